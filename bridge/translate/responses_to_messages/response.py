"""Anthropic Messages response -> OpenAI Responses `response` object (pure functions).

The response names the model the client asked for, carries `Context.response_id`,
`created_at`, and repeats the request parameters in `Context.echo`. Its `output`
holds one item per thing the client can act on, in the order of Anthropic's blocks:

- `thinking` / `redacted_thinking` -> a `reasoning` item. `encrypted_content` always
  carries the block itself (signature included, see protocols/reasoning.py) for the client to
  echo; the thinking text is shown as a `summary_text` only when the request asked
  for a reasoning summary (`Context.summary`), and never for redacted thinking.
- `text` -> an `output_text` part of a `message` item. Text blocks that no other item
  separates (citations split one answer into many blocks; server tools Responses
  cannot show sit between them) are parts of one message; empty text is left out.
- the JSON-format tool (`Context.json_tool`) -> the message's `output_text`: its input
  is the answer, as the chat front does.
- `tool_use` -> a `function_call` (`call_id` = the tool_use id, `arguments` a JSON
  string, `namespace` for a namespaced tool) or, for a custom tool, a
  `custom_tool_call` whose `input` is the text of Anthropic's `{"input": "..."}`.
  `Context.tools` maps the upstream name back to the client's.
- a web search (`server_tool_use` named web_search) -> a `web_search_call` item with its
  query, `completed` once its `web_search_tool_result` came (`failed` for an error
  result, `incomplete` when the turn paused first). A text block's web citations are
  `url_citation` annotations spanning its whole output_text part. Other server tools
  are left out.
- stop_reason `refusal` -> a `refusal` part closing the (last) message.
- stop_reason `max_tokens` (or the context window filled) -> `status: "incomplete"`,
  `incomplete_details.reason: "max_output_tokens"` and the last item `incomplete`, as
  OpenAI does; everything else is `completed`.

Usage follows OpenAI: `input_tokens` include cache reads and writes, shown again as
`cached_tokens` and `cache_write_tokens` (Codex reads both); `reasoning_tokens` is
Anthropic's thinking token count, 0 when it does not say; web searches are
`server_tool_use.web_search_requests`, Anthropic's name, as on the Chat front. Item ids are the type's
prefix and the response id's hex with the output index, so the streamed and the
non-streamed answer agree. The stream translator (stream.py) builds its items and
the final response from these same helpers.
"""

import json

from ...protocols import overflow, shapes
from ...protocols.reasoning import encrypted_content
from ..anthropic_request import WEB_SEARCH_TOOL
from ..anthropic_response import FINISH_REASONS, refusal_text, search_usage, token_counts, url_citations

ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "reasoning": "rs",
    "web_search_call": "ws",
}
# The request parameters a Response must repeat, when the request translator has not set them.
REQUIRED_ECHO = {"tool_choice": "auto", "tools": [], "parallel_tool_calls": True}
# Anthropic says so in an error message only: "prompt is too long: 208310 tokens > 200000 maximum",
# "input length and `max_tokens` exceed context limit: 180000 + 40000 > 200000".


def to_response(message, context):
    """One Anthropic message as one Response; blocks it cannot show (server tools but web search) are left out."""
    shapes.anthropic_message(message)
    output = []
    parts = None  # the content of the message item ending `output`, while more text may join it
    searches = {}  # server_tool_use id -> its web_search_call item

    def add_part(part):
        nonlocal parts
        if parts is None:
            parts = []
            output.append(message_item(item_id(context, "message", len(output)), parts))
        parts.append(part)

    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "tool_use" and block.get("name") == context.json_tool:
            kind, block = "text", {"text": arguments(block.get("input"))}
        if kind == "text" and block.get("text"):
            add_part(output_text(block["text"], url_annotations(block.get("citations"), block["text"])))
        elif is_web_search(block):
            parts = None
            item = web_search_item(item_id(context, "web_search_call", len(output)), block.get("input"))
            output.append(searches.setdefault(block.get("id"), item))
        elif kind == "web_search_tool_result" and block.get("tool_use_id") in searches:
            searches[block["tool_use_id"]]["status"] = search_status(block)
        elif kind == "tool_use":
            parts = None
            output.append(call_item(context, len(output), block["id"], block["name"], block.get("input")))
        elif kind in ("thinking", "redacted_thinking"):
            parts = None
            output.append(reasoning_item(item_id(context, "reasoning", len(output)), block, context.summary))
    if refused(message.get("stop_reason")):
        add_part(refusal_part(refusal_text(message.get("stop_details"))))
    status, incomplete_details = outcome(message.get("stop_reason"))
    if status == "incomplete" and output and "status" in output[-1]:
        output[-1]["status"] = "incomplete"
    return envelope(
        context, status, output, usage=usage(message.get("usage") or {}), incomplete_details=incomplete_details
    )


def envelope(context, status, output, *, usage=None, error=None, incomplete_details=None):
    """The response object around `output`, in every state the stream announces too."""
    return {
        "id": context.response_id,
        "object": "response",
        "created_at": context.created_at,
        "status": status,
        "error": error,
        "incomplete_details": incomplete_details,
        "model": context.model,
        "output": output,
        "usage": usage,
        **REQUIRED_ECHO,
        **context.echo,
    }


def outcome(stop_reason):
    """`status` and `incomplete_details` for Anthropic's stop_reason: a cut-off answer is incomplete."""
    if FINISH_REASONS.get(stop_reason) == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return "completed", None


def refused(stop_reason):
    return FINISH_REASONS.get(stop_reason) == "content_filter"


def item_id(context, item_type, output_index):
    """Stable within one response and unique across responses: the response id carries 32 random hex digits."""
    return f"{ID_PREFIXES[item_type]}_{context.response_id.removeprefix('resp_')}{output_index:04x}"


def message_item(identifier, parts, status="completed"):
    return {"id": identifier, "type": "message", "status": status, "role": "assistant", "content": parts}


def output_text(text, annotations=()):
    return {"type": "output_text", "text": text, "annotations": list(annotations), "logprobs": []}


def url_annotations(citations, text):
    """The url_citation annotations of one output_text part: each cites the whole part, which is
    the one Anthropic text block the citation came with."""
    return [
        {"type": "url_citation", "url": url, "title": title, "start_index": 0, "end_index": len(text)}
        for url, title in url_citations(citations)
    ]


def is_web_search(block):
    return block.get("type") == "server_tool_use" and block.get("name") == WEB_SEARCH_TOOL["name"]


def web_search_item(identifier, tool_input, status="incomplete"):
    """A web search Anthropic ran, as Responses' web_search_call; incomplete until its result came."""
    query = tool_input.get("query") if isinstance(tool_input, dict) else None
    action = {"type": "search", "query": query if isinstance(query, str) else ""}
    return {"id": identifier, "type": "web_search_call", "status": status, "action": action}


def search_status(result):
    """A web_search_tool_result holds the results, or an error object (max_uses_exceeded...)."""
    return "completed" if isinstance(result.get("content"), list) else "failed"


def refusal_part(text):
    return {"type": "refusal", "refusal": text}


def reasoning_item(identifier, block, summary):
    """Thinking text is a summary only when asked for; the block itself always rides in encrypted_content."""
    text = block.get("thinking") if block.get("type") == "thinking" else ""
    return {
        "id": identifier,
        "type": "reasoning",
        "summary": [summary_text(text)] if summary and text else [],
        "encrypted_content": encrypted_content({**block, "signature": block.get("signature") or ""}),
    }


def summary_text(text):
    return {"type": "summary_text", "text": text}


def call_item(context, output_index, call_id, upstream_name, tool_input, status="completed"):
    """A function_call, or a custom_tool_call for a custom tool, under the client's own tool name."""
    tool = context.tools.get(upstream_name) or {"kind": "function", "name": upstream_name, "namespace": None}
    if tool["kind"] == "custom":
        item = {
            "id": item_id(context, "custom_tool_call", output_index),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": tool["name"],
            "input": custom_input(tool_input),
        }
    else:
        item = {
            "id": item_id(context, "function_call", output_index),
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": tool["name"],
            "arguments": arguments(tool_input),
        }
    if tool.get("namespace"):
        item["namespace"] = tool["namespace"]
    return item


def arguments(tool_input):
    """Tool input as a JSON string, written the way Anthropic streams it (json.dumps' own separators).

    The streamed argument fragments then add up to exactly these arguments whenever the
    model wrote its JSON in that common form, as OpenAI's deltas always add up.
    """
    return json.dumps(tool_input if tool_input is not None else {}, ensure_ascii=False)


def custom_input(tool_input):
    """A custom tool's freeform text: the request translator declared it as `{"input": string}`."""
    value = tool_input.get("input") if isinstance(tool_input, dict) else tool_input
    if value is None:
        return ""
    return value if isinstance(value, str) else arguments(value)


def usage(anthropic_usage):
    """Responses usage: input includes cache reads and writes (see token_counts)."""
    counts = token_counts(anthropic_usage)
    return {
        "input_tokens": counts.input,
        "input_tokens_details": {"cached_tokens": counts.cache_read, "cache_write_tokens": counts.cache_write},
        "output_tokens": counts.output,
        "output_tokens_details": {"reasoning_tokens": counts.thinking or 0},
        "total_tokens": counts.input + counts.output,
        **search_usage(anthropic_usage),
    }


def response_error(error):
    """The Response `error` for a BridgeError, with a code Codex acts on.

    rate_limit_exceeded: Codex retries after the delay it reads from "try again in Ns";
    context_length_exceeded: it stops and says the context window is full; anything
    else is server_error, which it retries with backoff.
    """
    message = error.message
    if error.kind == "rate_limit":
        seconds = _seconds((error.upstream_headers or {}).get("retry-after"))
        if seconds is not None:
            message = f"{message.rstrip('.')}. Please try again in {seconds:g}s."
        return {"code": "rate_limit_exceeded", "message": message}
    if error.code == "context_length_exceeded" or overflow.find(error.upstream_detail) is not None:
        return {"code": "context_length_exceeded", "message": message}
    return {"code": "server_error", "message": message}


def _seconds(retry_after):
    """A Retry-After given in seconds; an HTTP date (rare upstream) gives no delay here."""
    try:
        seconds = float(retry_after)
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < float("inf") else None
