"""OpenAI Responses answer -> Anthropic Messages answer (pure functions).

The rules the stream translator shares live here too: the stop reason, usage, the thinking
block of a reasoning item.

- Output items in order: a `reasoning` item is a `thinking` block, its summary parts joined
  by a blank line as the text (or its raw reasoning text, from servers that give that
  instead), its `signature` the item itself in bridge's form (protocols/reasoning.py), which
  brings it back byte for byte on the next turn; an item without encrypted content gets ""
  (never an invented signature), and one with neither text nor encrypted content is nothing.
  A `message`'s `output_text` parts are text blocks, its `refusal` parts text blocks too,
  with stop_reason `refusal`. A `function_call` is a `tool_use` (its call_id kept, or
  encoded when it breaks Anthropic's id rules; arguments that are not a JSON object kept as
  `{"_invalid_json_arguments": "<raw>"}`). Annotations and hosted tools' items go nowhere.
- stop_reason: refusal, then `status: "incomplete"` for max_output_tokens as `max_tokens`
  (content_filter as `refusal`), then `tool_use` when a call came, else `end_turn`.
- A `failed` response (or an `error` in the body) is the error it names.
- usage: Anthropic's input_tokens excludes what was read from cache, which is
  `cache_read_input_tokens`; reasoning tokens, within output_tokens as on both sides, are
  also `output_tokens_details.thinking_tokens`.
"""

from ...protocols import shapes
from ...protocols.errors import BridgeError, from_openai
from ...protocols.reasoning import reasoning_signature
from ..messages_client import anthropic_message, client_tool_id, stop_fields, tool_input
from ..responses_stream import failed_error

SUMMARY_JOIN = "\n\n"  # between a reasoning item's summary parts


def to_anthropic_message(response, context):
    """The Messages answer for a Responses `response` object."""
    if isinstance(response, dict) and isinstance(response.get("error"), dict) and "status" not in response:
        raise from_openai(response)  # an error body in a 200
    shapes.responses_body(response)
    if response.get("status") == "failed" or response.get("error"):
        raise failed_error(response)
    content, tool_called, refused = [], False, False
    for item in response.get("output") or ():
        kind = item["type"]
        if kind == "reasoning":
            block = thinking_block(item, reasoning_text(item))
            if block["thinking"] or block["signature"]:
                content.append(block)
        elif kind == "message":
            for part in item.get("content") or ():
                text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                refused = refused or (part.get("type") == "refusal" and bool(text))
                if text:
                    content.append({"type": "text", "text": text})
        elif kind == "function_call":
            tool_called = True
            content.append(tool_use(item, context, tool_input(item.get("arguments"))))
    return anthropic_message(
        response.get("id"), context, content, stop(response, tool_called, refused), usage(response.get("usage"))
    )


def input_tokens(answer, context):
    """count_tokens' answer for OpenAI's input-token count ({"object": "response.input_tokens", "input_tokens": N})."""
    count = answer.get("input_tokens") if isinstance(answer, dict) else None
    if not shapes.is_count(count):
        raise BridgeError("api_error", "upstream answered the input-token count without a count", status=502)
    return {"input_tokens": count}


def reasoning_text(item):
    """A reasoning item's text: its summary parts, else its raw reasoning text."""
    summary = [part.get("text") or "" for part in item.get("summary") or ()]
    if any(summary):
        return SUMMARY_JOIN.join(summary)
    return "".join(part.get("text") or "" for part in item.get("content") or ())


def thinking_block(item, text):
    return {"type": "thinking", "thinking": text, "signature": reasoning_signature(item)}


def tool_use(item, context, tool_input_value):
    """A function_call item as a tool_use block: the client's id rules and tool name."""
    name = item.get("name")
    if not name:
        raise BridgeError("api_error", "upstream returned a function call without a name", status=502)
    return {
        "type": "tool_use",
        "id": client_tool_id(item.get("call_id")),
        "name": context.tool_names.get(name, name),
        "input": tool_input_value,
    }


def stop(response, tool_called, refused):
    """stop_reason (and stop_details) for how the response ended."""
    reason = (response.get("incomplete_details") or {}).get("reason")
    if response.get("status") == "incomplete":
        finish = "content_filter" if reason == "content_filter" else "length"
    else:
        finish = "stop"
    return stop_fields(finish, tool_called, refused, None)


def usage(responses_usage):
    """Anthropic usage from Responses usage: input_tokens excludes what was read from cache."""
    responses_usage = responses_usage or {}
    cached = (responses_usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    out = {
        "input_tokens": max((responses_usage.get("input_tokens") or 0) - cached, 0),
        "output_tokens": responses_usage.get("output_tokens") or 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }
    reasoning = (responses_usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    if reasoning:
        out["output_tokens_details"] = {"thinking_tokens": reasoning}
    return out
