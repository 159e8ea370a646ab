"""Chat requests the bridge refuses: validate_chat's cases, also sent over HTTP."""

USER = {"role": "user", "content": "hi"}


def call(name="lookup", arguments="{}", call_id="call_1"):
    """A Chat tool call, as an assistant message in a request carries it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat(*messages, **params):
    """A Chat request body; USER asks when no message is given."""
    return {"model": "gpt-4o", "messages": list(messages) or [USER], **params}


TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}

# (request, field path the 400 must name, words the message must contain)
BAD_CHAT_REQUESTS = {
    "several choices": (chat(n=2), "n", "one choice"),
    "logprobs": (chat(logprobs=True), "logprobs", "log probabilities"),
    "top_logprobs": (chat(top_logprobs=3), "top_logprobs", "log probabilities"),
    "audio input": (
        chat({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}),
        "messages.0.content.0.type",
        "audio input",
    ),
    "audio output modality": (chat(modalities=["text", "audio"]), "modalities", "audio output"),
    "audio output parameters": (chat(audio={"voice": "alloy", "format": "mp3"}), "audio", "audio output"),
    "custom tool": (chat(tools=[{"type": "custom", "custom": {"name": "grammar"}}]), "tools.0.type", "custom tools"),
    "custom tool choice": (
        chat(tools=[TOOL], tool_choice={"type": "custom", "custom": {"name": "x"}}),
        "tool_choice.type",
        "custom tool choices",
    ),
    "allowed_tools tool choice": (
        chat(tools=[TOOL], tool_choice={"type": "allowed_tools", "allowed_tools": {}}),
        "tool_choice.type",
        "allowed_tools",
    ),
    "custom tool call in history": (
        chat(
            USER,
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "x", "input": "free text"}}],
            },
        ),
        "messages.1.tool_calls.0.type",
        "custom tool calls",
    ),
    "role function": (
        chat({"role": "function", "name": "lookup", "content": "42"}),
        "messages.0.role",
        "legacy function calling",
    ),
    "legacy functions": (chat(functions=[{"name": "lookup"}]), "functions", "legacy function calling"),
    "legacy function_call": (chat(function_call="auto"), "function_call", "legacy function calling"),
    "legacy function_call in history": (
        chat(USER, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}),
        "messages.1.function_call",
        "legacy function calling",
    ),
    "uploaded file": (
        chat({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}),
        "messages.0.content.0.file.file_id",
        "file_data",
    ),
    "non-PDF file": (
        chat(
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_data": "data:application/zip;base64,UEsDBA==", "filename": "a.zip"}}
                ],
            }
        ),
        "messages.0.content.0.file.file_data",
        "application/pdf",
    ),
    "file part without data": (
        chat({"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf"}}]}),
        "messages.0.content.0.file.file_data",
        "required",
    ),
    "unsupported image type": (
        chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}}]}),
        "messages.0.content.0.image_url.url",
        "image/bmp",
    ),
    "image URL scheme": (
        chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}]}),
        "messages.0.content.0.image_url.url",
        "http(s) URL",
    ),
    "unknown user part": (
        chat({"role": "user", "content": [{"type": "video_url", "video_url": {}}]}),
        "messages.0.content.0.type",
        "expected one of: file, image_url, text",
    ),
    "refusal part from a user": (
        chat({"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}),
        "messages.0.content.0.type",
        "expected one of: file, image_url, text",
    ),
    "image in a system message": (
        chat(
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
            USER,
        ),
        "messages.0.content.0.type",
        "expected one of: text",
    ),
    "no messages": ({"model": "gpt-4o", "messages": []}, "messages", "at least one user or assistant"),
    "only system messages": (
        chat({"role": "system", "content": "be brief"}, {"role": "developer", "content": "be exact"}),
        "messages",
        "at least one user or assistant",
    ),
    "unknown role": (
        chat({"role": "critic", "content": "x"}),
        "messages.0.role",
        "'critic' is not a supported message role; expected one of: assistant, developer, system, tool, user",
    ),
    "role that is an object": (chat({"role": {"name": "user"}, "content": "x"}), "messages.0.role", "'user'"),
    "part type that is an array": (
        chat({"role": "user", "content": [{"type": ["text"], "text": "x"}]}),
        "messages.0.content.0.type",
        "'text'",
    ),
    "tool type that is an object": (
        chat(tools=[{"type": {}, "function": {"name": "lookup"}}]),
        "tools.0.type",
        "expected one of: function",
    ),
    "arguments not JSON": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="{city: Paris}")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "not valid JSON",
    ),
    "arguments not an object": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="[1, 2]")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "got array",
    ),
    "empty arguments": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "not valid JSON",
    ),
    "tool result without a call": (
        chat(USER, {"role": "tool", "tool_call_id": "call_1", "content": "x"}),
        "messages.1.tool_call_id",
        "must follow an assistant message",
    ),
    "tool result for another call": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call()]},
            {"role": "tool", "tool_call_id": "call_9", "content": "x"},
        ),
        "messages.2.tool_call_id",
        "'call_9'",
    ),
    "unanswered tool call": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(), call(call_id="call_2")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            USER,
        ),
        "messages.1.tool_calls.1.id",
        "'call_2'",
    ),
    "tool call without an id": (
        chat(USER, {"role": "assistant", "tool_calls": [call(call_id="")]}),
        "messages.1.tool_calls.0.id",
        "Shorter than minimum",
    ),
    "named tool choice not among tools": (
        chat(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "elsewhere"}}),
        "tool_choice.function.name",
        "'elsewhere'",
    ),
    "tool choice word": (chat(tools=[TOOL], tool_choice="any"), "tool_choice", "'required'"),
    "tool name": (
        chat(tools=[{"type": "function", "function": {"name": "get weather!"}}]),
        "tools.0.function.name",
        "a-z",
    ),
    "temperature range": (chat(temperature=2.5), "temperature", "2"),
    "max_tokens zero": (chat(max_tokens=0), "max_tokens", "1"),
    "max_completion_tokens as text": (chat(max_completion_tokens="100"), "max_completion_tokens", "integer"),
    "reasoning effort": (chat(reasoning_effort="extreme"), "reasoning_effort", "Must be one of"),
    "json schema root": (
        chat(response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "array"}}}),
        "response_format.json_schema.schema",
        "object",
    ),
    "temperature as a string": (chat(temperature="0.5"), "temperature", "Not a valid number"),
    "top_p as a boolean": (chat(top_p=True), "top_p", "Not a valid number"),
    "stream as a number": (chat(stream=1), "stream", "Not a valid boolean"),
    "response format type": (
        chat(response_format={"type": "yaml"}),
        "response_format.type",
        "expected one of: json_object, json_schema, text",
    ),
    "thinking budget": (chat(thinking={"type": "enabled", "budget_tokens": 10}), "thinking", "1024"),
    "model missing": ({"messages": [USER]}, "model", "required"),
    "stream flag type": (chat(stream="yes"), "stream", "boolean"),
    "web search options type": (chat(web_search_options="on"), "web_search_options", "Invalid input type"),
    "web search context size": (
        chat(web_search_options={"search_context_size": "huge"}),
        "web_search_options.search_context_size",
        "Must be one of",
    ),
}
