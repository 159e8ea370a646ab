"""Chat Completions answer -> Responses response object, one test per rule
(bridge/translate/responses_to_chat/response.py), on the recorded Chat bodies."""

import json

import pytest
from openai.types.responses import Response

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import carried
from bridge.translate.responses_to_chat.response import FILTERED, responses_overflow, to_response
from tests.helpers.contexts import RESPONSE_ID, responses_to_chat_context
from tests.helpers.recorded import OVERFLOWS, recorded

BODIES = ["text.json", "tool_calls.json", "deepseek_reasoning.json", "length.json", "refusal.json"]
BODIES += ["content_filter.json", "cached_tokens.json", "reasoning_usage.json"]
CUSTOM = {"apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": None}}
PATCH = '*** Begin Patch\n*** Add File: "a b".txt\n+caf\u00e9\n*** End Patch\n'


def completion(message, finish_reason="stop", usage=None):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": usage or {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }


def tool_call(name, arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def translate(body, **context):
    return to_response(body, responses_to_chat_context(**context))


@pytest.mark.parametrize("name", BODIES)
def test_every_recorded_answer_is_a_response_the_openai_sdk_reads(name):
    response = Response.model_validate(translate(recorded(f"openai/{name}")))
    assert response.id == RESPONSE_ID and response.model == "qwen3" and response.object == "response"


def test_text_is_an_output_text_part_of_a_message():
    body = recorded("openai/text.json")
    [item] = translate(body)["output"]
    assert item["type"] == "message" and item["status"] == "completed"
    assert item["content"] == [
        {"type": "output_text", "text": body["choices"][0]["message"]["content"], "annotations": [], "logprobs": []}
    ]


def test_tool_calls_are_function_calls_with_the_upstreams_ids_and_arguments_as_they_came():
    body = recorded("openai/tool_calls.json")
    calls = body["choices"][0]["message"]["tool_calls"]
    items = translate(body)["output"]
    assert [(i["type"], i["call_id"], i["name"], i["arguments"]) for i in items] == [
        ("function_call", c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls
    ]
    assert len({item["id"] for item in items}) == len(items)


def test_reasoning_is_a_reasoning_item_first_carrying_its_text_and_a_summary_only_when_asked():
    body = recorded("openai/deepseek_reasoning.json")
    thought = body["choices"][0]["message"]["reasoning_content"]
    [shown, message] = translate(body, summary=True)["output"]
    assert shown["type"] == "reasoning" and shown["summary"] == [{"type": "summary_text", "text": thought}]
    assert carried(shown["encrypted_content"]) == {"type": "reasoning_content", "text": thought}
    assert message["type"] == "message"
    [hidden, _] = translate(body)["output"]
    assert hidden["summary"] == [] and hidden["encrypted_content"] == shown["encrypted_content"]


def test_length_is_an_incomplete_response_with_its_last_item_incomplete():
    response = translate(recorded("openai/length.json"))
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][-1]["status"] == "incomplete"


def test_a_refusal_is_a_refusal_part_and_a_content_filter_stop_one_too():
    body = recorded("openai/refusal.json")
    [message] = translate(body)["output"]
    assert message["content"][-1] == {"type": "refusal", "refusal": body["choices"][0]["message"]["refusal"]}
    filtered = translate(completion({"content": "Part of"}, "content_filter"))
    assert filtered["status"] == "completed"
    assert [part["type"] for part in filtered["output"][0]["content"]] == ["output_text", "refusal"]
    assert filtered["output"][0]["content"][1]["refusal"] == FILTERED


def test_usage_counts_cached_and_reasoning_tokens_as_openai_does():
    cached = translate(recorded("openai/cached_tokens.json"))["usage"]
    assert (cached["input_tokens"], cached["input_tokens_details"]["cached_tokens"]) == (4020, 4012)
    reasoned = translate(recorded("openai/reasoning_usage.json"))["usage"]
    assert reasoned["output_tokens"] == 467 and reasoned["output_tokens_details"]["reasoning_tokens"] == 448
    assert reasoned["total_tokens"] == 498
    deepseek = translate(completion({"content": "hi"}, usage={"prompt_tokens": 50, "prompt_cache_hit_tokens": 40}))
    assert deepseek["usage"]["input_tokens_details"]["cached_tokens"] == 40


@pytest.mark.parametrize(
    "arguments, text",
    [
        (json.dumps({"input": PATCH}), PATCH),
        (json.dumps({"input": PATCH})[:40], "*** Begin Patch\n*** Add File"),
        (PATCH, PATCH),
    ],
    ids=["whole", "cut-short", "plain-text"],
)
def test_a_custom_tools_call_is_a_custom_tool_call_with_its_input_text(arguments, text):
    [item] = translate(completion({"tool_calls": [tool_call("apply_patch", arguments)]}), tools=CUSTOM)["output"]
    assert (item["type"], item["name"], item["input"], item["call_id"]) == (
        "custom_tool_call",
        "apply_patch",
        text,
        "call_1",
    )
    assert "arguments" not in item


def test_a_namespaced_tools_call_carries_its_namespace_and_the_clients_name():
    tools = {"multi_agent_v1__close_agent": {"kind": "function", "name": "close_agent", "namespace": "multi_agent_v1"}}
    body = completion({"tool_calls": [tool_call("multi_agent_v1__close_agent", '{"target": "a"}')]})
    [item] = translate(body, tools=tools)["output"]
    assert (item["name"], item["namespace"]) == ("close_agent", "multi_agent_v1")


def test_a_call_without_arguments_has_an_empty_object_and_one_without_an_id_gets_one():
    body = completion({"tool_calls": [{"type": "function", "function": {"name": "ls", "arguments": ""}}]})
    [item] = translate(body)["output"]
    assert item["arguments"] == "{}" and item["call_id"].startswith("call_")


@pytest.mark.parametrize(
    "body",
    [
        completion({"tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}),
        {**completion({"content": "a"}), "choices": completion({"content": "a"})["choices"] * 2},
        [],
    ],
    ids=["call-without-name", "two-choices", "not-an-object"],
)
def test_an_answer_that_cannot_be_one_response_is_a_502(body):
    with pytest.raises(BridgeError) as raised:
        translate(body)
    assert raised.value.status == 502


def test_an_error_in_a_200_is_raised_as_the_error_it_names():
    with pytest.raises(BridgeError) as raised:
        translate({"error": {"message": "slow down", "type": "rate_limit_exceeded"}})
    assert raised.value.kind == "rate_limit" and "slow down" in raised.value.message


def overflowed(detail, status=400):
    return BridgeError(
        "invalid_request", detail["message"], status=status, upstream_status=status, upstream_detail=detail
    )


@pytest.mark.parametrize("case", list(OVERFLOWS))
def test_a_context_overflow_however_worded_is_openais_400_context_length_exceeded_on_input(case):
    error = responses_overflow(overflowed(OVERFLOWS[case][0]))
    assert (error.status, error.kind, error.code, error.param) == (
        400,
        "invalid_request",
        "context_length_exceeded",
        "input",
    )
    assert error.message == OVERFLOWS[case][0]["message"]


@pytest.mark.parametrize("status", [413, 422])
def test_an_overflow_a_local_server_reports_as_413_or_422_is_one_too(status):
    assert responses_overflow(overflowed(OVERFLOWS["llama.cpp"][0], status)).status == 400


def test_other_errors_are_left_as_they_came():
    rate = BridgeError(
        "rate_limit", "tokens per minute exceeded", upstream_status=429, upstream_detail={"message": "x"}
    )
    assert responses_overflow(rate) is rate
    plain = overflowed({"message": "messages.1: tool_call_id unknown"})
    assert responses_overflow(plain) is plain
