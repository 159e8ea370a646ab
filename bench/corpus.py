"""The requests the benchmark sends, in the three protocols.

Each direction has a small everyday request (a short tool-using
conversation) written once as the client sends it to the bridge and once as
its upstream-protocol equivalent, which is what the reference relay and the
direct run send. The large requests are the Claude Code and Codex captures
in tests/fixtures/clients/ and a ~500 KB conversation per protocol built
here the way a long coding session grows: one tool call and one file-sized
tool result after another.
"""

import json
import pathlib

CLIENTS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "clients"
CODEX = CLIENTS / "codex-0.171.0" / "captures"

_SYSTEM = "You are a careful assistant. Answer briefly and use the tools when they help."
_QUESTION = "What is the weather in Paris today, and should I take an umbrella?"
_WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
_WEATHER_DOC = "Current weather for a city: temperature, sky and chance of rain."
_RESULT = "18 °C, light clouds, 40 % chance of rain after 16:00."


def anthropic_small(model, stream):
    """A Messages request: system, a tool, one finished tool round trip."""
    return {
        "model": model,
        "max_tokens": 1024,
        "stream": stream,
        "system": _SYSTEM,
        "tools": [{"name": "get_weather", "description": _WEATHER_DOC, "input_schema": _WEATHER_SCHEMA}],
        "messages": [
            {"role": "user", "content": _QUESTION},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look that up."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "get_weather",
                        "input": {"city": "Paris", "unit": "celsius"},
                    },
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": _RESULT}]},
        ],
    }


def openai_small(model, stream):
    """The same conversation as a Chat Completions request."""
    body = {
        "model": model,
        "max_completion_tokens": 1024,
        "stream": stream,
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "description": _WEATHER_DOC, "parameters": _WEATHER_SCHEMA},
            }
        ],
        "messages": [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _QUESTION},
            {
                "role": "assistant",
                "content": "Let me look that up.",
                "tool_calls": [
                    {
                        "id": "toolu_01A",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": json.dumps({"city": "Paris", "unit": "celsius"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_01A", "content": _RESULT},
        ],
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def responses_small(model, stream):
    """The same conversation as a Responses request, stateless as Codex sends it."""
    return {
        "model": model,
        "instructions": _SYSTEM,
        "max_output_tokens": 1024,
        "stream": stream,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {"type": "function", "name": "get_weather", "description": _WEATHER_DOC, "parameters": _WEATHER_SCHEMA}
        ],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _QUESTION}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me look that up."}],
            },
            {
                "type": "function_call",
                "call_id": "toolu_01A",
                "name": "get_weather",
                "arguments": json.dumps({"city": "Paris", "unit": "celsius"}),
            },
            {"type": "function_call_output", "call_id": "toolu_01A", "output": _RESULT},
        ],
    }


def captures():
    """(name, Messages request body) for every Claude Code capture of POST /v1/messages."""
    found = []
    for path in sorted(CLIENTS.glob("*.json")):
        capture = json.loads(path.read_text())
        if capture.get("path", "").split("?")[0] == "/v1/messages":
            found.append((path.stem, capture["body"]))
    return found


def captures_as_chat():
    """The largest Claude Code captures as a Chat client would send them: translated by the
    bridge's own messages->chat request translator (what an OpenAI-speaking agent sends)."""
    from bridge import settings
    from bridge.protocols.schemas.anthropic import validate_messages
    from bridge.translate.messages_to_chat.request import to_chat_request

    largest = sorted(captures(), key=lambda item: -len(json.dumps(item[1])))[:2]
    return [
        (name, to_chat_request(validate_messages(json.loads(json.dumps(body))), settings.load({}))[0])
        for name, body in largest
    ]


def codex_captures():
    """(name, Responses request body) for every Codex capture of POST /v1/responses."""
    return [
        (path.name.split("-POST")[0], json.loads(path.read_text())["body"]) for path in sorted(CODEX.glob("*.json"))
    ]


def _file_text(turn, size=5000):
    """A tool result the size of a source file, with some non-ASCII like real code has."""
    lines, total = [], 0
    number = 0
    while total < size:
        number += 1
        line = (
            f"{number:4d}\tdef step_{turn}_{number}(value):  # règle {number}: 数据 → résultat\n"
            f'     \t    return transform(value, factor={number * turn % 97}, label="item-{number}")\n'
        )
        lines.append(line)
        total += len(line)
    return "".join(lines)


def anthropic_large(target=500_000):
    """A Claude Code session grown to `target` bytes: the largest capture plus Read rounds."""
    name, body = max(captures(), key=lambda item: len(json.dumps(item[1])))
    body = json.loads(json.dumps(body))
    messages = body["messages"]
    turn = 0
    while len(json.dumps(body, ensure_ascii=False)) < target:
        turn += 1
        tool_id = f"toolu_bench{turn:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"I'll read module {turn} next to see how it transforms values."},
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": "Read",
                        "input": {"file_path": f"/home/user/project/src/module_{turn}.py"},
                    },
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": _file_text(turn)}]}
        )
    return body


def openai_large(target=500_000):
    """A Chat Completions coding session of `target` bytes with Claude Code's tool set."""
    capture = max(captures(), key=lambda item: len(json.dumps(item[1])))[1]
    system = "\n\n".join(block["text"] for block in capture["system"])
    tools = [
        {
            "type": "function",
            "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["input_schema"]},
        }
        for tool in capture["tools"]
    ]
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Read the modules under src/ and explain how values are transformed."},
    ]
    body = {
        "model": "bench-n50",
        "max_completion_tokens": 32000,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": tools,
        "messages": messages,
    }
    turn = 0
    while len(json.dumps(body, ensure_ascii=False)) < target:
        turn += 1
        call_id = f"call_bench{turn:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": f"I'll read module {turn} next.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "Read",
                            "arguments": json.dumps({"file_path": f"/home/user/project/src/module_{turn}.py"}),
                        },
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": _file_text(turn)})
    return body


def responses_large(target=500_000):
    """A Codex session grown to `target` bytes: its largest capture plus shell rounds reading files."""
    body = json.loads(json.dumps(max(codex_captures(), key=lambda item: len(json.dumps(item[1])))[1]))
    turn = 0
    while len(json.dumps(body, ensure_ascii=False)) < target:
        turn += 1
        call_id = f"call_bench{turn:04d}"
        body["input"] += [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"I'll read module {turn} next."}],
            },
            {
                "type": "function_call",
                "call_id": call_id,
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"cat src/module_{turn}.py"}),
            },
            {"type": "function_call_output", "call_id": call_id, "output": _file_text(turn)},
        ]
    return body


# The large request of each client protocol, by the path it is sent to.
LARGE = {"/v1/messages": anthropic_large, "/v1/chat/completions": openai_large, "/v1/responses": responses_large}
