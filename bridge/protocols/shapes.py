"""What an upstream's answer must hold before a translator reads it: the types, checked once.

The translators read an answer as its protocol documents it. What does not fit - a token
count that is a string, or 10**400 (Python's JSON parser keeps it; a metric cannot take it),
content that is not a list, a block that is not an object, a stop reason that is a number,
tool input that is not an object - is a 502 naming the field, raised here before it could
be a 500 and a traceback anywhere further on. Absent and null fields pass where the
translators read them as absent. Only the fields some translator reads are checked, so a
check costs a few dict lookups per answer or stream event.

One entry point per shape: anthropic_message and anthropic_event for a Messages upstream
(both OpenAI fronts), chat_completion and chat_chunk for a Chat upstream, responses_body,
responses_event and responses_delta for a Responses upstream.
"""

from .errors import BridgeError, from_anthropic

# No answer holds 2**53 tokens, and past it a JSON number is not exact in most readers.
MAX_COUNT = 2**53
ANTHROPIC_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
CHAT_COUNTS = ("prompt_tokens", "completion_tokens", "prompt_cache_hit_tokens")
CHAT_DETAIL_COUNTS = ("cached_tokens", "cache_write_tokens")
RESPONSES_COUNTS = ("input_tokens", "output_tokens", "total_tokens")

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
        _block(block, "answer", "content", position)
    _anthropic_usage(message.get("usage"), "answer", "usage")


def anthropic_event(kind, payload):
    """One Messages stream event of type `kind` (its payload an object, the relay's doing), but
    content_block_delta: see anthropic_delta."""
    check = _EVENT_CHECKS.get(kind)
    if check is not None:
        check(payload, _EVENTS[kind])


def anthropic_delta(payload):
    """A content_block_delta event as (index, delta, the string its delta type carries): the
    event a stream is made of, checked as it is read rather than read again after the check.
    An absent delta is {}, an absent string None."""
    index = payload.get("index")
    if type(index) is not int:
        raise _malformed(_DELTA_EVENT, "index", "an integer", index)
    delta = payload.get("delta")
    if delta is None:
        return index, {}, None
    if type(delta) is not dict:
        raise _malformed(_DELTA_EVENT, "delta", "an object", delta)
    name = _DELTA_FIELDS.get(delta.get("type"))
    value = None if name is None else delta.get(name)
    if value is not None and type(value) is not str:
        raise _malformed(_DELTA_EVENT, "delta." + name, "a string", value)
    return index, delta, value


def anthropic_error(payload, where):
    """An Anthropic error object (`{"type": "error", "error": {...}}`) as the BridgeError it names."""
    error = _field(payload, "error", dict, where) or {}
    _field(error, "type", str, where, "error.")
    _field(error, "message", str, where, "error.")
    return from_anthropic(payload)


# The event checks run for every event a stream carries: straight-line code, no path built
# unless something is wrong.


def _message_start(payload, where):
    message = _field(payload, "message", dict, where)
    if message is not None:
        _field(message, "id", str, where, "message.")
        _anthropic_usage(message.get("usage"), where, "message.usage")


def _content_block_start(payload, where):
    _index(payload, where)
    block = payload.get("content_block")
    if block is not None:
        _block(block, where, "content_block")


def _message_delta(payload, where):
    delta = _field(payload, "delta", dict, where)
    if delta is not None:
        _field(delta, "stop_reason", str, where, "delta.")
        _field(delta, "stop_details", dict, where, "delta.")
    _anthropic_usage(payload.get("usage"), where, "usage")


_EVENT_CHECKS = {
    "message_start": _message_start,
    "content_block_start": _content_block_start,
    "content_block_stop": lambda payload, where: _index(payload, where),
    "message_delta": _message_delta,
}
_EVENTS = {kind: f"{kind} event" for kind in _EVENT_CHECKS}
_DELTA_EVENT = "content_block_delta event"


def _index(payload, where):
    index = payload.get("index")
    if type(index) is not int:
        raise _malformed(where, "index", "an integer", index)


def _block(block, where, path, position=None):
    """A content block at `path` (`content` with a position, or `content_block`)."""
    if type(block) is not dict:
        raise _malformed(where, _at(path, position), "an object", block)
    for name, kind, required in _BLOCK_FIELDS.get(block.get("type"), ()):
        value = block.get(name)
        if type(value) is not kind and (required or value is not None):
            raise _malformed(where, f"{_at(path, position)}.{name}", _TYPE_NAMES[kind], value)


def _anthropic_usage(usage, where, path):
    if usage is None:
        return
    if type(usage) is not dict:
        raise _malformed(where, path, "an object", usage)
    _counts(usage, ANTHROPIC_COUNTS, where, path)
    iterations = usage.get("iterations")
    if iterations is not None:  # compaction: every billed iteration's counts
        if type(iterations) is not list:
            raise _malformed(where, path + ".iterations", "an array", iterations)
        for position, part in enumerate(iterations):
            if type(part) is not dict:
                raise _malformed(where, f"{path}.iterations.{position}", "an object", part)
            _counts(part, ANTHROPIC_COUNTS, where, f"{path}.iterations.{position}")
    details = usage.get("output_tokens_details")
    if details is not None:
        if type(details) is not dict:
            raise _malformed(where, path + ".output_tokens_details", "an object", details)
        _counts(details, ("thinking_tokens",), where, path + ".output_tokens_details")


# -- OpenAI Chat Completions ----------------------------------------------------------------


def chat_completion(completion):
    """A non-streamed Chat answer (an object without `error`): its choices, message and usage."""
    _choices(completion, "answer", "message")


def chat_chunk(chunk):
    """One streamed Chat chunk (an object without `error`)."""
    _choices(chunk, "stream chunk", "delta")


def _choices(body, where, inner):
    """Each choice's finish_reason and its message (or delta), and the usage."""
    choices = body.get("choices")
    if choices is not None:
        if type(choices) is not list:
            raise _malformed(where, "choices", "an array", choices)
        for position, choice in enumerate(choices):
            if type(choice) is not dict:
                raise _malformed(where, f"choices.{position}", "an object", choice)
            finish = choice.get("finish_reason")
            if finish is not None and type(finish) is not str:
                raise _malformed(where, f"choices.{position}.finish_reason", "a string", finish)
            message = choice.get(inner)
            if message is not None:
                _chat_message(message, where, f"choices.{position}.{inner}" if position else _FIRST[inner])
    usage = body.get("usage")
    if usage is not None:
        if type(usage) is not dict:
            raise _malformed(where, "usage", "an object", usage)
        _counts(usage, CHAT_COUNTS, where, "usage")
        details = usage.get("prompt_tokens_details")
        if details is not None:
            if type(details) is not dict:
                raise _malformed(where, "usage.prompt_tokens_details", "an object", details)
            _counts(details, CHAT_DETAIL_COUNTS, where, "usage.prompt_tokens_details")


# The path of the only choice there should be, not formatted again for every chunk.
_FIRST = {inner: f"choices.0.{inner}" for inner in ("message", "delta")}


def _chat_message(message, where, path):
    """A message or a delta: content (a string or an array of parts) and tool calls."""
    if type(message) is not dict:
        raise _malformed(where, path, "an object", message)
    content = message.get("content")
    if type(content) is list:
        for position, part in enumerate(content):
            if type(part) is not dict:
                raise _malformed(where, f"{path}.content.{position}", "an object", part)
    elif content is not None and type(content) is not str:
        raise _malformed(where, path + ".content", "a string or an array", content)
    calls = message.get("tool_calls")
    if calls is not None:
        if type(calls) is not list:
            raise _malformed(where, path + ".tool_calls", "an array", calls)
        for position, call in enumerate(calls):
            _tool_call(call, where, f"{path}.tool_calls.{position}")


def _tool_call(call, where, path):
    if type(call) is not dict:
        raise _malformed(where, path, "an object", call)
    _field(call, "id", str, where, path + ".")
    index = call.get("index")
    if index is not None and type(index) is not int:
        raise _malformed(where, path + ".index", "an integer", index)
    function = _field(call, "function", dict, where, path + ".")
    if function is not None:
        _field(function, "name", str, where, path + ".function.")
        _field(function, "arguments", (str, dict), where, path + ".function.")


# -- OpenAI Responses -----------------------------------------------------------------------

# The fields of an output item a translator reads (any item type: each has only its own).
_ITEM_FIELDS = (
    ("id", str),
    ("status", str),
    ("call_id", str),
    ("name", str),
    ("arguments", str),
    ("input", str),
    ("encrypted_content", str),
    ("summary", list),
    ("content", list),
)
# The fields of a content, summary or reasoning-text part a translator reads.
_PART_FIELDS = (("text", str), ("refusal", str))
_RESPONSES_DETAILS = (
    ("input_tokens_details", ("cached_tokens", "cache_write_tokens")),
    ("output_tokens_details", ("reasoning_tokens",)),
)


def responses_body(response):
    """A Responses `response` object: a non-streamed answer, or the one a stream's last event
    carries. Its status, error, incomplete_details, output items and usage."""
    where = "response"
    if not isinstance(response, dict):
        raise _malformed(where, "the body", "an object", response)
    _field(response, "id", str, where)
    _field(response, "status", str, where)
    for name in ("error", "incomplete_details"):
        detail = _field(response, name, dict, where)
        if detail is not None:
            _field(detail, "code" if name == "error" else "reason", str, where, name + ".")
            _field(detail, "message", str, where, name + ".")
    for position, item in enumerate(_field(response, "output", list, where) or ()):
        _output_item(item, where, f"output.{position}")
    usage = _field(response, "usage", dict, where)
    if usage is not None:
        _counts(usage, RESPONSES_COUNTS, where, "usage")
        for name, counts in _RESPONSES_DETAILS:
            details = _field(usage, name, dict, where, "usage.")
            if details is not None:
                _counts(details, counts, where, f"usage.{name}")


def responses_event(kind, payload):
    """One Responses stream event of type `kind` (its payload an object) but the deltas (see
    responses_delta): its indices integers, and the item, part or response it carries."""
    where = f"{kind} event"
    if "response" in payload:
        responses_body(payload["response"])
    if "item" in payload:
        _output_item(payload["item"], where, "item")
    part = payload.get("part")
    if part is not None:
        _part(part, where, "part")
    for name in ("output_index", "summary_index", "content_index"):
        value = payload.get(name)
        if value is not None and type(value) is not int:
            raise _malformed(where, name, "an integer", value)
    for name in ("text", "arguments", "input", "refusal"):
        _field(payload, name, str, where)


def responses_delta(kind, payload):
    """A delta event (text, refusal, summary, reasoning text, a call's arguments) as (output_index,
    its delta string): checked as it is read, the event a stream is made of. An absent delta is ""."""
    index = payload.get("output_index")
    if type(index) is not int:
        raise _malformed(f"{kind} event", "output_index", "an integer", index)
    delta = payload.get("delta")
    if type(delta) is str:
        return index, delta
    if delta is None:
        return index, ""
    raise _malformed(f"{kind} event", "delta", "a string", delta)


def _output_item(item, where, path):
    if type(item) is not dict:
        raise _malformed(where, path, "an object", item)
    if type(item.get("type")) is not str:
        raise _malformed(where, path + ".type", "a string", item.get("type"))
    prefix = path + "."
    for name, kind in _ITEM_FIELDS:
        if name in item:
            _field(item, name, kind, where, prefix)
    for name in ("summary", "content"):
        for position, part in enumerate(item.get(name) or ()):
            _part(part, where, f"{path}.{name}.{position}")


def _part(part, where, path):
    if type(part) is not dict:
        raise _malformed(where, path, "an object", part)
    for name, kind in _PART_FIELDS:
        if name in part:
            _field(part, name, kind, where, path + ".")


# -- the checks -----------------------------------------------------------------------------


def _field(container, name, kind, where, prefix=""):
    """container[name] when it is of `kind` or null/absent (None); else a 502 naming it."""
    value = container.get(name)
    if value is None or isinstance(value, kind):
        return value
    expected = " or ".join(_TYPE_NAMES[k] for k in kind) if isinstance(kind, tuple) else _TYPE_NAMES[kind]
    raise _malformed(where, prefix + name, expected, value)


def _counts(usage, names, where, path):
    for name in names:
        value = usage.get(name)
        if value is not None and not (type(value) is int and 0 <= value < MAX_COUNT):
            raise _malformed(where, f"{path}.{name}", "a token count (a whole number from 0 to 2**53)", value)


def _at(path, position):
    return path if position is None else f"{path}.{position}"


def _malformed(where, field, expected, value):
    """The 502 for a field of the wrong type; the value itself is not quoted (it may be huge)."""
    got = type(value).__name__
    if type(value) is int:
        got = "a negative number" if value < 0 else "a number too large"
    return BridgeError(
        "api_error", f"upstream sent a malformed {where}: {field} must be {expected}, got {got}", status=502
    )
