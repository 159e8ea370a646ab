"""Anthropic Messages response -> Chat Completions response (pure functions).

The stream translator (stream.py) builds its chunks from the same helpers,
so a streamed answer accumulates to exactly what the non-streamed one is;
what the Responses front reads the same way (finish reasons, refusal text,
usage, citations, context overflow) is anthropic_response.py.

Web search runs upstream (Anthropic's server tool): its blocks are never tool calls.
A text block's web page citations are `url_citation` annotations spanning that
text in `message.annotations`, and the search count is
`usage.server_tool_use.web_search_requests`. A context overflow is a 400 with
`code: "context_length_exceeded"` and `param: "messages"`.
"""

import datetime

from ...protocols import json_codec, shapes
from ..anthropic_response import FINISH_REASONS, refusal_text, search_usage, token_counts, url_citations
from ..chat_answer import completion, tool_call, usage_of


def to_chat_completion(message, context):
    """One Anthropic message as one Chat choice; blocks Chat cannot show (server tools) are left out."""
    shapes.anthropic_message(message)
    text, reasoning, signed, calls, annotations = [], [], [], [], []
    length = 0  # of the content so far, where the next text starts
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
            if block.get("citations"):
                annotations += chat_annotations(block["citations"], length, length + len(text[-1]))
            length += len(text[-1])
        elif kind == "tool_use" and block.get("name") == context.json_tool:
            text.append(arguments(block.get("input")))
            length += len(text[-1])
        elif kind == "tool_use":
            # Anthropic ids (toolu_...) are valid Chat ids as they are: stable both ways.
            calls.append(tool_call(block["id"], block["name"], arguments(block.get("input"))))
        elif kind == "thinking":
            reasoning.append(block.get("thinking") or "")
            if block.get("signature"):
                signed.append(thinking_entry(block))
        elif kind == "redacted_thinking":
            signed.append(thinking_entry(block))
    finish = finish_reason(message.get("stop_reason"), bool(calls))
    chat_message = {
        "role": "assistant",
        "content": "".join(text) if text else None,
        "refusal": refusal_text(message.get("stop_details")) if finish == "content_filter" else None,
    }
    if annotations:
        chat_message["annotations"] = annotations
    if calls:
        chat_message["tool_calls"] = calls
    if reasoning:
        chat_message["reasoning_content"] = "".join(reasoning)
    if signed:
        chat_message["thinking_blocks"] = signed
    return completion(message.get("id"), context, chat_message, finish, chat_usage(message.get("usage") or {}))


def arguments(tool_input):
    """Chat carries tool input as a JSON string."""
    return json_codec.dumps_text(tool_input if tool_input is not None else {})


def thinking_entry(block):
    """The `thinking_blocks` extension entry: the signed block byte-exact, for the client to echo back."""
    if block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block["data"]}
    return {"type": "thinking", "thinking": block.get("thinking", ""), "signature": block["signature"]}


def finish_reason(stop_reason, made_tool_calls):
    """A tool_use stop that only produced the response_format tool is a plain stop for Chat."""
    if stop_reason == "tool_use" and not made_tool_calls:
        return "stop"
    return FINISH_REASONS.get(stop_reason, "stop")


def chat_annotations(citations, start, end):
    """Chat's url_citation annotations for a text block at [start, end) of the message content."""
    return [
        {"type": "url_citation", "url_citation": {"url": url, "title": title, "start_index": start, "end_index": end}}
        for url, title in url_citations(citations)
    ]


def chat_usage(usage):
    """Chat's prompt_tokens include cached tokens (see token_counts)."""
    counts = token_counts(usage)
    return {**usage_of(counts.input, counts.output, counts.cache_read, counts.thinking), **search_usage(usage)}


def to_openai_model(anthropic_model):
    """One Anthropic model object in OpenAI's shape."""
    return {
        "id": anthropic_model["id"],
        "object": "model",
        "created": _epoch(anthropic_model.get("created_at")),
        "owned_by": "anthropic",
    }


def to_openai_model_list(anthropic_list, aliases):
    """Anthropic's model list in OpenAI's shape, the operator's aliases first."""
    upstream = {m["id"]: m for m in anthropic_list.get("data", []) if isinstance(m, dict) and m.get("id")}
    ids = dict.fromkeys([*aliases, *upstream])
    return {"object": "list", "data": [to_openai_model(upstream.get(model_id, {"id": model_id})) for model_id in ids]}


def _epoch(text):
    try:
        return int(datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0
