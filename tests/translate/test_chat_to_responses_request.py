"""Chat request -> Responses request, one test per rule (bridge/translate/chat_to_responses/request.py).

Every translated request is also put to the fake upstream's ResponsesRules (what OpenAI's
/v1/responses refuses), so no rule here makes a request OpenAI would refuse.
"""

import hashlib

import pytest

from bridge.protocols.reasoning import reasoning_signature
from bridge.protocols.schemas.openai import validate_chat
from bridge.settings import Settings
from bridge.translate.chat_to_responses.request import to_responses_request
from tests.fake_upstream import ResponsesRules

SETTINGS = Settings(model_map=(("codex", "gpt-5-codex"), ("old", "gpt-4.1")))
USER = {"role": "user", "content": "What is the weather in Paris?"}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
PNG = "data:image/png;base64,iVBORw0KGgo="
REASONING = {
    "id": "rs_0f35ed53160b3953",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "**Checking**\n\nThe user wants the weather."}],
    "encrypted_content": "gAAAAABpPMlcH0HHEv5_ozHwP5Gxz5ZLE7A8Aw7GK94sa1KWHqXLrAch29KZrZ",
}


def translate(*messages, model="codex", **params):
    body = validate_chat({"model": model, "messages": list(messages) or [USER], **params})
    out, context = to_responses_request(body, SETTINGS)
    assert ResponsesRules().refusal(out) is None, ResponsesRules().refusal(out).body
    return out, context


def call(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_reply(call_id="call_1", content="sunny"):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def ours(item=REASONING, text="The user wants the weather."):
    """The thinking_blocks entry a Chat answer carried for `item`."""
    return {"type": "thinking", "thinking": text, "signature": reasoning_signature(item)}


# -- conversation ---------------------------------------------------------------------------


def test_a_plain_request_is_stateless_and_asks_for_encrypted_reasoning():
    out, context = translate()
    assert out == {
        "model": "gpt-5-codex",
        "input": [{"type": "message", "role": "user", "content": USER["content"]}],
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }
    assert context.dropped == [] and context.model == "codex" and not context.stream


def test_leading_system_and_developer_messages_are_the_instructions_later_ones_stay():
    out, _ = translate(
        {"role": "system", "content": "Be kind."},
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        USER,
        {"role": "developer", "content": "Answer in French."},
    )
    assert out["instructions"] == "Be kind.\n\nBe brief."
    assert out["input"][1:] == [{"type": "message", "role": "developer", "content": "Answer in French."}]


def test_user_parts_are_input_parts():
    out, _ = translate(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "file", "file": {"file_data": PDF, "filename": "a.pdf"}},
                {"type": "file", "file": {"file_data": PDF}},
            ],
        }
    )
    assert out["input"][0]["content"] == [
        {"type": "input_text", "text": "Look:"},
        {"type": "input_image", "image_url": PNG, "detail": "low"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        {"type": "input_file", "file_data": PDF, "filename": "a.pdf"},
        {"type": "input_file", "file_data": PDF},
    ]


def test_assistant_text_and_calls_are_a_message_then_function_calls_without_ids():
    out, _ = translate(
        USER,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Checking. "}, {"type": "refusal", "refusal": "Not that."}],
            "tool_calls": [call(), call("call_2", arguments='{"city":  "Lyon", "n": 12345678901234567890}')],
        },
        tool_reply(),
        tool_reply("call_2", [{"type": "text", "text": "rain"}, {"type": "text", "text": "y"}]),
    )
    assert out["input"][1:] == [
        {"type": "message", "role": "assistant", "content": "Checking. Not that."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {
            "type": "function_call",
            "call_id": "call_2",
            "name": "get_weather",
            "arguments": '{"city":"Lyon","n":12345678901234567890}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "rainy"},
    ]


def test_an_assistant_refusal_field_is_its_text_and_an_empty_message_no_item():
    out, _ = translate(
        USER,
        {"role": "assistant", "content": None, "refusal": "I can't."},
        USER,
        {"role": "assistant", "content": ""},
        USER,
    )
    assert [item.get("content") for item in out["input"]] == [USER["content"], "I can't.", USER["content"]] + [
        USER["content"]
    ]


# -- reasoning round trip -------------------------------------------------------------------


def test_bridges_thinking_entry_is_the_reasoning_item_again_byte_for_byte():
    out, context = translate(
        USER, {"role": "assistant", "content": None, "tool_calls": [call()], "thinking_blocks": [ours()]}, tool_reply()
    )
    assert out["input"][1] == REASONING
    assert [item["type"] for item in out["input"]] == ["message", "reasoning", "function_call", "function_call_output"]
    assert context.dropped == []


def test_other_thinking_entries_are_dropped_and_named():
    anthropic = {"type": "thinking", "thinking": "Hmm.", "signature": "EqQBCkYIBxgCKkB/sig=="}
    out, context = translate(
        USER,
        {
            "role": "assistant",
            "content": "Sunny.",
            "thinking_blocks": [anthropic, {"type": "redacted_thinking", "data": "abc"}, ours()],
        },
        USER,
    )
    assert [item["type"] for item in out["input"]] == ["message", "reasoning", "message", "message"]
    assert context.dropped == ["messages.1.thinking_blocks.0", "messages.1.thinking_blocks.1"]


def test_reasoning_with_nothing_after_it_is_dropped_and_named():
    """OpenAI refuses a reasoning item without the item it led to."""
    out, context = translate(USER, {"role": "assistant", "content": "", "thinking_blocks": [ours()]}, USER)
    assert [item["type"] for item in out["input"]] == ["message", "message"]
    assert context.dropped == ["messages.1.thinking_blocks.0"]


def test_a_model_without_reasoning_gets_no_reasoning_items():
    out, context = translate(
        USER, {"role": "assistant", "content": "Sunny.", "thinking_blocks": [ours()]}, USER, model="old"
    )
    assert [item["type"] for item in out["input"]] == ["message", "message", "message"]
    assert context.dropped == ["messages.1.thinking_blocks.0"]


# -- tools and answers ----------------------------------------------------------------------


def test_function_tools_keep_strict_as_the_client_sent_it():
    strict = {"type": "function", "function": {**TOOL["function"], "name": "strict_one", "strict": True}}
    bare = {"type": "function", "function": {"name": "now"}}
    out, _ = translate(tools=[TOOL, strict, bare])
    assert out["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": TOOL["function"]["parameters"],
            "strict": False,
        },
        {
            "type": "function",
            "name": "strict_one",
            "description": "Weather for a city",
            "parameters": TOOL["function"]["parameters"],
            "strict": True,
        },
        {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}, "strict": False},
    ]
    assert "tool_choice" not in out and "parallel_tool_calls" not in out


@pytest.mark.parametrize(
    "choice, sent",
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ({"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "name": "get_weather"}),
    ],
)
def test_tool_choice_and_parallel_tool_calls_go_with_the_tools(choice, sent):
    out, _ = translate(tools=[TOOL], tool_choice=choice, parallel_tool_calls=False)
    assert (out["tool_choice"], out["parallel_tool_calls"]) == (sent, False)


def test_tool_choice_without_tools_is_not_sent():
    out, context = translate(tool_choice="none", parallel_tool_calls=True)
    assert "tool_choice" not in out and "parallel_tool_calls" not in out and context.dropped == []


@pytest.mark.parametrize(
    "response_format, text_format",
    [
        ({"type": "text"}, {"type": "text"}),
        ({"type": "json_object"}, {"type": "json_object"}),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "weather",
                    "description": "The weather",
                    "schema": {"type": "object", "properties": {"c": {"type": "number"}}},
                    "strict": True,
                },
            },
            {
                "type": "json_schema",
                "name": "weather",
                "description": "The weather",
                "schema": {"type": "object", "properties": {"c": {"type": "number"}}},
                "strict": True,
            },
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "any"}},
            {"type": "json_schema", "name": "any", "schema": {"type": "object"}},
        ),
    ],
)
def test_response_format_is_text_format(response_format, text_format):
    out, _ = translate(response_format=response_format, verbosity="low")
    assert out["text"] == {"format": text_format, "verbosity": "low"}


# -- limits, reasoning, sampling ------------------------------------------------------------


def test_reasoning_effort_asks_for_summaries_and_temperature_is_dropped_on_a_reasoning_model():
    out, context = translate(reasoning_effort="high", temperature=0.2, top_p=0.9)
    assert out["reasoning"] == {"effort": "high", "summary": "auto"}
    assert out["include"] == ["reasoning.encrypted_content"]
    assert "temperature" not in out and "top_p" not in out
    assert context.dropped == ["temperature", "top_p"]


def test_a_model_without_reasoning_keeps_temperature_and_drops_reasoning_effort():
    out, context = translate(model="old", reasoning_effort="high", temperature=0.2, top_p=0.9)
    assert (out["model"], out["temperature"], out["top_p"]) == ("gpt-4.1", 0.2, 0.9)
    assert "reasoning" not in out and "include" not in out
    assert context.dropped == ["reasoning_effort"]


@pytest.mark.parametrize(
    "params, limit, dropped",
    [
        ({"max_tokens": 100}, 100, []),
        ({"max_completion_tokens": 300, "max_tokens": 100}, 300, []),
        ({"max_completion_tokens": 5}, 16, ["max_completion_tokens"]),
        ({"max_tokens": 1}, 16, ["max_tokens"]),
    ],
)
def test_the_output_limit_is_max_output_tokens_at_least_16(params, limit, dropped):
    out, context = translate(**params)
    assert (out["max_output_tokens"], context.dropped) == (limit, dropped)


def test_without_a_limit_the_models_own_holds():
    assert "max_output_tokens" not in translate()[0]


def test_user_is_user_and_the_prompt_cache_key():
    out, _ = translate(user="alice", safety_identifier="u-1", service_tier="flex", metadata={"k": "v"})
    assert {
        name: out[name] for name in ("user", "prompt_cache_key", "safety_identifier", "service_tier", "metadata")
    } == {
        "user": "alice",
        "prompt_cache_key": "alice",
        "safety_identifier": "u-1",
        "service_tier": "flex",
        "metadata": {"k": "v"},
    }
    long_user = "someone-with-a-very-long-name@a-company-with-a-long-domain-name.example"
    out, _ = translate(user=long_user)
    assert out["prompt_cache_key"] == hashlib.sha256(long_user.encode()).hexdigest()
    out, _ = translate(user="alice", prompt_cache_key="session-7", prompt_cache_retention="24h")
    assert (out["prompt_cache_key"], out["prompt_cache_retention"]) == ("session-7", "24h")


def test_what_responses_cannot_take_is_dropped_and_named():
    out, context = translate(
        stop=["\n"],
        frequency_penalty=0.5,
        presence_penalty=0.1,
        seed=7,
        logit_bias={"50256": -100},
        prediction={"type": "content", "content": "x"},
        web_search_options={},
        top_k=5,
        store=True,
        brand_new_field=1,
        n=1,
        logprobs=False,
        modalities=["text"],
    )
    assert context.dropped == [
        "stop",
        "frequency_penalty",
        "presence_penalty",
        "seed",
        "logit_bias",
        "prediction",
        "web_search_options",
        "top_k",
        "brand_new_field",
        "store",
    ]
    assert out["store"] is False
    assert not {"stop", "seed", "n", "logprobs", "modalities", "brand_new_field"} & set(out)


def test_a_stream_asks_for_one_and_estimates_its_input():
    out, context = translate(stream=True, stream_options={"include_usage": True})
    assert out["stream"] is True and "stream_options" not in out
    assert context.stream and context.include_usage and context.input_tokens > 0
    assert not translate(stream=True)[1].include_usage
