"""Anthropic Messages request -> Chat Completions request: one test per rule."""

import base64
import json

import pytest

from bridge import settings as settings_module
from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas.anthropic import validate_messages
from bridge.translate.messages_client import client_tool_id
from bridge.translate.messages_to_chat.request import to_chat_request
from tests.fake_upstream import FIXTURES
from tests.helpers.upstream_requests import CHAT_FIELDS, OPENAI_TOOL_NAME, assert_valid_chat_request

CLIENTS = FIXTURES / "clients"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()
PDF = base64.b64encode(
    b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n2 0 obj <</Type /Page>> endobj\n3 0 obj <</Type /Pages>> endobj"
).decode()


def settings(**env):
    return settings_module.load({f"BRIDGE_{k.upper()}": str(v) for k, v in env.items()})


def translate(body, **env):
    return to_chat_request(validate_messages(body), settings(**env))


def request(*messages, **extra):
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": list(messages), **extra}


def user(content):
    return {"role": "user", "content": content}


def assistant(content):
    return {"role": "assistant", "content": content}


def text(value, **extra):
    return {"type": "text", "text": value, **extra}


def tool_use(tool_id, name="get_weather", **arguments):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


def tool_result(tool_id, content="done", **extra):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def rejected(body, **env):
    with pytest.raises(BridgeError) as caught:
        translate(body, **env)
    assert caught.value.status == 400
    return caught.value.message


# -- the recorded Claude Code requests ---------------------------------------------


@pytest.mark.parametrize("path", sorted(CLIENTS.glob("claude_code_*.json")), ids=lambda p: p.stem)
def test_every_recorded_claude_code_request_becomes_a_valid_chat_request(path):
    body = json.loads(path.read_text())["body"]
    if "max_tokens" not in body:  # the count_tokens capture
        body = {**body, "max_tokens": 1024}
    chat, context = translate(body)
    assert_valid_chat_request(chat)
    assert context.model == body["model"]
    tool_names = [t["function"]["name"] for t in chat.get("tools", [])]
    assert [context.tool_names[n] for n in tool_names] == [t["name"] for t in body.get("tools", [])]
    sent_calls = [c["id"] for m in chat["messages"] for c in m.get("tool_calls", [])]
    recorded_calls = [
        b["id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert sent_calls == recorded_calls


def test_claude_code_turn_with_thinking_history_keeps_text_and_call_order():
    body = json.loads((CLIENTS / "claude_code_tool_turn2_tool_result_with_thinking_history.json").read_text())["body"]
    chat, _ = translate(body)
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    history = body["messages"][2]["content"]
    assert chat["messages"][2]["content"] == history[1]["text"]
    assert "reasoning_content" not in chat["messages"][2]
    assert chat["messages"][3]["content"] == body["messages"][3]["content"][0]["content"]


# -- system -----------------------------------------------------------------------------


def test_system_string_becomes_the_leading_system_message():
    chat, _ = translate(request(user("hi"), system="Be brief."))
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}


def test_system_blocks_are_joined_and_lose_cache_control():
    chat, _ = translate(request(user("hi"), system=[text("A"), text("B", cache_control={"type": "ephemeral"})]))
    assert chat["messages"][0] == {"role": "system", "content": "A\n\nB"}


def test_role_system_messages_are_hoisted_after_the_top_level_system():
    chat, _ = translate(request(user("a"), {"role": "system", "content": [text("mid")]}, user("b"), system="top"))
    assert chat["messages"][0] == {"role": "system", "content": "top\n\nmid"}
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "user"]


def test_claude_codes_billing_header_is_not_sent_upstream():
    """Its per-request hash at the head of the prompt would defeat the upstream's prefix cache."""
    body = json.loads((CLIENTS / "claude_code_p_say_hi.json").read_text())["body"]
    header, *rest = body["system"]
    assert header["text"].startswith("x-anthropic-billing-header:")
    chat, _ = translate(body)
    assert chat["messages"][0]["content"].startswith("\n\n".join(block["text"] for block in rest))
    assert "x-anthropic-billing-header" not in json.dumps(chat)
    other_request = {**body, "system": [text(header["text"] + " cch=4f2a1;"), *rest]}
    assert translate(other_request)[0] == chat


def test_billing_header_line_inside_a_system_string_is_removed():
    chat, _ = translate(
        request(user("hi"), system="x-anthropic-billing-header: cc_version=2.1.1.a3f; cch=0b1c2;\nBe brief.")
    )
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}


def test_no_system_message_without_system_text():
    chat, _ = translate(request(user("hi"), system=""))
    assert [m["role"] for m in chat["messages"]] == ["user"]


# -- user content ------------------------------------------------------------------------


def test_text_only_content_arrays_are_flattened_to_a_string():
    chat, _ = translate(request(user([text("one"), text("two", cache_control={"type": "ephemeral"})])))
    assert chat["messages"] == [{"role": "user", "content": "one\n\ntwo"}]


def test_empty_text_blocks_are_dropped_and_empty_messages_with_them():
    chat, _ = translate(request(user([text(""), text("x")]), assistant(""), user("y")))
    assert chat["messages"] == [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]


def test_base64_image_becomes_a_data_url_and_url_image_stays_a_url():
    chat, _ = translate(
        request(
            user(
                [
                    text("look"),
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.test/a.jpg"}},
                ]
            )
        )
    )
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.test/a.jpg"}},
    ]


def test_pdf_document_becomes_a_file_part_with_a_data_url():
    chat, _ = translate(
        request(
            user(
                [
                    {
                        "type": "document",
                        "title": "Report Q3",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                    },
                    text("summarise"),
                ]
            )
        )
    )
    file_part, question = chat["messages"][0]["content"]
    assert file_part == {
        "type": "file",
        "file": {"filename": "Report Q3", "file_data": f"data:application/pdf;base64,{PDF}"},
    }
    assert question == {"type": "text", "text": "summarise"}


def test_plain_text_document_becomes_text_under_its_title():
    chat, _ = translate(
        request(
            user(
                [
                    {
                        "type": "document",
                        "title": "notes.txt",
                        "source": {"type": "text", "media_type": "text/plain", "data": "abc"},
                    }
                ]
            )
        )
    )
    assert chat["messages"][0]["content"] == "notes.txt\n\nabc"


def test_url_document_is_refused_naming_the_field():
    message = rejected(
        request(
            user([text("read"), {"type": "document", "source": {"type": "url", "url": "https://example.test/a.pdf"}}])
        )
    )
    assert message.startswith("messages.0.content.1.source.url: ")


# -- tools in history ---------------------------------------------------------------------


def test_tool_use_becomes_tool_calls_with_json_string_arguments():
    chat, _ = translate(
        request(
            user("weather?"), assistant([tool_use("toolu_1", city="Paris")]), user([tool_result("toolu_1", "sunny")])
        )
    )
    call = chat["messages"][1]
    assert call == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    assert chat["messages"][2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}


def test_tool_results_come_right_after_the_assistant_before_other_user_content():
    chat, _ = translate(
        request(
            user("go"),
            assistant([text("two calls"), tool_use("a"), tool_use("b")]),
            user([text("and also this"), tool_result("b", "B"), tool_result("a", "A")]),
        )
    )
    assert [(m["role"], m.get("tool_call_id")) for m in chat["messages"]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "b"),
        ("tool", "a"),
        ("user", None),
    ]
    assert chat["messages"][-1]["content"] == "and also this"


def test_tool_result_text_stays_in_the_tool_message_and_images_follow_in_a_user_message():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    chat, _ = translate(
        request(
            user("shot"),
            assistant([tool_use("t1", "screenshot")]),
            user([tool_result("t1", [text("captured"), image]), text("what is it?")]),
        )
    )
    tool_message, follow_up = chat["messages"][2:]
    assert tool_message == {"role": "tool", "tool_call_id": "t1", "content": "captured"}
    assert follow_up["role"] == "user"
    parts = follow_up["content"]
    assert "t1" in parts[0]["text"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert parts[2] == {"type": "text", "text": "what is it?"}


def test_tool_result_content_blocks_are_joined_and_may_be_empty():
    chat, _ = translate(
        request(
            user("x"),
            assistant([tool_use("t1"), tool_use("t2")]),
            user([tool_result("t1", [text("a"), text("b")]), {"type": "tool_result", "tool_use_id": "t2"}]),
        )
    )
    assert [m["content"] for m in chat["messages"][2:]] == ["a\n\nb", ""]


def test_error_tool_result_says_so_in_the_tool_message():
    chat, _ = translate(
        request(user("x"), assistant([tool_use("t1")]), user([tool_result("t1", "permission denied", is_error=True)]))
    )
    assert chat["messages"][2]["content"] == "Error: permission denied"


def test_assistant_text_after_tool_use_goes_into_content():
    chat, _ = translate(
        request(user("x"), assistant([text("before"), tool_use("t1"), text("after")]), user([tool_result("t1")]))
    )
    assert chat["messages"][1]["content"] == "before\n\nafter"
    assert len(chat["messages"][1]["tool_calls"]) == 1


def test_thinking_history_is_dropped_by_default():
    thinking = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xyz"},
        text("answer"),
    ]
    chat, _ = translate(request(user("q"), assistant(thinking), user("more")))
    assert chat["messages"][1] == {"role": "assistant", "content": "answer"}


def test_thinking_history_becomes_reasoning_content_when_the_upstream_needs_it():
    thinking = [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, tool_use("t1")]
    chat, _ = translate(
        request(user("q"), assistant(thinking), user([tool_result("t1")])), openai_reasoning_history="true"
    )
    assert chat["messages"][1]["reasoning_content"] == "hmm"


def test_assistant_turn_with_only_thinking_is_dropped():
    chat, _ = translate(request(user("q"), assistant([{"type": "thinking", "thinking": "x"}]), user("again")))
    assert [m["role"] for m in chat["messages"]] == ["user", "user"]


def test_tool_use_without_a_result_in_the_next_user_turn_is_a_400_naming_the_block():
    message = rejected(
        request(user("x"), assistant([text("t"), tool_use("t1"), tool_use("t2")]), user([tool_result("t1")]))
    )
    assert message.startswith("messages.1.content.2: ") and "'t2'" in message


def test_tool_use_at_the_end_of_the_conversation_is_a_400():
    assert rejected(request(user("x"), assistant([tool_use("t1")]))).startswith("messages.1.content.0: ")


def test_tool_result_that_answers_nothing_is_a_400_naming_its_id():
    message = rejected(request(user("x"), assistant("plain"), user([tool_result("ghost")])))
    assert message.startswith("messages.2.content.0.tool_use_id: ") and "'ghost'" in message


def test_tool_call_ids_too_long_for_openai_are_hashed_the_same_way_on_both_sides():
    long_id = "toolu_" + "x" * 60
    chat, _ = translate(request(user("x"), assistant([tool_use(long_id)]), user([tool_result(long_id)])))
    sent = chat["messages"][1]["tool_calls"][0]["id"]
    assert len(sent) <= 40 and chat["messages"][2]["tool_call_id"] == sent


def test_tool_call_ids_the_bridge_encoded_go_back_upstream_as_they_were():
    upstream_id = "functions.get_weather:0"
    client_id = client_tool_id(upstream_id)
    chat, _ = translate(request(user("x"), assistant([tool_use(client_id)]), user([tool_result(client_id)])))
    assert chat["messages"][1]["tool_calls"][0]["id"] == upstream_id
    assert chat["messages"][2]["tool_call_id"] == upstream_id


def test_tool_result_attachments_name_the_call_id_the_upstream_knows():
    client_id = client_tool_id("functions.screenshot:0")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    chat, _ = translate(
        request(user("x"), assistant([tool_use(client_id, "screenshot")]), user([tool_result(client_id, [image])]))
    )
    tool_message, follow_up = chat["messages"][2:]
    assert tool_message["tool_call_id"] in follow_up["content"][0]["text"]
    assert client_id not in json.dumps(chat)


# -- tool definitions -----------------------------------------------------------------------

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"},
}


def test_tools_become_function_tools():
    chat, _ = translate(request(user("x"), tools=[WEATHER]))
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": WEATHER["input_schema"],
                "description": "Weather for a city",
            },
        }
    ]


def test_a_tool_schema_without_properties_gets_empty_properties():
    """MCP servers declare argument-less tools as {"type": "object"}; OpenAI refuses that with
    "object schema missing properties"."""
    schema = {"type": "object", "additionalProperties": False}
    body = request(user("x"), tools=[{"name": "list_accounts", "input_schema": schema}])
    chat, _ = translate(body)
    assert chat["tools"][0]["function"]["parameters"] == {**schema, "properties": {}}
    assert body["tools"][0]["input_schema"] == {"type": "object", "additionalProperties": False}


def test_long_or_odd_tool_names_are_shortened_deterministically_and_mapped_back():
    long_name = "mcp__a_very_long_server_name_for_testing__" + "do_something_remarkable_" * 3
    dotted = "server.tool"
    tools = [{**WEATHER, "name": long_name}, {**WEATHER, "name": dotted}]
    body = request(
        user("x"),
        assistant([tool_use("t1", long_name)]),
        user([tool_result("t1")]),
        tools=tools,
        tool_choice={"type": "tool", "name": dotted},
    )
    chat, context = translate(body)
    again, _ = translate(body)
    short_long, short_dotted = (t["function"]["name"] for t in chat["tools"])
    assert OPENAI_TOOL_NAME.match(short_long) and OPENAI_TOOL_NAME.match(short_dotted)
    assert short_long == again["tools"][0]["function"]["name"]
    assert chat["messages"][1]["tool_calls"][0]["function"]["name"] == short_long
    assert chat["tool_choice"] == {"type": "function", "function": {"name": short_dotted}}
    assert context.tool_names[short_long] == long_name and context.tool_names[short_dotted] == dotted


def test_names_that_differ_only_in_invalid_characters_stay_distinct():
    tools = [{**WEATHER, "name": "a.b"}, {**WEATHER, "name": "a:b"}]
    chat, _ = translate(request(user("x"), tools=tools))
    assert len({t["function"]["name"] for t in chat["tools"]}) == 2


@pytest.mark.parametrize(
    "choice, expected",
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_maps_any_to_required_and_tool_to_a_named_function(choice, expected):
    chat, _ = translate(request(user("x"), tools=[WEATHER], tool_choice=choice))
    assert chat["tool_choice"] == expected
    assert "parallel_tool_calls" not in chat


def test_disable_parallel_tool_use_becomes_parallel_tool_calls_false():
    chat, _ = translate(
        request(user("x"), tools=[WEATHER], tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    )
    assert chat["parallel_tool_calls"] is False


def test_tool_choice_without_tools_is_dropped_and_reported():
    chat, context = translate(request(user("x"), tool_choice={"type": "any"}))
    assert "tool_choice" not in chat and "tool_choice" in context.dropped


def test_tool_choice_naming_an_unknown_tool_is_a_400():
    message = rejected(request(user("x"), tools=[WEATHER], tool_choice={"type": "tool", "name": "nope"}))
    assert message.startswith("tool_choice.name: ")
    only_in_history = request(
        user("x"),
        assistant([tool_use("t1", "old_tool")]),
        user([tool_result("t1")]),
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "old_tool"},
    )
    assert rejected(only_in_history).startswith("tool_choice.name: ")


def test_server_tools_are_refused_naming_the_tool():
    message = rejected(request(user("x"), tools=[WEATHER, {"type": "web_search_20250305", "name": "web_search"}]))
    assert message.startswith("tools.1.type: ") and "web_search_20250305" in message


def test_strict_tools_stay_strict():
    chat, _ = translate(request(user("x"), tools=[{**WEATHER, "strict": True}]))
    assert chat["tools"][0]["function"]["strict"] is True


# -- sampling, limits and the rest ------------------------------------------------------------


def test_max_tokens_goes_under_the_configured_parameter_name():
    chat, _ = translate(request(user("x")))
    assert chat["max_completion_tokens"] == 256 and "max_tokens" not in chat
    chat, _ = translate(request(user("x")), openai_max_tokens_param="max_tokens")
    assert chat["max_tokens"] == 256 and "max_completion_tokens" not in chat


def test_model_is_mapped_and_the_context_keeps_the_clients_name():
    chat, context = translate(
        request(user("x"), model="claude-haiku-4-5-20251001"), model_map=json.dumps({"claude-*haiku*": "gpt-4.1-mini"})
    )
    assert chat["model"] == "gpt-4.1-mini" and context.model == "claude-haiku-4-5-20251001"


def test_stop_sequences_become_stop():
    chat, context = translate(request(user("x"), stop_sequences=["END", "STOP"]))
    assert chat["stop"] == ["END", "STOP"] and context.stop_sequences == ("END", "STOP")


def test_more_than_four_stop_sequences_is_a_400():
    assert rejected(request(user("x"), stop_sequences=list("abcde"))).startswith("stop_sequences: ")


def test_temperature_and_top_p_pass_and_top_k_is_dropped_and_reported():
    chat, context = translate(request(user("x"), temperature=0.2, top_p=0.9, top_k=40))
    assert (chat["temperature"], chat["top_p"]) == (0.2, 0.9) and "top_k" not in chat
    assert "top_k" in context.dropped


def test_metadata_user_id_becomes_user_and_long_ids_a_stable_short_hash():
    chat, _ = translate(request(user("x"), metadata={"user_id": "alice"}))
    assert chat["user"] == "alice"
    long_id = json.dumps({"device_id": "0" * 64, "session_id": "s" * 36})
    first, _ = translate(request(user("x"), metadata={"user_id": long_id}))
    second, _ = translate(request(user("x"), metadata={"user_id": long_id}))
    assert first["user"] == second["user"] and len(first["user"]) <= 64


def test_anthropic_only_fields_are_consumed_and_reported():
    chat, context = translate(
        request(
            user("x"),
            context_management={"edits": []},
            service_tier="auto",
            container="c",
            mcp_servers=[],
            cache_control={"type": "ephemeral"},
        )
    )
    assert set(chat) <= CHAT_FIELDS
    assert {"context_management", "service_tier", "container", "mcp_servers"} <= set(context.dropped)


@pytest.mark.parametrize(
    "extra, effort",
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "low"),
        ({"thinking": {"type": "enabled", "budget_tokens": 8000}}, "medium"),
        ({"thinking": {"type": "enabled", "budget_tokens": 31999}}, "high"),
        ({"thinking": {"type": "disabled"}}, "low"),
        ({"thinking": {"type": "adaptive"}}, None),
        ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}, "medium"),
        ({"output_config": {"effort": "max"}}, "high"),
    ],
)
def test_thinking_and_effort_become_reasoning_effort_when_enabled(extra, effort):
    chat, context = translate(request(user("x"), **extra), openai_reasoning_effort="true")
    assert chat.get("reasoning_effort") == effort and not context.dropped


def test_thinking_and_effort_are_dropped_and_reported_when_the_upstream_takes_no_reasoning_effort():
    chat, context = translate(request(user("x"), thinking={"type": "adaptive"}, output_config={"effort": "high"}))
    assert "reasoning_effort" not in chat
    assert context.dropped == ["thinking", "output_config.effort"]


def test_output_config_format_becomes_a_json_schema_response_format():
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    chat, _ = translate(request(user("x"), output_config={"format": {"type": "json_schema", "schema": schema}}))
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "structured_output", "schema": schema},
    }


def test_stream_asks_for_usage_unless_switched_off():
    chat, context = translate(request(user("x"), stream=True))
    assert context.stream and chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    chat, _ = translate(request(user("x"), stream=True), openai_stream_usage="false")
    assert "stream_options" not in chat
    chat, context = translate(request(user("x")))
    assert "stream" not in chat and not context.stream


def test_a_stream_context_carries_an_input_estimate_for_message_start():
    _, small = translate(request(user("x"), stream=True))
    _, large = translate(request(user("x" * 3000), stream=True))
    assert 0 < small.input_tokens < large.input_tokens
    _, unstreamed = translate(request(user("x" * 3000)))
    assert unstreamed.input_tokens == 0  # nothing reads it: the upstream's usage answers


# -- Claude Code 2.1.332: tool search, per-turn control, fields with no upstream ---------------------

CLAUDE_CODE_2_1_332 = CLIENTS / "claude-code-2.1.332"


def test_a_tool_reference_becomes_tool_message_text_naming_the_loaded_tool():
    loaded = [{"type": "tool_reference", "tool_name": "WebFetch"}]
    body = request(
        user("fetch it"),
        assistant([tool_use("t1", "ToolSearch", query="select:WebFetch")]),
        user([tool_result("t1", loaded), text("Tool loaded.")]),
        tools=[{"name": "WebFetch", "input_schema": {"type": "object"}, "defer_loading": True}],
    )
    chat, context = translate(body)
    assert chat["messages"][-2] == {"role": "tool", "tool_call_id": "t1", "content": "Tool loaded: WebFetch"}
    assert chat["messages"][-1] == {"role": "user", "content": "Tool loaded."}
    assert [t["function"]["name"] for t in chat["tools"]] == ["WebFetch"], "deferred tools go inline"
    assert "tools.defer_loading" in context.dropped


def test_a_tool_reference_names_the_tool_as_the_upstream_knows_it():
    long_name = "mcp__a_very_long_server_name__" + "x" * 60
    loaded = [{"type": "tool_reference", "tool_name": long_name}]
    body = request(
        user("q"),
        assistant([tool_use("t1", "ToolSearch")]),
        user([tool_result("t1", loaded)]),
        tools=[{"name": long_name, "input_schema": {"type": "object"}}],
    )
    chat, _ = translate(body)
    [tool] = chat["tools"]
    assert chat["messages"][-1]["content"] == f"Tool loaded: {tool['function']['name']}"


def test_a_tool_reference_without_a_tool_name_is_a_400_naming_it():
    body = request(user("q"), assistant([tool_use("t1")]), user([tool_result("t1", [{"type": "tool_reference"}])]))
    assert rejected(body).startswith("messages.2.content.0.content.0.tool_name: ")


def test_the_deferred_tool_placeholder_is_not_sent_upstream_and_is_reported():
    capture = json.loads((CLAUDE_CODE_2_1_332 / "claude_code_p_say_hi.json").read_text())
    chat, context = translate(capture["body"])
    names = [t["function"]["name"] for t in chat["tools"]]
    assert "DeferredToolPlaceholder" not in names and "ToolSearch" in names
    assert len(names) == len(capture["body"]["tools"]) - 1
    assert "tools.DeferredToolPlaceholder" in context.dropped


def test_a_tool_choice_naming_the_placeholder_is_a_400():
    placeholder = {"name": "DeferredToolPlaceholder", "input_schema": {"type": "object"}, "defer_loading": True}
    other = {"name": "Read", "input_schema": {"type": "object"}}
    body = request(
        user("q"), tools=[placeholder, other], tool_choice={"type": "tool", "name": "DeferredToolPlaceholder"}
    )
    assert rejected(body).startswith("tool_choice.name: ")


@pytest.mark.parametrize("path", sorted(CLAUDE_CODE_2_1_332.glob("claude_code_*.json")), ids=lambda p: p.stem)
def test_every_field_claude_code_2_1_332_sends_that_does_not_go_upstream_is_named(path):
    """Walk the capture: what neither reaches the Chat body nor is translated into it is in context.dropped."""
    body = json.loads(path.read_text())["body"]
    if "max_tokens" not in body:
        return  # a count_tokens request: answered locally
    for enabled in ("false", "true"):
        chat, context = translate(body, openai_reasoning_effort=enabled)
        expected = {
            k
            for k in body
            if k
            not in {
                "model",
                "messages",
                "system",
                "max_tokens",
                "metadata",
                "tools",
                "thinking",
                "output_config",
                "stream",
            }
        }
        blocks = [
            *(body["system"] if isinstance(body["system"], list) else []),
            *(b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]),
        ]
        if any("cache_control" in b for b in blocks):
            expected.add("cache_control")
        if any("defer_loading" in t for t in body["tools"]):
            expected.add("tools.defer_loading")
        if any(t["name"] == "DeferredToolPlaceholder" for t in body["tools"]):
            expected.add("tools.DeferredToolPlaceholder")
        expected |= {"thinking.display"} if enabled == "true" else {"thinking", "output_config.effort"}
        assert set(context.dropped) == expected


def test_a_system_messages_own_effort_steers_over_the_top_level_one():
    body = request(
        user("q"),
        {"role": "system", "content": [], "output_config": {"effort": "low"}},
        output_config={"effort": "high"},
        thinking={"type": "adaptive", "display": "omitted"},
    )
    chat, context = translate(body, openai_reasoning_effort="true")
    assert chat["reasoning_effort"] == "low"
    assert context.dropped == ["thinking.display"]


def test_a_system_message_with_a_list_or_empty_content_is_hoisted():
    body = request(
        user("q"),
        {"role": "system", "content": [text("rules", cache_control={"type": "ephemeral"})]},
        {"role": "system", "content": []},
        system="top",
    )
    chat, context = translate(body)
    assert chat["messages"][0] == {"role": "system", "content": "top\n\nrules"}
    assert chat["messages"][1:] == [{"role": "user", "content": "q"}]
    assert context.dropped == ["cache_control"]


def test_safeguards_are_dropped_reported_and_warned_about():
    capture = json.loads((CLAUDE_CODE_2_1_332 / "claude_code_interactive_turn1.json").read_text())
    chat, context = translate(capture["body"])
    assert "safeguards" not in chat and "safeguards" in context.dropped
    [warning] = context.warnings
    assert warning.startswith("safeguards ")
    _, plain = translate(request(user("q")))
    assert plain.warnings == []


def test_thread_is_refused_with_the_details_the_sdks_act_on():
    for thread in ({"type": "create"}, {"type": "continue", "previous_message_id": "msg_1"}):
        with pytest.raises(BridgeError) as caught:
            translate(request(user("q"), thread=thread))
        error = caught.value
        assert error.status == 400 and error.param == "thread"
        body = error.body_for("anthropic")["error"]
        assert body["type"] == "invalid_request_error" and body["message"].startswith("thread: ")
        assert body["details"] == {"error_code": "thread_unsupported_request", "unsupported": []}


def test_compaction_is_refused():
    assert rejected(request(user("q"), compaction={"type": "summarize"})).startswith("compaction: ")


def test_the_deprecated_output_format_is_read_as_output_config_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    chat, context = translate(request(user("q"), output_format={"type": "json_schema", "schema": schema}))
    assert chat["response_format"]["json_schema"]["schema"] == schema and not context.dropped
    assert rejected(request(user("q"), output_format={"type": "xml"})).startswith("output_format.type: ")


def test_fallbacks_and_unknown_top_level_fields_are_named():
    chat, context = translate(request(user("q"), fallbacks=["claude-x"], some_future_field=1))
    assert set(chat) <= CHAT_FIELDS
    assert context.dropped == ["fallbacks", "some_future_field"]
