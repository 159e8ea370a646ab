"""A Chat Completions request built from another protocol's parts: what every pair with a Chat
upstream shares (pure functions).

OpenAI-compatible servers are stricter than OpenAI in places: some take only a string as a
message's content (text-only content is flattened), refuse an object schema without
`properties` (an argument-less MCP tool's), a `user` over 64 characters, or a
`reasoning_effort` beyond low/medium/high. A tool message carries text only: the images and
files a tool returned follow it in a user message, after a line naming the call they came from.
"""

import hashlib
import re

# A client's reasoning effort (Anthropic's output_config.effort, Responses' reasoning.effort) as
# the Chat reasoning_effort every server that takes one accepts: low, medium or high.
CHAT_EFFORTS = {
    "none": "low",
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}
_USER_MAX = 64  # characters of `user` OpenAI takes
_CALL_ID_MAX = 40  # characters of a tool call's id OpenAI takes


def join(texts):
    return "\n\n".join(texts)


def flattened(parts):
    """A text-only list of parts as one string, for servers that only take strings."""
    texts = [part["text"] for part in parts if part["type"] == "text"]
    return join(texts) if len(texts) == len(parts) else parts


def chat_tool(name, description, parameters, strict=None):
    """A Chat function tool; `strict` is sent only when asked for (servers that do not know it may refuse it)."""
    function = {"name": name, "parameters": object_parameters(parameters)}
    if description:
        function["description"] = description
    if strict is True:
        function["strict"] = True
    return {"type": "function", "function": function}


def object_parameters(schema):
    """OpenAI refuses an object schema without `properties` (MCP's argument-less tools send one)."""
    return schema if "properties" in schema else {**schema, "properties": {}}


def chat_user(user_id):
    """A user id as `user`; OpenAI caps it at 64 characters, so longer ids go as a stable hash."""
    return user_id if len(user_id) <= _USER_MAX else hashed_user(user_id)


def hashed_user(user_id):
    """A user id as a stable hash: what OpenAI's 64-character `user` takes of any id."""
    return "sha256:" + hashlib.sha256(user_id.encode()).hexdigest()[:48]


def openai_call_id(call_id):
    """A tool call's id as OpenAI takes it: one past 40 characters goes as a stable hash, the
    same for the assistant's call and its tool message."""
    if len(call_id) <= _CALL_ID_MAX:
        return call_id
    return "call_" + hashlib.sha256(call_id.encode()).hexdigest()[:32]


def stream_fields(stream_usage):
    """A streamed request's fields; `stream_usage` (BRIDGE_OPENAI_STREAM_USAGE) asks for the usage chunk."""
    return {"stream": True, **({"stream_options": {"include_usage": True}} if stream_usage else {})}


def file_part(title, data_url):
    """A PDF as a Chat `file` part, its name cleaned of what a server may refuse in one."""
    filename = re.sub(r"[^\w.\- ]", "_", title or "") or "document.pdf"
    return {"type": "file", "file": {"filename": filename, "file_data": data_url}}


def tool_attachments(call_id, media):
    """The image and file parts a tool returned, for the user message after the tool messages."""
    return [{"type": "text", "text": f"(attachments of tool result {call_id})"}, *media] if media else []
