"""OpenAI Responses events -> Anthropic Messages stream events
(bridge/translate/messages_to_responses/stream.py): what the anthropic SDK's accumulator folds
the translated stream into is the non-streamed translation of the response the stream ends with,
its items as output_item.done gave them (OpenAI encrypts a reasoning item anew for the
response.completed copy: either brings the reasoning back)."""

import json

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import reasoning_item
from bridge.translate.messages_to_responses.response import to_anthropic_message
from bridge.translate.messages_to_responses.stream import StreamTranslator
from tests.fake_upstream import responses_stream
from tests.helpers.accumulators import anthropic_fold, without_nulls
from tests.helpers.contexts import messages_to_responses_context, translated
from tests.helpers.recorded import RESPONSES_STREAMS, recorded_events

COMPLETE = [name for name in RESPONSES_STREAMS if "error" not in name and "failed" not in name]


def context(**overrides):
    return messages_to_responses_context(stream=True, **overrides)


def built(**answer):
    """The fake upstream builder's stream as (event name, payload) pairs."""
    return [(None, json.loads(raw.split(b"data: ", 1)[1])) for raw in responses_stream(**answer).events]


def translate(events, **overrides):
    return translated(StreamTranslator(context(**overrides)), events)


def event(kind, **fields):
    return None, {"type": kind, **fields}


def assert_well_formed(out):
    """message_start first; blocks indexed 0, 1, 2... one open at a time; message_delta, message_stop last."""
    assert out[0]["type"] == "message_start" and [e["type"] for e in out[-2:]] == ["message_delta", "message_stop"]
    open_index, next_index = None, 0
    for item in out[1:-2]:
        if item["type"] == "content_block_start":
            assert open_index is None and item["index"] == next_index
            open_index, next_index = item["index"], next_index + 1
        elif item["type"] == "content_block_stop":
            assert item["index"] == open_index
            open_index = None
        else:
            assert item["index"] == open_index
    assert open_index is None


def folded_equals_answer(events):
    out = translate(events)
    assert_well_formed(out)
    items = [payload["item"] for _, payload in events if payload["type"] == "response.output_item.done"]
    final = {**events[-1][1]["response"], "output": items}
    assert anthropic_fold(out) == without_nulls(to_anthropic_message(final, context()))
    return out


@pytest.mark.parametrize("name", COMPLETE)
def test_a_recorded_stream_folds_into_the_answer_of_its_last_response(name):
    folded_equals_answer(recorded_events(name))


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "Hello"},
        {"text": "hi", "reasoning": ("thought", "gAAAA-enc")},
        {"text": "", "reasoning": ("", "gAAAA-enc"), "function_calls": [("call_1", "f", {"a": 1})]},
        {"text": "hi", "reasoning": ("thought", None)},
        {"text": "hi", "reasoning": ("", None)},
        {"function_calls": [("call_1", "f", {"a": 1}), ("call_2", "g", {})]},
        {"text": "cut", "status": "incomplete"},
    ],
)
def test_built_streams_fold_into_their_answers(answer):
    folded_equals_answer(built(**answer))


def test_the_reasoning_items_signature_is_one_signature_delta_at_its_end():
    out = folded_equals_answer(built(text="hi", reasoning=("thought", "gAAAA-enc")))
    signatures = [e["delta"]["signature"] for e in out if e.get("delta", {}).get("type") == "signature_delta"]
    assert len(signatures) == 1 and reasoning_item(signatures[0])["encrypted_content"] == "gAAAA-enc"


def test_each_event_is_forwarded_as_it_arrives():
    translator = StreamTranslator(context())
    events = built(text="Hello", reasoning=("thought", "enc"))
    kinds = {payload["type"]: translator.feed(name, payload) for name, payload in events}
    assert kinds["response.created"][0]["type"] == "message_start"
    assert kinds["response.reasoning_summary_text.delta"][-1]["delta"] == {
        "type": "thinking_delta",
        "thinking": "thought",
    }
    assert kinds["response.output_text.delta"][-1]["delta"] == {"type": "text_delta", "text": "Hello"}


def test_summary_parts_after_the_first_are_led_by_a_blank_line():
    events = built(text="hi", reasoning=("one", "enc"))
    at = next(i for i, e in enumerate(events) if e[1]["type"] == "response.reasoning_summary_part.done") + 1
    ids = {"item_id": "rs_fake", "output_index": 0, "summary_index": 1}
    events[at:at] = [
        event("response.reasoning_summary_part.added", **ids, part={"type": "summary_text", "text": ""}),
        event("response.reasoning_summary_text.delta", **ids, delta="two"),
        event("response.reasoning_summary_part.done", **ids, part={"type": "summary_text", "text": "two"}),
    ]
    done = next(payload["item"] for _, payload in events if payload["type"] == "response.output_item.done")
    done["summary"].append({"type": "summary_text", "text": "two"})
    out = folded_equals_answer(events)
    assert anthropic_fold(out)["content"][0]["thinking"] == "one\n\ntwo"


def test_a_refusal_streams_as_text_with_stop_reason_refusal():
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
    part = {"type": "refusal", "refusal": "No."}
    usage = {"input_tokens": 10, "output_tokens": 2}
    response = {"id": "resp_1", "status": "completed", "output": [{**message, "content": [part]}], "usage": usage}
    events = [
        event("response.created", response={"id": "resp_1", "status": "in_progress", "output": []}),
        event("response.output_item.added", output_index=0, item={**message, "content": []}),
        event("response.content_part.added", output_index=0, content_index=0, part={"type": "refusal", "refusal": ""}),
        event("response.refusal.delta", output_index=0, content_index=0, delta="No."),
        event("response.refusal.done", output_index=0, content_index=0, refusal="No."),
        event("response.content_part.done", output_index=0, content_index=0, part=part),
        event("response.output_item.done", output_index=0, item={**message, "content": [part]}),
        event("response.completed", response=response),
    ]
    out = folded_equals_answer(events)
    assert anthropic_fold(out)["stop_reason"] == "refusal"


def test_a_call_whose_arguments_never_streamed_gets_them_at_its_end():
    events = [e for e in built(function_calls=[("call_1", "f", {"a": 1})]) if "arguments" not in e[1]["type"]]
    folded_equals_answer(events)


def test_without_usage_the_output_is_estimated():
    events = built(text="Hello there")
    events[-1][1]["response"]["usage"] = None
    delta = translate(events)[-2]
    assert delta["usage"] == {"output_tokens": 4}


def test_message_start_carries_a_full_usage_with_the_input_estimate():
    start = translate(built(text="hi"))[0]
    assert start["message"]["usage"] == {
        "input_tokens": 42,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


# -- errors ------------------------------------------------------------------------------------


def failure(events):
    translator = StreamTranslator(context())
    with pytest.raises(BridgeError) as caught:
        translated(translator, events)
    return translator, caught.value


def test_a_recorded_error_event_is_an_anthropic_error_event():
    translator, error = failure(recorded_events("openai/responses_error_event.sse"))
    body = translator.fail(error)[0]
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert "Sorry, something went wrong." in body["error"]["message"]


def test_a_recorded_failed_response_is_its_error():
    _, error = failure(recorded_events("openai/responses_failed.sse"))
    assert "quota" in error.message


def test_a_context_overflow_mid_stream_is_anthropics_prompt_is_too_long():
    overflow = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    events = built(text="x")[:2] + [
        event("response.failed", response={"id": "r", "status": "failed", "error": overflow})
    ]
    translator, error = failure(events)
    body = translator.fail(error)[0]
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"] == "prompt is too long: 42 tokens > 42 maximum"


def test_a_stream_cut_short_is_an_error_never_a_made_up_stop():
    _, error = failure(built(text="cut")[:-1])
    assert error.status == 502


def test_arguments_for_a_call_whose_block_closed_are_a_502():
    events = built(function_calls=[("call_1", "f", {"a": 1}), ("call_2", "g", {})])
    second = next(i for i, e in enumerate(events) if e[1].get("output_index") == 1)
    events.insert(second + 1, event("response.function_call_arguments.delta", output_index=0, delta="{}"))
    events = [e for e in events if not (e[1]["type"] == "response.output_item.done" and e[1]["output_index"] == 0)]
    events.insert(second - 1, events.pop(second - 1))
    _, error = failure(events)
    assert error.status == 502
