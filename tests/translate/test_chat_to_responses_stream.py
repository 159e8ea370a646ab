"""Responses events -> Chat chunks (bridge/translate/chat_to_responses/stream.py), fed every recorded stream.

What a Chat client ends up with is accumulated by the openai SDK's own accumulator, the code a
real client runs; what it must end up with is the same answer not streamed: the Response a
stream's last event carries, translated by response.py.
"""

import json

import pytest

from bridge.protocols.errors import OPENAI, BridgeError
from bridge.protocols.reasoning import reasoning_item
from bridge.translate.chat_to_responses.response import to_chat_completion
from bridge.translate.chat_to_responses.stream import StreamTranslator
from tests.fake_upstream import responses_stream, split_events
from tests.helpers.accumulators import openai_fold, responses_chat_comparable
from tests.helpers.contexts import chat_to_responses_context, translated
from tests.helpers.recorded import RESPONSES_STREAMS, recorded_events

# The recorded streams that end in an answer; the others end in an error.
ANSWERED = [name for name in RESPONSES_STREAMS if not name.endswith(("_failed.sse", "_error_event.sse"))]


def run(events, **context):
    context = chat_to_responses_context(**{"stream": True, "include_usage": True, **context})
    return translated(StreamTranslator(context), events)


def built(reply):
    """The (event name, payload) pairs of a stream built by tests/fake_upstream.py."""
    out = []
    for event in split_events(b"".join(reply.events)):
        name, data = event.decode().strip().split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def final_response(events):
    return events[-1][1]["response"]


@pytest.mark.parametrize("name", ANSWERED)
def test_the_openai_sdk_folds_every_translated_stream_into_the_non_streamed_answer(name):
    events = recorded_events(name)
    streamed = openai_fold(run(events))
    plain = to_chat_completion(final_response(events), chat_to_responses_context())
    assert responses_chat_comparable(streamed) == responses_chat_comparable(plain)


@pytest.mark.parametrize("name", ANSWERED)
def test_chunk_framing_role_first_finish_last_then_usage(name):
    translator = StreamTranslator(chat_to_responses_context(stream=True, include_usage=True))
    chunks = translated(translator, recorded_events(name))
    assert translator.done
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0]["finish_reason"] and chunks[-1]["choices"] == []
    assert all(chunk["choices"][0]["finish_reason"] is None for chunk in chunks[:-2])
    assert len({chunk["id"] for chunk in chunks}) == 1


def test_without_include_usage_there_is_no_usage_chunk():
    chunks = run(recorded_events("openai/responses_text.sse"), include_usage=False)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and all("usage" not in chunk for chunk in chunks)


def test_each_delta_is_one_chunk_as_it_comes():
    events = recorded_events("openai/responses_reasoning.sse")
    chunks = run(events)
    deltas = [p["delta"] for _, p in events if p["type"].endswith(("output_text.delta", "summary_text.delta"))]
    sent = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    pieces = [
        d.get("content") or d.get("reasoning_content") for d in sent if "content" in d or "reasoning_content" in d
    ]
    assert [p.removeprefix("\n\n") for p in pieces[1:]] == deltas, "the role chunk's content is first"


def test_summary_parts_are_a_blank_line_apart_and_the_item_rides_in_thinking_blocks():
    events = recorded_events("openai/responses_reasoning.sse")
    message = openai_fold(run(events))["choices"][0]["message"]
    [item] = [i for i in final_response(events)["output"] if i["type"] == "reasoning"]
    assert message["reasoning_content"] == "\n\n".join(part["text"] for part in item["summary"])
    [entry] = message["thinking_blocks"]
    [done] = [
        p["item"] for _, p in events if p["type"] == "response.output_item.done" and p["item"]["id"] == item["id"]
    ]
    assert reasoning_item(entry["signature"]) == done, "the item as its output_item.done carried it"


def test_a_function_call_opens_with_its_id_and_name_then_streams_its_arguments():
    events = recorded_events("openai/responses_tool_call.sse")
    chunks = run(events)
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    [item] = final_response(events)["output"]
    assert calls[0] == {
        "index": 0,
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": ""},
    }
    assert "".join(call["function"]["arguments"] for call in calls) == item["arguments"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_max_output_tokens_ends_in_length():
    chunks = run(recorded_events("openai/responses_incomplete.sse"))
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


def test_parallel_calls_get_tool_indexes_zero_and_one():
    reply = responses_stream(function_calls=[("call_a", "lookup", {"q": 1}), ("call_b", "lookup", {"q": 2})])
    completion = openai_fold(run(built(reply)))
    calls = completion["choices"][0]["message"]["tool_calls"]
    assert [(c["index"], c["id"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (0, "call_a", {"q": 1}),
        (1, "call_b", {"q": 2}),
    ]


def test_text_that_comes_only_with_its_items_end_is_sent_then():
    events = [
        (name, payload)
        for name, payload in built(responses_stream("Hello", reasoning=("Thought.", "gAAAA-x")))
        if not name.endswith(("output_text.delta", "summary_text.delta"))
    ]
    message = openai_fold(run(events))["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Hello", "Thought.")


def test_a_refusal_streams_as_the_refusal():
    events = built(responses_stream("x"))
    for _, payload in events:
        if payload["type"] == "response.output_text.delta":
            payload.update(type="response.refusal.delta", delta="I can't.")
    message = openai_fold(run(events))["choices"][0]["message"]
    assert message["refusal"] == "I can't."


@pytest.mark.parametrize(
    "name, message",
    [
        ("openai/responses_failed.sse", "insufficient_quota"),
        ("openai/responses_error_event.sse", "Sorry, something went wrong."),
    ],
)
def test_an_error_event_is_a_bridge_error_and_fail_sends_openais_error_chunk(name, message):
    translator = StreamTranslator(chat_to_responses_context(stream=True))
    with pytest.raises(BridgeError) as caught:
        translated(translator, recorded_events(name))
    assert message in caught.value.message
    assert translator.fail(caught.value) == [caught.value.body_for(OPENAI)]


def test_a_failed_response_is_its_error_and_an_overflow_is_context_length_exceeded():
    events = built(responses_stream("Hi"))[:2]
    error = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    events.append(("response.failed", {"type": "response.failed", "response": {"status": "failed", "error": error}}))
    with pytest.raises(BridgeError) as caught:
        run(events)
    assert (caught.value.code, caught.value.param, caught.value.status) == ("context_length_exceeded", "messages", 400)


def test_a_stream_cut_short_is_an_error_never_a_stop():
    events = recorded_events("openai/responses_text.sse")[:-1]
    translator = StreamTranslator(chat_to_responses_context(stream=True))
    with pytest.raises(BridgeError) as caught:
        translated(translator, events)
    assert caught.value.status == 502 and "before response.completed" in caught.value.message


@pytest.mark.parametrize(
    "events, words",
    [
        ([("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0})], "before"),
        (
            [
                ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
                ("x", {"type": "response.output_text.delta", "output_index": 3, "delta": "hi"}),
            ],
            "not open",
        ),
        (
            [
                ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
                ("x", {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}}),
                ("x", {"type": "response.output_text.delta", "output_index": 0, "delta": 7}),
            ],
            "delta must be a string",
        ),
    ],
)
def test_a_stream_that_breaks_the_grammar_is_a_502(events, words):
    with pytest.raises(BridgeError) as caught:
        run(events, include_usage=False)
    assert caught.value.status == 502 and words in caught.value.message


def test_the_estimate_is_the_requests_input_and_the_output_so_far():
    translator = StreamTranslator(chat_to_responses_context(stream=True, input_tokens=42))
    translated(translator, recorded_events("openai/responses_text.sse"), eof=False)
    assert translator.estimate()[0] == 42 and translator.estimate()[1] > 0
