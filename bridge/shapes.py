"""What an upstream's answer must hold before a translator reads it: the types, checked once.

The translators read an answer as its protocol documents it. What does not fit - a token
count that is a string, or 10**400 (Python's JSON parser keeps it; a metric cannot take it),
content that is not a list, a block that is not an object, a stop reason that is a number,
tool input that is not an object - is a 502 naming the field, raised here before it could
be a 500 and a traceback anywhere further on. Absent and null fields pass where the
translators read them as absent. Only the fields some translator reads are checked, so a
check costs a few dict lookups per answer or stream event.

One entry point per shape: anthropic_message and anthropic_event for a Messages upstream
(both OpenAI fronts), chat_completion and chat_chunk for a Chat upstream.
"""

from .errors import BridgeError, from_anthropic

# No answer holds 2**53 tokens, and past it a JSON number is not exact in most readers.
MAX_COUNT = 2**53
ANTHROPIC_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
CHAT_COUNTS = ("prompt_tokens", "completion_tokens", "prompt_cache_hit_tokens")
CHAT_DETAIL_COUNTS = ("cached_tokens", "cache_write_tokens")

# Anthropic content block type -> (field, type, required) for each field a translator reads.
_BLOCK_FIELDS = {
    "text": (("text", str, False),),
    "thinking": (("thinking", str, False), ("signature", str, False)),
    "redacted_thinking": (("data", str, True),),
    "tool_use": (("id", str, True), ("name", str, True), ("input", dict, False)),
}
# Anthropic delta type -> the field it carries, a string.
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
}
_TYPE_NAMES = {str: "a string", dict: "an object", list: "an array", int: "an integer"}


def is_count(value):
    """A token count a client, a log line and a metric can all take: a whole number in [0, 2**53)."""
    return type(value) is int and 0 <= value < MAX_COUNT


# -- Anthropic Messages ---------------------------------------------------------------------


def anthropic_message(message):
    """A non-streamed Messages answer; an error object in a 200 is raised as the error it names."""
    if not isinstance(message, dict):
        raise _malformed("answer", "the body", "an object", message)
    if message.get("type") == "error":
        raise anthropic_error(message, "answer")
    _field(message, "id", str, "answer")
    _field(message, "stop_reason", str, "answer")
    _field(message, "stop_details", dict, "answer")
    for position, block in enumerate(_field(message, "content", list, "answer") or ()):
        _block(block, f"content.{position}", "answer")
    _anthropic_usage(message.get("usage"), "usage", "answer")


def anthropic_event(kind, payload):
    """One Messages stream event of type `kind` (its payload an object, the relay's doing)."""
    where = f"{kind} event"
    if kind == "message_start":
        message = _field(payload, "message", dict, where) or {}
        _field(message, "id", str, where, "message.")
        _anthropic_usage(message.get("usage"), "message.usage", where)
    elif kind == "content_block_start":
        _index(payload, where)
        block = _field(payload, "content_block", dict, where)
        if block is not None:
            _block(block, "content_block", where)
    elif kind == "content_block_delta":
        _index(payload, where)
        delta = _field(payload, "delta", dict, where) or {}
        name = _DELTA_FIELDS.get(delta.get("type"))
        if name is not None:
            _field(delta, name, str, where, "delta.")
    elif kind == "content_block_stop":
        _index(payload, where)
    elif kind == "message_delta":
        delta = _field(payload, "delta", dict, where) or {}
        _field(delta, "stop_reason", str, where, "delta.")
        _field(delta, "stop_details", dict, where, "delta.")
        _anthropic_usage(payload.get("usage"), "usage", where)


def anthropic_error(payload, where):
    """An Anthropic error object (`{"type": "error", "error": {...}}`) as the BridgeError it names."""
    error = _field(payload, "error", dict, where) or {}
    _field(error, "type", str, where, "error.")
    _field(error, "message", str, where, "error.")
    return from_anthropic(payload)


def _block(block, path, where):
    if not isinstance(block, dict):
        raise _malformed(where, path, "an object", block)
    for name, kind, required in _BLOCK_FIELDS.get(block.get("type"), ()):
        value = block.get(name)
        if not isinstance(value, kind) and (required or value is not None):
            raise _malformed(where, f"{path}.{name}", _TYPE_NAMES[kind], value)


def _anthropic_usage(usage, path, where):
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise _malformed(where, path, "an object", usage)
    _counts(usage, ANTHROPIC_COUNTS, path, where)
    for position, part in enumerate(_field(usage, "iterations", list, where, path + ".") or ()):
        if not isinstance(part, dict):
            raise _malformed(where, f"{path}.iterations.{position}", "an object", part)
        _counts(part, ANTHROPIC_COUNTS, f"{path}.iterations.{position}", where)
    details = _field(usage, "output_tokens_details", dict, where, path + ".")
    if details is not None:
        _counts(details, ("thinking_tokens",), path + ".output_tokens_details", where)


def _index(payload, where):
    index = payload.get("index")
    if type(index) is not int:
        raise _malformed(where, "index", "an integer", index)


# -- OpenAI Chat Completions ----------------------------------------------------------------


def chat_completion(completion):
    """A non-streamed Chat answer (an object without `error`): its choices, message and usage."""
    choices = _field(completion, "choices", list, "answer")
    for position, choice in enumerate(choices or ()):
        path = f"choices.{position}."
        if not isinstance(choice, dict):
            raise _malformed("answer", path[:-1], "an object", choice)
        _field(choice, "finish_reason", str, "answer", path)
        message = _field(choice, "message", dict, "answer", path)
        if message is not None:
            _chat_message(message, path + "message.", "answer")
    _chat_usage(completion.get("usage"), "answer")


def chat_chunk(chunk):
    """One streamed Chat chunk (an object without `error`)."""
    for position, choice in enumerate(_field(chunk, "choices", list, "stream chunk") or ()):
        path = f"choices.{position}."
        if not isinstance(choice, dict):
            raise _malformed("stream chunk", path[:-1], "an object", choice)
        _field(choice, "finish_reason", str, "stream chunk", path)
        delta = _field(choice, "delta", dict, "stream chunk", path)
        if delta is not None:
            _chat_message(delta, path + "delta.", "stream chunk")
    _chat_usage(chunk.get("usage"), "stream chunk")


def _chat_message(message, path, where):
    """A message or a delta: content (a string or an array of parts) and tool calls."""
    content = message.get("content")
    if isinstance(content, list):
        for position, part in enumerate(content):
            if not isinstance(part, dict):
                raise _malformed(where, f"{path}content.{position}", "an object", part)
    elif content is not None and not isinstance(content, str):
        raise _malformed(where, path + "content", "a string or an array", content)
    for position, call in enumerate(_field(message, "tool_calls", list, where, path) or ()):
        call_path = f"{path}tool_calls.{position}"
        if not isinstance(call, dict):
            raise _malformed(where, call_path, "an object", call)
        _field(call, "id", str, where, call_path + ".")
        index = call.get("index")
        if index is not None and type(index) is not int:
            raise _malformed(where, call_path + ".index", "an integer", index)
        function = _field(call, "function", dict, where, call_path + ".") or {}
        _field(function, "name", str, where, call_path + ".function.")
        _field(function, "arguments", (str, dict), where, call_path + ".function.")


def _chat_usage(usage, where):
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise _malformed(where, "usage", "an object", usage)
    _counts(usage, CHAT_COUNTS, "usage", where)
    details = _field(usage, "prompt_tokens_details", dict, where, "usage.")
    if details is not None:
        _counts(details, CHAT_DETAIL_COUNTS, "usage.prompt_tokens_details", where)


# -- the checks -----------------------------------------------------------------------------


def _field(container, name, kind, where, path=""):
    """container[name] when it is of `kind` or null/absent (None); else a 502 naming it."""
    value = container.get(name)
    if value is None or isinstance(value, kind):
        return value
    expected = " or ".join(_TYPE_NAMES[k] for k in kind) if isinstance(kind, tuple) else _TYPE_NAMES[kind]
    raise _malformed(where, path + name, expected, value)


def _counts(usage, names, path, where):
    for name in names:
        value = usage.get(name)
        if value is not None and not is_count(value):
            raise _malformed(where, f"{path}.{name}", "a token count (a whole number from 0 to 2**53)", value)


def _malformed(where, field, expected, value):
    """The 502 for a field of the wrong type; the value itself is not quoted (it may be huge)."""
    got = type(value).__name__
    if type(value) is int:
        got = "a negative number" if value < 0 else "a number too large"
    return BridgeError(
        "api_error", f"upstream sent a malformed {where}: {field} must be {expected}, got {got}", status=502
    )
