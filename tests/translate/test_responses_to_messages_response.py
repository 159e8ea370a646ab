"""Messages response -> Responses `response` object, one test per rule
(bridge/translate/responses_to_messages/response.py).

Expectations are read from the recorded Anthropic bodies in tests/fixtures/anthropic;
every response built is validated by the openai SDK's own Response model.
"""

import copy
import json

import pytest
from openai.types.responses import Response

from bridge.protocols.reasoning import thinking_block
from bridge.translate.responses_to_messages.response import to_response
from tests.helpers.contexts import RESPONSE_ID, RESPONSES_ECHO, responses_to_messages_context
from tests.helpers.recorded import ANTHROPIC_BODIES, recorded


def translate(message, **overrides):
    response = to_response(message, responses_to_messages_context(**overrides))
    Response.model_validate(response)
    return response


def blocks(message, kind):
    return [block for block in message["content"] if block["type"] == kind]


def with_blocks(name, *content, **fields):
    """A recorded body with other content (and stop fields), for rules no recording shows alone."""
    message = copy.deepcopy(recorded(f"anthropic/{name}"))
    message.update(content=list(content), **fields)
    return message


@pytest.mark.parametrize("name", ANTHROPIC_BODIES)
def test_every_recorded_body_becomes_a_response_with_the_requests_id_model_and_parameters(name):
    response = translate(recorded(f"anthropic/{name}"))
    assert response["id"] == RESPONSE_ID and response["object"] == "response"
    assert response["created_at"] == 1700000000
    assert response["model"] == "gpt-5.5", "the response names the model the client asked for"
    assert {key: response[key] for key in RESPONSES_ECHO} == RESPONSES_ECHO
    assert response["error"] is None


def test_text_becomes_output_text_parts_of_one_assistant_message():
    message = recorded("anthropic/text.json")
    [item] = translate(message)["output"]
    assert (item["type"], item["role"], item["status"]) == ("message", "assistant", "completed")
    assert item["content"] == [
        {"type": "output_text", "text": message["content"][0]["text"], "annotations": [], "logprobs": []}
    ]


def test_text_blocks_no_other_item_separates_are_parts_of_one_message_and_empty_text_is_left_out():
    split = with_blocks(
        "text.json", {"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "b"}
    )
    [item] = translate(split)["output"]
    assert [part["text"] for part in item["content"]] == ["a", "b"]


def test_blocks_responses_cannot_show_are_left_out():
    fetch = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {"url": "https://a.example"}}
    fetched = {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": {"type": "web_fetch_result"}}
    message = with_blocks("text.json", {"type": "text", "text": "a"}, fetch, fetched, {"type": "text", "text": "b"})
    [item] = translate(message)["output"]
    assert [part["text"] for part in item["content"]] == ["a", "b"]


def test_tool_use_becomes_a_function_call_with_the_tool_use_id_as_call_id_and_json_string_arguments():
    message = recorded("anthropic/tool_use.json")
    [tool_use] = blocks(message, "tool_use")
    output = translate(message, tools={"get_weather": {"kind": "function", "name": "get_weather", "namespace": None}})[
        "output"
    ]
    assert [item["type"] for item in output] == ["message", "function_call"]
    call = output[1]
    assert (call["call_id"], call["name"], call["status"]) == (tool_use["id"], "get_weather", "completed")
    assert isinstance(call["arguments"], str) and json.loads(call["arguments"]) == tool_use["input"]
    assert "namespace" not in call


def test_a_namespaced_tool_comes_back_under_the_clients_name_and_namespace():
    message = with_blocks(
        "tool_use.json",
        {"type": "tool_use", "id": "toolu_1", "name": "multi_agent_v1__close_agent", "input": {"id": "a1"}},
    )
    tools = {"multi_agent_v1__close_agent": {"kind": "function", "name": "close_agent", "namespace": "multi_agent_v1"}}
    [call] = translate(message, tools=tools)["output"]
    assert (call["type"], call["name"], call["namespace"], call["call_id"]) == (
        "function_call",
        "close_agent",
        "multi_agent_v1",
        "toolu_1",
    )


def test_a_custom_tool_comes_back_as_a_custom_tool_call_whose_input_is_the_text():
    patch = '*** Begin Patch\n*** Add File: hello.txt\n+hello "quoted" \u00e9\n*** End Patch\n'
    message = with_blocks(
        "tool_use.json", {"type": "tool_use", "id": "toolu_2", "name": "apply_patch", "input": {"input": patch}}
    )
    tools = {"apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": None}}
    [call] = translate(message, tools=tools)["output"]
    assert call == {
        "id": call["id"],
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "toolu_2",
        "name": "apply_patch",
        "input": patch,
    }
    assert call["id"].startswith("ctc_")


def test_the_json_format_tool_comes_back_as_the_messages_output_text():
    answer = {"city": "Paris", "temperature": 21}
    message = with_blocks(
        "tool_use.json",
        {"type": "tool_use", "id": "toolu_3", "name": "json_answer", "input": answer},
        stop_reason="tool_use",
    )
    response = translate(message, json_tool="json_answer")
    [item] = response["output"]
    assert item["type"] == "message" and json.loads(item["content"][0]["text"]) == answer
    assert response["status"] == "completed"


def test_thinking_becomes_a_reasoning_item_whose_encrypted_content_carries_the_signed_block():
    message = recorded("anthropic/thinking.json")
    [thinking] = blocks(message, "thinking")
    output = translate(message)["output"]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    assert thinking_block(output[0]["encrypted_content"]) == thinking, "signature byte-exact"


def test_thinking_text_is_a_summary_only_when_the_request_asked_for_one():
    message = recorded("anthropic/thinking.json")
    [thinking] = blocks(message, "thinking")
    assert translate(message, summary=True)["output"][0]["summary"] == [
        {"type": "summary_text", "text": thinking["thinking"]}
    ]
    without = translate(message, summary=False)["output"][0]
    assert without["summary"] == [] and thinking_block(without["encrypted_content"]) == thinking


def test_redacted_thinking_is_a_reasoning_item_with_its_data_and_no_summary():
    message = recorded("anthropic/redacted_thinking.json")
    [redacted] = blocks(message, "redacted_thinking")
    reasoning = translate(message, summary=True)["output"][0]
    assert reasoning["type"] == "reasoning" and reasoning["summary"] == []
    assert thinking_block(reasoning["encrypted_content"]) == redacted


def test_a_refusal_is_a_refusal_part_with_anthropics_explanation():
    message = recorded("anthropic/refusal.json")
    response = translate(message)
    [item] = response["output"]
    assert item["content"] == [{"type": "refusal", "refusal": message["stop_details"]["explanation"]}]
    assert response["status"] == "completed"
    after_text = with_blocks("refusal.json", {"type": "text", "text": "Let me"})
    [item] = translate(after_text)["output"]
    assert [part["type"] for part in item["content"]] == ["output_text", "refusal"]


def test_max_tokens_is_status_incomplete_with_reason_max_output_tokens_and_the_last_item_incomplete():
    response = translate(recorded("anthropic/max_tokens.json"))
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][-1]["status"] == "incomplete"
    cut_call = with_blocks(
        "tool_use.json",
        {"type": "text", "text": "Writing"},
        {"type": "tool_use", "id": "toolu_4", "name": "get_weather", "input": {}},
        stop_reason="max_tokens",
    )
    assert [item["status"] for item in translate(cut_call)["output"]] == ["completed", "incomplete"]


@pytest.mark.parametrize("name", ["text.json", "stop_sequence.json", "tool_use.json", "pause_turn.json"])
def test_every_other_stop_reason_is_status_completed(name):
    response = translate(recorded(f"anthropic/{name}"))
    assert (response["status"], response["incomplete_details"]) == ("completed", None)
    output = response["output"]
    if name == "pause_turn.json":  # the turn paused before its last search ran: the client resends to go on
        assert output[-1]["type"] == "web_search_call" and output[-1]["status"] == "incomplete"
        output = output[:-1]
    assert all(item.get("status", "completed") == "completed" for item in output)


def test_usage_input_tokens_include_cache_reads_and_writes_shown_again_in_the_details():
    usage = recorded("anthropic/cache_usage.json")["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert translate(recorded("anthropic/cache_usage.json"))["usage"] == {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": usage["cache_read_input_tokens"],
            "cache_write_tokens": usage["cache_creation_input_tokens"],
        },
        "output_tokens": usage["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + usage["output_tokens"],
    }


def test_reasoning_tokens_are_anthropics_thinking_tokens():
    message = recorded("anthropic/thinking.json")
    assert translate(message)["usage"]["output_tokens_details"] == {
        "reasoning_tokens": message["usage"]["output_tokens_details"]["thinking_tokens"]
    }


def test_item_ids_carry_their_type_prefix_are_stable_within_a_response_and_differ_between_responses():
    message = with_blocks(
        "thinking.json",
        *recorded("anthropic/thinking.json")["content"],
        {"type": "tool_use", "id": "toolu_5", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "toolu_6", "name": "get_weather", "input": {}},
    )
    ids = [item["id"] for item in translate(message)["output"]]
    assert [identifier.split("_")[0] for identifier in ids] == ["rs", "msg", "fc", "fc"]
    assert len(set(ids)) == 4 and ids == [item["id"] for item in translate(message)["output"]]
    other = translate(message, response_id="resp_" + "f" * 32)["output"]
    assert not set(ids) & {item["id"] for item in other}
