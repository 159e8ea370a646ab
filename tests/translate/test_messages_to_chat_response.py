"""Chat Completions response -> Anthropic message: one test per rule, on the recorded bodies."""

import json
import re
import tracemalloc

import pytest

from bridge.protocols.errors import BridgeError, from_openai
from bridge.translate.messages_client import INVALID_ARGUMENTS_KEY, anthropic_overflow, client_tool_id, upstream_tool_id
from bridge.translate.messages_to_chat.response import to_anthropic_message, usage
from tests.helpers.contexts import messages_to_chat_context as context
from tests.helpers.recorded import OVERFLOWS, recorded


def completion(message, finish_reason="stop", **choice):
    return {
        "id": "chatcmpl-1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason, **choice}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


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
    assert message["content"] == [
        {
            "type": "tool_use",
            "id": c["id"],
            "name": c["function"]["name"],
            "input": json.loads(c["function"]["arguments"]),
        }
        for c in calls
    ]
    assert message["stop_reason"] == "tool_use"


def test_a_models_integers_in_arguments_stay_exact_however_long():
    arguments = '{"account": 123456789012345678901234567890, "min": -9223372036854775809}'
    message = to_anthropic_message(
        completion(
            {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": arguments}}]}
        ),
        context(),
    )
    assert message["content"][0]["input"] == {"account": 123456789012345678901234567890, "min": -9223372036854775809}


def test_shortened_tool_names_are_restored():
    body = completion(
        {
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "mcp__x_1a2b3c4d", "arguments": "{}"}}
            ],
        },
        "tool_calls",
    )
    message = to_anthropic_message(body, context(tool_names={"mcp__x_1a2b3c4d": "mcp__x.original"}))
    assert message["content"][0]["name"] == "mcp__x.original"


def test_a_tool_call_makes_the_stop_reason_tool_use_whatever_the_finish_reason():
    body = completion(
        {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "stop"
    )
    assert to_anthropic_message(body, context())["stop_reason"] == "tool_use"


def test_finish_reason_tool_calls_without_a_call_is_end_turn():
    """stop_reason tool_use tells the client to run the turn's tool_use blocks; there are none."""
    message = to_anthropic_message(completion({"content": "I would call a tool."}, "tool_calls"), context())
    assert [b["type"] for b in message["content"]] == ["text"] and message["stop_reason"] == "end_turn"


@pytest.mark.parametrize("arguments", ['{"city": "Par', "not json", "[1, 2]", "null"])
def test_arguments_that_are_not_a_json_object_are_kept_raw_never_replaced_by_empty(arguments):
    body = completion(
        {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        "tool_calls",
    )
    assert to_anthropic_message(body, context())["content"][0]["input"] == {INVALID_ARGUMENTS_KEY: arguments}


def test_arguments_sent_as_an_object_are_the_input():
    arguments = {"city": "Paris", "days": [1, 2]}
    body = completion(
        {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        "tool_calls",
    )
    assert to_anthropic_message(body, context())["content"][0]["input"] == arguments


@pytest.mark.parametrize("arguments", ["", None, "  "])
def test_empty_arguments_are_a_call_without_arguments(arguments):
    body = completion(
        {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        "tool_calls",
    )
    assert to_anthropic_message(body, context())["content"][0]["input"] == {}


def test_reasoning_content_becomes_a_thinking_block_before_the_text_with_an_empty_signature():
    body = recorded("openai/deepseek_reasoning.json")
    message = to_anthropic_message(body, context())
    source = body["choices"][0]["message"]
    assert message["content"] == [
        {"type": "thinking", "thinking": source["reasoning_content"], "signature": ""},
        {"type": "text", "text": source["content"]},
    ]


def test_reasoning_field_of_groq_and_openrouter_is_thinking_too():
    message = to_anthropic_message(completion({"content": "4", "reasoning": "2+2"}), context())
    assert message["content"][0] == {"type": "thinking", "thinking": "2+2", "signature": ""}


def test_mistral_content_array_splits_into_thinking_and_text():
    content = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "let me see"}]},
        {"type": "text", "text": "Answer."},
    ]
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
    body = completion(
        {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}]}, "length"
    )
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
        "input_tokens": source["prompt_tokens"] - cached,
        "output_tokens": source["completion_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


def test_usage_counts_reported_cache_writes_as_cache_creation():
    result = usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 30},
        }
    )
    assert result == {
        "input_tokens": 50,
        "output_tokens": 3,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 20,
    }


def test_usage_reads_deepseek_cache_hits_and_survives_missing_details():
    assert (
        usage(
            {"prompt_tokens": 10, "prompt_cache_hit_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": None}
        )["cache_read_input_tokens"]
        == 4
    )
    assert usage(None) == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


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


@pytest.mark.parametrize(
    "upstream_id", ["call_abc", "fc_bfb39741-3748-4def", "functions.get_weather:0", "id with spaces/and:colons"]
)
def test_tool_ids_satisfy_anthropic_and_round_trip_to_the_upstream(upstream_id):
    client_id = client_tool_id(upstream_id)
    assert all(c.isalnum() or c in "_-" for c in client_id)
    assert upstream_tool_id(client_id) == upstream_id


def test_a_client_id_too_long_to_be_an_upstreams_is_hashed_not_decoded():
    """Decoded, a 40 MB id in the encoded form cost three copies of itself and went upstream whole;
    hashed, it costs the one copy hashing takes."""
    huge = client_tool_id("functions.x:" * 2_500_000)
    tracemalloc.start()
    try:
        sent = upstream_tool_id(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sent.startswith("call_") and len(sent) <= 40 and sent == upstream_tool_id(huge)
    assert peak < 1.5 * len(huge)
    long = "functions." + "a" * 500 + ":0"
    assert upstream_tool_id(client_tool_id(long)) == long  # an upstream's long id still round-trips


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


def test_a_message_or_function_that_is_not_an_object_is_a_502_naming_it():
    for garbage in ("garbage", ["garbage"]):
        body = completion({})
        body["choices"][0]["message"] = garbage
        with pytest.raises(BridgeError) as caught:
            to_anthropic_message(body, context())
        assert caught.value.status == 502 and "choices.0.message must be an object" in caught.value.message
    body = completion({"tool_calls": [{"id": "c", "type": "function", "function": "f"}]}, "tool_calls")
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert "choices.0.message.tool_calls.0.function must be an object" in caught.value.message


@pytest.mark.parametrize("function", [{"arguments": "{}"}, {"name": "", "arguments": "{}"}])
def test_a_tool_call_without_a_name_is_a_502_as_in_a_stream(function):
    body = completion({"tool_calls": [{"id": "c", "type": "function", "function": function}]}, "tool_calls")
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert caught.value.status == 502 and "tool call 0 without a name" in caught.value.message


def test_a_body_that_is_not_an_object_is_a_502():
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(["not", "a", "completion"], context())
    assert caught.value.status == 502


# -- context overflow in Anthropic's words ------------------------------------------------------

# Claude Code's own patterns for the two messages it acts on (its CLI bundle, 2.1.332).
PROMPT_TOO_LONG = re.compile(r"^prompt is too long: (\d+) tokens > (\d+) maximum$")
EXCEED_CONTEXT_LIMIT = re.compile(
    r"^input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+), "
    r"decrease input length or `max_tokens` and try again$"
)


def overflowed(detail, status=400):
    return BridgeError(
        "invalid_request",
        detail["message"],
        status=status,
        upstream_status=status,
        upstream_detail=detail,
        upstream_headers={"x-should-retry": "false"},
    )


def never_estimated():
    raise AssertionError("the upstream gave the prompt's size: no estimate needed")


@pytest.mark.parametrize(
    "case, numbers",
    [
        ("openai", (130512, 128000)),
        ("vllm 0.10-0.17, input alone", (40000, 32768)),
        ("llama.cpp", (5000, 4096)),
        ("vllm 0.18+", (10000, 8192)),
        ("mistral", (10000, 8192)),
        ("anthropic, prompt", (210000, 200000)),
        ("deepseek", (70000, 65536)),
    ],
)
def test_an_overflow_with_its_numbers_is_anthropics_prompt_is_too_long_with_them(case, numbers):
    error = anthropic_overflow(overflowed(OVERFLOWS[case][0]), never_estimated)
    assert tuple(map(int, PROMPT_TOO_LONG.match(error.message).groups())) == numbers
    assert (error.kind, error.status, error.upstream_status) == ("invalid_request", 400, 400)
    assert error.upstream_headers == {"x-should-retry": "false"}, "what the upstream said about retrying stays"


@pytest.mark.parametrize(
    "case, numbers",
    [
        ("vllm, messages and completion", (4000, 1000, 4096)),
        ("vllm 0.10-0.17, max_tokens", (2778, 8000, 4096)),
        ("anthropic, prompt and max_tokens", (188240, 21333, 200000)),
    ],
)
def test_a_prompt_that_fits_without_its_max_tokens_is_anthropics_exceed_context_limit(case, numbers):
    """Claude Code answers this one by asking again with a max_tokens that fits."""
    error = anthropic_overflow(overflowed(OVERFLOWS[case][0]), never_estimated)
    assert tuple(map(int, EXCEED_CONTEXT_LIMIT.match(error.message).groups())) == numbers


def test_max_tokens_over_the_whole_window_counts_the_estimated_prompt():
    error = anthropic_overflow(overflowed(OVERFLOWS["vllm 0.18+, max_tokens over the window"][0]), lambda: 4500)
    assert EXCEED_CONTEXT_LIMIT.match(error.message).groups() == ("4500", "32000", "16384")


def test_an_overflow_without_numbers_states_the_estimate_for_both_an_unknown_gap():
    """No limit named: N = T, a gap of zero, which Claude Code reads as "too long by an unknown
    amount" instead of a limit the bridge would make up."""
    error = anthropic_overflow(overflowed(OVERFLOWS["ollama"][0]), lambda: 4500)
    assert error.message == "prompt is too long: 4500 tokens > 4500 maximum"


def test_a_limit_without_the_prompts_size_takes_the_estimate_never_below_the_limit():
    lm_studio = OVERFLOWS["lm studio"][0]  # the window is 4096
    assert (
        anthropic_overflow(overflowed(lm_studio), lambda: 5000).message
        == "prompt is too long: 5000 tokens > 4096 maximum"
    )
    assert (
        anthropic_overflow(overflowed(lm_studio), lambda: 3000).message
        == "prompt is too long: 4096 tokens > 4096 maximum"
    )


@pytest.mark.parametrize("status", [413, 422])
def test_an_overflow_some_servers_answer_with_413_or_422_is_still_a_400(status):
    error = anthropic_overflow(overflowed(OVERFLOWS["openai"][0], status), never_estimated)
    assert error.status == 400 and PROMPT_TOO_LONG.match(error.message)


def test_an_overflow_inside_a_200_is_one_too():
    body = {"error": OVERFLOWS["llama.cpp"][0]}
    with pytest.raises(BridgeError) as caught:
        to_anthropic_message(body, context())
    assert anthropic_overflow(caught.value, never_estimated).message == "prompt is too long: 5000 tokens > 4096 maximum"


def test_a_string_error_in_a_200_is_read_as_its_message():
    error = from_openai({"error": "the input length exceeds the context length"})
    assert anthropic_overflow(error, lambda: 9).message == "prompt is too long: 9 tokens > 9 maximum"


@pytest.mark.parametrize(
    "detail, status",
    [
        (OVERFLOWS["openai"][0], 429),  # a rate limit stays one, whatever it says
        (OVERFLOWS["openai"][0], 500),
        ({"message": "max_tokens is too large: 128000. This model supports at most 16384 completion tokens"}, 400),
    ],
)
def test_other_errors_are_left_as_they_came(detail, status):
    error = overflowed(detail, status)
    assert anthropic_overflow(error, never_estimated) is error
