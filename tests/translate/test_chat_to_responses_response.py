"""Responses answer -> Chat completion, one test per rule (bridge/translate/chat_to_responses/response.py).

Expectations are read from the recorded Responses bodies in tests/fixtures/openai.
"""

import pytest

from bridge.protocols.errors import OPENAI, BridgeError
from bridge.protocols.reasoning import reasoning_item
from bridge.translate.anthropic_response import openai_overflow
from bridge.translate.chat_to_responses.response import to_chat_completion
from tests.fake_upstream import FIXTURES, responses_answer
from tests.helpers.contexts import chat_to_responses_context as context
from tests.helpers.recorded import recorded

RESPONSES_BODIES = sorted(
    f"openai/{path.name}" for path in FIXTURES.glob("openai/responses_*.json") if "error" not in path.name
)


def translate(response, **overrides):
    return to_chat_completion(response, context(**overrides))


def only_message(completion):
    [choice] = completion["choices"]
    return choice["message"], choice["finish_reason"]


@pytest.mark.parametrize("name", RESPONSES_BODIES)
def test_every_recorded_body_becomes_one_chat_choice(name):
    response = recorded(name)
    completion = translate(response)
    usage = response["usage"]
    assert completion["id"] == f"chatcmpl-{response['id']}" and completion["object"] == "chat.completion"
    assert (completion["model"], completion["created"]) == ("gpt-5-codex", 1700000000)
    assert completion["usage"]["prompt_tokens"] == usage["input_tokens"]
    assert completion["usage"]["completion_tokens"] == usage["output_tokens"]
    assert completion["usage"]["total_tokens"] == usage["total_tokens"]
    assert (
        completion["usage"]["prompt_tokens_details"]["cached_tokens"] == usage["input_tokens_details"]["cached_tokens"]
    )
    assert (
        completion["usage"]["completion_tokens_details"]["reasoning_tokens"]
        == usage["output_tokens_details"]["reasoning_tokens"]
    )


def test_output_text_is_the_content():
    response = recorded("openai/responses_text.json")
    message, finish = only_message(translate(response))
    assert message == {"role": "assistant", "content": "2, 3, 4", "refusal": None}
    assert finish == "stop"


def test_a_function_call_is_a_tool_call_with_the_arguments_as_written():
    response = recorded("openai/responses_tool_call.json")
    [item] = response["output"]
    message, finish = only_message(translate(response))
    assert message["content"] is None and finish == "tool_calls"
    assert message["tool_calls"] == [
        {"id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": item["arguments"]}}
    ]


def test_reasoning_summaries_are_reasoning_content_and_the_item_rides_in_thinking_blocks():
    response = recorded("openai/responses_reasoning.json")
    reasoning = response["output"][0]
    message, finish = only_message(translate(response))
    assert message["reasoning_content"] == reasoning["summary"][0]["text"]
    assert message["content"] == response["output"][1]["content"][0]["text"] and finish == "stop"
    [entry] = message["thinking_blocks"]
    assert entry["type"] == "thinking" and entry["thinking"] == reasoning["summary"][0]["text"]
    assert reasoning_item(entry["signature"]) == reasoning, "the whole item, as served"


def test_summary_parts_and_items_are_a_blank_line_apart_and_raw_reasoning_text_counts():
    response = responses_answer("Done", reasoning=("First.", "gAAAA-one"))
    first = response["output"][0]
    first["summary"] += [{"type": "summary_text", "text": ""}, {"type": "summary_text", "text": "Second."}]
    raw = {"id": "rs_2", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Raw."}]}
    response["output"].insert(1, raw)
    message, _ = only_message(translate(response))
    assert message["reasoning_content"] == "First.\n\nSecond.\n\nRaw."
    assert [entry["thinking"] for entry in message["thinking_blocks"]] == ["First.\n\nSecond."], (
        "only an item with encrypted_content can go back"
    )


def test_max_output_tokens_is_length_and_reasoning_without_encrypted_content_stays_out():
    response = recorded("openai/responses_incomplete.json")
    message, finish = only_message(translate(response))
    assert finish == "length" and "thinking_blocks" not in message and "reasoning_content" not in message
    assert message["content"] == response["output"][1]["content"][0]["text"]
    assert translate(response)["usage"]["prompt_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 1217}


def test_a_call_cut_by_the_limit_is_length_not_tool_calls():
    response = responses_answer(function_calls=[("call_1", "lookup", {"q": "x"})], status="incomplete")
    response["output"][0]["arguments"] = '{"q": "x'
    message, finish = only_message(translate(response))
    assert finish == "length" and message["tool_calls"][0]["function"]["arguments"] == '{"q": "x'


def test_a_content_filter_is_content_filter_and_a_refusal_part_is_the_refusal():
    response = responses_answer("Partial", status="incomplete")
    response["incomplete_details"] = {"reason": "content_filter"}
    response["output"][0]["content"].append({"type": "refusal", "refusal": "I can't help with that."})
    message, finish = only_message(translate(response))
    assert (message["content"], message["refusal"], finish) == ("Partial", "I can't help with that.", "content_filter")


def test_output_items_bridge_never_asks_for_are_left_out():
    response = recorded("openai/responses_custom_tool.json")
    message, finish = only_message(translate(response))
    assert message == {"role": "assistant", "content": None, "refusal": None} and finish == "stop"


@pytest.mark.parametrize(
    "code, status, kind",
    [
        ("rate_limit_exceeded", 429, "rate_limit_error"),
        ("server_error", 502, "server_error"),
        ("invalid_image_url", 400, "invalid_request_error"),
        ("insufficient_quota", 429, "rate_limit_error"),
        (None, 502, "server_error"),
    ],
)
def test_a_failed_response_is_its_error(code, status, kind):
    response = {**responses_answer(), "status": "failed", "error": {"code": code, "message": "It broke."}}
    with pytest.raises(BridgeError) as caught:
        translate(response)
    body = caught.value.body_for(OPENAI)["error"]
    assert (caught.value.status_for(OPENAI), body["type"]) == (status, kind)
    assert body["message"].startswith("upstream failed: It broke.")


def test_an_error_body_in_a_200_is_that_error():
    with pytest.raises(BridgeError) as caught:
        translate({"error": {"message": "Overloaded.", "type": "server_error", "param": None, "code": None}})
    assert caught.value.status == 502 and "Overloaded." in caught.value.message


def test_a_failed_context_overflow_is_context_length_exceeded_on_messages():
    error = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    with pytest.raises(BridgeError) as caught:
        translate({**responses_answer(), "status": "failed", "error": error})
    reworded = openai_overflow(caught.value)
    assert (reworded.status, reworded.code, reworded.param) == (400, "context_length_exceeded", "messages")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"output": {}}, "output"),
        ({"output": [{"type": "function_call", "name": "f", "call_id": 7}]}, "output.0.call_id"),
        ({"output": [{"type": "message", "content": [{"type": "output_text", "text": 1}]}]}, "output.0.content.0.text"),
        ({"usage": {"input_tokens": "many"}}, "usage.input_tokens"),
        ({"usage": {"input_tokens_details": {"cached_tokens": -1}}}, "usage.input_tokens_details.cached_tokens"),
    ],
)
def test_a_malformed_answer_is_a_502_naming_the_field(change, field):
    with pytest.raises(BridgeError) as caught:
        translate({**responses_answer("Hi"), **change})
    assert caught.value.status == 502 and f"response: {field} must be" in caught.value.message
