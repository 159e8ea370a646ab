"""Messages events -> Chat chunks (bridge/chat_to_messages/stream.py), fed every recorded stream.

What a Chat client must end up with is read from the fixture itself (`fold`);
what it does end up with is accumulated by the openai SDK's own delta
accumulator, the code a real client runs.
"""
import json

import pytest
from openai.lib.streaming._deltas import accumulate_delta

from bridge import sse
from bridge.chat_to_messages.request import Context
from bridge.chat_to_messages.stream import StreamTranslator
from bridge.errors import OPENAI, BridgeError
from bridge.streaming import DONE, KEEPALIVE
from tests.fake_upstream import FIXTURES

STREAMS = sorted(path.name for path in (FIXTURES / "anthropic").glob("*.sse"))
COMPLETE = [name for name in STREAMS if name != "error_midstream_overloaded.sse"]
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
          "tool_use": "tool_calls", "refusal": "content_filter"}


def events(name):
    """A recorded stream as (event name, parsed data) pairs, decoded as the relay does."""
    decoder = sse.Decoder()
    decoded = decoder.feed((FIXTURES / "anthropic" / name).read_bytes()) + decoder.close()
    return [(event.event, json.loads(event.data)) for event in decoded]


def fold(name):
    """What the recording says: blocks in order with their joined deltas, stop reason, final usage."""
    blocks, stop_reason, usage = {}, None, {}
    for _, data in events(name):
        kind = data["type"]
        if kind == "message_start":
            usage = dict(data["message"]["usage"])
        elif kind == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "deltas": []}
        elif kind == "content_block_delta":
            delta = data["delta"]
            block = blocks[data["index"]]
            if delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                block["deltas"].append(delta.get("text", delta.get("thinking", delta.get("partial_json", ""))))
        elif kind == "message_delta":
            stop_reason = data["delta"]["stop_reason"]
            usage.update(data.get("usage") or {})
    return [blocks[i] for i in sorted(blocks)], stop_reason, usage


def expected_message(name):
    blocks, stop_reason, _ = fold(name)
    text = "".join("".join(b["deltas"]) for b in blocks if b["type"] == "text")
    reasoning = "".join("".join(b["deltas"]) for b in blocks if b["type"] == "thinking")
    calls = [(b["id"], b["name"], "".join(b["deltas"]) or "{}") for b in blocks if b["type"] == "tool_use"]
    return text, reasoning, calls, FINISH[stop_reason]


def run(name, **context):
    translator = StreamTranslator(Context(**{"stream": True, "model": "gpt-4o", "created": 1700000000,
                                             "include_usage": True, **context}))
    out = []
    for event, data in events(name):
        out.extend(translator.feed(event, data))
    out.extend(translator.finish())
    return out


def accumulate(chunks):
    """The openai SDK's own fold of Chat deltas into one message."""
    message, finish = {}, None
    for chunk in chunks:
        for choice in chunk["choices"]:
            message = accumulate_delta(message, json.loads(json.dumps(choice["delta"])))
            finish = choice["finish_reason"] or finish
    return message, finish


def data_chunks(out):
    return [item for item in out if isinstance(item, dict)]


@pytest.mark.parametrize("name", COMPLETE)
def test_every_recorded_stream_accumulates_to_what_the_recording_says(name):
    text, reasoning, calls, finish = expected_message(name)
    message, got_finish = accumulate(data_chunks(run(name)))
    assert message.get("content", "") == text
    assert message.get("reasoning_content", "") == reasoning
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls", [])] == calls
    assert got_finish == finish


@pytest.mark.parametrize("name", COMPLETE)
def test_chunk_framing_role_first_finish_last_then_usage_then_done(name):
    out = run(name)
    chunks = data_chunks(out)
    assert out[-1] == DONE and out.count(DONE) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
    *body, final, usage = chunks
    assert [c["choices"][0]["finish_reason"] for c in body] == [None] * len(body)
    assert final["choices"][0]["finish_reason"] is not None and final["choices"][0]["delta"] == {}
    assert usage["choices"] == [] and "usage" in usage
    message_id = events(name)[0][1]["message"]["id"]
    assert {c["id"] for c in chunks} == {f"chatcmpl-{message_id}"}
    assert {c["model"] for c in chunks} == {"gpt-4o"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def expected_usage(name):
    """Chat usage from the recording: cached tokens are part of the prompt; compaction iterations all count."""
    _, _, usage = fold(name)
    parts = usage.get("iterations") or [usage]
    total = {key: sum(part.get(key) or 0 for part in parts) for key in
             ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")}
    prompt = total["input_tokens"] + total["cache_read_input_tokens"] + total["cache_creation_input_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": total["output_tokens"],
            "total_tokens": prompt + total["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": total["cache_read_input_tokens"]}}


@pytest.mark.parametrize("name", COMPLETE)
def test_final_usage_counts_cache_tokens_in_the_prompt_from_the_cumulative_message_delta(name):
    expected = expected_usage(name)
    got = data_chunks(run(name))[-1]["usage"]
    assert {key: got[key] for key in expected} == expected


def test_cache_usage_in_message_delta_overrides_message_start():
    got = data_chunks(run("cache_usage_in_message_delta.sse"))[-1]["usage"]
    assert got["prompt_tokens_details"]["cached_tokens"] == 6289
    assert got["prompt_tokens"] == 6 + 3337 + 6289


def test_no_usage_chunk_unless_include_usage():
    chunks = data_chunks(run("text.sse", include_usage=False))
    assert all(c["choices"] for c in chunks) and all("usage" not in c for c in chunks)


def test_tool_calls_are_keyed_by_chat_tool_index_not_anthropic_block_index():
    """tool_use.sse has its tool at block 1 (after text): the Chat index is 0."""
    chunks = data_chunks(run("tool_use.sse", include_usage=False))
    entries = [entry for c in chunks for entry in c["choices"][0]["delta"].get("tool_calls", [])]
    assert {entry["index"] for entry in entries} == {0}
    first, *rest = entries
    assert first["id"] == "toolu_01NRLabsLyVHZPKxbKvkfSMn" and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""}
    assert all(set(entry) == {"index", "function"} and set(entry["function"]) == {"arguments"} for entry in rest)
    assert all(entry["function"]["arguments"] for entry in rest), "no empty argument fragments"


def test_parallel_no_argument_tools_get_indices_0_1_and_arguments_braces():
    message, finish = accumulate(data_chunks(run("tool_use_parallel.sse")))
    assert [(c["index"], c["function"]["arguments"]) for c in message["tool_calls"]] == [(0, "{}"), (1, "{}")]
    assert finish == "tool_calls"


def test_max_tokens_inside_a_tool_keeps_the_partial_arguments_and_says_length():
    _, _, calls, _ = expected_message("max_tokens_mid_tool.sse")
    message, finish = accumulate(data_chunks(run("max_tokens_mid_tool.sse")))
    assert finish == "length"
    assert message["tool_calls"][0]["function"]["arguments"] == calls[0][2]


def test_signed_thinking_is_sent_whole_once_its_block_closes():
    blocks, _, _ = fold("thinking.sse")
    message, _ = accumulate(data_chunks(run("thinking.sse")))
    [thinking] = [b for b in blocks if b["type"] == "thinking"]
    assert message["thinking_blocks"] == [{"index": 0, "type": "thinking", "thinking": "".join(thinking["deltas"]),
                                           "signature": thinking["signature"]}]


def test_redacted_thinking_goes_only_to_the_extension_field():
    blocks, _, _ = fold("redacted_thinking.sse")
    message, _ = accumulate(data_chunks(run("redacted_thinking.sse")))
    assert [(e["type"], e["data"]) for e in message["thinking_blocks"]] == [
        ("redacted_thinking", b["data"]) for b in blocks if b["type"] == "redacted_thinking"]
    assert "reasoning_content" not in message


@pytest.mark.parametrize("name", ["refusal.sse", "refusal_sdk.sse"])
def test_refusal_sends_the_explanation_as_delta_refusal_and_content_filter(name):
    explanation = [d for _, d in events(name) if d["type"] == "message_delta"][0]["delta"]["stop_details"]["explanation"]
    message, finish = accumulate(data_chunks(run(name)))
    assert message["refusal"] == explanation and finish == "content_filter"


def test_pings_become_keepalives():
    pings = sum(1 for _, d in events("redacted_thinking.sse") if d["type"] == "ping")
    assert run("redacted_thinking.sse").count(KEEPALIVE) == pings > 0


def test_server_tool_blocks_produce_nothing():
    """pause_turn.sse streams server_tool_use input_json_deltas: none may surface as Chat tool calls."""
    chunks = data_chunks(run("pause_turn.sse", include_usage=False))
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks)


def test_response_format_tool_streams_as_content():
    _, _, calls, _ = expected_message("tool_use.sse")
    text, *_ = expected_message("tool_use.sse")
    message, finish = accumulate(data_chunks(run("tool_use.sse", json_tool="get_weather")))
    assert message["content"] == text + calls[0][2]
    assert "tool_calls" not in message and finish == "stop"


def test_error_event_raises_the_upstream_error_after_the_text_so_far():
    translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
    out = []
    with pytest.raises(BridgeError) as caught:
        for event, data in events("error_midstream_overloaded.sse"):
            out.extend(translator.feed(event, data))
    assert caught.value.kind == "overloaded" and caught.value.message == "Overloaded"
    assert accumulate(data_chunks(out))[0]["content"] == "Hello"


@pytest.mark.parametrize("message", [
    "prompt is too long: 210000 tokens > 200000 maximum",
    "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
    "`max_tokens` and try again"])
def test_an_overflow_error_event_carries_openais_code_and_anthropics_message(message):
    translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
    translator.feed("message_start", events("text.sse")[0][1])
    with pytest.raises(BridgeError) as caught:
        translator.feed("error", {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    body = caught.value.body_for(OPENAI)["error"]
    assert body == {"message": message, "type": "invalid_request_error", "param": "messages",
                    "code": "context_length_exceeded"}


def test_a_stream_that_ends_before_message_stop_is_an_error_not_a_made_up_stop():
    translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
    recorded = events("text.sse")
    for event, data in recorded[:-1]:
        translator.feed(event, data)
    with pytest.raises(BridgeError) as caught:
        translator.finish()
    assert caught.value.status == 502


def test_a_delta_for_a_block_never_opened_is_an_error():
    translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
    translator.feed("message_start", events("text.sse")[0][1])
    with pytest.raises(BridgeError):
        translator.feed("content_block_delta", {"type": "content_block_delta", "index": 3,
                                                "delta": {"type": "text_delta", "text": "x"}})


def test_unknown_event_types_are_skipped_wherever_they_come():
    """Anthropic may add event types; one before message_start is no more an error than one after it."""
    def translate(stream):
        translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
        return [item for event, data in stream for item in translator.feed(event, data)]

    future = ("future_event", {"type": "future_event"})
    named_like_a_helper = ("text", {"type": "text", "text": "not a delta"})
    recorded = events("text.sse")
    assert translate([future, *recorded[:3], future, named_like_a_helper, *recorded[3:]]) == translate(recorded)


def test_a_signature_already_in_content_block_start_is_kept():
    translator = StreamTranslator(Context(stream=True, model="gpt-4o", created=0))
    translator.feed("message_start", events("text.sse")[0][1])
    translator.feed("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
        "type": "thinking", "thinking": "Done thinking.", "signature": "EqQBsig"}})
    [chunk] = translator.feed("content_block_stop", {"type": "content_block_stop", "index": 0})
    assert chunk["choices"][0]["delta"]["thinking_blocks"] == [
        {"index": 0, "type": "thinking", "thinking": "Done thinking.", "signature": "EqQBsig"}]
