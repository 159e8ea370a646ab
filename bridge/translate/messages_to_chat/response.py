"""Chat Completions response -> Anthropic Messages response (pure functions).

The rules the stream translator shares live here too: finish_reason ->
stop_reason, usage, tool-call ids, reading `content` that may be an array.

Decisions:
- Exactly one choice: Chat `choices` are alternative answers, an Anthropic
  message is one answer; anything else is a 502 naming the count.
- Reasoning (`reasoning_content`, or `reasoning` on Groq/OpenRouter/Ollama,
  or Mistral's `{type: thinking}` content parts) becomes a `thinking` block
  with an empty `signature`: the anthropic SDK accepts "", and a signature
  the bridge made up would look verifiable when it is not.
- Tool arguments that are not a JSON object are never replaced by `{}`: the
  raw text is kept as `{"_invalid_json_arguments": "<raw>"}` so the client
  (and, through its tool-input validation error, the model) sees what came.
  Empty arguments are a call without arguments: `{}`. A call without a
  name cannot be a tool_use: that is a 502, in a stream too.
- stop_reason precedence: refusal/content_filter, then length (a tool call
  cut by max_tokens must not be executed), then tool use (a tool_use block
  was sent, whatever the finish_reason says), then a matched stop
  sequence, then end_turn.
- A context overflow, however the upstream words it (overflow.py), is a 400
  `invalid_request_error` in Anthropic's own words, the only ones Claude
  Code compacts on (anthropic_overflow).
"""

import datetime

from ...protocols import shapes
from ...protocols.errors import BridgeError, from_openai, invalid
from ..messages_client import client_tool_id, message_id, stop_fields, tool_input


def to_anthropic_message(completion, context):
    if not isinstance(completion, dict):
        raise BridgeError("api_error", "upstream answered with JSON that is not an object", status=502)
    if completion.get("error"):
        raise from_openai(completion)
    shapes.chat_completion(completion)
    choice = only_choice(completion.get("choices"))
    message = json_object(choice.get("message"))
    parts = content_parts(message.get("content"))
    thinking = reasoning_text(message) + "".join(text for kind, text in parts if kind == "thinking")
    text = "".join(text for kind, text in parts if kind == "text")
    refusal = message.get("refusal") if isinstance(message.get("refusal"), str) else ""

    content = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": ""})
    if text:
        content.append({"type": "text", "text": text})
    if refusal:
        content.append({"type": "text", "text": refusal})
    calls = [call for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    for position, call in enumerate(calls):
        function = json_object(call.get("function"))
        if not function.get("name"):
            raise BridgeError("api_error", f"upstream returned tool call {position} without a name", status=502)
        content.append(
            {
                "type": "tool_use",
                "id": client_tool_id(call.get("id")),
                "name": client_tool_name(context, function.get("name")),
                "input": tool_input(function.get("arguments")),
            }
        )

    stop = stop_fields(
        choice.get("finish_reason"), bool(calls), bool(refusal), matched_stop(choice, context.stop_sequences)
    )
    return {
        "id": message_id(completion.get("id")),
        "type": "message",
        "role": "assistant",
        "model": context.model,
        "content": content,
        **stop,
        "usage": usage(completion.get("usage")),
    }


def only_choice(choices):
    """The single choice of an answer; alternatives cannot be one Anthropic message."""
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        count = len(choices) if isinstance(choices, list) else 0
        raise BridgeError(
            "api_error",
            f"upstream returned {count} choices; an Anthropic message carries "
            "exactly one answer (the bridge never asks for n>1)",
            status=502,
        )
    return choices[0]


def content_parts(content):
    """(kind, text) pairs of a Chat `content`: a string, or an array of text/thinking parts (Mistral)."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    parts = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(("text", part["text"]))
        elif part.get("type") == "thinking":
            inner = part.get("thinking")
            if isinstance(inner, list):
                inner = "".join(p.get("text", "") for p in inner if isinstance(p, dict))
            if isinstance(inner, str) and inner:
                parts.append(("thinking", inner))
    return [(kind, text) for kind, text in parts if text]


def json_object(value):
    """`value` if it is a JSON object, else {}: a malformed part of an answer carries nothing."""
    return value if isinstance(value, dict) else {}


def reasoning_text(message):
    """`reasoning_content` (DeepSeek, vLLM, llama.cpp) or else `reasoning` (Groq, OpenRouter, Ollama)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def matched_stop(choice, stop_sequences):
    """The request's stop sequence vLLM names in `stop_reason` (it may also be an end-of-text token id)."""
    matched = choice.get("stop_reason")
    if choice.get("finish_reason") == "stop" and isinstance(matched, str) and matched in stop_sequences:
        return matched
    return None


def usage(openai_usage):
    """Anthropic usage from Chat usage: input_tokens excludes what was read from or written to cache."""
    openai_usage = openai_usage if isinstance(openai_usage, dict) else {}
    details = openai_usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    prompt = _count(openai_usage.get("prompt_tokens"))
    cached = _count(details.get("cached_tokens")) or _count(openai_usage.get("prompt_cache_hit_tokens"))
    written = _count(details.get("cache_write_tokens"))
    return {
        "input_tokens": max(prompt - cached - written, 0),
        "output_tokens": _count(openai_usage.get("completion_tokens")),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached,
    }


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def client_tool_name(context, upstream_name):
    """The client's own name for a tool the request had to rename for OpenAI."""
    return context.tool_names.get(upstream_name, upstream_name)


def to_anthropic_model(openai_model):
    """One OpenAI model object in Anthropic's shape; OpenAI has no display name, so the id is one."""
    return {
        "type": "model",
        "id": openai_model["id"],
        "display_name": openai_model["id"],
        "created_at": _rfc3339(openai_model.get("created")),
    }


def to_anthropic_model_list(openai_list, aliases, limit=20, after_id=None, before_id=None):
    """One page of OpenAI's model list in Anthropic's shape, the operator's aliases first.

    OpenAI's list has no pages, so the whole of it is paged here the way Anthropic pages:
    the `limit` models right after `after_id`, or right before `before_id`, and `has_more`
    when more lie that way. A cursor that names no listed model is a 400 naming it.
    """
    upstream = {m["id"]: m for m in openai_list.get("data", []) if isinstance(m, dict) and m.get("id")}
    ids = list(dict.fromkeys([*aliases, *upstream]))
    if before_id is not None:
        end = _position(ids, before_id, "before_id")
        start, has_more = max(end - limit, 0), end > limit
    else:
        start = _position(ids, after_id, "after_id") + 1 if after_id is not None else 0
        end, has_more = start + limit, start + limit < len(ids)
    page = ids[start:end]
    return {
        "data": [to_anthropic_model(upstream.get(model_id, {"id": model_id})) for model_id in page],
        "has_more": has_more,
        "first_id": page[0] if page else None,
        "last_id": page[-1] if page else None,
    }


def _position(ids, cursor, param):
    try:
        return ids.index(cursor)
    except ValueError:
        raise invalid(f"{param}: no model {cursor!r} in the list", param=param) from None


def _rfc3339(epoch):
    if not isinstance(epoch, (int, float)):
        epoch = 0
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
