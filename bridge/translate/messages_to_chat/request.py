"""Anthropic Messages request -> Chat Completions request (pure functions).

The body arrives validated (schemas/anthropic.py); what is left here is
where the two protocols place things differently:

- System text (top-level `system`, and `role:"system"` entries inside
  `messages`) is hoisted into one leading system message, in order,
  without Claude Code's `x-anthropic-billing-header` line.
- A user turn's `tool_result` blocks become `role:"tool"` messages placed
  first, right after the assistant message that called them; the rest of
  the turn (and any image or PDF a tool returned, which a tool message
  cannot carry) follows in one user message. Every tool_use must be answered
  in the next user turn and every tool_result must answer one: OpenAI
  rejects anything else, so the bridge says which block is wrong instead.
- An assistant turn's text (also text after a tool_use) becomes `content`,
  its tool_use blocks `tool_calls`; thinking is dropped, or sent as
  `reasoning_content` for upstreams that need it back (DeepSeek), and
  redacted thinking is always dropped.
- Text-only content is flattened to one string (strict servers reject
  arrays), text blocks joined by a blank line; empty text is dropped; an
  `is_error` tool result is prefixed "Error: " since a tool message has no
  error flag; `cache_control` and `citations` go nowhere.
- PDFs travel as Chat `file` parts with a data URL. A `url` document is
  refused (400): the upstream cannot fetch it, and answering without the
  document would change the answer.
- A tool schema without `properties` gets an empty one: OpenAI refuses
  "object schema missing properties", Anthropic and MCP do not.
- Tool names OpenAI would refuse (over 64 characters or outside
  [a-zA-Z0-9_-]) are shortened deterministically (prefix + hash); the map
  back travels in the context, so responses and streams restore them.
- Tool search (Claude Code 2.1.332): every tool in `tools` goes upstream
  inline, `defer_loading` or not, so a `tool_reference` block in a tool
  result (the tool a ToolSearch call loaded) becomes text naming that tool,
  which the upstream model can already call. Claude Code's
  `DeferredToolPlaceholder` ("never call this tool") exists only to keep
  Anthropic's server-side deferred loading on; it is not sent upstream,
  where a model could only call it by mistake.
- Every field the client sent that does not go upstream is named in
  `x-bridge-dropped-params` (Context.dropped): top-level fields this module
  does not read, `cache_control`, `thinking.display`, `tools.defer_loading`,
  a message's `output_config` when nothing takes its effort. `safeguards`
  (a safety check of tool use that only Anthropic's servers run) is also
  logged at WARNING (Context.warnings). `thread` is refused with the details
  on which Anthropic's SDKs resend the whole conversation without it;
  `compaction` is refused, since no signed compaction block can come back.
  The deprecated `output_format` is read as `output_config.format`.
"""

import dataclasses

from ...protocols import json_codec
from ...protocols.errors import invalid
from ..chat_request import (
    CHAT_EFFORTS,
    chat_tool,
    chat_user,
    file_part,
    flattened,
    join,
    stream_fields,
    tool_attachments,
)
from ..messages_client import (
    UNENFORCED,
    content_blocks,
    conversation,
    function_tools,
    refuse_stateful,
    requested_effort,
    source_url,
    system_texts,
    tool_choice,
    upstream_name,
    upstream_tool_id,
)
from ..model_map import map_model
from ..tokens import count_tokens

MAX_STOP_SEQUENCES = 4
# Top-level fields this module translates; any other is reported as dropped.
_READ = frozenset(
    (
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
        "stop_sequences",
        "metadata",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "output_format",
        "stream",
    )
)


@dataclasses.dataclass
class Context:
    """What the response and stream translators need to know about the request."""

    model: str  # the name the client asked for; responses carry it back
    stream: bool
    dropped: list  # request fields not forwarded, for x-bridge-dropped-params
    tool_names: dict  # upstream tool name -> the client's name
    stop_sequences: tuple
    input_tokens: int  # estimate for a stream's message_start (0 when not streamed)
    warnings: list = dataclasses.field(default_factory=list)  # for the operator's log, once per request


def to_chat_request(body, settings):
    """(Chat request body, Context) for a validated Messages request body."""
    refuse_stateful(body)
    names = {}
    dropped = [field for field in body if field not in _READ]
    chat = {
        "model": map_model(settings.model_map, body["model"]),
        "messages": _messages(body, names, settings.openai_reasoning_history, dropped),
    }
    chat[settings.openai_max_tokens_param] = body["max_tokens"]  # a deployment's cap: caps.py
    for field in ("temperature", "top_p"):
        if field in body:
            chat[field] = body[field]
    stop = _stop_sequences(body.get("stop_sequences") or [])
    if stop:
        chat["stop"] = stop
    user = (body.get("metadata") or {}).get("user_id")
    if user:
        chat["user"] = chat_user(user)
    chat.update(_tools(body, names, dropped))
    chat.update(_reasoning(body, settings.openai_reasoning_effort, dropped))
    output_format = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if output_format:
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "structured_output", "schema": output_format["schema"]},
        }
    stream = bool(body.get("stream"))
    if stream:
        chat.update(stream_fields(settings.openai_stream_usage))
    context = Context(
        model=body["model"],
        stream=stream,
        dropped=list(dict.fromkeys(dropped)),
        tool_names={short: name for name, short in names.items()},
        stop_sequences=tuple(stop),
        input_tokens=count_tokens(body) if stream else 0,
        warnings=[UNENFORCED[field] for field in UNENFORCED if field in body],
    )
    return chat, context


# -- messages --------------------------------------------------------------------


def _messages(body, names, reasoning_history, dropped):
    system = system_texts(body.get("system"), dropped)
    out = []
    for i, role, blocks, unanswered in conversation(body, system, dropped):
        if role == "assistant":
            out.extend(_assistant_turn(blocks, names, reasoning_history))
        else:
            out.extend(_user_turn(i, blocks, unanswered, names))
    if system:
        out.insert(0, {"role": "system", "content": join(system)})
    return out


def _assistant_turn(blocks, names, reasoning_history):
    texts, calls, reasoning = [], [], []
    for block in blocks:
        if block["type"] == "text" and block["text"]:
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            calls.append(
                {
                    "id": upstream_tool_id(block["id"]),
                    "type": "function",
                    "function": {
                        "name": upstream_name(block["name"], names),
                        "arguments": json_codec.dumps_text(block["input"]),
                    },
                }
            )
        elif block["type"] == "thinking" and block["thinking"]:
            reasoning.append(block["thinking"])
    if not texts and not calls:
        return []  # thinking only: nothing a Chat assistant message can hold
    message = {"role": "assistant", "content": join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if reasoning_history and reasoning:
        message["reasoning_content"] = join(reasoning)
    return [message]


def _user_turn(i, blocks, unanswered, names):
    """Tool messages first (answering the previous assistant turn), then one user message."""
    tool_messages, attachments, parts = [], [], []
    for j, block in enumerate(blocks):
        path = f"messages.{i}.content.{j}"
        if block["type"] != "tool_result":
            parts.extend(_user_parts(block, path))
            continue
        if unanswered.pop(block["tool_use_id"], None) is None:
            raise invalid(
                f"{path}.tool_use_id: {block['tool_use_id']!r} answers no tool_use of the previous assistant message",
                f"{path}.tool_use_id",
            )
        text, media = _tool_result(block, path, names)
        call_id = upstream_tool_id(block["tool_use_id"])
        tool_messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        if media:
            attachments.extend(tool_attachments(call_id, media))
    content = attachments + parts
    if not content:
        return tool_messages
    return [*tool_messages, {"role": "user", "content": flattened(content)}]


def _tool_result(block, path, names):
    """(text for the tool message, image/file parts it cannot carry)."""
    content = block.get("content")
    texts, media = [], []
    if isinstance(content, str):
        texts = [content] if content else []
    for j, inner in enumerate(content if isinstance(content, list) else []):
        if inner["type"] == "tool_reference":
            texts.append(f"Tool loaded: {upstream_name(inner['tool_name'], names)}")
            continue
        for part in _user_parts(inner, f"{path}.content.{j}"):
            if part["type"] == "text":
                texts.append(part["text"])
            else:
                media.append(part)
    text = join(texts)
    if block.get("is_error"):
        text = f"Error: {text}" if text else "Error"
    return text, media


def _user_parts(block, path):
    """Chat content parts for a text, image or document block."""
    kind = block["type"]
    if kind == "text":
        return [{"type": "text", "text": block["text"]}] if block["text"] else []
    if kind == "image":
        return [{"type": "image_url", "image_url": {"url": source_url(block["source"])}}]
    return _document_parts(block, path)


def _document_parts(block, path):
    source = block["source"]
    heading = [text for text in (block.get("title"), block.get("context")) if text]
    if source["type"] == "url":
        raise invalid(
            f"{path}.source.url: an OpenAI-compatible upstream cannot fetch documents by URL; "
            "send the PDF as a base64 source",
            f"{path}.source.url",
        )
    if source["type"] == "text":
        texts = [*heading, source["data"]] if source["data"] else []
        return [{"type": "text", "text": join(texts)}] if texts else []
    if source["type"] == "content":
        inner = source["content"]
        parts = [p for j, b in enumerate(content_blocks(inner)) for p in _user_parts(b, f"{path}.source.content.{j}")]
        return ([{"type": "text", "text": join(heading)}] if heading and parts else []) + parts
    return [file_part(block.get("title"), source_url(source))]


# -- tools -------------------------------------------------------------------------


def _tools(body, names, dropped):
    tools = function_tools(body, names, dropped)
    choice = body.get("tool_choice")
    if not tools:
        if choice:
            dropped.append("tool_choice")
        return {}
    out = {
        "tools": [
            chat_tool(name, tool.get("description"), tool["input_schema"], tool.get("strict")) for name, tool in tools
        ]
    }
    if choice:
        mode = tool_choice(choice, names, tools)
        out["tool_choice"] = mode if isinstance(mode, str) else {"type": "function", "function": {"name": mode[1]}}
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    return out


# -- sampling and the rest -------------------------------------------------------------


def _stop_sequences(sequences):
    if len(sequences) > MAX_STOP_SEQUENCES:
        raise invalid(
            f"stop_sequences: an OpenAI-compatible upstream accepts at most "
            f"{MAX_STOP_SEQUENCES} stop sequences, got {len(sequences)}",
            "stop_sequences",
        )
    return [s for s in sequences if s]


def _reasoning(body, enabled, dropped):
    """thinking / output_config.effort as reasoning_effort, for upstreams configured to take it.

    An explicit effort wins; else an enabled budget picks low/medium/high; a
    disabled thinking asks for "low", the least every reasoning_effort server
    accepts; adaptive thinking leaves the upstream's default.
    """
    thinking = body.get("thinking") or {}
    effort = requested_effort(body)
    if not enabled:
        if thinking and thinking["type"] != "disabled":
            dropped.append("thinking")
        if effort:
            dropped.append("output_config.effort")
        return {}
    if "display" in thinking:
        dropped.append("thinking.display")  # whether thinking is shown: the upstream decides
    if effort:
        return {"reasoning_effort": CHAT_EFFORTS[effort]}
    if thinking.get("type") == "enabled":
        budget = thinking["budget_tokens"]
        return {"reasoning_effort": "low" if budget < 4096 else "medium" if budget < 16384 else "high"}
    if thinking.get("type") == "disabled":
        return {"reasoning_effort": "low"}
    return {}
