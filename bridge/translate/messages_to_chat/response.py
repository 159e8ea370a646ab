"""Chat Completions response -> Anthropic Messages response (pure functions).

The rules the stream translator shares live here too: finish_reason ->
stop_reason, usage in Anthropic's shape. How a Chat answer is read (one choice,
`content` that may be an array, reasoning fields, tool-call ids) is
chat_response.py, shared with the Responses front's Chat pair.

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
import json
import re
import uuid

from ...protocols import shapes
from ...protocols.errors import BridgeError, from_openai, invalid
from ..chat_response import (
    arguments_text,
    client_tool_id,
    content_parts,
    json_object,
    only_choice,
    overflow_of,
    reasoning_text,
    usage_counts,
)

INVALID_ARGUMENTS_KEY = "_invalid_json_arguments"


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
    found = overflow_of(error)
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
    counts = usage_counts(openai_usage)
    return {
        "input_tokens": max(counts.prompt - counts.cached - counts.written, 0),
        "output_tokens": counts.output,
        "cache_creation_input_tokens": counts.written,
        "cache_read_input_tokens": counts.cached,
    }


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


def client_tool_name(context, upstream_name):
    """The client's own name for a tool the request had to rename for OpenAI."""
    return context.tool_names.get(upstream_name, upstream_name)


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
