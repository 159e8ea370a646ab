"""What reaches an OpenAI-compatible upstream, read back from the fake upstream's log."""

import json
import re

CHAT_FIELDS = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "user",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "response_format",
    "stream",
    "stream_options",
}
OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def assert_valid_chat_request(chat):
    """What an OpenAI-compatible server insists on, checked on what the bridge sends."""
    assert set(chat) <= CHAT_FIELDS, set(chat) - CHAT_FIELDS
    assert "cache_control" not in json.dumps(chat)
    messages = chat["messages"]
    assert messages and all(m["role"] in ("system", "user", "assistant", "tool") for m in messages)
    assert all(m["role"] != "system" for m in messages[1:]), "system only leads"
    for tool in chat.get("tools", []):
        assert tool["type"] == "function" and OPENAI_TOOL_NAME.match(tool["function"]["name"])
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object" and isinstance(parameters["properties"], dict)
    waiting = set()
    for position, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in waiting, f"message {position} answers no open call"
            waiting.discard(message["tool_call_id"])
            assert isinstance(message["content"], str)
            continue
        assert not waiting, f"calls {waiting} unanswered before message {position}"
        content = message.get("content")
        if isinstance(content, list):
            assert content and role == "user", "content parts only in user messages"
            for part in content:
                assert part["type"] in ("text", "image_url", "file")
                assert part["type"] != "text" or part["text"]
        if role == "assistant":
            calls = message.get("tool_calls") or []
            assert content or calls, "never an empty assistant message"
            for call in calls:
                assert call["type"] == "function" and len(call["id"]) <= 40
                assert OPENAI_TOOL_NAME.match(call["function"]["name"])
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
            waiting = {call["id"] for call in calls}
            assert len(waiting) == len(calls)
        else:
            assert content, f"message {position} is empty"
    assert not waiting


def foreign_reasoning_session(turns):
    """The `input` of a Codex session begun on an OpenAI model: per turn, reasoning that OpenAI
    encrypted (which bridge drops and names, `input.N.encrypted_content`), a tool call and its output."""
    items = [{"role": "user", "content": "fix the build"}]
    for number in range(turns):
        items += [
            {"type": "reasoning", "summary": [], "encrypted_content": f"gAAAAABo{number:04d}" + "Q" * 200},
            {"type": "function_call", "call_id": f"call_{number}", "name": "shell", "arguments": '{"cmd": "ls"}'},
            {"type": "function_call_output", "call_id": f"call_{number}", "output": "ok"},
        ]
    return items
