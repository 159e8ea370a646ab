"""Anthropic Messages response -> Chat Completions response (pure functions).

The stream translator (stream.py) builds its chunks from the same helpers,
so a streamed answer accumulates to exactly what the non-streamed one is.

Web search runs upstream (Anthropic's server tool): its blocks are never tool calls.
A text block's web page citations are `url_citation` annotations spanning that
text in `message.annotations`, and the search count is
`usage.server_tool_use.web_search_requests`.

A context overflow (`prompt is too long: ...`, `input length and `max_tokens`
exceed context limit: ...`) is a 400 with `code: "context_length_exceeded"`
and `param: "messages"`, what LangChain, the OpenAI Agents SDK and others
look for to trim the conversation; the message stays Anthropic's.
"""

import collections
import datetime

from ...protocols import json_codec, overflow, shapes

# Anthropic stop_reason -> Chat finish_reason. pause_turn (a server-tool loop
# that paused) has no Chat meaning beyond "the turn ended here": stop.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
STANDARD_REFUSAL = "The model declined to answer this request."


def to_chat_completion(message, context):
    """One Anthropic message as one Chat choice; blocks Chat cannot show (server tools) are left out."""
    shapes.anthropic_message(message)
    text, reasoning, signed, calls, annotations = [], [], [], [], []
    length = 0  # of the content so far, where the next text starts
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
            annotations += chat_annotations(block.get("citations"), length, length + len(text[-1]))
            length += len(text[-1])
        elif kind == "tool_use" and block.get("name") == context.json_tool:
            text.append(arguments(block.get("input")))
            length += len(text[-1])
        elif kind == "tool_use":
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
    return {
        "id": completion_id(message.get("id")),
        "object": "chat.completion",
        "created": context.created,
        "model": context.model,
        "choices": [{"index": 0, "message": chat_message, "logprobs": None, "finish_reason": finish}],
        "usage": chat_usage(message.get("usage") or {}),
    }


def openai_overflow(error, param="messages"):
    """An Anthropic context overflow with OpenAI's code for it; any other error as it came.
    `param` names the field that holds the conversation in the client's request."""
    if error.kind != "invalid_request" or overflow.find(error.upstream_detail) is None:
        return error
    return error.replaced(status=400, code="context_length_exceeded", param=param)


def completion_id(message_id):
    return f"chatcmpl-{message_id or 'bridge'}"


def arguments(tool_input):
    """Chat carries tool input as a JSON string."""
    return json_codec.dumps_text(tool_input if tool_input is not None else {})


def tool_call(call_id, name, args):
    """Anthropic ids (toolu_...) are valid Chat ids as they are, so they stay stable both ways."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


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


def url_citations(citations):
    """(url, title) of each web page a text block cites, once each: Anthropic's web search
    citations (`web_search_result_location`); citations of the client's own documents have no URL."""
    found = {}
    for citation in citations if isinstance(citations, list) else ():
        if isinstance(citation, dict) and citation.get("type") == "web_search_result_location":
            url, title = citation.get("url"), citation.get("title")
            if isinstance(url, str):
                found.setdefault((url, title if isinstance(title, str) else ""), None)
    return list(found)


def chat_annotations(citations, start, end):
    """Chat's url_citation annotations for a text block at [start, end) of the message content."""
    return [
        {"type": "url_citation", "url_citation": {"url": url, "title": title, "start_index": start, "end_index": end}}
        for url, title in url_citations(citations)
    ]


def search_usage(usage):
    """Anthropic's count of web searches (each billed), which no OpenAI usage field holds: kept
    under Anthropic's own name, `server_tool_use.web_search_requests`, when there were any."""
    server_tools = usage.get("server_tool_use")
    searches = server_tools.get("web_search_requests") if isinstance(server_tools, dict) else None
    if type(searches) is not int or searches <= 0:
        return {}
    return {"server_tool_use": {"web_search_requests": searches}}


def refusal_text(stop_details):
    explanation = (stop_details or {}).get("explanation")
    return explanation if isinstance(explanation, str) and explanation else STANDARD_REFUSAL


def chat_usage(usage):
    """Chat's prompt_tokens include cached tokens (see token_counts)."""
    counts = token_counts(usage)
    out = {
        "prompt_tokens": counts.input,
        "completion_tokens": counts.output,
        "total_tokens": counts.input + counts.output,
        "prompt_tokens_details": {"cached_tokens": counts.cache_read},
    }
    if counts.thinking is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": counts.thinking}
    out.update(search_usage(usage))
    return out


TokenCounts = collections.namedtuple("TokenCounts", "input cache_read cache_write output thinking")


def token_counts(usage):
    """Anthropic usage as OpenAI counts it: input tokens include cache reads and writes.

    Anthropic's input_tokens exclude cached tokens; every OpenAI API counts them in.
    With server-side compaction the top-level counts are only the last
    iteration's; `iterations` holds every billed one, so those are summed.
    `thinking` is None when Anthropic does not say.
    """

    def total(name):
        parts = usage.get("iterations") if isinstance(usage.get("iterations"), list) else [usage]
        return sum(part.get(name) or 0 for part in parts if isinstance(part, dict))

    cache_read, cache_write = total("cache_read_input_tokens"), total("cache_creation_input_tokens")
    return TokenCounts(
        input=total("input_tokens") + cache_read + cache_write,
        cache_read=cache_read,
        cache_write=cache_write,
        output=total("output_tokens"),
        thinking=(usage.get("output_tokens_details") or {}).get("thinking_tokens"),
    )


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
