"""Reasoning carried by the client between turns, both ways: bridge stores nothing.

Anthropic thinking in a Responses `reasoning` item's `encrypted_content`
(encrypted_content / thinking_block), and an OpenAI reasoning item in an Anthropic
`thinking` block's `signature` (reasoning_signature / reasoning_item).

Anthropic requires the signed thinking blocks of a turn
back, byte-exact, before its tool results. Responses clients that ask for
`include: ["reasoning.encrypted_content"]` (Codex always does) echo every reasoning
item on every later request, so the block itself travels in that field: versioned,
base64url JSON. It is not encrypted: it holds what the client was shown anyway
(thinking text, or the redacted block's own opaque data) and a signature only
Anthropic can verify. Anything else (an OpenAI model's encrypted reasoning, a
client's own string) does not decode, and the request translator drops it.

A Chat upstream's reasoning (`reasoning_content`) travels the same way, as
`{"type": "reasoning_content", "text"}`: the Responses front's Chat pair sends it back
to upstreams that want their reasoning in the history (DeepSeek), and each pair drops
what another's upstream produced.

The other way, a Responses upstream under `store: false` keeps no reasoning: its reasoning
item (id, encrypted_content, summary) must come back whole, byte for byte, for the model to
go on from it. An Anthropic client echoes a thinking block's `signature` untouched (Claude
Code keeps only {type, thinking, signature} of old thinking), so the item travels there, in
the same versioned base64url JSON under its own prefix. A real Anthropic signature (base64,
never a dot) or anything else does not decode: the translator drops that block.
"""

import base64
import binascii
import json

from .json_values import loads_decoded

_PREFIX = "bridge.v1."
_SIGNATURE_PREFIX = "bridge.rs.v1."
# The fields of an OpenAI reasoning item the next request needs, kept in the upstream's order.
# Not `status` (the output's state) nor `content` (raw reasoning text, which an item with
# encrypted content does not need).
_ITEM_FIELDS = frozenset(("type", "id", "summary", "encrypted_content"))
# Characters of base64 decoded at a time (a multiple of 4).
_SLICE = 1 << 20


def encrypted_content(block):
    """The client-side form of one Anthropic `thinking` or `redacted_thinking` block."""
    if block["type"] == "redacted_thinking":
        kept = {"type": "redacted_thinking", "data": block["data"]}
    else:
        kept = {"type": "thinking", "thinking": block.get("thinking", ""), "signature": block["signature"]}
    return _encoded(kept)


def chat_reasoning(text):
    """The client-side form of a Chat upstream's reasoning text."""
    return _encoded({"type": "reasoning_content", "text": text})


def _encoded(kept, prefix=_PREFIX):
    raw = json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def thinking_block(value):
    """The Anthropic block an `encrypted_content` carries, or None when it carries none (carried)."""
    block = carried(value)
    return block if block is not None and block["type"] != "reasoning_content" else None


def carried(value):
    """What an `encrypted_content` of bridge's carries: an Anthropic `thinking` or
    `redacted_thinking` block, or a Chat upstream's `reasoning_content`; None when it carries
    none of ours.

    What it decodes to counts towards the request's limits (json_values.loads_decoded): a 413 when
    it holds more JSON values than the request has left.
    """
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return None
    try:
        block = loads_decoded(_decoded(value, len(_PREFIX)), "a reasoning item's encrypted_content")
    except (binascii.Error, ValueError):
        return None
    if not isinstance(block, dict):
        return None
    if (
        block.get("type") == "thinking"
        and isinstance(block.get("thinking"), str)
        and isinstance(block.get("signature"), str)
        and block["signature"]
    ):
        return {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}
    if block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str):
        return {"type": "redacted_thinking", "data": block["data"]}
    if block.get("type") == "reasoning_content" and isinstance(block.get("text"), str):
        return {"type": "reasoning_content", "text": block["text"]}
    return None


def reasoning_signature(item):
    """The `signature` of the thinking block that carries the Responses reasoning `item` to an
    Anthropic client; "" for an item without encrypted content (nothing could bring it back)."""
    if not isinstance(item.get("encrypted_content"), str) or not item["encrypted_content"]:
        return ""
    return _encoded({name: value for name, value in item.items() if name in _ITEM_FIELDS}, _SIGNATURE_PREFIX)


def reasoning_item(signature):
    """The Responses reasoning item a thinking block's `signature` carries, as the upstream sent
    it; None for a signature that is not bridge's (a real Anthropic one) or carries no whole item.

    What it decodes to counts towards the request's limits, as in thinking_block.
    """
    if not isinstance(signature, str) or not signature.startswith(_SIGNATURE_PREFIX):
        return None
    try:
        item = loads_decoded(_decoded(signature, len(_SIGNATURE_PREFIX)), "a thinking block's signature")
    except (binascii.Error, ValueError):
        return None
    if not isinstance(item, dict) or item.get("type") != "reasoning" or not set(item) <= _ITEM_FIELDS:
        return None
    if not all(isinstance(item.get(name), str) and item[name] for name in ("id", "encrypted_content")):
        return None
    summary = item.get("summary")
    if not isinstance(summary, list) or not all(_is_summary_part(part) for part in summary):
        return None
    return item


def _is_summary_part(part):
    return isinstance(part, dict) and part.get("type") == "summary_text" and isinstance(part.get("text"), str)


def _decoded(text, start):
    """The bytes of the unpadded base64url in `text` from `start` on, decoded a slice at a time:
    a client's encrypted_content, however large, costs its bytes, not copies of its text too."""
    pieces = (text[at : at + _SLICE] for at in range(start, len(text), _SLICE))
    return b"".join(base64.urlsafe_b64decode(piece + "=" * (-len(piece) % 4)) for piece in pieces)
