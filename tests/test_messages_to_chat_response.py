"""Chat Completions response -> Anthropic message: one test per rule, on the recorded bodies."""
import json

import pytest

from bridge.errors import BridgeError
from bridge.messages_to_chat.response import (INVALID_ARGUMENTS_KEY, client_tool_id, to_anthropic_message,
                                              upstream_tool_id, usage)
from tests.helpers import messages_to_chat_context as context, recorded


def completion(message, finish_reason="stop", **choice):
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                             "finish_reason": finish_reason, **choice}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}}


def test_text_answer_becomes_one_text_block_with_end_turn():
    body = recorded("openai/text.json")
    message = to_anthropic_message(body, context())
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"] == [{"type": "text", "text": body["choices"][0]["message"]["content"]}]
    assert message["stop_reason"] == "end_turn" and message["stop_sequence"] is None
    assert message["id"].startswith("msg_")


def test_response_model_is_the_model_the_client_asked_for():
    message = to_anthropic_message(recorded("openai/text.json"), context(model="claude-opus-4-8"))
    assert message["model"] == "claude-opus-4-8"


def test_tool_calls_become_tool_use_blocks_with_parsed_input():
    body = recorded("openai/tool_calls.json")
    message = to_anthropic_message(body, context())
    calls = body["choices"][0]["message"]["tool_calls"]
    assert message["content"] == [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                                   "input": json.loads(c["function"]["arguments"])} for c in calls]
    assert message["stop_reason"] == "tool_use"


def test_a_models_integers_in_arguments_stay_exact_however_long():
    arguments = '{"account": 123456789012345678901234567890, "min": -9223372036854775809}'
    message = to_anthropic_message(completion({"tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": arguments}}]}), context())
    assert message["content"][0]["input"] == {"account": 123456789012345678901234567890,
                                              "min": -9223372036854775809}


def test_shortened_tool_names_are_restored():
    body = completion({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "mcp__x_1a2b3c4d", "arguments": "{}"}}]},
        "tool_calls")
    message = to_anthropic_message(body, context(tool_names={"mcp__x_1a2b3c4d": "mcp__x.original"}))
    assert message["content"][0]["name"] == "mcp__x.original"


def test_a_tool_call_makes_the_stop_reason_tool_use_whatever_the_finish_reason():
    body = completion({"tool_calls": [{"id": "c", "type": "function",
                                       "function": {"name": "f", "arguments": "{}"}}]}, "stop")
    assert to_anthropic_message(body, context())["stop_reason"] == "tool_use"


def test_finish_reason_tool_calls_without_a_call_is_end_turn():
    """stop_reason tool_use tells the client to run the turn's tool_use blocks; there are none."""
    message = to_anthropic_message(completion({"content": "I would call a tool."}, "tool_calls"), context())
    assert [b["type"] for b in message["content"]] == ["text"] and message["stop_reason"] == "end_turn"


@pytest.mark.parametrize("arguments", ['{"city": "Par', "not json", "[1, 2]", "null"])
def test_arguments_that_are_not_a_json_object_are_kept_raw_never_replaced_by_empty(arguments):
    body = completion({"tool_calls": [{"id": "c", "type": "function",
                                       "function": {"name": "f", "arguments": arguments}}]}, "tool_calls")
    assert to_anthropic_message(body, context())["content"][0]["input"] == {INVALID_ARGUMENTS_KEY: arguments}


def test_arguments_sent_as_an_object_are_the_input():
    arguments = {"city": "Paris", "days": [1, 2]}
    body = completion({"tool_calls": [{"id": "c", "type": "function",
                                       "function": {"name": "f", "arguments": arguments}}]}, "tool_calls")
    assert to_anthropic_message(body, context())["content"][0]["input"] == arguments


@pytest.mark.parametrize("arguments", ["", None, "  "])
def test_empty_arguments_are_a_call_without_arguments(arguments):
    body = completion({"tool_calls": [{"id": "c", "type": "function",
                                       "function": {"name": "f", "arguments": arguments}}]}, "tool_calls")
    assert to_anthropic_message(body, context())["content"][0]["input"] == {}


def test_reasoning_content_becomes_a_thinking_block_before_the_text_with_an_empty_signature():
    body = recorded("openai/deepseek_reasoning.json")
    message = to_anthropic_message(body, context())
    source = body["choices"][0]["message"]
    assert message["content"] == [
        {"type": "thinking", "thinking": source["reasoning_content"], "signature": ""},
        {"type": "text", "text": source["content"]}]


def test_reasoning_field_of_groq_and_openrouter_is_thinking_too():
    message = to_anthropic_message(completion({"content": "4", "reasoning": "2+2"}), context())
    assert message["content"][0] == {"type": "thinking", "thinking": "2+2", "signature": ""}


def test_mistral_content_array_splits_into_thinking_and_text():
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": "let me see"}]},
               {"type": "text", "text": "Answer."}]
    message = to_anthropic_message(completion({"content": content}), context())
    assert [b["type"] for b in message["content"]] == ["thinking", "text"]
    assert message["content"][1]["text"] == "Answer."


def test_refusal_becomes_text_and_stop_reason_refusal():
    body = recorded("openai/refusal.json")
    message = to_anthropic_message(body, context())
    assert message["content"] == [{"type": "text", "text": body["choices"][0]["message"]["refusal"]}]
    assert message["stop_reason"] == "refusal" and message["stop_details"]["type"] == "refusal"


def test_content_filter_is_a_refusal_with_no_content():
    message = to_anthropic_message(recorded("openai/content_filter.json"), context())
    assert message["content"] == [] and message["stop_reason"] == "refusal"
    assert "content filter" in message["stop_details"]["explanation"]


def test_length_is_max_tokens():
    body = recorded("openai/length.json")
    message = to_anthropic_message(body, context())
    assert message["stop_reason"] == "max_tokens"
    assert message["content"][0]["text"] == body["choices"][0]["message"]["content"]


def test_length_wins_over_a_truncated_tool_call():
    body = completion({"tool_calls": [{"id": "c", "type": "function",
                                       "function": {"name": "f", "arguments": '{"a": '}}]}, "length")
    assert to_anthropic_message(body, context())["stop_reason"] == "max_tokens"


def test_vllm_stop_reason_naming_a_requested_stop_sequence_is_stop_sequence():
    body = completion({"content": "Hello"}, stop_reason="END")
    message = to_anthropic_message(body, context(stop_sequences=("END",)))
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "END")


@pytest.mark.parametrize("stop_reason", [151645, "OTHER", None])
def test_vllm_stop_reason_that_is_a_token_or_unrequested_is_end_turn(stop_reason):
    body = completion({"content": "Hello"}, stop_reason=stop_reason)
    assert to_anthropic_message(body, context(stop_sequences=("END",)))["stop_reason"] == "end_turn"


def test_usage_input_excludes_cached_tokens_which_are_cache_reads():
    body = recorded("openai/cached_tokens.json")
    source = body["usage"]
    cached = source["prompt_tokens_details"]["cached_tokens"]
    assert to_anthropic_message(body, context())["usage"] == {
        "input_tokens": source["prompt_tokens"] - cached, "output_tokens": source["completion_tokens"],
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}


def test_usage_counts_reported_cache_writes_as_cache_creation():
    result = usage({"prompt_tokens": 100, "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 30}})
    assert result == {"input_tokens": 50, "output_tokens": 3, "cache_creation_input_tokens": 30,
                      "cache_read_input_tokens": 20}


def test_usage_reads_deepseek_cache_hits_and_survives_missing_details():
    assert usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 4, "completion_tokens": 1,
                  "prompt_tokens_details": None})["cache_read_input_tokens"] == 4
    assert usage(None) == {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                           "cache_read_input_tokens": 0}


def test_reasoning_tokens_stay_in_output_tokens():
    body = recorded("openai/reasoning_usage.json")
    assert to_anthropic_message(body, context())["usage"]["output_tokens"] == body["usage"]["completion_tokens"]


@pytest.mark.parametrize("choices", [[], None, "x"])
def test_no_choice_is_a_502(choices):
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message({"choices": choices}, context())
    assert caught.value.status == 502 and caught.value.kind == "api_error"


def test_several_choices_are_a_502_naming_the_count():
    body = completion({"content": "a"})
    body["choices"].append({**body["choices"][0], "index": 1})
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert caught.value.status == 502 and "2 choices" in caught.value.message


@pytest.mark.parametrize("upstream_id", ["call_abc", "fc_bfb39741-3748-4def", "functions.get_weather:0",
                                         "id with spaces/and:colons"])
def test_tool_ids_satisfy_anthropic_and_round_trip_to_the_upstream(upstream_id):
    client_id = client_tool_id(upstream_id)
    assert all(c.isalnum() or c in "_-" for c in client_id)
    assert upstream_tool_id(client_id) == upstream_id


def test_a_missing_tool_id_gets_a_fresh_valid_one():
    assert client_tool_id(None).startswith("toolu_") and client_tool_id("") != client_tool_id("")


def test_an_error_object_in_a_200_body_is_raised_with_its_message():
    body = {"error": {"message": "model is loading", "type": "server_error", "code": "loading"}}
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert caught.value.status == 502 and "model is loading (loading)" in caught.value.message


def test_a_rate_limit_error_in_a_200_body_keeps_its_kind():
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}, context())
    assert caught.value.kind == "rate_limit" and caught.value.status == 429


def test_a_message_or_function_that_is_not_an_object_is_no_content_not_a_crash():
    for garbage in ("garbage", ["garbage"]):
        body = completion({})
        body["choices"][0]["message"] = garbage
        assert to_anthropic_message(body, context())["content"] == []



@pytest.mark.parametrize("function", ["f", {"arguments": "{}"}, {"name": "", "arguments": "{}"}])
def test_a_tool_call_without_a_name_is_a_502_as_in_a_stream(function):
    body = completion({"tool_calls": [{"id": "c", "type": "function", "function": function}]}, "tool_calls")
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert caught.value.status == 502 and "tool call 0 without a name" in caught.value.message


def test_a_body_that_is_not_an_object_is_a_502():
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(["not", "a", "completion"], context())
    assert caught.value.status == 502
