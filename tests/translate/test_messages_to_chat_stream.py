"""Chat chunks -> Anthropic stream events: the block lifecycle, on every recorded stream and edge cases.

What an Anthropic client ends up with is accumulated by the anthropic SDK's own accumulator,
the code a real client runs; what it must end up with is the same answer not streamed: the
completion the openai SDK's own accumulator makes of the recording, translated by response.py.
(A recorded .json next to a .sse is another answer, with another id: not its twin.)
"""

import pytest

from bridge.protocols.errors import BridgeError
from bridge.serve.streaming import ANTHROPIC_SSE
from bridge.translate.messages_to_chat.response import to_anthropic_message
from bridge.translate.messages_to_chat.stream import StreamTranslator
from bridge.translate.translator import DONE
from tests.helpers.accumulators import anthropic_fold, openai_stream_completion, without_nulls
from tests.helpers.contexts import messages_to_chat_context, translated
from tests.helpers.recorded import OPENAI_STREAMS, recorded_events


def translate(events, ctx=None, eof=True):
    return translated(StreamTranslator(ctx or messages_to_chat_context(stream=True)), events, eof)


def chunk(delta=None, finish_reason=None, usage=None, **choice):
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, **choice}],
    }
    if usage is not None:
        body["usage"] = usage
    return (None, body)


def call(index, arguments=None, call_id=None, name=None):
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    entry = {"index": index, "function": function}
    if call_id:
        entry.update(id=call_id, type="function")
    return entry


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_the_usual_text_chunk_path_writes_what_the_full_path_writes(name, monkeypatch):
    """The usual text chunk skips shapes.chat_chunk and _delta: the client's bytes are the same
    as through them, on every recorded stream."""
    events = recorded_events(name)
    fast = b"".join(map(ANTHROPIC_SSE.frame, translate(events)))
    monkeypatch.setattr(StreamTranslator, "_usual_text", lambda self, chunk: None)
    assert fast == b"".join(map(ANTHROPIC_SSE.frame, translate(events)))


def test_ollamas_text_chunks_take_the_usual_path_with_their_role(monkeypatch):
    """Ollama repeats "role": "assistant" in every delta; its text chunks are still the usual ones."""
    taken = []
    usual = StreamTranslator._usual_text

    def spied(self, chunk):
        text = usual(self, chunk)
        taken.append(text is not None)
        return text

    monkeypatch.setattr(StreamTranslator, "_usual_text", spied)
    translate(recorded_events("openai/ollama.sse"))
    assert taken.count(True) == 2  # the chunks between the first (message_start) and the finish_reason


USAGE = (None, {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})


def check_lifecycle(events):
    """Anthropic's rules: one message_start first, blocks 0,1,2... one at a time, typed deltas, then the end."""
    assert events[0]["type"] == "message_start"
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert (
        set(start["usage"])
        == {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
        and start["usage"]["output_tokens"] == 0
    )
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    assert sum(e["type"] == "message_start" for e in events) == 1
    delta_types = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}
    open_block, next_index, kinds = None, 0, []
    for event in events[1:-2]:
        if event["type"] == "content_block_start":
            assert open_block is None and event["index"] == next_index
            open_block, next_index = event["index"], next_index + 1
            kinds.append(event["content_block"]["type"])
        elif event["type"] == "content_block_delta":
            assert event["index"] == open_block
            delta = event["delta"]
            assert delta["type"] == delta_types[kinds[open_block]]
            assert any(value for key, value in delta.items() if key != "type"), "empty delta"
        else:
            assert event["type"] == "content_block_stop" and event["index"] == open_block
            open_block = None
    assert open_block is None
    return kinds


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_every_recorded_stream_becomes_a_well_formed_anthropic_stream(name):
    check_lifecycle(translate(recorded_events(name)))


# The openai SDK types delta.content as a string: warnings on Mistral's arrays, which it cannot fold.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_the_anthropic_sdk_folds_every_translated_stream_into_the_non_streamed_answer(name):
    """The stream module's promise: a streamed answer accumulates to exactly what the non-streamed one is.

    Null and absent fields read the same, so nulls are left out on both sides.
    """
    completion = openai_stream_completion(name)
    streamed = anthropic_fold(translate(recorded_events(name)))
    plain = without_nulls(to_anthropic_message(completion, messages_to_chat_context()))
    if "usage" not in completion:
        # No usage came (or, in moderation_extra_chunk.sse, the SDK's accumulator took the null
        # `usage` of the moderation chunk after the usage chunk): a body then says 0 where the stream
        # estimates; test_final_usage_is_the_upstreams_last_reported_usage covers the stream's.
        del streamed["usage"], plain["usage"]
    if name == "openai/mistral_thinking_content_array.sse":
        # The SDK's accumulator drops the content arrays that carry Mistral's thinking (only string
        # content is appended); test_mistral_thinking_parts_become_one_thinking_block checks it.
        streamed["content"] = [block for block in streamed["content"] if block["type"] != "thinking"]
    assert streamed == plain


def test_mistral_thinking_parts_become_one_thinking_block():
    upstream = recorded_events("openai/mistral_thinking_content_array.sse")
    contents = [p["choices"][0]["delta"].get("content") for _, p in upstream if p != DONE and p["choices"]]
    thinking = "".join(
        inner["text"]
        for content in contents
        if isinstance(content, list)
        for part in content
        if part["type"] == "thinking"
        for inner in part["thinking"]
    )
    message = anthropic_fold(translate(upstream))
    assert [b["type"] for b in message["content"]] == ["thinking", "text"]
    assert message["content"][0]["thinking"] == thinking != ""


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_final_usage_is_the_upstreams_last_reported_usage(name):
    upstream = recorded_events(name)
    reported = [p["usage"] for _, p in upstream if p != DONE and isinstance(p.get("usage"), dict)]
    final = translate(upstream)[-2]["usage"]
    if reported:
        last = reported[-1]
        cached = (last.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        assert final["output_tokens"] == last["completion_tokens"]
        assert final["input_tokens"] == last["prompt_tokens"] - cached
    else:
        assert final["output_tokens"] > 0 and "input_tokens" not in final


def test_message_start_carries_the_requested_model_and_the_input_estimate():
    context = messages_to_chat_context(stream=True, model="claude-x", input_tokens=77)
    start = translate(recorded_events("openai/text.sse"), context)[0]
    assert start["message"]["model"] == "claude-x" and start["message"]["usage"]["input_tokens"] == 77


def test_message_start_waits_for_the_first_choice_not_azures_prompt_filter_chunk():
    events = recorded_events("openai/azure_prompt_filter.sse")
    assert events[0][1]["choices"] == []
    translator = StreamTranslator(messages_to_chat_context(stream=True))
    assert translator.feed(*events[0]) == []
    assert translator.feed(*events[1])[0]["message"]["id"] == "msg_" + events[1][1]["id"]


def test_content_filter_is_a_refusal():
    delta = translate(recorded_events("openai/content_filter.sse"))[-2]["delta"]
    assert delta["stop_reason"] == "refusal" and delta["stop_details"]["type"] == "refusal"


def test_refusal_deltas_are_text_and_end_in_refusal():
    events = translate(recorded_events("openai/refusal.sse"))
    assert events[-2]["delta"]["stop_reason"] == "refusal"
    assert anthropic_fold(events)["content"][0]["type"] == "text"


def test_length_is_max_tokens():
    assert translate(recorded_events("openai/length.sse"))[-2]["delta"]["stop_reason"] == "max_tokens"


def test_vllm_stop_reason_naming_a_requested_stop_sequence_is_stop_sequence():
    events = [chunk({"content": "Hello"}), chunk({}, "stop", stop_reason="###"), (None, DONE)]
    delta = translate(events, messages_to_chat_context(stream=True, stop_sequences=("###",)))[-2]["delta"]
    assert (delta["stop_reason"], delta["stop_sequence"]) == ("stop_sequence", "###")


def test_vllm_token_id_stop_reason_is_end_turn():
    events = translate(
        recorded_events("openai/vllm_stop_reason.sse"), messages_to_chat_context(stream=True, stop_sequences=("x",))
    )
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_argument_fragment_in_the_naming_chunk_is_forwarded():
    events = translate(
        [
            chunk({"tool_calls": [call(0, '{"city":', "call_1", "get_weather")]}),
            chunk({"tool_calls": [call(0, '"Paris"}')]}),
            chunk({}, "tool_calls"),
            USAGE,
        ]
    )
    fragments = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert fragments == ['{"city":', '"Paris"}']
    assert anthropic_fold(events)["content"][0]["input"] == {"city": "Paris"}


def test_a_call_complete_in_one_chunk_is_one_start_and_one_delta():
    events = recorded_events("openai/ollama_tool_calls.sse")
    out = translate(events)
    assert [e["type"] for e in out[1:4]] == ["content_block_start", "content_block_delta", "content_block_stop"]
    assert out[-2]["delta"]["stop_reason"] == "tool_use"


def test_arguments_sent_as_an_object_are_forwarded_as_their_json():
    """llama-server and TGI have sent `arguments` as the object itself, not a JSON string."""
    arguments = {"city": "Paris", "days": 3}
    entry = {"index": 0, "id": "c0", "type": "function", "function": {"name": "f", "arguments": arguments}}
    events = translate([chunk({"tool_calls": [entry]}), chunk({}, "tool_calls"), (None, DONE)])
    check_lifecycle(events)
    assert anthropic_fold(events)["content"][0]["input"] == arguments


def test_parallel_calls_are_sequential_blocks_and_stop_reason_is_tool_use():
    out = translate(recorded_events("openai/tool_calls_parallel.sse"))
    assert check_lifecycle(out) == ["tool_use", "tool_use"]
    assert out[-2]["delta"]["stop_reason"] == "tool_use"


def test_several_calls_in_one_chunk_each_get_a_block():
    events = translate(
        [
            chunk({"tool_calls": [call(0, "{}", "c0", "a"), call(1, '{"x":1}', "c1", "b")]}),
            chunk({}, "tool_calls"),
            (None, DONE),
        ]
    )
    assert [(b["name"], b["input"]) for b in anthropic_fold(events)["content"]] == [("a", {}), ("b", {"x": 1})]


def test_a_reused_index_with_a_new_id_is_a_new_call():
    events = translate(
        [
            chunk({"tool_calls": [call(0, "{}", "c0", "a")]}),
            chunk({"tool_calls": [call(0, "{}", "c1", "b")]}),
            chunk({}, "tool_calls"),
            (None, DONE),
        ]
    )
    assert [b["id"] for b in anthropic_fold(events)["content"]] == ["c0", "c1"]


def test_arguments_before_the_name_are_held_until_the_call_is_named():
    events = translate(
        [
            chunk({"tool_calls": [call(0, '{"a"', "c0")]}),
            chunk({"tool_calls": [call(0, ":1}", name="f")]}),
            chunk({}, "tool_calls"),
            (None, DONE),
        ]
    )
    check_lifecycle(events)
    assert anthropic_fold(events)["content"][0] == {"type": "tool_use", "id": "c0", "name": "f", "input": {"a": 1}}


def test_a_call_that_never_gets_a_name_is_an_error_not_a_silent_drop():
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"tool_calls": [call(0, "{}", "c0")]}), chunk({}, "tool_calls"), (None, DONE)])
    assert "without a name" in caught.value.message


def test_a_fragment_for_a_call_whose_block_closed_is_an_error_not_a_wrong_input():
    events = [
        chunk({"tool_calls": [call(0, '{"a":', "c0", "f")]}),
        chunk({"tool_calls": [call(1, "{}", "c1", "g")]}),
        chunk({"tool_calls": [call(0, "1}")]}),
    ]
    with pytest.raises(BridgeError) as caught:
        translate(events)
    assert caught.value.status == 502 and "tool call 0" in caught.value.message


def test_a_closed_call_repeated_without_arguments_is_harmless():
    events = translate(
        [
            chunk({"tool_calls": [call(0, "{}", "c0", "f")]}),
            chunk({"content": "done"}),
            chunk({"tool_calls": [call(0, "", "c0", "f")]}),
            chunk({}, "tool_calls"),
            (None, DONE),
        ]
    )
    assert check_lifecycle(events) == ["tool_use", "text"]


def test_tool_calls_without_an_index_are_keyed_by_position():
    entries = [
        {"id": "c0", "function": {"name": "a", "arguments": "{}"}},
        {"id": "c1", "function": {"name": "b", "arguments": "{}"}},
    ]
    events = translate([chunk({"tool_calls": entries}), chunk({}, "tool_calls"), (None, DONE)])
    assert [b["name"] for b in anthropic_fold(events)["content"]] == ["a", "b"]


def test_empty_tool_calls_array_is_treated_as_absent():
    events = translate(
        [chunk({"content": "hi", "tool_calls": []}), chunk({"tool_calls": [], "content": ""}, "stop"), (None, DONE)]
    )
    assert check_lifecycle(events) == ["text"] and events[-2]["delta"]["stop_reason"] == "end_turn"


def test_reasoning_then_text_are_two_blocks_and_text_then_tool_closes_the_text():
    events = translate(
        [
            chunk({"reasoning_content": "think"}),
            chunk({"content": "say"}),
            chunk({"tool_calls": [call(0, "{}", "c", "f")]}),
            chunk({}, "tool_calls"),
            (None, DONE),
        ]
    )
    assert check_lifecycle(events) == ["thinking", "text", "tool_use"]


def test_finish_reason_tool_calls_without_a_call_is_end_turn():
    events = translate([chunk({"content": "I would call a tool."}), chunk({}, "tool_calls"), (None, DONE)])
    assert check_lifecycle(events) == ["text"] and events[-2]["delta"]["stop_reason"] == "end_turn"


def test_thinking_blocks_carry_an_empty_signature_never_an_invented_one():
    events = translate(recorded_events("openai/deepseek_reasoning.sse"))
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert not any(e.get("delta", {}).get("type") == "signature_delta" for e in events)


def test_shortened_tool_names_are_restored_in_the_stream():
    context = messages_to_chat_context(stream=True, tool_names={"short_1234": "original.name"})
    events = translate(
        [chunk({"tool_calls": [call(0, "{}", "c", "short_1234")]}), chunk({}, "tool_calls"), (None, DONE)], context
    )
    assert anthropic_fold(events)["content"][0]["name"] == "original.name"


def test_final_events_wait_for_the_usage_chunk_and_come_right_after_it():
    translator = StreamTranslator(messages_to_chat_context(stream=True))
    translator.feed(*chunk({"content": "x"}))
    assert [e["type"] for e in translator.feed(*chunk({}, "stop"))] == ["content_block_stop"]
    final = translator.feed(*USAGE)
    assert [e["type"] for e in final] == ["message_delta", "message_stop"]
    assert final[0]["usage"]["input_tokens"] == 9 and final[0]["usage"]["output_tokens"] == 3
    assert translator.feed(None, DONE) == [] and translator.finish() == []


def test_nothing_follows_message_stop_not_even_the_moderation_chunk():
    events = translate(recorded_events("openai/moderation_extra_chunk.sse"))
    assert events[-1]["type"] == "message_stop" and sum(e["type"] == "message_delta" for e in events) == 1


def test_usage_on_the_finish_chunk_is_used_when_no_usage_chunk_follows():
    events = translate(
        [chunk({"content": "x"}), chunk({}, "stop", usage={"prompt_tokens": 4, "completion_tokens": 2}), (None, DONE)]
    )
    assert events[-2]["usage"]["output_tokens"] == 2


def test_without_any_usage_the_output_is_estimated_from_the_streamed_text():
    events = translate([chunk({"content": "x" * 30}), chunk({}, "stop"), (None, DONE)])
    assert events[-2]["usage"] == {"output_tokens": 10}


@pytest.mark.parametrize("ending", [[(None, DONE)], []], ids=["done", "eof"])
def test_a_stream_that_ends_before_a_finish_reason_is_an_error(ending):
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"content": "partial"}), *ending])
    assert caught.value.status == 502 and "finish_reason" in caught.value.message


def test_an_upstream_error_event_is_raised_with_its_message():
    events = recorded_events("openai/groq_midstream_error.sse")
    with pytest.raises(BridgeError) as caught:
        translate(events)
    error = next(p for name, p in events if name == "error")["error"]
    assert error["message"] in caught.value.message and caught.value.kind == "invalid_request"


@pytest.mark.parametrize(
    "event, error, message",
    [
        (
            None,
            {
                "message": "This model's maximum context length is 4096 tokens. However, your request has 5000 input "
                "tokens. Please reduce the length of the input messages.",
                "type": "BadRequestError",
                "code": 400,
            },
            "prompt is too long: 5000 tokens > 4096 maximum",
        ),
        (
            "error",
            {
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            },
            "prompt is too long: 777 tokens > 777 maximum",
        ),
    ],
)
def test_an_overflow_reported_mid_stream_is_anthropics_overflow_with_the_streams_estimate(event, error, message):
    with pytest.raises(BridgeError) as caught:
        translate(
            [chunk({"content": "x"}), (event, {"error": error})],
            messages_to_chat_context(stream=True, input_tokens=777),
        )
    assert (caught.value.message, caught.value.kind) == (message, "invalid_request")


def test_an_error_object_in_a_data_chunk_is_raised():
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"content": "x"}), (None, {"error": {"message": "overloaded", "type": "server_error"}})])
    assert "overloaded" in caught.value.message and caught.value.kind == "api_error"


def test_a_delta_or_function_that_is_not_an_object_is_a_502_naming_it():
    """A crash would cut the stream without an error event; a BridgeError becomes one."""
    with pytest.raises(BridgeError) as caught:
        translate([(None, {"choices": [{"index": 0, "delta": "garbage"}]})])
    assert caught.value.status == 502 and "choices.0.delta must be an object" in caught.value.message
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"tool_calls": [{"index": 0, "id": "c0", "function": "f"}]})])
    assert caught.value.status == 502 and "choices.0.delta.tool_calls.0.function must be" in caught.value.message


def test_several_choices_are_refused():
    with pytest.raises(BridgeError) as caught:
        translate(recorded_events("openai/multi_choice.sse"))
    assert caught.value.status == 502 and "choices" in caught.value.message


@pytest.mark.parametrize("choices", [{"0": {"delta": {"content": "a"}}}, "a", [["a"]]])
def test_choices_that_are_not_a_list_of_objects_are_an_upstream_error_not_a_crash(choices):
    with pytest.raises(BridgeError) as caught:
        translate([(None, {"id": "x", "choices": choices}), (None, DONE)])
    assert caught.value.status == 502 and "choices" in caught.value.message


def test_role_on_every_chunk_and_empty_content_open_no_block():
    events = translate(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"role": "assistant", "content": "a"}),
            chunk({"role": "assistant", "content": ""}, "stop"),
            (None, DONE),
        ]
    )
    assert check_lifecycle(events) == ["text"]
    assert [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"] == ["a"]


def test_an_answer_with_no_content_at_all_still_ends_properly():
    events = translate([chunk({"role": "assistant"}), chunk({}, "content_filter"), (None, DONE)])
    assert check_lifecycle(events) == [] and events[-2]["delta"]["stop_reason"] == "refusal"


def test_usage_on_every_text_chunk_is_kept_and_the_last_one_counts():
    """vLLM's continuous usage stats put usage on each chunk, text ones too."""
    events = translate(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hel"}, usage={"prompt_tokens": 9, "completion_tokens": 1}),
            chunk({"content": "lo"}, usage={"prompt_tokens": 9, "completion_tokens": 2}),
            chunk(finish_reason="stop"),
            (None, DONE),
        ]
    )
    check_lifecycle(events)
    assert anthropic_fold(events)["content"][0]["text"] == "Hello"
    assert events[-2]["usage"]["output_tokens"] == 2 and events[-2]["usage"]["input_tokens"] == 9


def test_text_after_the_finish_reason_is_not_sent():
    events = translate(
        [chunk({"role": "assistant", "content": "Hi"}), chunk(finish_reason="stop"), chunk({"content": " late"}), USAGE]
    )
    check_lifecycle(events)
    assert anthropic_fold(events)["content"][0]["text"] == "Hi"
