"""Anthropic Messages request -> OpenAI Responses request: one test per rule
(bridge/translate/messages_to_responses/request.py). Every request built is checked against the
fake upstream's copy of OpenAI's rules (ResponsesRules), as the real API would check it."""

import base64
import json

import pytest

from bridge import settings as settings_module
from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import reasoning_signature
from bridge.protocols.schemas.anthropic import validate_count_tokens, validate_messages
from bridge.translate.messages_to_responses.request import counted_request, to_responses_request
from tests.fake_upstream import FIXTURES, ResponsesRules

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj").decode()
ITEM = {
    "id": "rs_0123",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Thinking about the weather"}],
    "encrypted_content": "gAAAAA-opaque==",
}
ANTHROPIC_SIGNATURE = json.loads((FIXTURES / "anthropic" / "thinking.json").read_text())["content"][0]["signature"]


def settings(**env):
    return settings_module.load({f"BRIDGE_{k.upper()}": str(v) for k, v in env.items()})


def translate(body, **env):
    out, context = to_responses_request(validate_messages(body), settings(**env))
    refusal = ResponsesRules().refusal(out)
    assert refusal is None, refusal.body
    return out, context


def request(*messages, model="gpt-5", **extra):
    return {"model": model, "max_tokens": 256, "messages": list(messages), **extra}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def text(value):
    return {"type": "text", "text": value}


def tool_use(tool_id, name="get_weather", **arguments):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


def tool_result(tool_id, content="done", **extra):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def thinking(signature, words="Thinking about the weather"):
    """A thinking block as Claude Code keeps old ones: type, thinking, signature."""
    return {"type": "thinking", "thinking": words, "signature": signature}


WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


# -- stateless -----------------------------------------------------------------------------------


def test_always_store_false_and_encrypted_reasoning_included():
    out, _ = translate(request(user("hi")))
    assert out["store"] is False and out["include"] == ["reasoning.encrypted_content"]


def test_a_model_without_encrypted_reasoning_is_not_asked_for_it_nor_for_reasoning():
    out, context = translate(request(user("hi"), model="gpt-4.1", thinking={"type": "enabled", "budget_tokens": 2048}))
    assert "include" not in out and "reasoning" not in out and out["store"] is False
    assert "thinking" in context.dropped


def test_the_capability_table_can_say_a_model_has_no_encrypted_reasoning():
    overrides = json.dumps({"my-local-*": {"encrypted_reasoning": False}})
    out, _ = translate(request(user("hi"), model="my-local-model"), model_capabilities=overrides)
    assert "include" not in out


def test_a_thinking_block_with_bridges_signature_is_its_reasoning_item_byte_for_byte():
    body = request(
        user("Weather in Paris?"),
        assistant([thinking(reasoning_signature(ITEM)), tool_use("call_1", city="Paris")]),
        user([tool_result("call_1", "Sunny")]),
    )
    out, context = translate(body, model_map=json.dumps({"*": "gpt-5"}))
    reasoning = [item for item in out["input"] if item.get("type") == "reasoning"]
    assert json.dumps(reasoning) == json.dumps([ITEM]) and not context.dropped
    assert [item.get("type") for item in out["input"]] == [None, "reasoning", "function_call", "function_call_output"]


def test_the_reasoning_item_goes_back_whatever_the_client_did_to_the_thinking_text():
    out, _ = translate(request(user("a"), assistant([thinking(reasoning_signature(ITEM), ""), text("b")]), user("c")))
    assert out["input"][1] == ITEM


@pytest.mark.parametrize(
    "block",
    [
        thinking(ANTHROPIC_SIGNATURE),
        thinking(""),
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    ],
)
def test_thinking_that_is_not_bridges_is_dropped_and_named_never_sent(block):
    out, context = translate(request(user("a"), assistant([block, text("b")]), user("c")))
    assert [item.get("type") for item in out["input"]] == [None, "message", None]
    assert context.dropped == ["messages.1.content.0"]


def test_a_reasoning_item_nothing_follows_in_its_turn_is_dropped_and_named():
    out, context = translate(request(user("a"), assistant([text("b"), thinking(reasoning_signature(ITEM))]), user("c")))
    assert all(item.get("type") != "reasoning" for item in out["input"])
    assert context.dropped == ["messages.1.content.1"]


def test_no_item_but_a_reasoning_item_carries_an_id():
    body = request(
        user("a"),
        assistant([thinking(reasoning_signature(ITEM)), text("b"), tool_use("call_1")]),
        user([tool_result("call_1")]),
    )
    out, _ = translate(body)
    assert [item for item in out["input"] if "id" in item] == [ITEM]


# -- turns ---------------------------------------------------------------------------------------


def test_system_is_instructions_without_claude_codes_billing_line():
    system = [text("x-anthropic-billing-header: cc_version=2.1; cch=abc;"), text("You are Claude Code.")]
    out, _ = translate(request({"role": "system", "content": "Later rule."}, user("hi"), system=system))
    assert out["instructions"] == "You are Claude Code.\n\nLater rule."
    assert out["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


def test_tool_use_and_tool_result_are_a_function_call_and_its_output():
    body = request(
        user("Weather?"),
        assistant([text("Let me look."), tool_use("toolu_01A", city="Paris")]),
        user([tool_result("toolu_01A", [text("Sunny")]), text("Thanks")]),
        tools=[WEATHER],
    )
    out, _ = translate(body)
    assert out["input"][1:] == [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "toolu_01A", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "toolu_01A", "output": "Sunny"},
        {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
    ]


def test_images_in_a_tool_result_stay_in_its_output():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    body = request(user("Look"), assistant([tool_use("t1")]), user([tool_result("t1", [text("a chart"), image])]))
    output = translate(body)[0]["input"][-1]["output"]
    assert output == [
        {"type": "input_text", "text": "a chart"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
    ]


def test_an_error_result_says_so():
    body = request(user("x"), assistant([tool_use("t1")]), user([tool_result("t1", "denied", is_error=True)]))
    assert translate(body)[0]["input"][-1]["output"] == "Error: denied"


def test_a_tool_reference_names_the_loaded_tool():
    result = tool_result("t1", [{"type": "tool_reference", "tool_name": "get_weather"}])
    body = request(user("x"), assistant([tool_use("t1", name="ToolSearch")]), user([result]))
    assert translate(body)[0]["input"][-1]["output"] == "Tool loaded: get_weather"


def test_user_images_and_pdfs_are_input_parts():
    body = request(
        user(
            [
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
                {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            ]
        )
    )
    assert translate(body)[0]["input"][0]["content"] == [
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        {"type": "input_file", "filename": "document.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
    ]


def test_a_tool_use_without_its_result_is_a_400_naming_it():
    with pytest.raises(BridgeError) as caught:
        translate(request(user("x"), assistant([tool_use("t1")]), user("no result")))
    assert caught.value.status == 400 and "messages.1.content.0" in caught.value.message


def test_cache_control_is_named_as_dropped():
    _, context = translate(request(user([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])))
    assert context.dropped == ["cache_control"]


# -- tools ---------------------------------------------------------------------------------------


def test_tools_are_function_tools_strict_only_when_asked():
    strict = {**WEATHER, "name": "strict_one", "strict": True}
    bare = {"name": "no_args", "input_schema": {"type": "object"}}
    out, _ = translate(request(user("x"), tools=[WEATHER, strict, bare]))
    assert out["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER["input_schema"],
            "strict": False,
        },
        {
            "type": "function",
            "name": "strict_one",
            "description": "Weather for a city",
            "parameters": WEATHER["input_schema"],
            "strict": True,
        },
        {"type": "function", "name": "no_args", "parameters": {"type": "object", "properties": {}}, "strict": False},
    ]


def test_a_long_tool_name_is_shortened_and_mapped_back():
    long_name = "mcp__" + "very_long_server_name_" * 4 + "__tool"
    body = request(user("x"), assistant([tool_use("t1", name=long_name)]), user([tool_result("t1")]))
    out, context = translate({**body, "tools": [{**WEATHER, "name": long_name}]})
    short = out["tools"][0]["name"]
    assert len(short) <= 64 and out["input"][1]["name"] == short and context.tool_names == {short: long_name}


@pytest.mark.parametrize(
    "choice, expected",
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "get_weather"}, {"type": "function", "name": "get_weather"}),
    ],
)
def test_tool_choice(choice, expected):
    out, _ = translate(request(user("x"), tools=[WEATHER], tool_choice=choice))
    assert out["tool_choice"] == expected and "parallel_tool_calls" not in out


def test_disable_parallel_tool_use_is_parallel_tool_calls_false():
    out, _ = translate(
        request(user("x"), tools=[WEATHER], tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    )
    assert out["parallel_tool_calls"] is False


def test_a_server_tool_is_a_400():
    with pytest.raises(BridgeError) as caught:
        translate(request(user("x"), tools=[{"type": "web_search_20250305", "name": "web_search"}]))
    assert caught.value.param == "tools.0.type"


# -- reasoning, limits, the rest -------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, effort",
    [
        ({"output_config": {"effort": "max"}}, "xhigh"),
        ({"output_config": {"effort": "xhigh"}}, "xhigh"),
        ({"output_config": {"effort": "low"}}, "low"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "low"),
        ({"thinking": {"type": "enabled", "budget_tokens": 8000}}, "medium"),
        ({"thinking": {"type": "enabled", "budget_tokens": 31999}}, "high"),
        ({"thinking": {"type": "disabled"}}, "low"),
        ({"thinking": {"type": "adaptive"}}, None),
        ({}, None),
    ],
)
def test_thinking_and_effort_are_reasoning_effort_with_summaries(extra, effort):
    out, _ = translate(request(user("x"), max_tokens=32000, **extra))
    assert out["reasoning"] == ({"effort": effort, "summary": "auto"} if effort else {"summary": "auto"})


def test_a_system_messages_effort_steers_the_turns_after_it():
    system = {"role": "system", "content": "Think harder.", "output_config": {"effort": "max"}}
    out, _ = translate(request(user("x"), system, output_config={"effort": "low"}))
    assert out["reasoning"]["effort"] == "xhigh"


def test_max_tokens_is_max_output_tokens_at_least_openais_minimum():
    out, context = translate(request(user("x"), max_tokens=1000))
    assert out["max_output_tokens"] == 1000 and not context.dropped
    out, context = translate(request(user("x"), max_tokens=1))
    assert out["max_output_tokens"] == 16 and context.dropped == ["max_tokens"]


def test_output_format_is_text_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out, _ = translate(request(user("x"), output_config={"format": {"type": "json_schema", "schema": schema}}))
    assert out["text"] == {"format": {"type": "json_schema", "name": "structured_output", "schema": schema}}


def test_the_user_id_is_user_and_prompt_cache_key_hashed_never_raw():
    user_id = "user_abc_account_123_session_456"
    out, _ = translate(request(user("x"), metadata={"user_id": user_id}))
    assert out["user"] == out["prompt_cache_key"] and out["user"].startswith("sha256:")
    assert user_id not in json.dumps(out) and len(out["user"]) <= 64


def test_what_responses_cannot_take_is_dropped_and_named():
    body = request(user("x"), stop_sequences=["END"], top_k=5, temperature=0.5, top_p=0.9, service_tier="auto")
    out, context = translate(body)
    assert not {"stop", "top_k", "temperature", "top_p", "service_tier"} & set(out)
    assert sorted(context.dropped) == ["service_tier", "stop_sequences", "temperature", "top_k", "top_p"]


def test_temperature_and_top_p_go_to_a_model_that_does_not_reason():
    out, context = translate(request(user("x"), model="gpt-4.1", temperature=0.5, top_p=0.9))
    assert out["temperature"] == 0.5 and out["top_p"] == 0.9 and not context.dropped


def test_the_model_map_names_the_upstream_model_and_the_context_keeps_the_clients():
    out, context = translate(request(user("x"), model="claude-opus-4-8"), model_map=json.dumps({"claude-*": "gpt-5"}))
    assert out["model"] == "gpt-5" and context.model == "claude-opus-4-8"


def test_a_stream_asks_for_one_and_estimates_its_input():
    out, context = translate(request(user("x"), stream=True))
    assert out["stream"] is True and context.stream and context.input_tokens > 0


def test_thread_is_refused_with_anthropics_details():
    with pytest.raises(BridgeError) as caught:
        translate(request(user("x"), thread={"id": "t"}))
    assert caught.value.details["error_code"] == "thread_unsupported_request"


def test_the_count_request_holds_only_what_openais_input_token_count_takes():
    body = validate_count_tokens({"model": "gpt-5", "messages": [user("x")], "tools": [WEATHER], "system": "s"})
    out, _ = counted_request(body, settings())
    assert set(out) == {"model", "instructions", "input", "reasoning", "tools"}
