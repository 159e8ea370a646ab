"""JSON values counted in the text before it is parsed, and the request's budget of them.

A parsed value costs a Python object, so the values a request may make the bridge build are
counted in its bytes first, for the body (policy/limits.py) and for every JSON document decoded
from inside it (a tool call's `arguments`, a reasoning item's `encrypted_content`): those take
what the body left of BRIDGE_MAX_JSON_VALUES, so no string can hold more than the body could.
The schemas and translators that decode read through loads_decoded.
"""

import contextvars
import dataclasses
import re

from . import json_codec
from .errors import BridgeError

# Every byte but a comma and the two opening brackets; and every JSON whitespace byte.
_NOT_COMMA_OR_OPENING = bytes(byte for byte in range(256) if byte not in b",{[")
_WHITESPACE = b" \t\n\r"
_QUOTED = re.compile(rb'"[^"]*"')


def set_budget(limit, left):
    """The request being served may still decode `left` of its `limit` values (its body set it)."""
    _budget.set(_Budget(limit, left))


@dataclasses.dataclass
class _Budget:
    limit: int  # BRIDGE_MAX_JSON_VALUES
    left: int  # what the body and the documents decoded so far left of it


# The JSON values the request being served may still decode; each request body sets it anew.
_budget = contextvars.ContextVar("bridge_json_values", default=None)


def budget_mark():
    """Where the budget of the request being served stands, for rewind."""
    budget = _budget.get()
    return budget, None if budget is None else budget.left


def rewind(mark):
    """The budget back where budget_mark found it: the documents decoded since are decoded
    again, and counted again (a refusal loads a request a second time, schemas/__init__.py)."""
    budget, left = mark
    if budget is not None:
        budget.left = left


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
            raise too_large(
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


def too_large(what, limit, setting, param=None):
    """The 413 for a request over one of the limits: what it holds, the limit and its setting."""
    return BridgeError("request_too_large", f"{what}; the bridge accepts at most {limit:,} ({setting})", param=param)
