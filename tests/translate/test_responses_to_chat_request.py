"""Responses request -> Chat Completions request, one test per rule
(bridge/translate/responses_to_chat/request.py), on bodies validated as the front validates them."""

import copy
import json

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.reasoning import chat_reasoning, encrypted_content
from bridge.protocols.schemas.openai import validate_chat
from bridge.protocols.schemas.responses import validate_responses
from bridge.settings import Settings
from bridge.translate.responses_to_chat.request import to_chat_request
from tests.fake_upstream import FIXTURES

CAPTURES = sorted((FIXTURES / "clients/codex-0.171.0/captures").glob("*.json"))
SETTINGS = Settings(model_map=(("codex-local", "qwen3-coder"),))
PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
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
    "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}],
}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"


def user(content="Run echo hi"):
    return {"type": "message", "role": "user", "content": content}


def developer(text):
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call(call_id, cmd="echo hi", **extra):
    arguments = json.dumps({"cmd": cmd})
    return {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": arguments, **extra}


def output(call_id, value="hi\n"):
    return {"type": "function_call_output", "call_id": call_id, "output": value}


def reasoning(encrypted):
    return {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": encrypted}


def translate(settings=SETTINGS, **body):
    body = {"model": "codex-local", "input": [user()], **body}
    return to_chat_request(validate_responses(copy.deepcopy(body)), settings)


def messages(**body):
    return translate(**body)[0]["messages"]


# -- messages ------------------------------------------------------------------------------


def test_instructions_and_the_leading_developer_messages_are_one_system_message():
    sent = messages(instructions="Be brief.", input=[developer("You are Codex."), developer("Skills."), user()])
    assert sent == [
        {"role": "system", "content": "Be brief.\n\nYou are Codex.\n\nSkills."},
        {"role": "user", "content": "Run echo hi"},
    ]


def test_a_developer_message_later_in_the_history_is_user_text_where_it_stands():
    sent = messages(input=[user("one"), assistant("ok"), developer("<permissions>"), user("two")])
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[2]["content"] == "<permissions>\n\ntwo"


def test_consecutive_user_messages_are_one_user_message():
    sent = messages(input=[developer("sys"), user("<environment_context>"), user("say hi")])
    assert sent[1:] == [{"role": "user", "content": "<environment_context>\n\nsay hi"}]


def test_images_and_inline_pdfs_are_chat_parts_with_the_image_detail_chat_knows():
    content = [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": PNG, "detail": "high"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "original"},
        {"type": "input_file", "file_data": PDF, "filename": "a report?.pdf"},
    ]
    [sent] = messages(input=[user(content)])
    assert sent["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "file", "file": {"filename": "a report_.pdf", "file_data": PDF}},
    ]


def test_a_pdf_by_url_is_a_400_naming_it():
    with pytest.raises(BridgeError) as raised:
        translate(input=[user([{"type": "input_file", "file_url": "https://example.com/a.pdf"}])])
    assert raised.value.status == 400 and raised.value.param == "input.0.content.0.file_url"


def test_parallel_calls_are_one_assistant_message_and_their_outputs_tool_messages():
    """Codex sends call, call, output, output; the arguments go back as the model wrote them."""
    sent = messages(
        tools=[EXEC],
        input=[
            user(),
            assistant("Running both."),
            call("call_a"),
            call("call_b", "ls"),
            output("call_a"),
            output("call_b", "a.txt"),
        ],
    )
    assert sent[1] == {
        "role": "assistant",
        "content": "Running both.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "exec_command", "arguments": '{"cmd": "echo hi"}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "exec_command", "arguments": '{"cmd": "ls"}'}},
        ],
    }
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "hi\n"},
        {"role": "tool", "tool_call_id": "call_b", "content": "a.txt"},
    ]


def test_a_user_message_between_a_call_and_its_output_follows_the_tool_message():
    sent = messages(tools=[EXEC], input=[user(), call("call_a"), user("hurry"), output("call_a")])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[3]["content"] == "hurry"


def test_an_outputs_text_parts_are_the_tool_message_and_its_images_follow_in_a_user_message():
    parts = [{"type": "input_text", "text": "a screenshot:"}, {"type": "input_image", "image_url": PNG}]
    sent = messages(tools=[EXEC], input=[user(), call("call_a"), output("call_a", parts)])
    assert sent[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "a screenshot:"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "(attachments of tool result call_a)"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ],
        },
    ]


def test_call_ids_past_40_characters_are_hashed_the_same_for_the_call_and_its_output():
    long = "call_" + "x" * 60
    sent = messages(tools=[EXEC], input=[user(), call(long), output(long)])
    sent_id = sent[1]["tool_calls"][0]["id"]
    assert len(sent_id) <= 40 and sent[2]["tool_call_id"] == sent_id


# -- reasoning -----------------------------------------------------------------------------

HISTORY = Settings(model_map=(), openai_reasoning_history=True)


def test_a_chat_upstreams_reasoning_goes_back_as_reasoning_content_where_the_deployment_wants_it():
    history = [user(), reasoning(chat_reasoning("I should run it.")), call("call_a"), output("call_a")]
    body, context = translate(HISTORY, tools=[EXEC], input=history)
    assert body["messages"][1]["reasoning_content"] == "I should run it."
    assert context.dropped == []


def test_without_reasoning_history_the_reasoning_is_left_out_unnamed():
    body, context = translate(
        tools=[EXEC], input=[user(), reasoning(chat_reasoning("thought")), call("call_a"), output("call_a")]
    )
    assert "reasoning_content" not in body["messages"][1] and context.dropped == []


@pytest.mark.parametrize(
    "encrypted",
    [
        "gAAAAABoVxFp-an-openai-encrypted-reasoning",
        encrypted_content({"type": "thinking", "thinking": "hm", "signature": "EqQBsig=="}),
        None,
    ],
    ids=["openai", "anthropic-thinking", "none"],
)
def test_reasoning_that_is_not_a_chat_upstreams_is_dropped_and_named(encrypted):
    history = [user(), reasoning(encrypted), call("call_a"), output("call_a")]
    body, context = translate(HISTORY, tools=[EXEC], input=history)
    assert "reasoning_content" not in body["messages"][1]
    assert context.dropped == ["input.1.encrypted_content"]


def test_reasoning_no_assistant_message_follows_is_dropped_and_named():
    _, context = translate(HISTORY, input=[user("a"), reasoning(chat_reasoning("hm")), user("b")])
    assert context.dropped == ["input.1"]


# -- tools ---------------------------------------------------------------------------------


def test_function_tools_are_chat_functions_and_strict_goes_only_when_true():
    body, _ = translate(
        tools=[EXEC, {**EXEC, "name": "strict_one", "strict": True}, {"type": "function", "name": "bare"}]
    )
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "exec_command", "parameters": EXEC["parameters"], "description": "Runs a command."},
        },
        {
            "type": "function",
            "function": {
                "name": "strict_one",
                "parameters": EXEC["parameters"],
                "description": "Runs a command.",
                "strict": True,
            },
        },
        {"type": "function", "function": {"name": "bare", "parameters": {"type": "object", "properties": {}}}},
    ]


def test_a_custom_tool_is_a_function_taking_its_input_text_and_its_calls_carry_that_text():
    history = [
        user(),
        {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done!"},
    ]
    body, context = translate(tools=[APPLY_PATCH], input=history)
    [tool] = body["tools"]
    assert tool["function"]["name"] == "apply_patch" and tool["function"]["parameters"]["required"] == ["input"]
    assert GRAMMAR in tool["function"]["parameters"]["properties"]["input"]["description"]
    assert json.loads(body["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_p", "content": "Done!"}
    assert context.tools["apply_patch"] == {"kind": "custom", "name": "apply_patch", "namespace": None}


def test_namespaced_tools_are_flattened_and_their_calls_named_the_same():
    history = [
        user(),
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "close_agent",
            "namespace": "multi_agent_v1",
            "arguments": "{}",
        },
        output("c1", "closed"),
    ]
    body, context = translate(tools=[AGENTS], input=history)
    assert body["tools"][0]["function"]["name"] == "multi_agent_v1__close_agent"
    assert body["tools"][0]["function"]["description"] == "Tools for managing sub-agents."
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__close_agent"
    assert context.tools["multi_agent_v1__close_agent"]["namespace"] == "multi_agent_v1"


def test_hosted_tools_are_dropped_and_named():
    body, context = translate(
        tools=[EXEC, {"type": "web_search", "external_web_access": True}, {"type": "file_search"}]
    )
    assert [tool["function"]["name"] for tool in body["tools"]] == ["exec_command"]
    assert context.dropped == ["tools.web_search", "tools.file_search"]


@pytest.mark.parametrize(
    "choice, sent",
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ({"type": "function", "name": "exec_command"}, {"type": "function", "function": {"name": "exec_command"}}),
        ({"type": "custom", "name": "apply_patch"}, {"type": "function", "function": {"name": "apply_patch"}}),
    ],
)
def test_tool_choice_is_chats(choice, sent):
    body, _ = translate(tools=[EXEC, APPLY_PATCH], tool_choice=choice)
    assert body["tool_choice"] == sent


def test_allowed_tools_sends_only_the_tools_it_lists_with_its_mode():
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "custom", "name": "apply_patch"}]}
    body, _ = translate(tools=[EXEC, APPLY_PATCH], tool_choice=choice)
    assert [tool["function"]["name"] for tool in body["tools"]] == ["apply_patch"] and body["tool_choice"] == "required"


def test_a_tool_choice_with_no_tool_left_is_dropped_and_named():
    body, context = translate(tools=[{"type": "web_search"}], tool_choice="required")
    assert "tools" not in body and "tool_choice" not in body and "tool_choice" in context.dropped


def test_parallel_tool_calls_false_is_sent_and_true_left_to_the_default():
    assert translate(tools=[EXEC], parallel_tool_calls=False)[0]["parallel_tool_calls"] is False
    assert "parallel_tool_calls" not in translate(tools=[EXEC], parallel_tool_calls=True)[0]


# -- the rest --------------------------------------------------------------------------------


def test_text_format_is_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    spec = {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
    assert translate(text={"format": spec})[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert translate(text={"format": {"type": "json_object"}})[0]["response_format"] == {"type": "json_object"}
    assert "response_format" not in translate(text={"format": {"type": "text"}})[0]


@pytest.mark.parametrize(
    "effort, sent", [("none", "low"), ("minimal", "low"), ("medium", "medium"), ("xhigh", "high"), ("max", "high")]
)
def test_reasoning_effort_is_chats_where_the_deployment_takes_it(effort, sent):
    on = Settings(model_map=(), openai_reasoning_effort=True)
    assert translate(on, reasoning={"effort": effort})[0]["reasoning_effort"] == sent


def test_reasoning_effort_is_dropped_and_named_where_the_deployment_does_not_take_it():
    body, context = translate(reasoning={"effort": "high", "summary": "auto"})
    assert "reasoning_effort" not in body and context.dropped == ["reasoning.effort"] and context.summary


@pytest.mark.parametrize("param", ["max_completion_tokens", "max_tokens"])
def test_max_output_tokens_is_the_deployments_max_tokens_param(param):
    body, _ = translate(Settings(model_map=(), openai_max_tokens_param=param), max_output_tokens=500)
    assert body[param] == 500
    assert not {"max_tokens", "max_completion_tokens"} & set(translate()[0])  # the server's own default


def test_a_stream_asks_for_the_usage_chunk_unless_switched_off_and_counts_its_input():
    body, context = translate(stream=True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert context.input_tokens > 0
    assert "stream_options" not in translate(Settings(model_map=(), openai_stream_usage=False), stream=True)[0]


def test_model_sampling_and_user_go_as_chat_takes_them():
    body, _ = translate(temperature=0.2, top_p=0.9, safety_identifier="u" * 80)
    assert (body["model"], body["temperature"], body["top_p"]) == ("qwen3-coder", 0.2, 0.9)
    assert body["user"].startswith("sha256:") and len(body["user"]) <= 64


def test_fields_no_chat_server_takes_are_dropped_and_named_and_the_prompt_cache_key_goes_nowhere():
    body, context = translate(
        store=True, metadata={"a": "b"}, service_tier="flex", text={"verbosity": "low"}, prompt_cache_key="thread-1"
    )
    assert context.dropped == ["store", "metadata", "service_tier", "text.verbosity"]
    assert not {"store", "metadata", "service_tier", "prompt_cache_key", "verbosity"} & set(body)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name.split("-POST")[0] for p in CAPTURES])
def test_every_codex_request_is_a_chat_request_the_chat_schema_takes(path):
    """As Codex 0.171.0 sent them (tests/fixtures/clients/codex-0.171.0/CODEX.md)."""
    captured = json.loads(path.read_text())["body"]
    body, context = to_chat_request(validate_responses(captured), SETTINGS)
    validate_chat(body)
    assert body["messages"][0]["role"] == "system" and body["stream"] is True
    assert "tools.web_search" in context.dropped or not captured.get("tools")
