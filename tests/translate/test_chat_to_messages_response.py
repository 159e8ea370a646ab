"""Messages response -> Chat completion, one test per rule (bridge/translate/chat_to_messages/response.py).

Expectations are read from the recorded Anthropic bodies in tests/fixtures/anthropic.
"""

import json

import pytest

from bridge.protocols.errors import OPENAI, BridgeError
from bridge.translate.anthropic_response import STANDARD_REFUSAL, openai_overflow
from bridge.translate.chat_to_messages.response import to_chat_completion, to_openai_model_list
from tests.helpers.contexts import chat_to_messages_context as context
from tests.helpers.recorded import ANTHROPIC_BODIES, OVERFLOWS, recorded

# The stop_reason -> finish_reason table (docs/translation.md; content_filter is refusal both ways).
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def translate(name, **overrides):
    message = recorded(f"anthropic/{name}")
    return message, to_chat_completion(message, context(**overrides))


def blocks(message, kind):
    return [block for block in message["content"] if block["type"] == kind]


@pytest.mark.parametrize(
    "name",
    ANTHROPIC_BODIES,
)
def test_every_recorded_body_becomes_one_chat_choice(name):
    message, chat = translate(name)
    assert chat["object"] == "chat.completion"
    assert chat["id"] == f"chatcmpl-{message['id']}"
    assert chat["model"] == "gpt-4o", "the response names the model the client asked for"
    assert chat["created"] == 1700000000
    [choice] = chat["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == FINISH[message["stop_reason"]]
    assert choice["message"]["role"] == "assistant"
    text = "".join(block["text"] for block in blocks(message, "text"))
    assert choice["message"]["content"] == (text if blocks(message, "text") else None)


def test_tool_use_becomes_tool_calls_with_json_string_arguments_and_the_same_ids():
    message, chat = translate("tool_use.json")
    calls = chat["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (b["id"], "function", b["name"], b["input"]) for b in blocks(message, "tool_use")
    ]
    assert chat["choices"][0]["finish_reason"] == "tool_calls"


def test_thinking_becomes_reasoning_content_never_content_and_the_signed_block_is_kept_byte_exact():
    message, chat = translate("thinking.json")
    [thinking] = blocks(message, "thinking")
    out = chat["choices"][0]["message"]
    assert out["reasoning_content"] == thinking["thinking"]
    assert thinking["thinking"] not in out["content"]
    assert out["thinking_blocks"] == [
        {"type": "thinking", "thinking": thinking["thinking"], "signature": thinking["signature"]}
    ]
    assert chat["usage"]["completion_tokens_details"] == {
        "reasoning_tokens": message["usage"]["output_tokens_details"]["thinking_tokens"]
    }


def test_redacted_thinking_is_kept_only_in_the_extension_field():
    message, chat = translate("redacted_thinking.json")
    out = chat["choices"][0]["message"]
    assert out["thinking_blocks"] == [
        {"type": "redacted_thinking", "data": b["data"]} for b in blocks(message, "redacted_thinking")
    ]
    assert "reasoning_content" not in out
    assert all(b["data"] not in json.dumps(out["content"]) for b in blocks(message, "redacted_thinking"))


def test_refusal_is_content_filter_with_the_explanation_as_message_refusal():
    message, chat = translate("refusal.json")
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "content_filter"
    assert choice["message"]["refusal"] == message["stop_details"]["explanation"]


def test_refusal_without_an_explanation_gets_a_standard_sentence():
    message = {**recorded("anthropic/refusal.json"), "stop_details": None}
    chat = to_chat_completion(message, context())
    assert chat["choices"][0]["message"]["refusal"] == STANDARD_REFUSAL


def test_no_refusal_outside_a_refusal():
    _, chat = translate("text.json")
    assert chat["choices"][0]["message"]["refusal"] is None


def test_server_tool_blocks_of_a_paused_turn_are_not_client_tool_calls():
    message, chat = translate("pause_turn.json")
    assert blocks(message, "server_tool_use")
    out = chat["choices"][0]["message"]
    assert "tool_calls" not in out and chat["choices"][0]["finish_reason"] == "stop"
    assert out["reasoning_content"] == "".join(b["thinking"] for b in blocks(message, "thinking"))


def test_usage_counts_cached_tokens_in_the_prompt():
    message, chat = translate("cache_usage.json")
    usage = message["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert chat["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": usage["output_tokens"],
        "total_tokens": prompt + usage["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": usage["cache_read_input_tokens"]},
    }


def test_usage_after_compaction_sums_every_billed_iteration():
    iterations = [
        {
            "input_tokens": 100,
            "output_tokens": 83,
            "cache_read_input_tokens": 55096,
            "cache_creation_input_tokens": 0,
            "type": "compaction",
        },
        {
            "input_tokens": 181,
            "output_tokens": 8,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "type": "message",
        },
    ]
    message = {
        **recorded("anthropic/text.json"),
        "usage": {"input_tokens": 181, "output_tokens": 8, "cache_read_input_tokens": 0, "iterations": iterations},
    }
    usage = to_chat_completion(message, context())["usage"]
    assert usage["prompt_tokens"] == 100 + 55096 + 181 and usage["completion_tokens"] == 83 + 8
    assert usage["prompt_tokens_details"]["cached_tokens"] == 55096


def test_the_response_format_tool_comes_back_as_json_content_not_a_tool_call():
    answer = {"city": "Paris", "temperature_c": 21}
    message = {
        **recorded("anthropic/tool_use.json"),
        "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather_report", "input": answer}],
    }
    chat = to_chat_completion(message, context(json_tool="weather_report"))
    out = chat["choices"][0]
    assert json.loads(out["message"]["content"]) == answer
    assert "tool_calls" not in out["message"] and out["finish_reason"] == "stop"


def test_model_list_in_openai_shape_with_aliases_first():
    upstream = {"data": [{"type": "model", "id": "claude-sonnet-4-5", "created_at": "2025-09-29T00:00:00Z"}]}
    listed = to_openai_model_list(upstream, ["gpt-4o"])
    assert [m["id"] for m in listed["data"]] == ["gpt-4o", "claude-sonnet-4-5"]
    assert all(m["object"] == "model" for m in listed["data"]) and listed["object"] == "list"


# -- context overflow -------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["anthropic, prompt", "anthropic, prompt and max_tokens"])
def test_an_anthropic_overflow_is_a_400_with_openais_code_and_anthropics_message(case):
    detail = OVERFLOWS[case][0]
    error = openai_overflow(
        BridgeError(
            "invalid_request",
            detail["message"],
            upstream_status=400,
            upstream_detail=detail,
            upstream_headers={"x-should-retry": "false"},
        )
    )
    assert error.status_for(OPENAI) == 400 and error.upstream_headers == {"x-should-retry": "false"}
    assert error.body_for(OPENAI) == {
        "error": {
            "message": detail["message"],
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


@pytest.mark.parametrize(
    "error",
    [
        BridgeError(
            "invalid_request",
            "max_tokens: 100000 > 64000, which is the maximum allowed number of output "
            "tokens for claude-sonnet-4-20250514",
            upstream_detail={
                "type": "invalid_request_error",
                "message": "max_tokens: "
                "100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-20250514",
            },
        ),
        BridgeError(
            "rate_limit",
            "prompt is too long: 3 tokens > 2 maximum",
            upstream_detail={"type": "rate_limit_error", "message": "prompt is too long: 3 tokens > 2 maximum"},
        ),
        BridgeError("invalid_request", "no detail: a bridge-made error"),
    ],
)
def test_other_errors_keep_their_code(error):
    assert openai_overflow(error) is error
