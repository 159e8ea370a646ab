"""Chat Completions response -> Anthropic Messages response (pure functions).

The stream translator shares usage in Anthropic's shape from here. How a
Chat answer is read (one choice, `content` that may be an array, reasoning
fields) is chat_response.py, shared with the Responses front's Chat pair;
what an Anthropic answer needs (stop_reason, tool_use ids and inputs, an
overflow in Anthropic's words) is messages_client.py, shared with
messages_to_responses.

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

from ...protocols.errors import invalid
from ..chat_response import read_answer, usage_counts
from ..messages_client import anthropic_message, client_tool_id, stop_fields, tool_input


def to_anthropic_message(completion, context):
    answer = read_answer(completion)
    content = []
    if answer.reasoning:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": ""})
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    if answer.refusal:
        content.append({"type": "text", "text": answer.refusal})
    for call in answer.calls:
        content.append(
            {
                "type": "tool_use",
                "id": client_tool_id(call.id),
                "name": client_tool_name(context, call.name),
                "input": tool_input(call.arguments),
            }
        )
    choice = answer.choice
    stop = stop_fields(
        choice.get("finish_reason"),
        bool(answer.calls),
        bool(answer.refusal),
        matched_stop(choice, context.stop_sequences),
    )
    return anthropic_message(completion.get("id"), context, content, stop, usage(completion.get("usage")))


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
