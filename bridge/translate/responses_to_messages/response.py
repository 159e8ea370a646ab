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

Usage follows OpenAI (responses_events.usage); `reasoning_tokens` is Anthropic's thinking
token count, 0 when it does not say; web searches are `server_tool_use.web_search_requests`,
Anthropic's name, as on the Chat front. The response object, its items and their ids are
responses_events.py's, shared with the other pairs serving Responses clients; the stream
translator (stream.py) builds its items and the final response from these same helpers.
"""

from ...protocols import shapes
from ...protocols.reasoning import encrypted_content
from ..anthropic_request import WEB_SEARCH_TOOL
from ..anthropic_response import FINISH_REASONS, refusal_text, search_usage, token_counts, url_citations
from ..responses_client import model_json
from ..responses_events import (
    call_item,
    client_tool,
    custom_input,
    envelope,
    item_id,
    mark_incomplete,
    message_item,
    outcome,
    output_text,
    reasoning_item,
    refusal_part,
    usage,
)


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
            output.append(tool_call_item(context, len(output), block["id"], block["name"], block.get("input")))
        elif kind in ("thinking", "redacted_thinking"):
            parts = None
            output.append(thinking_item(item_id(context, "reasoning", len(output)), block, context.summary))
    if refused(message.get("stop_reason")):
        add_part(refusal_part(refusal_text(message.get("stop_details"))))
    status, incomplete_details = outcome(FINISH_REASONS.get(message.get("stop_reason")))
    if status == "incomplete":
        mark_incomplete(output)
    return envelope(
        context,
        status,
        output,
        usage=anthropic_usage(message.get("usage") or {}),
        incomplete_details=incomplete_details,
    )


def refused(stop_reason):
    return FINISH_REASONS.get(stop_reason) == "content_filter"


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


def thinking_item(identifier, block, summary):
    """A thinking block as a reasoning item: the block itself always rides in encrypted_content."""
    text = block.get("thinking") if block.get("type") == "thinking" else ""
    return reasoning_item(
        identifier, text, encrypted_content({**block, "signature": block.get("signature") or ""}), summary
    )


def tool_call_item(context, output_index, call_id, upstream_name, tool_input, status="completed"):
    """A tool_use as a function_call (its input as arguments) or, for a custom tool, a custom_tool_call."""
    custom = client_tool(context, upstream_name)["kind"] == "custom"
    value = custom_input(tool_input) if custom else arguments(tool_input)
    return call_item(context, output_index, call_id, upstream_name, value, status)


def arguments(tool_input):
    """Tool input as a JSON string, written the way Anthropic streams it (json.dumps' own separators).

    The streamed argument fragments then add up to exactly these arguments whenever the
    model wrote its JSON in that common form, as OpenAI's deltas always add up.
    """
    return model_json(tool_input if tool_input is not None else {})


def anthropic_usage(message_usage):
    """Anthropic usage in the Responses shape (token_counts); reasoning tokens 0 when Anthropic does not say."""
    counts = token_counts(message_usage)
    return usage(
        counts.input,
        counts.cache_read,
        counts.cache_write,
        counts.output,
        counts.thinking or 0,
        **search_usage(message_usage),
    )
