"""Chat chunks -> Anthropic stream events: the block lifecycle, on every recorded stream and edge cases."""
import json
import pathlib

import pytest

from bridge.errors import BridgeError
from bridge.messages_to_chat.request import Context
from bridge.messages_to_chat.stream import StreamTranslator
from bridge.sse import Decoder
from bridge.streaming import DONE

OPENAI = pathlib.Path(__file__).parent / "fixtures" / "openai"
FAILING = {"groq_midstream_error.sse", "multi_choice.sse"}
STREAMS = sorted(p for p in OPENAI.glob("*.sse") if p.name not in FAILING)


def context(**overrides):
    values = {"model": "claude-sonnet-4-5", "stream": True, "dropped": [], "tool_names": {},
              "stop_sequences": (), "input_tokens": 42}
    return Context(**{**values, **overrides})


def upstream_events(path):
    decoder = Decoder()
    events = decoder.feed(path.read_bytes()) + decoder.close()
    return [(e.event, DONE if e.data.strip() == DONE else json.loads(e.data)) for e in events]


def translate(events, ctx=None, eof=True):
    translator = StreamTranslator(ctx or context())
    out = [item for name, payload in events for item in translator.feed(name, payload)]
    return out + (translator.finish() if eof else [])


def chunk(delta=None, finish_reason=None, usage=None, **choice):
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, **choice}]}
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


USAGE = (None, {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})


def check_lifecycle(events):
    """Anthropic's rules: one message_start first, blocks 0,1,2... one at a time, typed deltas, then the end."""
    assert events[0]["type"] == "message_start"
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert set(start["usage"]) == {"input_tokens", "output_tokens", "cache_creation_input_tokens",
                                   "cache_read_input_tokens"} and start["usage"]["output_tokens"] == 0
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


def accumulate(events):
    """The message a client builds from the events (like the SDK's accumulate_event)."""
    message, buffers = None, {}
    for event in events:
        if event["type"] == "message_start":
            message = json.loads(json.dumps(event["message"]))
        elif event["type"] == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            block, delta = message["content"][event["index"]], event["delta"]
            if delta["type"] == "input_json_delta":
                buffers[event["index"]] = buffers.get(event["index"], "") + delta["partial_json"]
            else:
                key = delta["type"][:-len("_delta")]
                block[key] += delta[key]
        elif event["type"] == "message_delta":
            message.update(event["delta"])
            message["usage"].update(event["usage"])
    for index, raw in buffers.items():
        message["content"][index]["input"] = json.loads(raw)
    return message


def expected_from(events):
    """What the recorded upstream said, read straight from its chunks."""
    text, thinking, calls = "", "", {}
    for _, payload in events:
        if payload == DONE or not payload.get("choices"):
            continue
        delta = payload["choices"][0].get("delta") or {}
        content = delta.get("content")
        if isinstance(content, str):
            text += content
        for part in content if isinstance(content, list) else []:
            thinking += "".join(p["text"] for p in part.get("thinking", []))
        text += delta.get("refusal") or ""
        thinking += delta.get("reasoning_content") or delta.get("reasoning") or ""
        for entry in delta.get("tool_calls") or []:
            record = calls.setdefault(entry["index"], {"name": "", "arguments": ""})
            record["name"] = record["name"] or entry.get("function", {}).get("name") or ""
            record["arguments"] += entry.get("function", {}).get("arguments") or ""
    return text, thinking, [(c["name"], json.loads(c["arguments"] or "{}")) for _, c in sorted(calls.items())]


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.stem)
def test_every_recorded_stream_becomes_a_well_formed_anthropic_stream_with_the_same_content(path):
    upstream = upstream_events(path)
    events = translate(upstream)
    check_lifecycle(events)
    message = accumulate(events)
    text, thinking, calls = expected_from(upstream)
    assert "".join(b["text"] for b in message["content"] if b["type"] == "text") == text
    assert "".join(b["thinking"] for b in message["content"] if b["type"] == "thinking") == thinking
    assert [(b["name"], b["input"]) for b in message["content"] if b["type"] == "tool_use"] == calls
    assert (message["stop_reason"] == "tool_use") == bool(calls)


@pytest.mark.parametrize("path", STREAMS, ids=lambda p: p.stem)
def test_final_usage_is_the_upstreams_last_reported_usage(path):
    upstream = upstream_events(path)
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
    start = translate(upstream_events(OPENAI / "text.sse"), context(model="claude-x", input_tokens=77))[0]
    assert start["message"]["model"] == "claude-x" and start["message"]["usage"]["input_tokens"] == 77


def test_message_start_waits_for_the_first_choice_not_azures_prompt_filter_chunk():
    events = upstream_events(OPENAI / "azure_prompt_filter.sse")
    assert events[0][1]["choices"] == []
    translator = StreamTranslator(context())
    assert translator.feed(*events[0]) == []
    assert translator.feed(*events[1])[0]["message"]["id"] == "msg_" + events[1][1]["id"]


def test_content_filter_is_a_refusal():
    delta = translate(upstream_events(OPENAI / "content_filter.sse"))[-2]["delta"]
    assert delta["stop_reason"] == "refusal" and delta["stop_details"]["type"] == "refusal"


def test_refusal_deltas_are_text_and_end_in_refusal():
    events = translate(upstream_events(OPENAI / "refusal.sse"))
    assert events[-2]["delta"]["stop_reason"] == "refusal"
    assert accumulate(events)["content"][0]["type"] == "text"


def test_length_is_max_tokens():
    assert translate(upstream_events(OPENAI / "length.sse"))[-2]["delta"]["stop_reason"] == "max_tokens"


def test_vllm_stop_reason_naming_a_requested_stop_sequence_is_stop_sequence():
    events = [chunk({"content": "Hello"}), chunk({}, "stop", stop_reason="###"), (None, DONE)]
    delta = translate(events, context(stop_sequences=("###",)))[-2]["delta"]
    assert (delta["stop_reason"], delta["stop_sequence"]) == ("stop_sequence", "###")


def test_vllm_token_id_stop_reason_is_end_turn():
    events = upstream_events(OPENAI / "vllm_stop_reason.sse")
    assert translate(events, context(stop_sequences=("x",)))[-2]["delta"]["stop_reason"] == "end_turn"


def test_argument_fragment_in_the_naming_chunk_is_forwarded():
    events = translate([chunk({"tool_calls": [call(0, '{"city":', "call_1", "get_weather")]}),
                        chunk({"tool_calls": [call(0, '"Paris"}')]}), chunk({}, "tool_calls"), USAGE])
    fragments = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert fragments == ['{"city":', '"Paris"}']
    assert accumulate(events)["content"][0]["input"] == {"city": "Paris"}


def test_a_call_complete_in_one_chunk_is_one_start_and_one_delta():
    events = upstream_events(OPENAI / "ollama_tool_calls.sse")
    out = translate(events)
    assert [e["type"] for e in out[1:4]] == ["content_block_start", "content_block_delta", "content_block_stop"]
    assert out[-2]["delta"]["stop_reason"] == "tool_use"


def test_arguments_sent_as_an_object_are_forwarded_as_their_json():
    """llama-server and TGI have sent `arguments` as the object itself, not a JSON string."""
    arguments = {"city": "Paris", "days": 3}
    entry = {"index": 0, "id": "c0", "type": "function", "function": {"name": "f", "arguments": arguments}}
    events = translate([chunk({"tool_calls": [entry]}), chunk({}, "tool_calls"), (None, DONE)])
    check_lifecycle(events)
    assert accumulate(events)["content"][0]["input"] == arguments


def test_parallel_calls_are_sequential_blocks_and_stop_reason_is_tool_use():
    out = translate(upstream_events(OPENAI / "tool_calls_parallel.sse"))
    assert check_lifecycle(out) == ["tool_use", "tool_use"]
    assert out[-2]["delta"]["stop_reason"] == "tool_use"


def test_several_calls_in_one_chunk_each_get_a_block():
    events = translate([chunk({"tool_calls": [call(0, "{}", "c0", "a"), call(1, '{"x":1}', "c1", "b")]}),
                        chunk({}, "tool_calls"), (None, DONE)])
    assert [(b["name"], b["input"]) for b in accumulate(events)["content"]] == [("a", {}), ("b", {"x": 1})]


def test_a_reused_index_with_a_new_id_is_a_new_call():
    events = translate([chunk({"tool_calls": [call(0, "{}", "c0", "a")]}),
                        chunk({"tool_calls": [call(0, "{}", "c1", "b")]}), chunk({}, "tool_calls"), (None, DONE)])
    assert [b["id"] for b in accumulate(events)["content"]] == ["c0", "c1"]


def test_arguments_before_the_name_are_held_until_the_call_is_named():
    events = translate([chunk({"tool_calls": [call(0, '{"a"', "c0")]}),
                        chunk({"tool_calls": [call(0, ":1}", name="f")]}), chunk({}, "tool_calls"), (None, DONE)])
    check_lifecycle(events)
    assert accumulate(events)["content"][0] == {"type": "tool_use", "id": "c0", "name": "f", "input": {"a": 1}}


def test_a_call_that_never_gets_a_name_is_an_error_not_a_silent_drop():
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"tool_calls": [call(0, "{}", "c0")]}), chunk({}, "tool_calls"), (None, DONE)])
    assert "without a name" in caught.value.message


def test_a_fragment_for_a_call_whose_block_closed_is_an_error_not_a_wrong_input():
    events = [chunk({"tool_calls": [call(0, '{"a":', "c0", "f")]}),
              chunk({"tool_calls": [call(1, "{}", "c1", "g")]}),
              chunk({"tool_calls": [call(0, "1}")]})]
    with pytest.raises(BridgeError) as caught:
        translate(events)
    assert caught.value.status == 502 and "tool call 0" in caught.value.message


def test_a_closed_call_repeated_without_arguments_is_harmless():
    events = translate([chunk({"tool_calls": [call(0, "{}", "c0", "f")]}), chunk({"content": "done"}),
                        chunk({"tool_calls": [call(0, "", "c0", "f")]}), chunk({}, "tool_calls"), (None, DONE)])
    assert check_lifecycle(events) == ["tool_use", "text"]


def test_tool_calls_without_an_index_are_keyed_by_position():
    entries = [{"id": "c0", "function": {"name": "a", "arguments": "{}"}},
               {"id": "c1", "function": {"name": "b", "arguments": "{}"}}]
    events = translate([chunk({"tool_calls": entries}), chunk({}, "tool_calls"), (None, DONE)])
    assert [b["name"] for b in accumulate(events)["content"]] == ["a", "b"]


def test_empty_tool_calls_array_is_treated_as_absent():
    events = translate([chunk({"content": "hi", "tool_calls": []}), chunk({"tool_calls": [], "content": ""}, "stop"),
                        (None, DONE)])
    assert check_lifecycle(events) == ["text"] and events[-2]["delta"]["stop_reason"] == "end_turn"


def test_reasoning_then_text_are_two_blocks_and_text_then_tool_closes_the_text():
    events = translate([chunk({"reasoning_content": "think"}), chunk({"content": "say"}),
                        chunk({"tool_calls": [call(0, "{}", "c", "f")]}), chunk({}, "tool_calls"), (None, DONE)])
    assert check_lifecycle(events) == ["thinking", "text", "tool_use"]


def test_finish_reason_tool_calls_without_a_call_is_end_turn():
    events = translate([chunk({"content": "I would call a tool."}), chunk({}, "tool_calls"), (None, DONE)])
    assert check_lifecycle(events) == ["text"] and events[-2]["delta"]["stop_reason"] == "end_turn"


def test_thinking_blocks_carry_an_empty_signature_never_an_invented_one():
    events = translate(upstream_events(OPENAI / "deepseek_reasoning.sse"))
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert not any(e.get("delta", {}).get("type") == "signature_delta" for e in events)


def test_shortened_tool_names_are_restored_in_the_stream():
    events = translate([chunk({"tool_calls": [call(0, "{}", "c", "short_1234")]}), chunk({}, "tool_calls"),
                        (None, DONE)], context(tool_names={"short_1234": "original.name"}))
    assert accumulate(events)["content"][0]["name"] == "original.name"


def test_final_events_wait_for_the_usage_chunk_and_come_right_after_it():
    translator = StreamTranslator(context())
    translator.feed(*chunk({"content": "x"}))
    assert [e["type"] for e in translator.feed(*chunk({}, "stop"))] == ["content_block_stop"]
    final = translator.feed(*USAGE)
    assert [e["type"] for e in final] == ["message_delta", "message_stop"]
    assert final[0]["usage"]["input_tokens"] == 9 and final[0]["usage"]["output_tokens"] == 3
    assert translator.feed(None, DONE) == [] and translator.finish() == []


def test_nothing_follows_message_stop_not_even_the_moderation_chunk():
    events = translate(upstream_events(OPENAI / "moderation_extra_chunk.sse"))
    assert events[-1]["type"] == "message_stop" and sum(e["type"] == "message_delta" for e in events) == 1


def test_usage_on_the_finish_chunk_is_used_when_no_usage_chunk_follows():
    events = translate([chunk({"content": "x"}), chunk({}, "stop", usage={"prompt_tokens": 4, "completion_tokens": 2}),
                        (None, DONE)])
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
    events = upstream_events(OPENAI / "groq_midstream_error.sse")
    with pytest.raises(BridgeError) as caught:
        translate(events)
    error = next(p for name, p in events if name == "error")["error"]
    assert error["message"] in caught.value.message and caught.value.kind == "invalid_request"


@pytest.mark.parametrize("event, error, message", [
    (None, {"message": "This model's maximum context length is 4096 tokens. However, your request has 5000 input "
                       "tokens. Please reduce the length of the input messages.", "type": "BadRequestError",
            "code": 400}, "prompt is too long: 5000 tokens > 4096 maximum"),
    ("error", {"message": "the request exceeds the available context size, try increasing it",
               "type": "exceed_context_size_error"}, "prompt is too long: 777 tokens > 777 maximum")])
def test_an_overflow_reported_mid_stream_is_anthropics_overflow_with_the_streams_estimate(event, error, message):
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"content": "x"}), (event, {"error": error})], context(stream=True, input_tokens=777))
    assert (caught.value.message, caught.value.kind) == (message, "invalid_request")


def test_an_error_object_in_a_data_chunk_is_raised():
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"content": "x"}), (None, {"error": {"message": "overloaded", "type": "server_error"}})])
    assert "overloaded" in caught.value.message and caught.value.kind == "api_error"


def test_a_delta_or_function_that_is_not_an_object_is_no_content_not_a_crash():
    """A crash would cut the stream without an error event; a BridgeError becomes one."""
    events = translate([(None, {"choices": [{"index": 0, "delta": "garbage"}]}), chunk({"content": "ok"}),
                        chunk({}, "stop"), (None, DONE)])
    assert check_lifecycle(events) == ["text"]
    with pytest.raises(BridgeError) as caught:
        translate([chunk({"tool_calls": [{"index": 0, "id": "c0", "function": "f"}]}), chunk({}, "tool_calls"),
                   (None, DONE)])
    assert caught.value.status == 502 and "without a name" in caught.value.message


def test_several_choices_are_refused():
    with pytest.raises(BridgeError) as caught:
        translate(upstream_events(OPENAI / "multi_choice.sse"))
    assert caught.value.status == 502 and "choices" in caught.value.message


@pytest.mark.parametrize("choices", [{"0": {"delta": {"content": "a"}}}, "a", [["a"]]])
def test_choices_that_are_not_a_list_of_objects_are_an_upstream_error_not_a_crash(choices):
    with pytest.raises(BridgeError) as caught:
        translate([(None, {"id": "x", "choices": choices}), (None, DONE)])
    assert caught.value.status == 502 and "choices" in caught.value.message


def test_role_on_every_chunk_and_empty_content_open_no_block():
    events = translate([chunk({"role": "assistant", "content": ""}), chunk({"role": "assistant", "content": "a"}),
                        chunk({"role": "assistant", "content": ""}, "stop"), (None, DONE)])
    assert check_lifecycle(events) == ["text"]
    assert [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"] == ["a"]


def test_an_answer_with_no_content_at_all_still_ends_properly():
    events = translate([chunk({"role": "assistant"}), chunk({}, "content_filter"), (None, DONE)])
    assert check_lifecycle(events) == [] and events[-2]["delta"]["stop_reason"] == "refusal"
