"""Validation of Anthropic Messages requests: every bad input is a 400 naming the field."""

import copy
import json

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas.anthropic import validate_count_tokens, validate_messages
from tests.fake_upstream import FIXTURES

CLIENTS = sorted((FIXTURES / "clients").glob("*.json"))


def minimal(**extra):
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **extra}


def rejected(body, validate=validate_messages):
    with pytest.raises(BridgeError) as caught:
        validate(body)
    assert caught.value.status == 400 and caught.value.kind == "invalid_request"
    return caught.value.message


@pytest.mark.parametrize("path", CLIENTS, ids=lambda p: p.stem)
def test_every_recorded_claude_code_request_is_valid(path):
    capture = json.loads(path.read_text())
    validate = validate_count_tokens if "count_tokens" in capture["path"] else validate_messages
    assert validate(capture["body"]) is capture["body"]


def test_validation_returns_the_body_unchanged():
    body = minimal(context_management={"edits": []}, some_future_field=1)
    before = copy.deepcopy(body)
    assert validate_messages(body) == before


@pytest.mark.parametrize(
    "body, path",
    [
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        (minimal(max_tokens="100"), "max_tokens"),
        (minimal(max_tokens=1.5), "max_tokens"),
        (minimal(max_tokens=0), "max_tokens"),
        (minimal(model=""), "model"),
        (minimal(messages=[]), "messages"),
        (minimal(messages="hi"), "messages"),
        (minimal(messages=[5]), "messages.0"),
        (minimal(messages=[{"role": "bot", "content": "x"}]), "messages.0.role"),
        (minimal(messages=[{"content": "x"}]), "messages.0.role"),
        (minimal(messages=[{"role": "user"}]), "messages.0.content"),
        (minimal(messages=[{"role": "user", "content": 5}]), "messages.0.content"),
        (
            minimal(messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "foo"}]}]),
            "messages.0.content.1.type",
        ),
        (minimal(messages=[{"role": "user", "content": [{"text": "no type"}]}]), "messages.0.content.0.type"),
        (minimal(messages=[{"role": "user", "content": [{"type": "text", "text": 3}]}]), "messages.0.content.0.text"),
        (
            minimal(
                messages=[{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]
            ),
            "messages.0.content.0.type",
        ),
        (
            minimal(messages=[{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]),
            "messages.0.content.0.type",
        ),
        (
            minimal(
                messages=[
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": "{}"}]}
                ]
            ),
            "messages.0.content.0.input",
        ),
        (
            minimal(messages=[{"role": "system", "content": [{"type": "image", "source": {}}]}]),
            "messages.0.content.0.type",
        ),
        (
            minimal(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png"}}],
                    }
                ]
            ),
            "messages.0.content.0.source.data",
        ),
        (
            minimal(
                messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]
            ),
            "messages.0.content.0.source.type",
        ),
        (
            minimal(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "tool_use"}]}],
                    }
                ]
            ),
            "messages.0.content.0.content.0.type",
        ),
        (
            minimal(
                messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}]
            ),
            "messages.0.content.0.is_error",
        ),
        (minimal(system=5), "system"),
        (minimal(system=[{"type": "image"}]), "system.0.type"),
        (minimal(temperature="0.5"), "temperature"),
        (minimal(temperature=1.5), "temperature"),
        (minimal(top_p=True), "top_p"),
        (minimal(top_k=-1), "top_k"),
        (minimal(stream="true"), "stream"),
        (minimal(stop_sequences="END"), "stop_sequences"),
        (minimal(stop_sequences=["ok", 5]), "stop_sequences.1"),
        (minimal(tools=[{"name": "x"}]), "tools.0.input_schema"),
        (minimal(tools=["x"]), "tools.0"),
        (minimal(tools=[{"name": "x", "input_schema": {}, "type": 5}]), "tools.0.type"),
        (minimal(tool_choice={"type": "sometimes"}), "tool_choice.type"),
        (minimal(tool_choice={"type": "tool"}), "tool_choice.name"),
        (
            minimal(tool_choice={"type": "auto", "disable_parallel_tool_use": 1}),
            "tool_choice.disable_parallel_tool_use",
        ),
        (minimal(thinking={"type": "enabled"}), "thinking.budget_tokens"),
        (minimal(thinking={"type": "on"}), "thinking.type"),
        (minimal(output_config={"effort": "huge"}), "output_config.effort"),
        (minimal(output_config={"format": {"type": "json_schema"}}), "output_config.format.schema"),
        (minimal(metadata={"user_id": 42}), "metadata.user_id"),
    ],
)
def test_bad_input_is_a_400_that_names_the_field(body, path):
    message = rejected(body)
    assert message.startswith(f"{path}: "), message


def test_unknown_block_type_message_lists_the_supported_ones():
    message = rejected(minimal(messages=[{"role": "user", "content": [{"type": "video"}]}]))
    assert "'video'" in message and "image" in message and "tool_result" in message


def test_body_that_is_not_an_object_is_rejected():
    assert "Invalid input type" in rejected(["not", "an", "object"])


def test_role_system_message_inside_messages_is_allowed():
    validate_messages(
        minimal(
            messages=[
                {"role": "user", "content": "a"},
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "b"},
            ]
        )
    )


def test_anthropic_only_and_unknown_top_level_fields_pass():
    validate_messages(
        minimal(
            context_management={"edits": []},
            container="c",
            mcp_servers=[],
            service_tier="auto",
            brand_new_field={"x": 1},
        )
    )


def test_server_tools_pass_validation_for_the_translator_to_refuse():
    validate_messages(minimal(tools=[{"type": "web_search_20250305", "name": "web_search"}]))


def test_count_tokens_needs_no_max_tokens_but_still_needs_messages():
    validate_count_tokens({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert rejected({"model": "m"}, validate_count_tokens).startswith("messages: ")


def test_every_bad_field_is_named_not_just_the_first():
    with pytest.raises(BridgeError) as caught:
        validate_messages({"model": "m", "messages": []})
    assert "messages:" in caught.value.message and "max_tokens:" in caught.value.message
