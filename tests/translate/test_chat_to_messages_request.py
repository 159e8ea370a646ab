"""Chat request -> Messages request, one test per rule (bridge/translate/chat_to_messages/request.py)."""

import base64
import dataclasses
import json
import re

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas.openai import validate_chat
from bridge.settings import Settings
from bridge.translate.anthropic_request import (
    JSON_OBJECT_TOOL,
    MIN_THINKING_BUDGET,
    THINKING_BUDGETS,
    anthropic_tool_id,
)
from bridge.translate.chat_to_messages.request import to_messages_request

# Caching off and forced-tool JSON answers: the rules as they were (test_prompt_cache.py,
# test_structured_output.py and the capability tests below cover the rest).
SETTINGS = Settings(
    model_map=(("gpt-4o", "claude-sonnet-4-5"), ("gpt-*", "claude-haiku-4-5")),
    default_max_tokens=4000,
    prompt_cache="off",
    capabilities=(("*", {"structured_output": False}),),
)
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


def translate(*messages, **params):
    body = validate_chat({"model": "gpt-4o", "messages": list(messages) or [USER], **params})
    return to_messages_request(body, SETTINGS)


def call(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_reply(call_id="call_1", content="sunny"):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def signed(text="Let me check.", signature="EqQBCkYIBxgCKkB/sig=="):
    return {"type": "thinking", "thinking": text, "signature": signature}


# -- placement ----------------------------------------------------------------------------


def test_one_system_message_becomes_the_system_string():
    out, _ = translate({"role": "system", "content": "Be brief."}, USER)
    assert out["system"] == "Be brief."
    assert out["messages"] == [{"role": "user", "content": [{"type": "text", "text": USER["content"]}]}]


def test_system_and_developer_parts_anywhere_become_system_blocks_never_user_turns():
    out, _ = translate(
        {"role": "system", "content": "Be brief."},
        USER,
        {
            "role": "developer",
            "content": [{"type": "text", "text": "Use metric units."}, {"type": "text", "text": "Cite sources."}],
        },
        {"role": "assistant", "content": "Sunny."},
        {"role": "system", "content": "Stay polite."},
        {"role": "user", "content": "Thanks"},
    )
    assert out["system"] == [
        {"type": "text", "text": t} for t in ("Be brief.", "Use metric units.", "Cite sources.", "Stay polite.")
    ]
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert "Be brief." not in json.dumps(out["messages"])


def test_user_data_url_image_becomes_a_base64_image_block():
    out, _ = translate(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
            ],
        }
    )
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",", 1)[1]}},
    ]


# The first bytes of each image format Anthropic takes (file signatures), padded to a few dozen bytes.
SIGNATURES = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF",
    "image/gif": b"GIF89a",
    "image/webp": b"RIFF\x24\x00\x00\x00WEBPVP8 ",
}


@pytest.mark.parametrize("label", ["image/jpg", "image/png", "application/octet-stream"])
@pytest.mark.parametrize("actual", SIGNATURES)
def test_a_data_url_image_is_sent_with_the_type_its_bytes_show(label, actual):
    """OpenAI reads the image and ignores the label (image/jpg is common); Anthropic refuses a label that
    is not one of its four types or does not match the bytes."""
    data = base64.b64encode(SIGNATURES[actual] + bytes(32)).decode()
    out, _ = translate(
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"data:{label};base64,{data}"}}]}
    )
    assert out["messages"][0]["content"][0]["source"] == {"type": "base64", "media_type": actual, "data": data}


def test_user_https_image_becomes_a_url_image_block():
    url = "https://upload.example.com/pelican.jpg"
    out, _ = translate({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]})
    assert out["messages"][0]["content"] == [{"type": "image", "source": {"type": "url", "url": url}}]


def test_pdf_file_part_becomes_a_document_block_titled_by_its_filename():
    out, _ = translate(
        {
            "role": "user",
            "content": [
                {"type": "file", "file": {"file_data": PDF, "filename": "report.pdf"}},
                {"type": "text", "text": "Sum up"},
            ],
        }
    )
    assert out["messages"][0]["content"][0] == {
        "type": "document",
        "title": "report.pdf",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF.split(",", 1)[1]},
    }


def test_assistant_text_and_tool_calls_become_text_and_tool_use_with_parsed_input():
    arguments = '{"city": "Paris", "units": {"temp": "C"}, "days": [1, 2]}'
    out, _ = translate(
        USER, {"role": "assistant", "content": "Checking.", "tool_calls": [call(arguments=arguments)]}, tool_reply()
    )
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": json.loads(arguments)},
        ],
    }


def test_a_models_integers_in_arguments_stay_exact_however_long():
    arguments = '{"account": 123456789012345678901234567890}'
    out, _ = translate(USER, {"role": "assistant", "tool_calls": [call(arguments=arguments)]}, tool_reply())
    assert out["messages"][1]["content"][0]["input"] == {"account": 123456789012345678901234567890}


def test_assistant_with_null_content_and_tool_calls_is_tool_use_only():
    out, _ = translate(USER, {"role": "assistant", "content": None, "tool_calls": [call()]}, tool_reply())
    assert [b["type"] for b in out["messages"][1]["content"]] == ["tool_use"]


def test_consecutive_tool_messages_become_one_user_turn_results_first_then_user_content():
    out, _ = translate(
        USER,
        {"role": "assistant", "tool_calls": [call("call_a"), call("call_b")]},
        tool_reply("call_a", "sunny"),
        tool_reply("call_b", [{"type": "text", "text": "windy"}]),
        {"role": "user", "content": "And tomorrow?"},
    )
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_a", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "call_b", "content": [{"type": "text", "text": "windy"}]},
            {"type": "text", "text": "And tomorrow?"},
        ],
    }
    assert len(out["messages"]) == 3


def test_consecutive_same_role_messages_merge_into_one_turn():
    out, _ = translate(
        USER,
        {"role": "user", "content": "Quickly."},
        {"role": "assistant", "content": "Sunny"},
        {"role": "assistant", "content": "and warm."},
        {"role": "user", "content": "Thanks"},
    )
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert [b["text"] for b in out["messages"][0]["content"]] == [USER["content"], "Quickly."]
    assert [b["text"] for b in out["messages"][1]["content"]] == ["Sunny", "and warm."]


def test_empty_text_parts_and_empty_messages_are_dropped():
    out, _ = translate(
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Still there?"},
    )
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Still there?"}]}
    ]


def test_a_conversation_of_empty_messages_is_a_400():
    with pytest.raises(BridgeError) as caught:
        translate({"role": "user", "content": ""})
    assert caught.value.status == 400 and caught.value.param == "messages"


def test_an_empty_tool_result_is_sent_without_content():
    out, _ = translate(USER, {"role": "assistant", "tool_calls": [call()]}, tool_reply(content=""))
    assert out["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1"}]


def test_a_final_assistant_prefill_loses_trailing_whitespace():
    out, _ = translate(USER, {"role": "assistant", "content": "The answer is:\n "})
    assert out["messages"][-1]["content"][-1]["text"] == "The answer is:"


def test_assistant_refusal_is_kept_as_text():
    out, _ = translate(
        USER,
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "Why?"},
    )
    assert out["messages"][1]["content"] == [{"type": "text", "text": "I can't help with that."}]


def test_cache_control_on_a_part_is_kept():
    marker = {"type": "ephemeral"}
    out, _ = translate(
        {"role": "system", "content": [{"type": "text", "text": "Long rules", "cache_control": marker}]}, USER
    )
    assert out["system"] == [{"type": "text", "text": "Long rules", "cache_control": marker}]


# -- tool ids -----------------------------------------------------------------------------


@pytest.mark.parametrize("chat_id", ["call_abc-123", "functions.get_weather:0", "call/1 2", "tool.ü"])
def test_tool_ids_are_valid_for_anthropic_and_the_call_stays_linked_to_its_result(chat_id):
    out, _ = translate(USER, {"role": "assistant", "tool_calls": [call(chat_id)]}, tool_reply(chat_id))
    use_id = out["messages"][1]["content"][0]["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]+", use_id)
    assert out["messages"][2]["content"][0]["tool_use_id"] == use_id
    if re.fullmatch(r"[a-zA-Z0-9_-]+", chat_id):
        assert use_id == chat_id


def test_tool_id_cleaning_is_deterministic_and_keeps_distinct_ids_distinct():
    assert anthropic_tool_id("fn.a:0") == anthropic_tool_id("fn.a:0")
    assert anthropic_tool_id("fn.a:0") != anthropic_tool_id("fn:a.0")


# -- tools --------------------------------------------------------------------------------


def test_function_tools_become_anthropic_tools():
    out, _ = translate(tools=[TOOL, {"type": "function", "function": {"name": "now"}}])
    assert out["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": TOOL["function"]["parameters"]},
        {"name": "now", "input_schema": {"type": "object"}},
    ]
    assert "tool_choice" not in out


@pytest.mark.parametrize(
    "chat_choice, anthropic_choice",
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"type": "tool", "name": "get_weather"}),
    ],
)
def test_tool_choice_maps(chat_choice, anthropic_choice):
    out, _ = translate(tools=[TOOL], tool_choice=chat_choice)
    assert out["tool_choice"] == anthropic_choice


@pytest.mark.parametrize(
    "chat_choice, anthropic_choice",
    [
        (None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),
    ],
)
def test_parallel_tool_calls_false_disables_parallel_tool_use(chat_choice, anthropic_choice):
    out, _ = translate(tools=[TOOL], tool_choice=chat_choice, parallel_tool_calls=False)
    assert out["tool_choice"] == anthropic_choice


def test_tool_choice_without_tools_is_dropped():
    out, _ = translate(tool_choice="required", parallel_tool_calls=False)
    assert "tool_choice" not in out and "tools" not in out


def test_strict_tools_are_reported_as_dropped():
    strict = {"type": "function", "function": {**TOOL["function"], "strict": True}}
    out, context = translate(tools=[strict])
    assert "strict" not in out["tools"][0] and "strict" in context.dropped


# -- response_format ----------------------------------------------------------------------


def test_json_object_is_a_forced_tool_whose_input_is_the_answer():
    out, context = translate(response_format={"type": "json_object"})
    assert out["tools"] == [
        {"name": JSON_OBJECT_TOOL, "description": out["tools"][0]["description"], "input_schema": {"type": "object"}}
    ]
    assert out["tool_choice"] == {"type": "tool", "name": JSON_OBJECT_TOOL}
    assert context.json_tool == JSON_OBJECT_TOOL


def test_json_schema_is_a_forced_tool_named_and_shaped_by_the_schema():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    out, context = translate(
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "place", "description": "Where", "schema": schema, "strict": True},
        }
    )
    assert out["tools"] == [{"name": "place", "description": "Where", "input_schema": schema}]
    assert out["tool_choice"] == {"type": "tool", "name": "place"} and context.json_tool == "place"
    assert context.dropped == ["strict"], "adherence to the schema is not guaranteed upstream: said so"


def test_json_answer_beside_callable_tools_lets_the_model_choose_any_tool():
    out, _ = translate(tools=[TOOL], response_format={"type": "json_object"})
    assert [t["name"] for t in out["tools"]] == ["get_weather", JSON_OBJECT_TOOL]
    assert out["tool_choice"] == {"type": "any"}


def test_json_answer_with_tool_choice_none_forces_the_json_tool():
    out, _ = translate(tools=[TOOL], tool_choice="none", response_format={"type": "json_object"})
    assert out["tool_choice"] == {"type": "tool", "name": JSON_OBJECT_TOOL}


def test_json_schema_named_like_a_function_is_a_400():
    with pytest.raises(BridgeError) as caught:
        translate(tools=[TOOL], response_format={"type": "json_schema", "json_schema": {"name": "get_weather"}})
    assert caught.value.param == "response_format"


# -- sampling and limits ------------------------------------------------------------------


@pytest.mark.parametrize("stop, sequences", [("END", ["END"]), (["END", "###"], ["END", "###"])])
def test_stop_becomes_stop_sequences(stop, sequences):
    out, _ = translate(stop=stop)
    assert out["stop_sequences"] == sequences


def test_whitespace_only_stop_sequences_are_dropped_and_reported():
    out, context = translate(stop=["\n", "END"])
    assert out["stop_sequences"] == ["END"] and "stop" in context.dropped


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"max_completion_tokens": 300, "max_tokens": 200}, 300),
        ({"max_tokens": 200}, 200),
        ({}, SETTINGS.default_max_tokens),
    ],
)
def test_max_tokens_from_max_completion_tokens_then_max_tokens_then_the_default(params, expected):
    out, _ = translate(**params)
    assert out["max_tokens"] == expected


@pytest.mark.parametrize("temperature, expected", [(0, 0), (0.7, 0.7), (1.0, 1.0), (1.6, 1.0), (2, 1.0)])
def test_temperature_is_capped_to_anthropics_range(temperature, expected):
    out, _ = translate(temperature=temperature)
    assert out["temperature"] == expected


def test_top_p_beside_temperature_is_dropped_and_reported():
    out, context = translate(temperature=0.5, top_p=0.9)
    assert out["temperature"] == 0.5 and "top_p" not in out and "top_p" in context.dropped


def test_top_p_alone_is_kept():
    out, context = translate(top_p=0.9)
    assert out["top_p"] == 0.9 and context.dropped == []


def test_top_k_from_extra_body_is_honoured():
    out, _ = translate(top_k=40)
    assert out["top_k"] == 40


@pytest.mark.parametrize(
    "params, user",
    [
        ({"user": "u-1"}, "u-1"),
        ({"safety_identifier": "s-1"}, "s-1"),
        ({"user": "u-1", "safety_identifier": "s-1"}, "s-1"),
        ({"user": "alice@example.com"}, "alice@example.com"),
        ({"user": "u" * 300}, "u" * 300),
    ],
)
def test_user_and_safety_identifier_become_an_opaque_metadata_user_id(params, user):
    """Anthropic wants an opaque id and refuses an e-mail address or more than 256 characters;
    OpenAI clients often send an e-mail address as `user`."""
    user_id = translate(**params)[0]["metadata"]["user_id"]
    assert re.fullmatch(r"[0-9a-f]{1,256}", user_id) and user not in user_id
    assert translate(user=user)[0]["metadata"]["user_id"] == user_id, "the same user, the same id"
    assert translate(user=user + "2")[0]["metadata"]["user_id"] != user_id, "another user, another id"


def test_hint_only_and_unknown_parameters_are_dropped_and_named():
    hints = {
        "frequency_penalty": 0.5,
        "presence_penalty": 0.1,
        "seed": 7,
        "logit_bias": {"50256": -100},
        "service_tier": "auto",
        "store": True,
        "prediction": {"type": "content", "content": "x"},
        "metadata": {"k": "v"},
        "verbosity": "low",
        "prompt_cache_key": "k",
        "brand_new_param": 1,
    }
    out, context = translate(**hints)
    assert sorted(context.dropped) == sorted(hints)
    assert not set(hints) & set(out)


def test_model_is_mapped_and_the_requested_name_kept_for_the_response():
    out, context = translate()
    assert out["model"] == "claude-sonnet-4-5" and context.model == "gpt-4o"
    body = validate_chat({"model": "gpt-4.1-mini", "messages": [USER]})
    assert to_messages_request(body, SETTINGS)[0]["model"] == "claude-haiku-4-5"
    body = validate_chat({"model": "claude-opus-4-1", "messages": [USER]})
    assert to_messages_request(body, SETTINGS)[0]["model"] == "claude-opus-4-1"


def test_stream_and_include_usage_reach_the_context():
    out, context = translate(stream=True, stream_options={"include_usage": True})
    assert out["stream"] is True and context.stream and context.include_usage
    out, context = translate()
    assert "stream" not in out and not context.stream and not context.include_usage


# -- reasoning ----------------------------------------------------------------------------


@pytest.mark.parametrize("effort", THINKING_BUDGETS)
@pytest.mark.parametrize("cap", [None, 500, 1500, 3000, 20000, 100000])
def test_reasoning_effort_becomes_a_thinking_budget_that_fits_max_tokens(effort, cap):
    out, _ = translate(reasoning_effort=effort, **({"max_completion_tokens": cap} if cap else {}))
    budget = out["thinking"]["budget_tokens"]
    assert out["thinking"]["type"] == "enabled"
    assert MIN_THINKING_BUDGET <= budget <= THINKING_BUDGETS[effort]
    assert budget < out["max_tokens"]
    if cap is None:  # the default bounds the answer, the budget comes on top
        assert out["max_tokens"] == SETTINGS.default_max_tokens + budget
    elif cap >= 2 * MIN_THINKING_BUDGET:  # the client's cap is kept; thinking takes at most half
        assert out["max_tokens"] == cap and budget <= cap // 2


def test_reasoning_effort_none_means_no_thinking():
    out, context = translate(reasoning_effort="none")
    assert "thinking" not in out and context.dropped == []


def test_thinking_drops_the_sampling_parameters_anthropic_refuses_with_it():
    out, context = translate(reasoning_effort="low", temperature=0.2, top_k=5)
    assert "temperature" not in out and "top_k" not in out
    assert {"temperature", "top_k"} <= set(context.dropped)


def test_anthropic_thinking_from_extra_body_is_honoured_and_max_tokens_raised_above_its_budget():
    out, _ = translate(thinking={"type": "enabled", "budget_tokens": 6000}, max_tokens=2000)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 6000}
    assert out["max_tokens"] > 6000
    out, _ = translate(thinking={"type": "disabled"}, reasoning_effort="high")
    assert out["thinking"] == {"type": "disabled"}


def test_thinking_is_left_off_when_the_last_tool_use_turn_carries_no_signed_thinking():
    out, context = translate(
        USER, {"role": "assistant", "tool_calls": [call()]}, tool_reply(), reasoning_effort="medium", temperature=0.3
    )
    assert "thinking" not in out and "reasoning_effort" in context.dropped
    assert out["temperature"] == 0.3 and out["max_tokens"] == SETTINGS.default_max_tokens


def test_echoed_thinking_blocks_go_first_byte_exact_and_keep_thinking_on():
    blocks = [signed(), {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}]
    out, context = translate(
        USER,
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [call()],
            "reasoning_content": "Let me check.",
            "thinking_blocks": blocks,
        },
        tool_reply(),
        reasoning_effort="medium",
    )
    assert out["messages"][1]["content"][:2] == blocks
    assert [b["type"] for b in out["messages"][1]["content"][2:]] == ["text", "tool_use"]
    assert out["thinking"]["type"] == "enabled" and context.dropped == []


def test_unsigned_thinking_is_never_sent_and_never_given_a_signature():
    out, context = translate(
        USER,
        {
            "role": "assistant",
            "tool_calls": [call()],
            "thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": ""}],
        },
        tool_reply(),
        reasoning_effort="low",
    )
    assert [b["type"] for b in out["messages"][1]["content"]] == ["tool_use"]
    assert "thinking" not in out and "reasoning_effort" in context.dropped


def test_reasoning_only_assistant_message_is_dropped():
    out, _ = translate(
        USER,
        {"role": "assistant", "content": None, "thinking_blocks": [signed()]},
        {"role": "user", "content": "Go on"},
    )
    assert [m["role"] for m in out["messages"]] == ["user"]


def test_thinking_is_left_off_with_a_forced_tool():
    out, context = translate(tools=[TOOL], tool_choice="required", reasoning_effort="high")
    assert "thinking" not in out and "reasoning_effort" in context.dropped
    out, context = translate(response_format={"type": "json_object"}, thinking={"type": "adaptive"})
    assert "thinking" not in out and "thinking" in context.dropped


def test_without_thinking_a_final_assistant_prefill_sheds_its_thinking_blocks():
    out, _ = translate(USER, {"role": "assistant", "content": "Partial", "thinking_blocks": [signed()]})
    assert out["messages"][-1]["content"] == [{"type": "text", "text": "Partial"}]
    assert "thinking" not in out


@pytest.mark.parametrize("params", [{}, {"reasoning_effort": "low"}])
@pytest.mark.parametrize("text", ["", " \n", ["", "  "]])
def test_a_prefill_of_only_thinking_and_whitespace_is_no_prefill(params, text):
    """Anthropic refuses an empty message: what is left of the prefill once its thinking and trailing
    whitespace go is nothing, so the conversation ends with the user."""
    content = text if isinstance(text, str) else [{"type": "text", "text": t} for t in text]
    out, _ = translate(USER, {"role": "assistant", "content": content, "thinking_blocks": [signed()]}, **params)
    assert out["messages"] == [{"role": "user", "content": [{"type": "text", "text": USER["content"]}]}]
    assert ("thinking" in out) == bool(params), "with the prefill gone, thinking is allowed again"


def test_a_prefill_loses_trailing_whitespace_across_its_last_text_blocks():
    out, _ = translate(
        USER,
        {"role": "assistant", "content": [{"type": "text", "text": "The answer is "}, {"type": "text", "text": " \n"}]},
    )
    assert out["messages"][-1]["content"] == [{"type": "text", "text": "The answer is"}]


def test_a_system_message_between_a_call_and_its_results_is_hoisted_without_breaking_the_link():
    out, _ = translate(
        USER,
        {"role": "assistant", "tool_calls": [call()]},
        {"role": "system", "content": "Results follow."},
        tool_reply(),
    )
    assert out["system"] == "Results follow."
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert out["messages"][2]["content"][0]["tool_use_id"] == "call_1"


# -- model capabilities --------------------------------------------------------------------


def translate_for(upstream_model, settings=SETTINGS, **params):
    """Translate for `upstream_model` (the model map sends every name there)."""
    body = validate_chat({"model": "gpt-4o", "messages": [USER], **params})
    return to_messages_request(body, dataclasses.replace(settings, model_map=(("*", upstream_model),)))


@pytest.mark.parametrize(
    "model, effort, level",
    [
        ("claude-opus-4-7", "minimal", "low"),
        ("claude-opus-4-7", "medium", "medium"),
        ("claude-opus-4-7", "xhigh", "xhigh"),
        ("claude-opus-4-6", "xhigh", "max"),
        ("claude-sonnet-4-6", "xhigh", "max"),
        ("claude-mythos-preview", "xhigh", "max"),
        ("claude-mythos-5", "xhigh", "xhigh"),
        ("claude-sonnet-4-6-20260101", "high", "high"),
    ],
)
def test_reasoning_effort_is_adaptive_thinking_with_an_effort_on_models_that_take_it(model, effort, level):
    out, context = translate_for(model, reasoning_effort=effort, temperature=0.2)
    assert out["thinking"] == {"type": "adaptive"} and out["output_config"] == {"effort": level}
    assert "budget_tokens" not in json.dumps(out)
    assert out["max_tokens"] == SETTINGS.default_max_tokens + THINKING_BUDGETS[effort], "room as a budget would have"
    assert "temperature" not in out and context.dropped == ["temperature"]


def test_reasoning_effort_is_a_budget_on_models_without_adaptive_thinking():
    out, _ = translate_for("claude-sonnet-4-5", reasoning_effort="high")
    assert out["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGETS["high"]}
    assert "output_config" not in out


def test_reasoning_effort_none_is_no_thinking_on_an_adaptive_model():
    out, context = translate_for("claude-opus-4-7", reasoning_effort="none")
    assert "thinking" not in out and "output_config" not in out and context.dropped == []


def test_a_model_taking_no_thinking_drops_reasoning_effort_and_names_it():
    settings = dataclasses.replace(SETTINGS, capabilities=(("claude-x-*", {"budget_tokens": False}),))
    out, context = translate_for("claude-x-1", settings, reasoning_effort="high")
    assert "thinking" not in out and context.dropped == ["reasoning_effort"]


def test_the_next_model_needs_a_line_of_settings_not_a_release():
    settings = dataclasses.replace(
        SETTINGS, capabilities=(("claude-opus-5*", {"efforts": ("low", "medium", "high"), "budget_tokens": False}),)
    )
    out, _ = translate_for("claude-opus-5-20270101", settings, reasoning_effort="low")
    assert out["thinking"] == {"type": "adaptive"} and out["output_config"] == {"effort": "low"}
    out, _ = translate_for("claude-opus-5-20270101", reasoning_effort="low")
    assert out["thinking"]["type"] == "enabled", "without the line: today's budget"


def test_temperature_stays_with_thinking_on_a_model_that_takes_it():
    settings = dataclasses.replace(SETTINGS, capabilities=(("*", {"temperature_with_thinking": True}),))
    out, context = translate_for("claude-sonnet-4-5", settings, reasoning_effort="low", temperature=0.3)
    assert out["temperature"] == 0.3 and out["thinking"]["type"] == "enabled" and context.dropped == []
