"""The grammar of a Responses upstream's event stream (bridge/translate/responses_stream.py), read
through a translator that records every hook it is called with; recorded streams and the fake
upstream's builder as input."""

import json

import pytest

from bridge.protocols.errors import BridgeError
from bridge.translate.responses_stream import ResponsesStream
from bridge.translate.translator import DONE
from tests.fake_upstream import responses_stream
from tests.helpers.recorded import RESPONSES_STREAMS, recorded_events


class Recorder(ResponsesStream):
    """Every hook as (name, what it was given)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def _record(self, name, *args):
        self.calls.append((name, *args))
        return [name]

    def on_response_start(self, response):
        return self._record("start", response["id"])

    def on_item_start(self, item):
        return self._record("item", item.kind, item.index)

    def on_part_start(self, item, part):
        return self._record("part", part["type"])

    def on_text(self, item, text):
        return self._record("text", text)

    def on_refusal(self, item, text):
        return self._record("refusal", text)

    def on_part_done(self, item, part):
        return self._record("part_done", part["type"])

    def on_summary_part(self, item, summary_index):
        return self._record("summary_part", summary_index)

    def on_summary(self, item, text):
        return self._record("summary", text)

    def on_reasoning_text(self, item, text):
        return self._record("reasoning_text", text)

    def on_arguments(self, item, fragment):
        return self._record("arguments", item.kind, fragment)

    def on_item_done(self, item):
        return self._record("item_done", item.kind, item.done, item.streamed)

    def on_response_end(self, response):
        return self._record("end", response["status"])


def event(kind, **fields):
    return kind, {"type": kind, **fields}


def run(events, translator=None):
    translator = translator or Recorder()
    for name, payload in events:
        translator.feed(name, payload)
    translator.finish()
    return translator


def built(**answer):
    """The events of the fake upstream's Responses stream builder."""
    reply = responses_stream(**answer)
    return [(None, json.loads(raw.split(b"data: ", 1)[1])) for raw in reply.events]


CREATED = event("response.created", response={"id": "resp_1", "status": "in_progress", "output": []})
COMPLETED = event("response.completed", response={"id": "resp_1", "status": "completed", "output": []})


@pytest.mark.parametrize("name", [n for n in RESPONSES_STREAMS if "error" not in n and "failed" not in n])
def test_every_recorded_stream_is_read_to_its_end(name):
    translator = run(recorded_events(name))
    assert translator.done and translator.calls[0][0] == "start" and translator.calls[-1][0] == "end"
    assert not translator.items, "every item opened was closed"


def test_a_texts_deltas_reach_the_hook_in_order_within_its_part():
    calls = run(built(text="Hello there")).calls
    assert [c[0] for c in calls] == ["start", "item", "part", "text", "part_done", "item_done", "end"]
    assert ("text", "Hello there") in calls


def test_a_reasoning_items_summary_parts_and_the_whole_item_at_its_end():
    calls = run(built(text="hi", reasoning=("thought", "gAAAA-secret"))).calls
    assert ("summary_part", 0) in calls and ("summary", "thought") in calls
    done = next(c for c in calls if c[0] == "item_done" and c[1] == "reasoning")
    assert done[2]["encrypted_content"] == "gAAAA-secret" and done[3] is True


def test_a_function_calls_arguments_fragments_in_order():
    calls = run(recorded_events("openai/responses_tool_call.sse")).calls
    fragments = [c[2] for c in calls if c[0] == "arguments"]
    done = next(c for c in calls if c[0] == "item_done" and c[1] == "function")
    assert "".join(fragments) == done[2]["arguments"] and len(fragments) > 1


def test_a_custom_tool_calls_input_is_a_fragment_of_its_kind():
    calls = run(recorded_events("openai/responses_custom_tool.sse")).calls
    assert any(c[0] == "arguments" and c[1] == "custom" for c in calls)


def test_a_refusal_reaches_its_hook():
    events = [
        CREATED,
        event("response.output_item.added", output_index=0, item={"type": "message", "id": "msg_1", "content": []}),
        event("response.content_part.added", output_index=0, content_index=0, part={"type": "refusal", "refusal": ""}),
        event("response.refusal.delta", output_index=0, content_index=0, delta="No."),
        event("response.refusal.done", output_index=0, content_index=0, refusal="No."),
        event("response.output_item.done", output_index=0, item={"type": "message", "id": "msg_1"}),
        COMPLETED,
    ]
    assert ("refusal", "No.") in run(events).calls


def test_raw_reasoning_text_reaches_its_hook():
    events = [
        CREATED,
        event("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1", "summary": []}),
        event("response.reasoning_text.delta", output_index=0, content_index=0, delta="thinking..."),
        event("response.reasoning_text.done", output_index=0, content_index=0, text="thinking..."),
        event("response.output_item.done", output_index=0, item={"type": "reasoning", "id": "rs_1", "summary": []}),
        COMPLETED,
    ]
    assert ("reasoning_text", "thinking...") in run(events).calls


def test_an_incomplete_response_ends_the_stream_with_its_status():
    translator = run(built(text="cut", status="incomplete"))
    assert translator.calls[-1] == ("end", "incomplete") and translator.response["incomplete_details"]


def test_empty_deltas_are_no_content():
    events = built(text="x")
    events.insert(4, event("response.output_text.delta", output_index=0, content_index=0, delta=""))
    assert [c for c in run(events).calls if c[0] == "text"] == [("text", "x")]


def test_hosted_tools_events_unknown_events_and_a_done_marker_are_skipped():
    events = built(text="x")
    events[2:2] = [
        event("response.web_search_call.searching", output_index=0, item_id="ws_1"),
        event("response.something_new", anything=1),
        (None, DONE),
    ]
    assert [c[0] for c in run(events).calls] == ["start", "item", "part", "text", "part_done", "item_done", "end"]


def test_an_item_of_a_kind_not_translated_is_opened_and_closed_as_ignored():
    events = [
        CREATED,
        event("response.output_item.added", output_index=0, item={"type": "web_search_call", "id": "ws_1"}),
        event("response.output_item.done", output_index=0, item={"type": "web_search_call", "id": "ws_1"}),
        COMPLETED,
    ]
    assert ("item", "ignored", 0) in run(events).calls


def test_the_relayed_size_counts_every_delta():
    translator = run(built(text="héllo", function_calls=[("call_1", "f", {"a": 1})]))
    assert translator.relayed == len("héllo".encode()) + len('{"a": 1}')


# -- errors ------------------------------------------------------------------------------------


def failure(events, translator=None):
    translator = translator or Recorder()
    with pytest.raises(BridgeError) as raised:
        for name, payload in events:
            translator.feed(name, payload)
        translator.finish()
    return raised.value


def test_a_recorded_error_event_is_the_error_it_names():
    error = failure(recorded_events("openai/responses_error_event.sse"))
    assert error.status == 502 and "Sorry, something went wrong." in error.message


def test_an_error_event_as_the_api_reference_writes_it_takes_its_kind_from_its_code():
    error = failure([CREATED, event("error", code="rate_limit_exceeded", message="slow down", param=None)])
    assert error.kind == "rate_limit" and error.status == 429 and "slow down" in error.message


def test_a_failed_response_is_its_error():
    error = failure(recorded_events("openai/responses_failed.sse"))
    assert "exceeded your current quota" in error.message


def test_a_failed_responses_rate_limit_code_is_a_rate_limit():
    failed = {"id": "r", "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "later"}}
    assert failure([CREATED, event("response.failed", response=failed)]).kind == "rate_limit"


def test_a_stream_that_ends_before_its_last_event_is_an_error():
    error = failure(built(text="cut short")[:-1])
    assert error.status == 502 and "ended before response.completed" in error.message


def test_an_event_before_response_created_is_a_broken_stream():
    error = failure(built(text="x")[2:])
    assert error.status == 502 and "before response.created" in error.message


def test_a_delta_for_an_item_not_open_is_a_broken_stream():
    events = built(text="x")
    closed = [e for e in events if e[1]["type"] != "response.output_item.added"]
    error = failure(closed)
    assert error.status == 502 and "not open" in error.message


def test_an_item_opened_twice_is_a_broken_stream():
    events = built(text="x")
    error = failure(events[:3] + events[2:])
    assert "opened output item 0 twice" in error.message


@pytest.mark.parametrize(
    "bad, field",
    [
        (event("response.output_text.delta", output_index=0, delta=5), "delta"),
        (event("response.output_text.delta", output_index="0", delta="x"), "output_index"),
        (event("response.output_item.added", output_index=1, item="text"), "item"),
        (event("response.output_item.added", output_index=1, item={"type": "function_call", "name": 3}), "item.name"),
        (
            event("response.completed", response={"id": "r", "status": "completed", "usage": {"input_tokens": "9"}}),
            "usage.input_tokens",
        ),
        (
            event("response.completed", response={"id": "r", "status": "completed", "output": [{"type": 1}]}),
            "output.0.type",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_a_502_naming_it(bad, field):
    events = built(text="x")
    events.insert(4, bad)
    error = failure(events)
    assert error.status == 502 and f"{field} must be" in error.message


def test_nothing_is_read_after_the_last_event():
    translator = run(built(text="x"))
    assert translator.feed(None, {"type": "response.output_text.delta", "output_index": 9, "delta": "late"}) == []
