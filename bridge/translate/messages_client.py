"""An Anthropic Messages client on an OpenAI upstream: what the Messages front's pairs share
(messages_to_chat, messages_to_responses; pure functions).

The request: fields that ask for stored state are refused (thread, compaction); system
text is gathered without Claude Code's billing line; every tool_use must be answered in
the next user turn; tool names OpenAI would refuse are shortened and restored; Claude
Code's deferred-tool placeholder goes nowhere; a `role:"system"` message's effort steers
the turns after it. The answer: the message around its content (and a stream's
message_start), ids and tool inputs as Anthropic requires them, the stop reason, and a
context overflow in the words Claude Code compacts on. What any OpenAI upstream needs of a
request (a schema's properties, a hashed user, a call id's length) is chat_request.py's.
"""

import base64
import binascii
import itertools
import json
import re

from ..protocols import ids, overflow
from ..protocols.errors import BridgeError, invalid
from ..protocols.tool_names import safe_tool_name
from .chat_request import openai_call_id
from .chat_response import arguments_text

# -- the request ------------------------------------------------------------------------------

# Claude Code's first system line, for Anthropic's billing: a hash that changes per request, meaningless
# to a model, would sit at the head of the prompt and defeat the upstream's prefix cache.
_BILLING_MARK = "x-anthropic-billing-header:"
_BILLING_HEADER = re.compile(rf"^{_BILLING_MARK}.*(?:\n|$)", re.MULTILINE)
# Dropped fields that switch off a safety check the upstream cannot run: an operator must hear of them.
UNENFORCED = {
    "safeguards": "safeguards (Anthropic's server-side check of dangerous tool use) cannot run "
    "on an OpenAI-compatible upstream; the request goes on without it"
}
_CACHE_CONTROL = itertools.repeat("cache_control")
# Claude Code's stand-in tool that keeps Anthropic's deferred tool loading on; meaningless elsewhere.
DEFERRED_TOOL_PLACEHOLDER = "DeferredToolPlaceholder"


def refuse_stateful(body):
    """Fields that ask the server to keep or rewrite the conversation: bridge stores nothing.

    `thread` gets Anthropic's own refusal (error.details.error_code thread_unsupported_request),
    on which both SDKs' tool runners stop threading and resend the whole conversation.
    """
    if "thread" in body:
        raise BridgeError(
            "invalid_request",
            "thread: this endpoint does not store conversations; send the "
            "full conversation in `messages` without `thread`",
            param="thread",
            details={"error_code": "thread_unsupported_request", "unsupported": []},
        )
    if body.get("compaction") is not None:
        raise invalid(
            "compaction: an OpenAI-compatible upstream cannot return a compaction block; "
            "summarize the conversation with a normal request instead",
            "compaction",
        )


def content_blocks(content):
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def system_texts(content, dropped):
    """The non-empty texts of a system string or list of text blocks, without a billing header line."""
    if content is None:
        return []
    blocks = content_blocks(content)
    if marks_cache(blocks):
        dropped.append("cache_control")
    texts = [_without_billing_header(block["text"]) for block in blocks]
    return [text for text in texts if text]


def _without_billing_header(text):
    """The text without its billing line. The regex tries every line start, a long scan on a
    system prompt of many kilobytes: only a text that holds the line goes through it."""
    return _BILLING_HEADER.sub("", text) if _BILLING_MARK in text else text


def marks_cache(blocks):
    """Whether a block carries Anthropic's cache_control, which no OpenAI upstream takes. Looked
    for in C (map over dict.__contains__): a generator's frames cost more than the lookups."""
    return any(map(dict.__contains__, blocks, _CACHE_CONTROL))


def conversation(body, system, dropped):
    """The user and assistant turns of `messages` as (index, role, blocks, unanswered).

    A `role:"system"` message's texts join `system` (the upstream's system prompt) instead;
    cache_control is named as dropped. For a user turn, `unanswered` maps the tool_use ids of
    the assistant turn before it to their paths: the translator pops those its tool_results
    answer, and one left is a 400 naming the call (OpenAI refuses a call without its output).
    """
    unanswered = {}
    for i, message in enumerate(body["messages"]):
        role, blocks = message["role"], content_blocks(message["content"])
        if role == "system":
            system.extend(system_texts(blocks, dropped))
            continue
        if marks_cache(blocks):
            dropped.append("cache_control")
        if role == "assistant":
            require_answered(unanswered)
            unanswered = {b["id"]: f"messages.{i}.content.{j}" for j, b in enumerate(blocks) if b["type"] == "tool_use"}
            yield i, role, blocks, None
        else:
            yield i, role, blocks, unanswered
            require_answered(unanswered)
    require_answered(unanswered)


def require_answered(unanswered):
    """A 400 naming the first tool_use (id -> path) left without its tool_result."""
    if unanswered:
        tool_id, path = next(iter(unanswered.items()))
        raise invalid(
            f"{path}: tool_use {tool_id!r} has no tool_result in the next user message; "
            "every tool call must be answered before the conversation goes on",
            path,
        )


def upstream_name(name, names):
    """The name OpenAI will accept for a tool, remembered so responses can restore it."""
    if name not in names:
        names[name] = safe_tool_name(name)
    return names[name]


def function_tools(body, names, dropped):
    """The client's tools an OpenAI upstream gets, as (upstream name, tool): every one inline.

    Anthropic's server tools (web search...) are a 400: an OpenAI upstream cannot run them.
    Tool search (Claude Code 2.1.332) loads tools on Anthropic's servers: `defer_loading` is
    named as dropped, and the `DeferredToolPlaceholder` that only keeps it on is not sent,
    where a model could only call it by mistake.
    """
    tools = []
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") not in (None, "custom"):
            raise invalid(
                f"tools.{i}.type: {tool['type']!r} is an Anthropic server tool; an "
                "OpenAI-compatible upstream cannot run it",
                f"tools.{i}.type",
            )
        if "defer_loading" in tool:
            dropped.append("tools.defer_loading")  # every tool goes upstream inline
        if tool["name"] == DEFERRED_TOOL_PLACEHOLDER and tool.get("defer_loading"):
            dropped.append(f"tools.{DEFERRED_TOOL_PLACEHOLDER}")
            continue
        tools.append((upstream_name(tool["name"], names), tool))
    return tools


def tool_choice(choice, names, tools):
    """Anthropic's tool_choice as OpenAI's mode: auto, required (`any`), none, or ("function",
    the upstream name of the one tool to call), which must be one of `tools`."""
    kind = choice["type"]
    if kind == "tool":
        if not any(tool["name"] == choice["name"] for _, tool in tools):
            raise invalid(f"tool_choice.name: no tool named {choice['name']!r} in tools", "tool_choice.name")
        return "function", names[choice["name"]]
    return {"auto": "auto", "any": "required", "none": "none"}[kind]


def source_url(source):
    """An image or document source as a URL: its own, or a data URL of its base64 data."""
    if source["type"] == "url":
        return source["url"]
    return f"data:{source['media_type']};base64,{source['data']}"


def requested_effort(body):
    """output_config.effort. Per-turn control (Claude Code 2.1.332): a `role:"system"` message's
    own output_config steers the turns from there on, over the top-level one."""
    effort = (body.get("output_config") or {}).get("effort")
    for message in body["messages"]:
        config = message.get("output_config") if message["role"] == "system" else None
        if config and config.get("effort"):
            effort = config["effort"]
    return effort


# -- the answer -------------------------------------------------------------------------------

INVALID_ARGUMENTS_KEY = "_invalid_json_arguments"
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_NOT_IN_ID = re.compile(r"[^a-zA-Z0-9_-]")
_ENCODED_ID = "toolu_b64_"
_ENCODED_ID_MAX = 1024  # the longest encoded id decoded back: no upstream's id is nearly so long


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
    found = overflow.reported(error)
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
    """A message's stop_reason and stop_sequence for how the upstream ended (a Chat finish_reason:
    length, content_filter, stop...); stop_details for a refusal."""
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


def client_tool_id(upstream_id):
    """An upstream tool-call id as an Anthropic tool_use id, which must match [a-zA-Z0-9_-]+.

    Ids that do not fit (Kimi's `functions.get_weather:0`) are base64url-encoded
    so the next request can give the upstream its own id back (upstream_tool_id).
    A missing id gets a fresh one.
    """
    if not isinstance(upstream_id, str) or not upstream_id:
        return f"toolu_{ids.random_hex()}"
    if _ANTHROPIC_ID.match(upstream_id):
        return upstream_id
    return _ENCODED_ID + base64.urlsafe_b64encode(upstream_id.encode()).decode().rstrip("=")


def upstream_tool_id(client_id):
    """The tool-call id to send upstream for a tool_use id of the conversation.

    Reverses client_tool_id; any other id goes as OpenAI takes it (openai_call_id). An
    encoded id longer than _ENCODED_ID_MAX is not decoded: a client's id costs no copies of
    itself, however long.
    """
    if client_id.startswith(_ENCODED_ID) and len(client_id) <= _ENCODED_ID_MAX:
        encoded = client_id[len(_ENCODED_ID) :]
        try:
            return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError):
            pass
    return openai_call_id(client_id)


def anthropic_message(upstream_id, context, content, stop, usage):
    """An Anthropic answer of `content`, under the model name the client asked for; `stop` is
    stop_fields()."""
    return {
        "id": message_id(upstream_id),
        "type": "message",
        "role": "assistant",
        "model": context.model,
        "content": content,
        **stop,
        "usage": usage,
    }


def message_start(upstream_id, context):
    """A stream's first event: the message without content, with the request's input estimate."""
    usage = {
        "input_tokens": context.input_tokens,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    not_stopped = {"stop_reason": None, "stop_sequence": None}
    return {"type": "message_start", "message": anthropic_message(upstream_id, context, [], not_stopped, usage)}


# A text block's content_block_delta as the relay frames it (serve/streaming.py), around its
# block's index and a plain text (the fast path, translator.py).
TEXT_DELTA_FRAME = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"text_delta","text":"%s"}}\n\n'
)


def message_id(upstream_id):
    """msg_ + the upstream answer's id (for tracing), or a fresh id when it has none."""
    cleaned = _NOT_IN_ID.sub("", upstream_id) if isinstance(upstream_id, str) else ""
    return f"msg_{cleaned or ids.random_hex()}"
