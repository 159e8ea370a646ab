"""OpenAI Responses answer -> Anthropic Messages answer, one test per rule
(bridge/translate/messages_to_responses/response.py); recorded bodies from tests/fixtures/openai,
every message built validated by the anthropic SDK's own Message model."""

import json

import pytest
from anthropic.types import Message

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import reasoning_item
from bridge.translate.messages_client import INVALID_ARGUMENTS_KEY
from bridge.translate.messages_to_responses.response import input_tokens, to_anthropic_message
from tests.fake_upstream import responses_answer
from tests.helpers.contexts import messages_to_responses_context as context
from tests.helpers.recorded import recorded


def translate(body, **overrides):
    message = to_anthropic_message(body, context(**overrides))
    Message.model_validate(message)
    return message


def test_recorded_text():
    body = recorded("openai/responses_text.json")
    message = translate(body)
    assert [block["type"] for block in message["content"]] == ["text"]
    assert message["content"][0]["text"] == body["output"][-1]["content"][0]["text"]
    assert message["stop_reason"] == "end_turn" and message["model"] == "claude-sonnet-4-5"
    assert message["id"] == "msg_" + body["id"]


def test_recorded_reasoning_is_a_thinking_block_whose_signature_is_the_item():
    body = recorded("openai/responses_reasoning.json")
    item = next(item for item in body["output"] if item["type"] == "reasoning")
    block = translate(body)["content"][0]
    assert block["type"] == "thinking"
    assert block["thinking"] == "\n\n".join(part["text"] for part in item["summary"])
    back = reasoning_item(block["signature"])
    assert back == {key: value for key, value in item.items() if key not in ("status", "content")}


def test_summary_parts_are_joined_by_a_blank_line():
    body = responses_answer(text="hi", reasoning=("first", "enc"))
    body["output"][0]["summary"].append({"type": "summary_text", "text": "second"})
    assert translate(body)["content"][0]["thinking"] == "first\n\nsecond"


def test_a_reasoning_item_without_encrypted_content_has_an_empty_signature_never_an_invented_one():
    body = responses_answer(text="hi", reasoning=("thought", None))
    assert translate(body)["content"][0] == {"type": "thinking", "thinking": "thought", "signature": ""}


def test_a_reasoning_item_with_neither_text_nor_encrypted_content_is_nothing():
    body = responses_answer(text="hi", reasoning=("", None))
    assert [block["type"] for block in translate(body)["content"]] == ["text"]


def test_raw_reasoning_text_stands_in_for_a_missing_summary():
    body = responses_answer(text="hi", reasoning=("", "enc"))
    body["output"][0]["content"] = [{"type": "reasoning_text", "text": "raw thoughts"}]
    assert translate(body)["content"][0]["thinking"] == "raw thoughts"


def test_recorded_tool_call_is_a_tool_use_with_its_call_id():
    body = recorded("openai/responses_tool_call.json")
    call = next(item for item in body["output"] if item["type"] == "function_call")
    message = translate(body)
    block = message["content"][-1]
    assert block == {
        "type": "tool_use",
        "id": call["call_id"],
        "name": call["name"],
        "input": json.loads(call["arguments"]),
    }
    assert message["stop_reason"] == "tool_use"


def test_a_shortened_tool_name_is_restored_and_an_odd_call_id_encoded():
    body = responses_answer(function_calls=[("call:1", "short_abc", {"a": 1})])
    block = translate(body, tool_names={"short_abc": "mcp__long__name"})["content"][0]
    assert block["name"] == "mcp__long__name" and block["id"].startswith("toolu_b64_")


def test_arguments_that_are_not_an_object_are_kept_raw():
    body = responses_answer(function_calls=[("call_1", "f", {})])
    body["output"][0]["arguments"] = '{"cut'
    assert translate(body)["content"][0]["input"] == {INVALID_ARGUMENTS_KEY: '{"cut'}


def test_a_call_without_a_name_is_a_502():
    body = responses_answer(function_calls=[("call_1", "", {})])
    with pytest.raises(BridgeError) as caught:
        translate(body)
    assert caught.value.status == 502


def test_recorded_incomplete_is_max_tokens():
    message = translate(recorded("openai/responses_incomplete.json"))
    assert message["stop_reason"] == "max_tokens"


def test_incomplete_for_content_filter_is_a_refusal():
    body = responses_answer(text="partial", status="incomplete")
    body["incomplete_details"] = {"reason": "content_filter"}
    message = translate(body)
    assert message["stop_reason"] == "refusal" and message["stop_details"]["type"] == "refusal"


def test_a_refusal_part_is_text_and_stop_reason_refusal():
    body = responses_answer(text="x")
    body["output"][0]["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
    message = translate(body)
    assert message["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert message["stop_reason"] == "refusal"


def test_usage_input_excludes_cached_tokens_which_are_cache_reads():
    body = responses_answer(text="hi", reasoning=("t", "enc"))
    body["usage"]["input_tokens_details"]["cached_tokens"] = 60
    assert translate(body)["usage"] == {
        "input_tokens": 40,
        "output_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60,
        "output_tokens_details": {"thinking_tokens": 5},
    }


def test_a_failed_response_is_its_error():
    body = {**responses_answer(text=""), "status": "failed", "error": {"code": "server_error", "message": "boom"}}
    with pytest.raises(BridgeError) as caught:
        translate(body)
    assert "boom" in caught.value.message and caught.value.status == 502


def test_an_error_body_in_a_200_is_its_error():
    with pytest.raises(BridgeError) as caught:
        translate({"error": {"type": "rate_limit_exceeded", "message": "slow down"}})
    assert caught.value.kind == "rate_limit"


def test_a_field_of_the_wrong_type_is_a_502_naming_it():
    body = responses_answer(text="hi")
    body["usage"]["output_tokens"] = "10"
    with pytest.raises(BridgeError) as caught:
        translate(body)
    assert caught.value.status == 502 and "usage.output_tokens" in caught.value.message


def test_the_input_token_count():
    assert input_tokens({"object": "response.input_tokens", "input_tokens": 42}, None) == {"input_tokens": 42}
    with pytest.raises(BridgeError):
        input_tokens({"object": "response.input_tokens", "input_tokens": "42"}, None)
