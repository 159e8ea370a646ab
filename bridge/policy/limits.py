"""Request limits: how much one client body may make the bridge hold, checked before it does.

Parsed, a JSON body costs far more memory than its bytes: a Python object per value, then the
schema's loaded copy and the translated request, each with its own objects (a 30 MB body of
830,000 tiny messages peaked at 766 MiB). BRIDGE_MAX_BODY_BYTES bounds the bytes; these bound
the values, so that what a request costs stays in proportion to its size:

- JSON values, counted in the raw bytes before the parser builds a single object
  (json_values.count_values): the bound holds during parsing, not only after it. What the bridge decodes
  from inside a request, JSON in a string (tool calls' `arguments`, a reasoning item's
  `encrypted_content`), is counted the same way before it is parsed, against what the body
  left of the same limit (json_values.loads_decoded): a document in a string cannot hold more than the
  body could;
- messages (a Responses request's input items), content blocks and tools, counted once parsed
  and before the schema and the translator copy them (check_counts): they name the limit in the
  client's terms, and cap what costs most to translate.

The defaults are hundreds of times what Claude Code, Codex and the SDKs send (README, Limits).
A body over a limit is a 413 naming the limit and its setting: the request is too large for
this bridge, and no SDK retries a 413.
"""

from ..protocols.json_values import count_values, set_budget, too_large


def check_values(raw, limit):
    """A 413 when the JSON text `raw` holds more than `limit` values, before it is parsed.

    What it leaves of `limit` is what the documents decoded from inside it may hold, for the rest
    of the request (json_values.loads_decoded). Its count may be a bound above it, never one that leaves them
    less than half of `limit`.
    """
    count = count_values(raw, limit, loose=limit // 2)
    if count > limit:
        raise too_large("request body holds too many JSON values", limit, "BRIDGE_MAX_JSON_VALUES")
    set_budget(limit, limit - count)


def check_parsed(body, items, settings):
    """A 413 when the parsed request holds more messages (`items` names their list: `messages`,
    or a Responses request's `input`), content blocks or tools than the settings allow.

    Content blocks are the entries of each message's `content` array (a Responses tool output's
    `output`), of a block's own (a tool result's), and of a Messages request's `system` array.
    """
    listed = _array(body, items)
    if len(listed) > settings.max_messages:
        what = "messages" if items == "messages" else "input items"
        raise too_large(f"request holds {len(listed):,} {what}", settings.max_messages, "BRIDGE_MAX_MESSAGES", items)
    blocks = len(_array(body, "system"))
    for item in listed:
        parts = _parts(item)
        blocks += len(parts)
        for part in parts:
            blocks += len(_parts(part))
    if blocks > settings.max_content_blocks:
        raise too_large(
            f"request holds {blocks:,} content blocks", settings.max_content_blocks, "BRIDGE_MAX_CONTENT_BLOCKS", items
        )
    tools = len(_array(body, "tools"))
    if tools > settings.max_tools:
        raise too_large(f"request holds {tools:,} tools", settings.max_tools, "BRIDGE_MAX_TOOLS", "tools")


def _array(value, key):
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else ()


def _parts(value):
    """A message's or block's `content` entries, or a Responses tool output's `output` ones.

    One dict check per item: this runs for every message and block of every request.
    """
    if not isinstance(value, dict):
        return ()
    found = value.get("content")
    if isinstance(found, list) and found:
        return found
    found = value.get("output")
    return found if isinstance(found, list) else ()
