"""Responses request -> Messages request, one test per rule (bridge/translate/responses_to_messages/request.py,
bridge/protocols/schemas/responses.py).

The Codex captures in tests/fixtures/clients/codex-0.171.0/captures/ are copies of
tests/fixtures/clients/codex-0.171.0/captures/ (CODEX.md there tells how they were recorded):
what Codex CLI 0.171.0 sent to a Responses server, each `{"method", "path", "headers", "body", ...}`.
"""

import base64
import copy
import dataclasses
import hashlib
import json
import re

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import encrypted_content
from bridge.protocols.schemas.responses import validate_responses
from bridge.settings import Settings
from bridge.translate.anthropic_request import JSON_OBJECT_TOOL, MIN_THINKING_BUDGET, THINKING_BUDGETS
from bridge.translate.responses_to_messages.request import STARTED, to_messages_request
from tests.fake_upstream import FIXTURES

CAPTURES = sorted((FIXTURES / "clients/codex-0.171.0/captures").glob("*.json"))
SETTINGS = Settings(
    model_map=(("gpt-5.5", "claude-sonnet-4-5"),),
    responses_default_max_tokens=32000,
    prompt_cache="off",
    capabilities=(("*", {"structured_output": False}),),  # forced-tool JSON answers, as they were
)
PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "strict": False,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
GRAMMAR = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files. This is a FREEFORM tool.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools for managing sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "close_agent",
            "description": "Close an agent.",
            "strict": False,
            "parameters": {"type": "object", "properties": {"target": {"type": "string"}}},
        }
    ],
}
SIGNED = {"type": "thinking", "thinking": "The user wants the weather.", "signature": "EqQBCkYIBxgCKkB/sig=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}


def user(content="What is the weather in Paris?"):
    return {"type": "message", "role": "user", "content": content}


def developer(text):
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def assistant(text):
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "id": "msg_1",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def call(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}', **extra):
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        **extra,
    }


def output(call_id="call_1", result="sunny"):
    return {"type": "function_call_output", "call_id": call_id, "output": result}


def reasoning(block=SIGNED, **extra):
    return {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Thinking"}],
        "content": None,
        "encrypted_content": encrypted_content(block),
        **extra,
    }


def request(*items, **params):
    return {"model": "claude-sonnet-4-5", "input": list(items) or [user()], **params}


def translate(*items, settings=SETTINGS, **params):
    return to_messages_request(validate_responses(request(*items, **params)), settings)


def refused(body):
    """The 400 validation or translation gives."""
    with pytest.raises(BridgeError) as caught:
        to_messages_request(validate_responses(body), SETTINGS)
    assert caught.value.status == 400
    return caught.value


# -- what a strict Messages server accepts --------------------------------------------------

MESSAGES_FIELDS = {
    "model",
    "messages",
    "system",
    "max_tokens",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
}
BLOCK_FIELDS = {
    "text": {"text"},
    "image": {"source"},
    "document": {"source", "title"},
    "tool_use": {"id", "name", "input"},
    "tool_result": {"tool_use_id", "content"},
    "thinking": {"thinking", "signature"},
    "redacted_thinking": {"data"},
}
ROLE_BLOCKS = {
    "user": {"text", "image", "document", "tool_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def assert_valid_block(block, allowed):
    assert block["type"] in allowed, block
    assert set(block) - {"type", "cache_control"} <= BLOCK_FIELDS[block["type"]], block
    if block["type"] == "text":
        assert isinstance(block["text"], str) and block["text"], "Anthropic refuses empty text blocks"
    if block["type"] in ("image", "document"):
        assert block["source"]["type"] in ("base64", "url"), block
    if block["type"] == "tool_result":
        content = block.get("content")
        assert content is None or isinstance(content, str) and content or isinstance(content, list) and content
        for inner in content if isinstance(content, list) else []:
            assert_valid_block(inner, {"text", "image", "document"})
    if block["type"] == "thinking":
        assert block["signature"], "a thinking block goes upstream only with its signature"


def assert_valid_messages_request(body):
    """What Anthropic's Messages API checks before answering, and no Responses field leaked."""
    assert set(body) <= MESSAGES_FIELDS, set(body) - MESSAGES_FIELDS
    assert isinstance(body["model"], str) and body["model"]
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] >= 1
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            assert_valid_block(block, {"text"})
    else:
        assert system is None or isinstance(system, str) and system
    assert set(body.get("metadata") or {}) <= {"user_id"}
    tool_names = [tool["name"] for tool in body.get("tools") or []]
    assert len(tool_names) == len(set(tool_names)), "tool names are unique"
    for tool in body.get("tools") or []:
        assert set(tool) <= {"name", "description", "input_schema", "cache_control"}, tool
        assert TOOL_NAME.match(tool["name"]) and tool["input_schema"]["type"] == "object", tool
    choice = body.get("tool_choice")
    if choice:
        assert body.get("tools") and choice["type"] in ("auto", "any", "tool", "none"), choice
        assert choice["type"] != "tool" or choice["name"] in tool_names
    thinking = body.get("thinking")
    if thinking:
        assert MIN_THINKING_BUDGET <= thinking["budget_tokens"] < body["max_tokens"]
        assert not {"temperature", "top_p", "top_k"} & set(body), "thinking takes the default sampling"
        assert (choice or {}).get("type") not in ("any", "tool"), "thinking refuses a forced tool"
    messages = body["messages"]
    assert messages and messages[0]["role"] == "user", "the first message is a user turn"
    seen_ids, open_calls = set(), set()
    for position, message in enumerate(messages):
        assert set(message) == {"role", "content"}
        assert message["role"] == ("user" if position % 2 == 0 else "assistant"), "roles alternate"
        content = message["content"]
        assert isinstance(content, list) and content, "no empty turn"
        for block in content:
            assert_valid_block(block, ROLE_BLOCKS[message["role"]])
        kinds = [block["type"] for block in content]
        if message["role"] == "assistant":
            if thinking and position == len(messages) - 2 and "tool_use" in kinds:
                assert kinds[0] in ("thinking", "redacted_thinking"), "thinking opens the turn its tool_use ends"
            uses = [k for k, kind in enumerate(kinds) if kind == "tool_use"]
            assert all(k > t for t, kind in enumerate(kinds) if kind.endswith("thinking") for k in uses), (
                "a turn's thinking comes before its tool_use"
            )
            calls = {block["id"] for block in content if block["type"] == "tool_use"}
            assert all(ANTHROPIC_ID.match(i) for i in calls) and not calls & seen_ids
            assert all(block["name"] in tool_names for block in content if block["type"] == "tool_use")
            seen_ids |= calls
            open_calls = calls
            if position == len(messages) - 1:
                assert not calls, "a call at the end has no answer"
        else:
            results = [block["tool_use_id"] for block in content if block["type"] == "tool_result"]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "tool results come first in a turn"
            assert sorted(results) == sorted(open_calls), "every tool_use answered, every tool_result answers one"
            open_calls = set()
    assert len(re.findall(r'"cache_control"', json.dumps(body))) <= 4, "Anthropic takes four cache breakpoints"


def capture(name):
    return json.loads(next(path for path in CAPTURES if path.name.startswith(name)).read_text())["body"]


# -- Codex ---------------------------------------------------------------------------------


def test_the_codex_captures_are_all_here():
    assert len(CAPTURES) == 10


@pytest.mark.parametrize("path", CAPTURES, ids=lambda path: path.name.split("-POST")[0])
def test_every_codex_capture_becomes_a_messages_request_a_strict_server_accepts(path):
    body = json.loads(path.read_text())["body"]
    out, context = to_messages_request(validate_responses(body), SETTINGS)
    assert_valid_messages_request(out)
    assert out["system"][0]["text"].startswith("You are"), "Codex's system prompt is input[0], a developer message"
    assert out["stream"] is True and context.stream
    declared = {info["name"] for info in context.tools.values()}
    assert {"exec_command", "close_agent"} & declared and "web_search" not in declared


def test_codex_reasoning_echoed_back_keeps_thinking_on_across_a_tool_call():
    """reason_high_claude-01, with the reasoning item bridge would have served: the signed block goes
    back before the tool_use, so Anthropic keeps thinking on for the turn after the tool result."""
    body = capture("reason_high_claude-01")
    body["input"][4]["encrypted_content"] = encrypted_content(SIGNED)
    body["input"].append(developer("<permissions instructions>resumed</permissions instructions>"))
    out, context = to_messages_request(validate_responses(body), SETTINGS)
    assert_valid_messages_request(out)
    assert out["messages"][1]["content"][0] == SIGNED
    assert [block["type"] for block in out["messages"][1]["content"]] == ["thinking", "tool_use"]
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 16000} and "reasoning.effort" not in context.dropped
    assert out["messages"][2]["content"][-1]["text"].startswith("<permissions instructions>")


def test_codex_reasoning_from_another_model_is_dropped_and_thinking_left_off_for_that_turn():
    out, context = to_messages_request(validate_responses(capture("reason_high_claude-01")), SETTINGS)
    assert "input.4.encrypted_content" in context.dropped and "reasoning.effort" in context.dropped
    assert "thinking" not in out


def test_codex_apply_patch_history_is_a_tool_use_of_the_custom_tool():
    out, context = to_messages_request(validate_responses(capture("catalog_claude-01")), SETTINGS)
    use = out["messages"][1]["content"][0]
    assert use["name"] == "apply_patch" and use["input"] == {"input": capture("catalog_claude-01")["input"][4]["input"]}
    assert context.tools["apply_patch"] == {"kind": "custom", "name": "apply_patch", "namespace": None}


# -- stateless -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("previous_response_id", "resp_abc"), ("conversation", "conv_abc"), ("conversation", {"id": "conv_abc"})],
)
def test_previous_response_id_and_conversation_are_a_400_that_says_to_send_the_full_input(field, value):
    error = refused(request(**{field: value}))
    assert error.param == field and "full conversation in `input`" in error.message


@pytest.mark.parametrize("store", [True, False, None])
def test_store_is_accepted_and_ignored_and_the_response_says_nothing_was_stored(store):
    out, context = translate(store=store)
    assert_valid_messages_request(out)
    assert context.echo["store"] is False
    assert ("store" in context.dropped) is (store is True)


# -- system and turns ----------------------------------------------------------------------


def test_instructions_and_the_leading_developer_and_system_messages_become_the_system_prompt():
    out, _ = translate(
        developer("Rule one."),
        {"type": "message", "role": "system", "content": "Rule two."},
        user(),
        instructions="Be brief.",
    )
    assert out["system"] == [{"type": "text", "text": text} for text in ("Be brief.", "Rule one.", "Rule two.")]
    assert out["messages"] == [{"role": "user", "content": [{"type": "text", "text": user()["content"]}]}]


def test_a_developer_message_later_in_the_history_is_user_text_where_it_stands():
    out, _ = translate(
        developer("Rules."),
        user("hi"),
        assistant("Hello!"),
        developer("<permissions>"),
        user("<environment_context>"),
        user("now say bye"),
    )
    assert out["system"] == "Rules."
    assert out["messages"][2] == {
        "role": "user",
        "content": [{"type": "text", "text": t} for t in ("<permissions>", "<environment_context>", "now say bye")],
    }


def test_input_as_a_string_is_one_user_message():
    out, _ = to_messages_request(validate_responses({"model": "m", "input": "say hi"}), SETTINGS)
    assert out["messages"] == [{"role": "user", "content": [{"type": "text", "text": "say hi"}]}]


def test_a_message_without_type_is_a_message():
    out, _ = translate(
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "bye"}
    )
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_item_ids_and_statuses_are_ignored():
    plain, _ = translate(user(), call(), output())
    tagged, _ = translate(
        {**user(), "id": "msg_x", "status": "completed"},
        {**call(), "id": "fc_zzz"},
        {**output(), "id": "fco_1", "status": "completed"},
    )
    assert plain["messages"] == tagged["messages"]


def test_user_parts_become_text_image_and_document_blocks():
    out, _ = translate(
        user(
            [
                {"type": "input_text", "text": "Compare"},
                {"type": "input_image", "image_url": PNG, "detail": "high"},
                {"type": "input_image", "image_url": "https://example.com/a.jpg", "detail": "auto"},
                {"type": "input_file", "file_data": PDF, "filename": "report.pdf"},
                {"type": "input_file", "file_url": "https://example.com/b.pdf"},
            ]
        )
    )
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "Compare"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",", 1)[1]}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
        {
            "type": "document",
            "title": "report.pdf",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF.split(",", 1)[1]},
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/b.pdf"}},
    ]


def test_a_data_url_image_is_sent_with_the_type_its_bytes_show():
    data = base64.b64encode(b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(32)).decode()
    out, _ = translate(user([{"type": "input_image", "image_url": f"data:image/png;base64,{data}"}]))
    assert out["messages"][0]["content"][0]["source"]["media_type"] == "image/jpeg"


def test_assistant_output_text_and_refusal_parts_become_text():
    out, _ = translate(
        user(),
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Sunny.", "annotations": []},
                {"type": "refusal", "refusal": "I won't say more."},
            ],
        },
        user("ok"),
    )
    assert out["messages"][1]["content"] == [
        {"type": "text", "text": "Sunny."},
        {"type": "text", "text": "I won't say more."},
    ]


def test_consecutive_items_of_one_side_merge_into_alternating_turns():
    out, _ = translate(user("a"), user("b"), assistant("c"), call(), output(), user("d"))
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in out["messages"]] == [
        ("user", ["text", "text"]),
        ("assistant", ["text", "tool_use"]),
        ("user", ["tool_result", "text"]),
    ]


def test_a_history_that_opens_with_the_assistant_gets_a_user_turn_first():
    out, _ = translate(developer("Rules."), assistant("Ahoy! How can I help?"), user("A joke."))
    assert out["messages"][0] == {"role": "user", "content": [{"type": "text", "text": STARTED}]}
    assert_valid_messages_request(out)


def test_a_final_assistant_message_is_a_prefill_without_trailing_whitespace():
    out, _ = translate(user(), reasoning(), assistant("The weather is \n"))
    assert out["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "The weather is"}]}


@pytest.mark.parametrize("items", [[developer("Rules only.")], [user("")], []], ids=["developer", "empty", "none"])
def test_nothing_to_answer_is_a_400_before_translation(items):
    with pytest.raises(BridgeError) as caught:
        validate_responses({"model": "m", "input": items})
    assert caught.value.param == "input" and "nothing to answer" in caught.value.message


def test_messages_that_are_all_empty_text_are_a_400():
    error = refused(request(user([{"type": "input_text", "text": ""}]), assistant("")))
    assert error.param == "input" and "nothing to answer" in error.message


# -- tool calls ----------------------------------------------------------------------------


def test_function_call_and_output_become_tool_use_and_tool_result():
    out, _ = translate(
        user(),
        call(arguments='{"city": "Paris", "days": [1, 2], "id": 123456789012345678901}'),
        output(result="Sunny, 24C"),
        tools=[WEATHER],
    )
    assert out["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris", "days": [1, 2], "id": 123456789012345678901},
                }
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny, 24C"}]},
    ]


def test_an_output_of_parts_becomes_tool_result_blocks_and_an_empty_one_no_content():
    out, _ = translate(
        user(),
        call("a"),
        call("b"),
        output("a", [{"type": "input_text", "text": "shot:"}, {"type": "input_image", "image_url": PNG}]),
        output("b", ""),
        tools=[WEATHER],
    )
    assert out["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "a",
            "content": [
                {"type": "text", "text": "shot:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG.split(",", 1)[1]},
                },
            ],
        },
        {"type": "tool_result", "tool_use_id": "b"},
    ]


def test_custom_tool_call_is_tool_use_with_its_text_as_input_and_its_output_a_tool_result():
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
    out, _ = translate(
        user(),
        {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": patch},
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Exit code: 0"},
        tools=[APPLY_PATCH],
    )
    assert out["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_p", "name": "apply_patch", "input": {"input": patch}}
    ]
    assert out["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_p", "content": "Exit code: 0"}
    ]


def test_parallel_calls_become_one_assistant_turn_and_one_user_turn():
    out, _ = translate(user(), call("a"), call("b"), output("a", "sunny"), output("b", "windy"), tools=[WEATHER])
    assert_valid_messages_request(out)
    assert [b["id"] for b in out["messages"][1]["content"]] == ["a", "b"]
    assert [b["tool_use_id"] for b in out["messages"][2]["content"]] == ["a", "b"]


def test_a_message_between_a_call_and_its_output_comes_after_the_tool_result():
    out, _ = translate(user(), call(), developer("<permissions>"), output(), tools=[WEATHER])
    assert_valid_messages_request(out)
    assert [b["type"] for b in out["messages"][2]["content"]] == ["tool_result", "text"]


@pytest.mark.parametrize("call_id", ["call_abc-123", "functions.get_weather:0", "call/1 2"])
def test_call_ids_are_cleaned_for_anthropic_identically_for_the_call_and_its_output(call_id):
    out, _ = translate(user(), call(call_id), output(call_id), tools=[WEATHER])
    use_id = out["messages"][1]["content"][0]["id"]
    assert ANTHROPIC_ID.match(use_id) and out["messages"][2]["content"][0]["tool_use_id"] == use_id


def test_an_output_that_answers_no_call_is_a_400_naming_the_item():
    error = refused(request(user(), assistant("Hi"), output("call_9")))
    assert error.param == "input.2.call_id" and "answers no call" in error.message


@pytest.mark.parametrize(
    "later",
    [[assistant("Done"), user("next")], [call("c"), output("c"), output("b")], [reasoning(), assistant("Done")]],
    ids=["message", "call", "reasoning"],
)
def test_a_call_left_unanswered_before_the_conversation_goes_on_is_a_400_naming_the_item(later):
    error = refused(request(user(), call("a"), call("b"), output("a"), *later))
    assert error.param == "input.2.call_id" and "'b' has no function_call_output" in error.message


def test_a_call_left_unanswered_at_the_end_is_a_400_naming_the_item():
    error = refused(request(user(), {"type": "custom_tool_call", "call_id": "p", "name": "apply_patch", "input": "x"}))
    assert error.param == "input.1.call_id" and "custom_tool_call_output" in error.message


def test_two_calls_of_one_turn_with_the_same_call_id_are_a_400():
    assert refused(request(user(), call("a"), call("a"), output("a"))).param == "input.2.call_id"


# -- reasoning -----------------------------------------------------------------------------


def test_reasoning_becomes_the_signed_thinking_block_before_its_turns_tool_use():
    out, context = translate(
        user(),
        reasoning(),
        assistant("Let me check."),
        call(),
        output(),
        tools=[WEATHER],
        reasoning={"effort": "medium"},
    )
    assert_valid_messages_request(out)
    assert out["messages"][1]["content"][0] == SIGNED
    assert [b["type"] for b in out["messages"][1]["content"]] == ["thinking", "text", "tool_use"]
    assert out["thinking"]["type"] == "enabled" and not context.dropped


def test_a_reasoning_item_that_comes_after_its_turns_tool_use_still_goes_before_it():
    out, _ = translate(user(), call(), reasoning(), output(), tools=[WEATHER], reasoning={"effort": "low"})
    assert [b["type"] for b in out["messages"][1]["content"]] == ["thinking", "tool_use"]
    assert "thinking" in out


def test_redacted_thinking_travels_back_as_it_came():
    out, _ = translate(user(), reasoning(REDACTED), call(), output(), tools=[WEATHER], reasoning={"effort": "low"})
    assert out["messages"][1]["content"][0] == REDACTED


@pytest.mark.parametrize("value", ["gAAAAB-FAKE-ENCRYPTED-1770b1", None, "bridge.v1.bm90IGpzb24"])
def test_reasoning_whose_encrypted_content_does_not_decode_is_dropped_and_named(value):
    out, context = translate(user(), reasoning(encrypted_content=value), assistant("Hi"), user("bye"))
    assert "input.1.encrypted_content" in context.dropped
    assert [b["type"] for b in out["messages"][1]["content"]] == ["text"]


def test_reasoning_whose_turn_says_nothing_is_dropped_and_named():
    out, context = translate(user(), reasoning(), user("are you there?"))
    assert_valid_messages_request(out)
    assert context.dropped == ["input.1"] and len(out["messages"]) == 1


# -- tools ---------------------------------------------------------------------------------


def test_function_tools_become_anthropic_tools():
    out, context = translate(tools=[WEATHER, {"type": "function", "name": "now", "parameters": None, "strict": None}])
    assert out["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER["parameters"]},
        {"name": "now", "input_schema": {"type": "object"}},
    ]
    assert context.tools == {
        "get_weather": {"kind": "function", "name": "get_weather", "namespace": None},
        "now": {"kind": "function", "name": "now", "namespace": None},
    }


def test_strict_function_tools_are_named_as_dropped():
    _, context = translate(tools=[{**WEATHER, "strict": True}])
    assert context.dropped == ["tools.strict"]


def test_a_custom_tool_takes_one_string_input_whose_description_holds_the_grammar():
    out, context = translate(tools=[APPLY_PATCH, {"type": "custom", "name": "note"}])
    patch, note = out["tools"]
    assert patch["name"] == "apply_patch" and patch["description"] == APPLY_PATCH["description"]
    assert patch["input_schema"]["required"] == ["input"] and set(patch["input_schema"]["properties"]) == {"input"}
    assert patch["input_schema"]["properties"]["input"]["type"] == "string"
    assert "lark grammar" in patch["input_schema"]["properties"]["input"]["description"]
    assert GRAMMAR in patch["input_schema"]["properties"]["input"]["description"]
    assert GRAMMAR not in json.dumps(note)
    assert context.tools["note"] == {"kind": "custom", "name": "note", "namespace": None}


def test_namespace_tools_are_flattened_and_recorded_for_the_way_back():
    out, context = translate(tools=[AGENTS])
    assert out["tools"] == [
        {
            "name": "multi_agent_v1__close_agent",
            "description": "Tools for managing sub-agents.\n\nClose an agent.",
            "input_schema": AGENTS["tools"][0]["parameters"],
        }
    ]
    assert context.tools == {
        "multi_agent_v1__close_agent": {"kind": "function", "name": "close_agent", "namespace": "multi_agent_v1"}
    }


def test_a_function_call_carrying_a_namespace_maps_to_the_flattened_name():
    out, _ = translate(
        user(),
        call(name="close_agent", arguments='{"target": "a1"}', namespace="multi_agent_v1"),
        output(),
        tools=[AGENTS],
    )
    assert_valid_messages_request(out)
    assert out["messages"][1]["content"][0]["name"] == "multi_agent_v1__close_agent"


def test_a_flattened_name_beyond_64_characters_is_shortened_and_recorded():
    namespace = {**AGENTS, "name": "n" * 60}
    out, context = translate(user(), call(name="close_agent", namespace="n" * 60), output(), tools=[namespace])
    name = out["tools"][0]["name"]
    assert TOOL_NAME.match(name) and out["messages"][1]["content"][0]["name"] == name
    assert context.tools[name] == {"kind": "function", "name": "close_agent", "namespace": "n" * 60}


def test_a_top_level_tool_and_a_namespaced_one_flattening_alike_get_distinct_names():
    clash = {**WEATHER, "name": "multi_agent_v1__close_agent"}
    out, context = translate(
        user(), call(name="close_agent", namespace="multi_agent_v1"), output(), tools=[clash, AGENTS]
    )
    assert_valid_messages_request(out)
    back = {name: (info["namespace"], info["name"]) for name, info in context.tools.items()}
    assert back["multi_agent_v1__close_agent"] == (None, "multi_agent_v1__close_agent")
    assert back[out["messages"][1]["content"][0]["name"]] == ("multi_agent_v1", "close_agent")


def test_a_tool_declared_twice_is_a_400_naming_it():
    assert refused(request(tools=[WEATHER, WEATHER])).param == "tools.1.name"


def test_hosted_tools_are_dropped_and_named():
    out, context = translate(
        tools=[
            WEATHER,
            {"type": "web_search", "external_web_access": True},
            {"type": "file_search", "vector_store_ids": ["vs_1"]},
        ]
    )
    assert [t["name"] for t in out["tools"]] == ["get_weather"]
    assert context.dropped == ["tools.web_search", "tools.file_search"]


def test_additional_tools_items_declare_their_tools_and_carry_nothing_else():
    """Codex's code mode (OpenAI slugs) declares its tools in an input item rather than in `tools`."""
    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [{"type": "namespace", "name": "functions", "description": "", "tools": [APPLY_PATCH]}],
    }
    out, context = translate(item, developer("Rules."), user())
    assert out["system"] == "Rules." and len(out["messages"]) == 1
    assert context.tools == {
        "functions__apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": "functions"}
    }
    assert not context.dropped


def test_tool_search_and_defer_loading_are_dropped_since_every_tool_goes_inline():
    deferred = {**WEATHER, "defer_loading": True}
    loaded = {"type": "tool_search_output", "call_id": "ts_1", "tools": [{**WEATHER, "name": "get_time"}]}
    out, context = translate(
        user(),
        {"type": "tool_search_call", "call_id": "ts_1", "arguments": {"query": "t"}},
        loaded,
        tools=[deferred, {"type": "tool_search", "execution": "client"}],
    )
    assert [t["name"] for t in out["tools"]] == ["get_weather", "get_time"]
    assert context.dropped == ["tools.defer_loading", "tools.tool_search", "input.1", "input.2"]


@pytest.mark.parametrize(
    "choice, expected",
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "name": "get_weather"}, {"type": "tool", "name": "get_weather"}),
        ({"type": "function", "name": "close_agent"}, {"type": "tool", "name": "multi_agent_v1__close_agent"}),
        ({"type": "custom", "name": "apply_patch"}, {"type": "tool", "name": "apply_patch"}),
    ],
)
def test_tool_choice_maps(choice, expected):
    out, _ = translate(tools=[WEATHER, APPLY_PATCH, AGENTS], tool_choice=choice)
    assert out["tool_choice"] == expected


@pytest.mark.parametrize("mode, expected", [("auto", "auto"), ("required", "any")])
def test_allowed_tools_sends_only_the_tools_it_lists(mode, expected):
    choice = {
        "type": "allowed_tools",
        "mode": mode,
        "tools": [
            {"type": "custom", "name": "apply_patch"},
            {"type": "namespace", "name": "multi_agent_v1"},
            {"type": "web_search"},
        ],
    }
    out, _ = translate(tools=[WEATHER, APPLY_PATCH, AGENTS], tool_choice=choice)
    assert [t["name"] for t in out["tools"]] == ["apply_patch", "multi_agent_v1__close_agent"]
    assert out["tool_choice"] == {"type": expected}


@pytest.mark.parametrize(
    "choice, expected",
    [
        (None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),
    ],
)
def test_parallel_tool_calls_false_disables_parallel_tool_use(choice, expected):
    out, _ = translate(tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False)
    assert out["tool_choice"] == expected


# -- text.format ---------------------------------------------------------------------------


def test_text_format_json_schema_is_a_forced_tool_whose_input_is_the_answer():
    schema = {"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}
    out, context = translate(
        text={"format": {"type": "json_schema", "name": "codex_output_schema", "strict": True, "schema": schema}}
    )
    assert out["tools"] == [
        {
            "name": "codex_output_schema",
            "input_schema": schema,
            "description": "Respond with your answer in this JSON format.",
        }
    ]
    assert out["tool_choice"] == {"type": "tool", "name": "codex_output_schema"}
    assert context.json_tool == "codex_output_schema" and context.dropped == ["text.format.strict"]


def test_text_format_json_object_beside_tools_lets_the_model_call_any_tool():
    out, context = translate(tools=[WEATHER], text={"format": {"type": "json_object"}})
    assert [t["name"] for t in out["tools"]] == ["get_weather", JSON_OBJECT_TOOL]
    assert out["tool_choice"] == {"type": "any"} and context.json_tool == JSON_OBJECT_TOOL


def test_text_format_named_like_a_tool_is_a_400():
    error = refused(
        request(
            tools=[WEATHER],
            text={"format": {"type": "json_schema", "name": "get_weather", "schema": {"type": "object"}}},
        )
    )
    assert error.param == "text.format"


def test_text_format_text_adds_no_tool():
    out, context = translate(text={"format": {"type": "text"}})
    assert "tools" not in out and context.json_tool is None


# -- limits, reasoning, sampling -----------------------------------------------------------


def test_max_output_tokens_is_max_tokens():
    out, _ = translate(max_output_tokens=1234)
    assert out["max_tokens"] == 1234


def test_without_max_output_tokens_the_responses_default_is_max_tokens():
    out, _ = translate(settings=Settings(responses_default_max_tokens=20000, default_max_tokens=100))
    assert out["max_tokens"] == 20000


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high", "xhigh", "max"])
def test_reasoning_effort_is_a_thinking_budget_within_max_tokens(effort):
    out, _ = translate(reasoning={"effort": effort})
    assert out["max_tokens"] == 32000, "max_output_tokens (or the default) bounds thinking and answer together"
    budget = THINKING_BUDGETS["xhigh" if effort == "max" else effort]
    assert out["thinking"] == {"type": "enabled", "budget_tokens": min(budget, 16000)}


def test_effort_max_takes_the_largest_budget():
    out, _ = translate(reasoning={"effort": "max"}, max_output_tokens=64000)
    assert out["thinking"]["budget_tokens"] == THINKING_BUDGETS["xhigh"]


def test_a_small_max_output_tokens_still_leaves_room_for_the_minimum_budget():
    out, _ = translate(reasoning={"effort": "high"}, max_output_tokens=1500)
    assert out["thinking"]["budget_tokens"] == MIN_THINKING_BUDGET < out["max_tokens"]


@pytest.mark.parametrize("reasoning", [{"effort": "none"}, {"summary": "auto"}, {}, None])
def test_no_effort_or_effort_none_leaves_thinking_off(reasoning):
    out, context = translate(reasoning=reasoning)
    assert "thinking" not in out and not context.dropped


def test_thinking_is_left_off_and_named_when_the_last_tool_turn_carries_none():
    out, context = translate(user(), call(), output(), tools=[WEATHER], reasoning={"effort": "high"})
    assert "thinking" not in out and context.dropped == ["reasoning.effort"]


@pytest.mark.parametrize(
    "reasoning, summary",
    [
        ({"summary": "auto"}, True),
        ({"summary": "detailed"}, True),
        ({"generate_summary": "concise"}, True),
        ({"effort": "low"}, False),
        (None, False),
    ],
)
def test_reasoning_summary_asks_for_thinking_as_summary_text(reasoning, summary):
    _, context = translate(reasoning=reasoning)
    assert context.summary is summary


def test_temperature_is_capped_at_1_and_top_p_dropped_beside_it():
    out, context = translate(temperature=1.7, top_p=0.5)
    assert out["temperature"] == 1.0 and "top_p" not in out and context.dropped == ["top_p"]


def test_thinking_takes_the_default_sampling():
    out, context = translate(temperature=0.2, reasoning={"effort": "low"})
    assert "temperature" not in out and context.dropped == ["temperature"]


@pytest.mark.parametrize(
    "params, who",
    [({"user": "ana@example.com"}, "ana@example.com"), ({"safety_identifier": "u-1", "user": "other"}, "u-1")],
)
def test_user_and_safety_identifier_become_a_hashed_metadata_user_id(params, who):
    out, _ = translate(**params)
    assert out["metadata"] == {"user_id": hashlib.sha256(who.encode()).hexdigest()}


def test_prompt_caching_marks_tools_system_the_previous_turn_and_the_conversation_end():
    out, context = translate(
        developer("Rules."),
        user(),
        call(),
        output(),
        user("and tomorrow?"),
        tools=[WEATHER, APPLY_PATCH],
        prompt_cache_key="thread-1",
        settings=dataclasses.replace(SETTINGS, prompt_cache="5m"),
    )
    assert_valid_messages_request(out)
    marked = {"type": "ephemeral"}
    assert out["tools"][-1]["cache_control"] == marked and "cache_control" not in out["tools"][0]
    assert out["system"] == [{"type": "text", "text": "Rules.", "cache_control": marked}]
    assert out["messages"][0]["content"][-1]["cache_control"] == marked
    assert out["messages"][-1]["content"][-1]["cache_control"] == marked
    assert json.dumps(out).count("cache_control") == 4
    assert context.dropped == [], "prompt_cache_key asks for what happens anyway"


def test_with_caching_off_nothing_is_marked_and_prompt_cache_key_is_named():
    out, context = translate(developer("Rules."), user(), tools=[WEATHER], prompt_cache_key="thread-1")
    assert "cache_control" not in json.dumps(out)
    assert context.dropped == ["prompt_cache_key"]


@pytest.mark.parametrize(
    "params, named",
    [
        ({"metadata": {"team": "a"}}, "metadata"),
        ({"client_metadata": {"thread_id": "t"}}, "client_metadata"),
        ({"service_tier": "flex"}, "service_tier"),
        ({"truncation": "auto"}, "truncation"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"max_tool_calls": 3}, "max_tool_calls"),
        ({"stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation"),
        ({"include": ["reasoning.encrypted_content", "web_search_call.results"]}, "include"),
        ({"reasoning": {"context": "all_turns"}}, "reasoning.context"),
        ({"reasoning": {"mode": "pro"}}, "reasoning.mode"),
        ({"prompt_cache_retention": "24h"}, "prompt_cache_retention"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_fields_without_an_anthropic_equivalent_are_named_as_dropped(params, named):
    out, context = translate(**params)
    assert context.dropped == [named]
    assert_valid_messages_request(out)


@pytest.mark.parametrize(
    "params",
    [
        {"truncation": "disabled"},
        {"include": ["reasoning.encrypted_content"]},
        {"stream_options": {"include_obfuscation": False}},
        {"store": False},
        {"background": False},
        {"metadata": {}},
    ],
)
def test_fields_that_ask_for_what_happens_anyway_are_not_named(params):
    _, context = translate(**params)
    assert context.dropped == []


def test_echo_repeats_the_request_parameters_with_openai_defaults():
    _, context = translate()
    assert context.echo == {
        "instructions": None,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "reasoning": {"effort": None, "summary": None},
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "metadata": {},
        "store": False,
        "truncation": "disabled",
        "user": None,
        "safety_identifier": None,
        "prompt_cache_key": None,
        "top_logprobs": 0,
        "background": False,
        "service_tier": "default",
        "previous_response_id": None,
    }


def test_echo_repeats_what_the_client_sent():
    params = {
        "instructions": "Be brief.",
        "tools": [WEATHER],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.3,
        "top_p": 0.9,
        "max_output_tokens": 500,
        "reasoning": {"summary": "auto"},
        "text": {"format": {"type": "json_object"}, "verbosity": "low"},
        "metadata": {"k": "v"},
        "truncation": "auto",
        "user": "u1",
        "prompt_cache_key": "t1",
    }
    _, context = translate(**params)
    assert {name: context.echo[name] for name in params} == {**params, "reasoning": {"effort": None, "summary": "auto"}}


def test_context_names_the_response_the_model_and_the_stream():
    out, context = translate(stream=True)
    assert re.fullmatch(r"resp_[0-9a-f]{32}", context.response_id) and context.created_at > 1_700_000_000
    assert context.model == "claude-sonnet-4-5" and context.stream and out["stream"] is True
    assert translate()[1].response_id != context.response_id


def test_the_model_name_is_mapped_and_the_client_name_kept():
    out, context = to_messages_request(validate_responses({"model": "gpt-5.5", "input": "hi"}), SETTINGS)
    assert out["model"] == "claude-sonnet-4-5" and context.model == "gpt-5.5"


# -- refused -------------------------------------------------------------------------------

# (request, field path the 400 must name, words the message must contain)
BAD_REQUESTS = {
    "stored prompt": (request(prompt={"id": "pmpt_1"}), "prompt", "stored prompts"),
    "background": (request(background=True), "background", "full conversation"),
    "item reference": (request(user(), {"type": "item_reference", "id": "msg_1"}), "input.1.type", "stores nothing"),
    "compaction item": (
        request({"type": "compaction", "encrypted_content": "x"}, user()),
        "input.0.type",
        "only OpenAI",
    ),
    "unknown item": (
        request({"type": "computer_call_output", "call_id": "c"}),
        "input.0.type",
        "expected one of: additional_tools, custom_tool_call",
    ),
    "message without role": (request({"type": "message", "content": "hi"}), "input.0.role", "missing"),
    "audio input": (request(user([{"type": "input_audio", "input_audio": {}}])), "input.0.content.0.type", "audio"),
    "unknown part": (
        request(user([{"type": "input_video"}])),
        "input.0.content.0.type",
        "expected one of: input_file, input_image, input_text",
    ),
    "assistant input_text": (
        request(user(), {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "x"}]}),
        "input.1.content.0.type",
        "output_text",
    ),
    "image file_id": (
        request(user([{"type": "input_image", "file_id": "file-1"}])),
        "input.0.content.0.file_id",
        "uploaded to OpenAI",
    ),
    "image scheme": (
        request(user([{"type": "input_image", "image_url": "ftp://x/a.png"}])),
        "input.0.content.0.image_url",
        "http(s) URL",
    ),
    "image type": (
        request(user([{"type": "input_image", "image_url": "data:image/bmp;base64,Qk0="}])),
        "input.0.content.0.image_url",
        "image/bmp",
    ),
    "file file_id": (
        request(user([{"type": "input_file", "file_id": "file-1"}])),
        "input.0.content.0.file_id",
        "uploaded to OpenAI",
    ),
    "file without data": (
        request(user([{"type": "input_file", "filename": "a.pdf"}])),
        "input.0.content.0.file_data",
        "file_url",
    ),
    "non-PDF file": (
        request(user([{"type": "input_file", "file_data": "data:application/zip;base64,UEsDBA=="}])),
        "input.0.content.0.file_data",
        "application/pdf",
    ),
    "arguments not JSON": (
        request(user(), call(arguments="{city: Paris}"), output()),
        "input.1.arguments",
        "not valid JSON",
    ),
    "arguments not an object": (request(user(), call(arguments="[1]"), output()), "input.1.arguments", "array"),
    "call without call_id": (
        request(user(), {"type": "function_call", "name": "f", "arguments": "{}"}),
        "input.1.call_id",
        "required",
    ),
    "output of a number": (request(user(), call(), output(result=42)), "input.2.output", "string"),
    "input of a number": (request(input=42), "input", "string"),
    "model missing": ({"input": "hi"}, "model", "required"),
    "input missing": ({"model": "m"}, "input", "required"),
    "temperature as a string": (request(temperature="0.5"), "temperature", "number"),
    "temperature above 2": (request(temperature=3), "temperature", "2"),
    "top_p above 1": (request(top_p=2), "top_p", "1"),
    "max_output_tokens zero": (request(max_output_tokens=0), "max_output_tokens", "1"),
    "max_output_tokens fractional": (request(max_output_tokens=2.5), "max_output_tokens", "integer"),
    "stream as a string": (request(stream="true"), "stream", "boolean"),
    "parallel_tool_calls as 1": (request(parallel_tool_calls=1), "parallel_tool_calls", "boolean"),
    "top_logprobs": (request(top_logprobs=3), "top_logprobs", "log probabilities"),
    "logprobs include": (request(include=["message.output_text.logprobs"]), "include", "log probabilities"),
    "truncation value": (request(truncation="sometimes"), "truncation", "auto"),
    "metadata value": (request(metadata={"a": 1}), "metadata.a.value", "string"),
    "reasoning effort": (request(reasoning={"effort": "extreme"}), "reasoning.effort", "medium"),
    "reasoning summary": (request(reasoning={"summary": "long"}), "reasoning.summary", "detailed"),
    "text format": (request(text={"format": {"type": "xml"}}), "text.format.type", "json_schema"),
    "json schema root": (
        request(text={"format": {"type": "json_schema", "name": "a", "schema": {"type": "array"}}}),
        "text.format.schema",
        "object",
    ),
    "json schema name": (
        request(text={"format": {"type": "json_schema", "name": "a b", "schema": {}}}),
        "text.format.name",
        "a-z",
    ),
    "unknown tool type": (request(tools=[{"type": "functoin", "name": "f"}]), "tools.0.type", "expected one of"),
    "function tool name": (request(tools=[{**WEATHER, "name": "get weather"}]), "tools.0.name", "a-z"),
    "custom tool syntax": (
        request(tools=[{**APPLY_PATCH, "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}}]),
        "tools.0.format.syntax",
        "lark",
    ),
    "namespace without tools": (request(tools=[{"type": "namespace", "name": "ns"}]), "tools.0.tools", "required"),
    "namespace of hosted tools": (
        request(tools=[{"type": "namespace", "name": "ns", "tools": [{"type": "mcp"}]}]),
        "tools.0.tools.0.type",
        "custom, function",
    ),
    "tool_choice any": (request(tools=[WEATHER], tool_choice="any"), "tool_choice", "required"),
    "tool_choice hosted": (
        request(tools=[WEATHER], tool_choice={"type": "web_search_preview"}),
        "tool_choice.type",
        "hosted tool",
    ),
    "tool_choice undeclared": (
        request(tools=[WEATHER], tool_choice={"type": "function", "name": "nope"}),
        "tool_choice.name",
        "no function tool named 'nope'",
    ),
    "tool_choice of the wrong kind": (
        request(tools=[WEATHER], tool_choice={"type": "custom", "name": "get_weather"}),
        "tool_choice.name",
        "no custom tool",
    ),
    "allowed_tools mode": (
        request(tools=[WEATHER], tool_choice={"type": "allowed_tools", "mode": "none", "tools": []}),
        "tool_choice.mode",
        "required",
    ),
}


@pytest.mark.parametrize("name", BAD_REQUESTS)
def test_a_bad_request_is_a_400_naming_the_field(name):
    body, path, words = BAD_REQUESTS[name]
    error = refused(body)
    assert error.param == path, error.message
    assert words in error.message and error.message.startswith(path)


def test_every_bad_field_is_named_in_one_400():
    error = refused(request(user(), output("ghost"), temperature=5, tool_choice="any"))
    assert error.param == "temperature"
    assert "tool_choice" in error.message
    body = request(user(), output("ghost"), user([{"type": "input_file"}]))
    error = refused(body)
    assert error.param == "input.1.call_id" and "input.2.content.0.file_data" in error.message


def test_validation_leaves_the_clients_body_as_it_was():
    body = capture("catalog_claude-01")
    kept = copy.deepcopy(body)
    to_messages_request(validate_responses(body), SETTINGS)
    assert body == kept
