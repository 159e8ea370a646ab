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

import base64
import binascii
import datetime
import hashlib
import json
import re
import uuid

from ...protocols import json_codec, overflow, shapes
from ...protocols.errors import BridgeError, from_openai, invalid

INVALID_ARGUMENTS_KEY = "_invalid_json_arguments"
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_ENCODED_ID = "toolu_b64_"
_ENCODED_ID_MAX = 1024  # the longest encoded id decoded back: no upstream's id is nearly so long
_OPENAI_ID_MAX = 40


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


# Where an upstream reports an overflow: a 400, or a 413/422 from some local servers and
# gateways; None is an error inside a 200 body or a stream. A 429 that counts tokens is a rate limit.
_OVERFLOW_STATUSES = (None, 400, 413, 422)


def anthropic_overflow(error, estimate):
    """An upstream's context overflow in Anthropic's words; any other error as it came.

    - The prompt fits but prompt + max_tokens does not (vLLM says both): `input length and
      `max_tokens` exceed context limit: T + M > N, ...`; Claude Code retries with a
      max_tokens that fits.
    - Otherwise `prompt is too long: T tokens > N maximum`, with the upstream's numbers;
      `estimate()` (count_tokens, called only then) stands in for a size it does not give.
      When it names no limit, N is T: a gap of zero, which Claude Code reads as "too long by
      an unknown amount" and meets with its own rule (drop the oldest fifth) rather than with
      a limit the bridge made up. T is never written below N, for the same reason.
    """
    found = overflow.find(error.upstream_detail) if error.upstream_status in _OVERFLOW_STATUSES else None
    if found is None:
        return error
    prompt = found.prompt if found.prompt is not None else estimate()
    if found.limit is not None and found.output and prompt < found.limit:
        message = (
            f"input length and `max_tokens` exceed context limit: {prompt} + {found.output} > "
            f"{found.limit}, decrease input length or `max_tokens` and try again"
        )
    else:
        limit = found.limit if found.limit is not None else prompt
        message = f"prompt is too long: {max(prompt, limit)} tokens > {limit} maximum"
    return error.replaced(kind="invalid_request", message=message, status=400)


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


def stop_fields(finish_reason, tool_called, refused, stop_sequence):
    """A message's stop_reason and stop_sequence for how the upstream ended; stop_details for a refusal."""
    reason, sequence = _stop_reason(finish_reason, tool_called, refused, stop_sequence)
    fields = {"stop_reason": reason, "stop_sequence": sequence}
    if reason == "refusal":
        explanation = "stopped by the upstream's content filter" if finish_reason == "content_filter" else None
        fields["stop_details"] = {"type": "refusal", "category": None, "explanation": explanation}
    return fields


def _stop_reason(finish_reason, tool_called, refused, stop_sequence):
    if refused or finish_reason == "content_filter":
        return "refusal", None
    if finish_reason == "length":
        return "max_tokens", None
    if tool_called:  # not finish_reason "tool_calls": a client runs the tool_use blocks, so there must be one
        return "tool_use", None
    if stop_sequence is not None:
        return "stop_sequence", stop_sequence
    return "end_turn", None


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


def tool_input(arguments):
    """A tool call's `arguments` as the object Anthropic's `input` must be."""
    text = arguments_text(arguments)
    if not text.strip():
        return {}
    try:
        parsed = json.loads(text)  # not orjson: a model's integers stay exact however long
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {INVALID_ARGUMENTS_KEY: text}


def arguments_text(arguments):
    """`arguments` as JSON text: OpenAI sends a string, llama-server and TGI have sent the object itself."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json_codec.dumps_text(arguments)


def client_tool_name(context, upstream_name):
    """The client's own name for a tool the request had to rename for OpenAI."""
    return context.tool_names.get(upstream_name, upstream_name)


def client_tool_id(upstream_id):
    """An upstream tool-call id as an Anthropic tool_use id, which must match [a-zA-Z0-9_-]+.

    Ids that do not fit (Kimi's `functions.get_weather:0`) are base64url-encoded
    so the next request can give the upstream its own id back (upstream_tool_id).
    A missing id gets a fresh one.
    """
    if not isinstance(upstream_id, str) or not upstream_id:
        return f"toolu_{uuid.uuid4().hex}"
    if _ANTHROPIC_ID.match(upstream_id):
        return upstream_id
    return _ENCODED_ID + base64.urlsafe_b64encode(upstream_id.encode()).decode().rstrip("=")


def upstream_tool_id(client_id):
    """The tool-call id to send upstream for a tool_use id of the conversation.

    Reverses client_tool_id; ids longer than OpenAI's 40 characters become a
    stable hash, the same for the assistant's call and its tool message. An
    encoded id longer than _ENCODED_ID_MAX is not decoded: a client's id costs
    no copies of itself, however long.
    """
    if client_id.startswith(_ENCODED_ID) and len(client_id) <= _ENCODED_ID_MAX:
        encoded = client_id[len(_ENCODED_ID) :]
        try:
            return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError):
            pass
    if len(client_id) <= _OPENAI_ID_MAX:
        return client_id
    return "call_" + hashlib.sha256(client_id.encode()).hexdigest()[:32]


def message_id(upstream_id):
    """msg_ + the upstream completion id (for tracing), or a fresh id when it has none."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "", upstream_id) if isinstance(upstream_id, str) else ""
    return f"msg_{cleaned or uuid.uuid4().hex}"


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
