"""Messages events -> Chat chunks (bridge/translate/chat_to_messages/stream.py), fed every recorded stream.

What a Chat client ends up with is accumulated by the openai SDK's own accumulator, the
code a real client runs; what it must end up with is the same answer not streamed, folded
from the recording by the anthropic SDK's own accumulator and translated by response.py.
(A recorded .json next to a .sse is another answer, with another id: not its twin.)
"""

import pytest
from jiter import from_json

from bridge.protocols.errors import OPENAI, BridgeError
from bridge.translate.chat_to_messages.response import to_chat_completion
from bridge.translate.chat_to_messages.stream import StreamTranslator
from tests.helpers.accumulators import anthropic_stream_message, openai_fold, without_nulls
from tests.helpers.contexts import chat_to_messages_context, translated
from tests.helpers.recorded import ANTHROPIC_STREAMS, recorded_events


def run(name, **context):
    context = chat_to_messages_context(**{"stream": True, "include_usage": True, **context})
    return translated(StreamTranslator(context), recorded_events(name))


def accumulate(chunks):
    """The message and finish_reason the openai SDK's accumulator makes of the chunks."""
    [choice] = openai_fold(chunks)["choices"]
    return choice["message"], choice.get("finish_reason")


def streamed_input(name):
    """The input_json_delta fragments of a recorded stream, joined: its tool input as the model wrote it."""
    return "".join(
        data["delta"]["partial_json"]
        for _, data in recorded_events(name)
        if data["type"] == "content_block_delta" and data["delta"]["type"] == "input_json_delta"
    )


def comparable(completion):
    """A Chat completion as far as its streamed and non-streamed forms must agree.

    They legitimately differ in: null and absent fields, which read the same; the `index` of
    tool_calls, thinking_blocks and annotations entries, the stream's merge keys, which the
    accumulator keeps;
    the arguments' JSON text, forwarded as Anthropic streamed it but re-serialised in a body, so
    arguments are compared parsed (cut by max_tokens, as partial JSON, as the anthropic SDK parses
    them); content "" where the body has null because no text came: the role chunk goes out at
    message_start, before anything says whether text follows, with content "" as OpenAI's own
    text streams have it.
    """
    completion = without_nulls(completion)
    [choice] = completion["choices"]
    message = choice["message"]
    if message.get("content") == "":
        del message["content"]
    for entry in [*message.get("thinking_blocks", []), *message.get("annotations", [])]:
        entry.pop("index", None)
    for call in message.get("tool_calls", []):
        call.pop("index", None)
        text = call["function"]["arguments"]
        call["function"]["arguments"] = from_json(text.encode(), partial_mode=choice["finish_reason"] == "length")
    return completion


@pytest.mark.parametrize("name", ANTHROPIC_STREAMS)
def test_the_openai_sdk_folds_every_translated_stream_into_the_non_streamed_answer(name):
    """The stream module's promise: a streamed answer accumulates to exactly what the non-streamed one is."""
    streamed = openai_fold(run(name))
    plain = to_chat_completion(anthropic_stream_message(name), chat_to_messages_context())
    assert comparable(streamed) == comparable(plain)


@pytest.mark.parametrize("name", ANTHROPIC_STREAMS)
def test_chunk_framing_role_first_finish_last_then_usage(name):
    """[DONE] is the Chat framing's, written by the relay once the translator is done."""
    translator = StreamTranslator(chat_to_messages_context(stream=True, include_usage=True))
    chunks = translated(translator, recorded_events(name))
    assert translator.done and all(isinstance(chunk, dict) for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
    *body, final, usage = chunks
    assert [c["choices"][0]["finish_reason"] for c in body] == [None] * len(body)
    assert final["choices"][0]["finish_reason"] is not None and final["choices"][0]["delta"] == {}
    assert usage["choices"] == [] and "usage" in usage
    message_id = recorded_events(name)[0][1]["message"]["id"]
    assert {c["id"] for c in chunks} == {f"chatcmpl-{message_id}"}
    assert {c["model"] for c in chunks} == {"gpt-4o"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_cache_usage_in_message_delta_overrides_message_start():
    got = run("anthropic/cache_usage_in_message_delta.sse")[-1]["usage"]
    assert got["prompt_tokens_details"]["cached_tokens"] == 6289
    assert got["prompt_tokens"] == 6 + 3337 + 6289


def test_no_usage_chunk_unless_include_usage():
    chunks = run("anthropic/text.sse", include_usage=False)
    assert all(c["choices"] for c in chunks) and all("usage" not in c for c in chunks)


def test_tool_calls_are_keyed_by_chat_tool_index_not_anthropic_block_index():
    """tool_use.sse has its tool at block 1 (after text): the Chat index is 0."""
    chunks = run("anthropic/tool_use.sse", include_usage=False)
    entries = [entry for c in chunks for entry in c["choices"][0]["delta"].get("tool_calls", [])]
    assert {entry["index"] for entry in entries} == {0}
    first, *rest = entries
    assert first["id"] == "toolu_01NRLabsLyVHZPKxbKvkfSMn" and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert all(set(entry) == {"index", "function"} and set(entry["function"]) == {"arguments"} for entry in rest)
    assert all(entry["function"]["arguments"] for entry in rest), "no empty argument fragments"


def test_parallel_no_argument_tools_get_indices_0_1_and_arguments_braces():
    message, finish = accumulate(run("anthropic/tool_use_parallel.sse"))
    assert [(c["index"], c["function"]["arguments"]) for c in message["tool_calls"]] == [(0, "{}"), (1, "{}")]
    assert finish == "tool_calls"


def test_max_tokens_inside_a_tool_keeps_the_partial_arguments_and_says_length():
    message, finish = accumulate(run("anthropic/max_tokens_mid_tool.sse"))
    assert finish == "length"
    assert message["tool_calls"][0]["function"]["arguments"] == streamed_input("anthropic/max_tokens_mid_tool.sse")


def test_signed_thinking_is_sent_whole_once_its_block_closes():
    [thinking] = [b for b in anthropic_stream_message("anthropic/thinking.sse")["content"] if b["type"] == "thinking"]
    message, _ = accumulate(run("anthropic/thinking.sse"))
    assert message["thinking_blocks"] == [
        {"index": 0, "type": "thinking", "thinking": thinking["thinking"], "signature": thinking["signature"]}
    ]


def test_redacted_thinking_goes_only_to_the_extension_field():
    blocks = anthropic_stream_message("anthropic/redacted_thinking.sse")["content"]
    message, _ = accumulate(run("anthropic/redacted_thinking.sse"))
    assert [(e["type"], e["data"]) for e in message["thinking_blocks"]] == [
        ("redacted_thinking", b["data"]) for b in blocks if b["type"] == "redacted_thinking"
    ]
    assert "reasoning_content" not in message


@pytest.mark.parametrize("name", ["anthropic/refusal.sse", "anthropic/refusal_sdk.sse"])
def test_refusal_sends_the_explanation_as_delta_refusal_and_content_filter(name):
    explanation = anthropic_stream_message(name)["stop_details"]["explanation"]
    message, finish = accumulate(run(name))
    assert message["refusal"] == explanation and finish == "content_filter"


def test_pings_produce_nothing_the_relay_keeps_the_client_alive():
    assert any(d["type"] == "ping" for _, d in recorded_events("anthropic/redacted_thinking.sse"))
    assert StreamTranslator(chat_to_messages_context(stream=True)).feed("ping", {"type": "ping"}) == []


def test_server_tool_blocks_produce_nothing():
    """pause_turn.sse streams server_tool_use input_json_deltas: none may surface as Chat tool calls."""
    chunks = run("anthropic/pause_turn.sse", include_usage=False)
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks)


def test_response_format_tool_streams_as_content():
    answer = anthropic_stream_message("anthropic/tool_use.sse")
    text = "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    message, finish = accumulate(run("anthropic/tool_use.sse", json_tool="get_weather"))
    assert message["content"] == text + streamed_input("anthropic/tool_use.sse")
    assert "tool_calls" not in message and finish == "stop"


def test_error_event_raises_the_upstream_error_after_the_text_so_far():
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    out = []
    with pytest.raises(BridgeError) as caught:
        for event, data in recorded_events("anthropic/error_midstream_overloaded.sse"):
            out.extend(translator.feed(event, data))
    assert caught.value.kind == "overloaded" and caught.value.message == "Overloaded"
    assert accumulate(out)[0]["content"] == "Hello"


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
        "`max_tokens` and try again",
    ],
)
def test_an_overflow_error_event_carries_openais_code_and_anthropics_message(message):
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    translator.feed("message_start", recorded_events("anthropic/text.sse")[0][1])
    with pytest.raises(BridgeError) as caught:
        translator.feed("error", {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    body = caught.value.body_for(OPENAI)["error"]
    assert body == {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }


def test_a_stream_that_ends_before_message_stop_is_an_error_not_a_made_up_stop():
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    recorded = recorded_events("anthropic/text.sse")
    for event, data in recorded[:-1]:
        translator.feed(event, data)
    with pytest.raises(BridgeError) as caught:
        translator.finish()
    assert caught.value.status == 502


def test_a_delta_for_a_block_never_opened_is_an_error():
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    translator.feed("message_start", recorded_events("anthropic/text.sse")[0][1])
    with pytest.raises(BridgeError):
        translator.feed(
            "content_block_delta",
            {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}},
        )


def test_unknown_event_types_are_skipped_wherever_they_come():
    """Anthropic may add event types; one before message_start is no more an error than one after it."""

    def translate(stream):
        translator = StreamTranslator(chat_to_messages_context(stream=True))
        return [item for event, data in stream for item in translator.feed(event, data)]

    future = ("future_event", {"type": "future_event"})
    named_like_a_helper = ("text", {"type": "text", "text": "not a delta"})
    recorded = recorded_events("anthropic/text.sse")
    assert translate([future, *recorded[:3], future, named_like_a_helper, *recorded[3:]]) == translate(recorded)


def test_a_signature_already_in_content_block_start_is_kept():
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    translator.feed("message_start", recorded_events("anthropic/text.sse")[0][1])
    translator.feed(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "Done thinking.", "signature": "EqQBsig"},
        },
    )
    [chunk] = translator.feed("content_block_stop", {"type": "content_block_stop", "index": 0})
    assert chunk["choices"][0]["delta"]["thinking_blocks"] == [
        {"index": 0, "type": "thinking", "thinking": "Done thinking.", "signature": "EqQBsig"}
    ]
