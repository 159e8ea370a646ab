"""Request limits: how much one client body may make the bridge hold, checked before it does.

Parsed, a JSON body costs far more memory than its bytes: a Python object per value, then the
schema's loaded copy and the translated request, each with its own objects (a 30 MB body of
830,000 tiny messages peaked at 766 MiB). BRIDGE_MAX_BODY_BYTES bounds the bytes; these bound
the values, so that what a request costs stays in proportion to its size:

- JSON values, counted in the raw bytes before the parser builds a single object
  (count_values): the bound holds during parsing, not only after it. What the bridge decodes
  from inside a request, JSON in a string (tool calls' `arguments`, a reasoning item's
  `encrypted_content`), is counted the same way before it is parsed, against what the body
  left of the same limit (loads_decoded): a document in a string cannot hold more than the
  body could;
- messages (a Responses request's input items), content blocks and tools, counted once parsed
  and before the schema and the translator copy them (check_counts): they name the limit in the
  client's terms, and cap what costs most to translate.

The defaults are hundreds of times what Claude Code, Codex and the SDKs send (README, Limits).
A body over a limit is a 413 naming the limit and its setting: the request is too large for
this bridge, and no SDK retries a 413.
"""

import contextvars
import dataclasses
import re

from ..protocols import json_codec
from ..protocols.errors import BridgeError

# Every byte but a comma and the two opening brackets; and every JSON whitespace byte.
_NOT_COMMA_OR_OPENING = bytes(byte for byte in range(256) if byte not in b",{[")
_WHITESPACE = b" \t\n\r"
_QUOTED = re.compile(rb'"[^"]*"')


def check_values(raw, limit):
    """A 413 when the JSON text `raw` holds more than `limit` values, before it is parsed.

    What it leaves of `limit` is what the documents decoded from inside it may hold, for the rest
    of the request (loads_decoded). Its count may be a bound above it, never one that leaves them
    less than half of `limit`.
    """
    count = count_values(raw, limit, loose=limit // 2)
    if count > limit:
        raise _too_large("request body holds too many JSON values", limit, "BRIDGE_MAX_JSON_VALUES")
    _budget.set(_Budget(limit, limit - count))


@dataclasses.dataclass
class _Budget:
    limit: int  # BRIDGE_MAX_JSON_VALUES
    left: int  # what the body and the documents decoded so far left of it


# The JSON values the request being served may still decode; each request body sets it anew.
_budget = contextvars.ContextVar("bridge_json_values", default=None)


def loads_decoded(text, what, loads=json_codec.loads):
    """The value of a JSON document decoded from inside the request being served, read as its
    body was: its values counted before it is parsed, against what the body and the documents
    before it left of BRIDGE_MAX_JSON_VALUES (a 413 beyond), then parsed by `loads`.

    Every place that parses JSON found in a request reads it here, so no string can hold more
    than the body could: `what` names it for the 413 (a tool call's `arguments`). Raises
    ValueError for text `loads` cannot read, nesting too deep for it included; outside a
    request (no body counted) nothing is counted.
    """
    budget = _budget.get()
    if budget is not None:
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        count = count_values(raw, budget.left)
        if count > budget.left:
            raise _too_large(
                f"request holds too many JSON values with those decoded from {what}",
                budget.limit,
                "BRIDGE_MAX_JSON_VALUES",
            )
        budget.left -= count
    try:
        return loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def too_many_values(raw, limit):
    """Whether the JSON text `raw` holds more than `limit` values, found without parsing it."""
    return count_values(raw, limit, loose=limit) > limit


def count_values(raw, limit, loose=0):
    """How many values the JSON text `raw` holds (objects, arrays, strings, numbers, true, false,
    null; not the keys), found without parsing it: exactly; or a cheaper bound above the count
    once one is at most `loose`; or a number over `limit` once the text surely holds more.

    Every value is the body itself, the first element of a non-empty object or array, or
    follows a comma: the values are 1 + the commas + the non-empty objects and arrays, outside
    strings. Each step below answers for most of what reaches it, walking the bytes at C speed,
    never a value at a time:
    - a value takes two bytes at least (`1,`): the length answers for most bodies at no cost;
    - commas and opening brackets counted inside strings too are a bound above;
    - each string is a key or a value, and each key has its value: more strings than twice the
      limit is over it (escaped backslashes and quotes dropped first, so every quote left opens
      or closes a string);
    - else the count itself, with each string cut down to one byte and whitespace dropped.
    """
    bound = (len(raw) + 1) // 2
    if bound <= loose:
        return bound
    bound = 1 + len(raw.translate(None, _NOT_COMMA_OR_OPENING))
    if bound <= loose:
        return bound
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if unescaped.count(b'"') // 2 > 2 * limit:
        return limit + 1
    outside = _QUOTED.sub(b"0", unescaped).translate(None, _WHITESPACE)
    opening = outside.count(b"{") + outside.count(b"[")
    empty = outside.count(b"{}") + outside.count(b"[]")
    return 1 + outside.count(b",") + opening - empty


def check_parsed(body, items, settings):
    """A 413 when the parsed request holds more messages (`items` names their list: `messages`,
    or a Responses request's `input`), content blocks or tools than the settings allow.

    Content blocks are the entries of each message's `content` array (a Responses tool output's
    `output`), of a block's own (a tool result's), and of a Messages request's `system` array.
    """
    listed = _array(body, items)
    blocks = len(_array(body, "system")) + sum(
        len(_parts(item)) + sum(len(_parts(part)) for part in _parts(item)) for item in listed
    )
    for count, limit, what, setting, param in (
        (len(listed), settings.max_messages, "messages" if items == "messages" else "input items", "MESSAGES", items),
        (blocks, settings.max_content_blocks, "content blocks", "CONTENT_BLOCKS", items),
        (len(_array(body, "tools")), settings.max_tools, "tools", "TOOLS", "tools"),
    ):
        if count > limit:
            raise _too_large(f"request holds {count:,} {what}", limit, f"BRIDGE_MAX_{setting}", param)


def _too_large(what, limit, setting, param=None):
    """The 413 for a request over one of the limits: what it holds, the limit and its setting."""
    return BridgeError("request_too_large", f"{what}; the bridge accepts at most {limit:,} ({setting})", param=param)


def _array(value, key):
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else ()


def _parts(value):
    """A message's or block's `content` entries, or a Responses tool output's `output` ones."""
    return _array(value, "content") or _array(value, "output")
