"""A `reasoning` item's `encrypted_content`: the Anthropic thinking block bridge served, carried by the client.

bridge stores nothing, and Anthropic requires the signed thinking blocks of a turn
back, byte-exact, before its tool results. Responses clients that ask for
`include: ["reasoning.encrypted_content"]` (Codex always does) echo every reasoning
item on every later request, so the block itself travels in that field: versioned,
base64url JSON. It is not encrypted: it holds what the client was shown anyway
(thinking text, or the redacted block's own opaque data) and a signature only
Anthropic can verify. Anything else (an OpenAI model's encrypted reasoning, a
client's own string) does not decode, and the request translator drops it.
"""

import base64
import binascii
import json

_PREFIX = "bridge.v1."


def encrypted_content(block):
    """The client-side form of one Anthropic `thinking` or `redacted_thinking` block."""
    if block["type"] == "redacted_thinking":
        kept = {"type": "redacted_thinking", "data": block["data"]}
    else:
        kept = {"type": "thinking", "thinking": block.get("thinking", ""), "signature": block["signature"]}
    raw = json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()
    return _PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def thinking_block(value):
    """The Anthropic block an `encrypted_content` carries, or None when it carries none of ours."""
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return None
    encoded = value[len(_PREFIX) :]
    try:
        block = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
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
    return None
