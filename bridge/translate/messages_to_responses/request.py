"""Anthropic Messages request -> OpenAI Responses request (pure functions).

The body arrives validated (schemas/anthropic.py); the rules every OpenAI upstream shares
(stored state refused, system text without Claude Code's billing line, tool_use answered by
tool_result, tool names, server tools refused, the deferred-tool placeholder) are
messages_client.py's. What is the Responses API's own:

Stateless
- Always `store: false`; `include: ["reasoning.encrypted_content"]` for a model that reasons
  (capabilities.py `encrypted_reasoning`; OpenAI refuses it for gpt-4o and gpt-4.1).
- A `thinking` block whose signature is bridge's (protocols/reasoning.py) is the reasoning
  item it carries, sent back byte for byte with its id: OpenAI accepts a reasoning item
  under store:false when it carries its encrypted content. Claude Code keeps only {type,
  thinking, signature} of old thinking, which is all this reads. A thinking block with
  another signature (a real Anthropic one, an empty one) and `redacted_thinking` are dropped
  and named (`messages.N.content.M`): nothing else could continue that reasoning. A reasoning
  item OpenAI requires to be followed by its output (a message or a call) in the same turn;
  one that would not be is dropped and named too.
- No other item carries an `id`: messages and calls go as content, never as references to
  items the upstream did not store.

Turns
- `system` (and `role:"system"` messages) are `instructions`.
- A user turn's `tool_result` blocks are `function_call_output` items, first, then its other
  content as one user message: text `input_text`, images `input_image` (a data URL or the
  URL), PDFs `input_file` (base64 as `file_data`, a URL as `file_url`), text documents as
  text. A tool result's images and files stay in its output (an array of input parts), its
  text a string otherwise; an `is_error` result is prefixed "Error: "; a `tool_reference`
  (Claude Code's tool search) names the tool, which goes upstream inline anyway.
- An assistant turn's blocks keep their order: text as an assistant `message` item
  (`output_text` parts), each `tool_use` a `function_call` item (call_id: the tool_use id,
  cleaned as messages_client.upstream_tool_id does), thinking as said above.

Tools and the rest
- Tools are `function` tools; `strict` is sent as the client meant it, false unless it asked
  (the Responses API takes a missing `strict` as true, and refuses most schemas then).
- `tool_choice`: auto, `any` is `required`, none, a named tool `{"type": "function", "name"}`;
  `disable_parallel_tool_use` is `parallel_tool_calls: false`.
- `max_tokens` is `max_output_tokens` (OpenAI's minimum, 16, where it asks for less, named:
  Claude Code's one-token probe), which bounds reasoning and answer together as Anthropic's bounds
  thinking and answer.
- Reasoning (models that reason): `output_config.effort` (a `role:"system"` message's too) is
  `reasoning.effort`, Claude Code's `max` as `xhigh`; else a thinking budget picks low /
  medium / high, thinking disabled asks for `low`, adaptive or absent leaves the model's
  default; `reasoning.summary: "auto"` always, for the thinking text. On a model that does
  not reason, `thinking` and `output_config.effort` are named as dropped.
- `output_config.format` (or the deprecated `output_format`) is `text.format` json_schema.
- `metadata.user_id` is `user` and `prompt_cache_key`, as a hash (chat_request.hashed_user):
  the upstream keeps a session's prompts together without learning who it is.
- Named as dropped: `stop_sequences` and `top_k` (no Responses equivalent), `temperature`
  and `top_p` on a model that reasons (OpenAI refuses them), `cache_control`,
  `thinking.display`, `tools.defer_loading`, and top-level fields this module does not read.
  `safeguards` is also logged (Context.warnings).
"""

import dataclasses

from ...protocols import json_codec
from ...protocols.errors import invalid
from ...protocols.reasoning import reasoning_item
from ..capabilities import capabilities_of
from ..chat_request import hashed_user, object_parameters
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
from ..responses_request import MIN_OUTPUT_TOKENS, function_tool, sampling, stateless
from ..tokens import count_tokens

# What OpenAI's input-token count (POST /responses/input_tokens) takes of a request.
COUNTED = ("model", "instructions", "input", "reasoning", "text", "tools", "tool_choice", "parallel_tool_calls")
# Anthropic's output_config.effort -> OpenAI's reasoning.effort: xhigh is OpenAI's most.
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
# Top-level fields this module translates; any other is reported as dropped.
_READ = frozenset(
    (
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
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

    model: str  # the name the client asked for; answers carry it back
    stream: bool
    dropped: list  # request fields not forwarded, for x-bridge-dropped-params
    tool_names: dict  # upstream tool name -> the client's name
    input_tokens: int  # estimate for a stream's message_start (0 when not streamed)
    warnings: list = dataclasses.field(default_factory=list)  # for the operator's log, once per request


def to_responses_request(body, settings):
    """(Responses request body, Context) for a validated Messages request body."""
    refuse_stateful(body)
    names = {}
    dropped = [field for field in body if field not in _READ]
    model = map_model(settings.model_map, body["model"])
    reasons = capabilities_of(model, settings.capabilities).encrypted_reasoning
    instructions, items = _input(body, names, dropped)
    out = {"model": model}
    if instructions:
        out["instructions"] = instructions
    out["input"] = items
    if "max_tokens" in body:  # count_tokens has none
        out["max_output_tokens"] = max(body["max_tokens"], MIN_OUTPUT_TOKENS)  # a deployment's cap: caps.py
        if body["max_tokens"] < MIN_OUTPUT_TOKENS:
            dropped.append("max_tokens")  # not sent as asked
    out.update(stateless(reasons))
    if reasons:
        out["reasoning"] = _reasoning(body, dropped)
    else:
        dropped.extend(_unreasoned(body))
    out.update(sampling(body, reasons, dropped))
    out.update(_tools(body, names, dropped))
    output_format = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if output_format:
        schema = output_format["schema"]
        out["text"] = {"format": {"type": "json_schema", "name": "structured_output", "schema": schema}}
    user = (body.get("metadata") or {}).get("user_id")
    if user:
        out["user"] = out["prompt_cache_key"] = hashed_user(user)
    stream = bool(body.get("stream"))
    if stream:
        out["stream"] = True
    context = Context(
        model=body["model"],
        stream=stream,
        dropped=list(dict.fromkeys(dropped)),
        tool_names={short: name for name, short in names.items()},
        input_tokens=count_tokens(body) if stream else 0,
        warnings=[UNENFORCED[field] for field in UNENFORCED if field in body],
    )
    return out, context


def counted_request(body, settings):
    """(input-token count request, Context) for a validated count_tokens body: the request
    to_responses_request makes of it, with the fields OpenAI's count takes."""
    out, context = to_responses_request(body, settings)
    return {field: out[field] for field in COUNTED if field in out}, context


# -- turns --------------------------------------------------------------------------------


def _input(body, names, dropped):
    """(instructions, input items) of the conversation."""
    system = system_texts(body.get("system"), dropped)
    items = []
    for i, role, blocks, unanswered in conversation(body, system, dropped):
        if role == "assistant":
            items.extend(_assistant_turn(i, blocks, names, dropped))
        else:
            items.extend(_user_turn(i, blocks, unanswered, names))
    return "\n\n".join(system), items


def _assistant_turn(i, blocks, names, dropped):
    """The turn's items in order: reasoning items, messages (a run of text blocks each), calls."""
    items, texts = [], []
    for j, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            if block["text"]:
                texts.append({"type": "output_text", "text": block["text"]})
            continue
        if texts:
            items.append(_assistant_message(texts))
            texts = []
        if kind == "tool_use":
            items.append(
                {
                    "type": "function_call",
                    "call_id": upstream_tool_id(block["id"]),
                    "name": upstream_name(block["name"], names),
                    "arguments": json_codec.dumps_text(block["input"]),
                }
            )
            continue
        item = reasoning_item(block.get("signature")) if kind == "thinking" else None
        if item is None:
            dropped.append(f"messages.{i}.content.{j}")  # redacted, or another model's: nothing continues it
        else:
            items.append((f"messages.{i}.content.{j}", item))
    if texts:
        items.append(_assistant_message(texts))
    return _followed(items, dropped)


def _followed(items, dropped):
    """The turn's items without the reasoning items that no message or call follows (OpenAI
    refuses one "provided without its required following item"), which are named as dropped."""
    kept = []
    for position, item in enumerate(items):
        if isinstance(item, tuple):
            path, item = item
            if not any(not isinstance(later, tuple) for later in items[position + 1 :]):
                dropped.append(path)
                continue
        kept.append(item)
    return kept


def _assistant_message(parts):
    return {"type": "message", "role": "assistant", "content": parts}


def _user_turn(i, blocks, unanswered, names):
    """function_call_output items first (answering the previous assistant turn), then one user message."""
    outputs, parts = [], []
    for j, block in enumerate(blocks):
        path = f"messages.{i}.content.{j}"
        if block["type"] != "tool_result":
            parts.extend(_user_parts(block))
            continue
        if unanswered.pop(block["tool_use_id"], None) is None:
            raise invalid(
                f"{path}.tool_use_id: {block['tool_use_id']!r} answers no tool_use of the previous assistant message",
                f"{path}.tool_use_id",
            )
        outputs.append(
            {
                "type": "function_call_output",
                "call_id": upstream_tool_id(block["tool_use_id"]),
                "output": _tool_output(block, names),
            }
        )
    if not parts:
        return outputs
    return [*outputs, {"role": "user", "content": parts}]


def _tool_output(block, names):
    """A tool result's output: its text, or input parts when it holds images or files."""
    content = block.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) and content else []
    for inner in content if isinstance(content, list) else []:
        if inner["type"] == "tool_reference":
            parts.append({"type": "input_text", "text": f"Tool loaded: {upstream_name(inner['tool_name'], names)}"})
        else:
            parts.extend(_user_parts(inner))
    if block.get("is_error"):  # an output has no error flag
        if parts and parts[0]["type"] == "input_text":
            parts[0] = {"type": "input_text", "text": "Error: " + parts[0]["text"]}
        else:
            parts.insert(0, {"type": "input_text", "text": "Error"})
    texts = [part["text"] for part in parts if part["type"] == "input_text"]
    return "\n\n".join(texts) if len(texts) == len(parts) else parts


def _user_parts(block):
    """Input parts for a text, image or document block."""
    kind = block["type"]
    if kind == "text":
        return [{"type": "input_text", "text": block["text"]}] if block["text"] else []
    if kind == "image":
        return [{"type": "input_image", "image_url": source_url(block["source"]), "detail": "auto"}]
    return _document_parts(block)


def _document_parts(block):
    source = block["source"]
    heading = [text for text in (block.get("title"), block.get("context")) if text]
    if source["type"] == "text":
        texts = [*heading, source["data"]] if source["data"] else []
        return [{"type": "input_text", "text": "\n\n".join(texts)}] if texts else []
    if source["type"] == "content":
        parts = [part for inner in content_blocks(source["content"]) for part in _user_parts(inner)]
        return ([{"type": "input_text", "text": "\n\n".join(heading)}] if heading and parts else []) + parts
    if source["type"] == "url":
        return [{"type": "input_file", "file_url": source["url"]}]
    return [{"type": "input_file", "filename": block.get("title") or "document.pdf", "file_data": source_url(source)}]


# -- tools, reasoning -------------------------------------------------------------------------


def _tools(body, names, dropped):
    tools = function_tools(body, names, dropped)
    choice = body.get("tool_choice")
    if not tools:
        if choice:
            dropped.append("tool_choice")
        return {}
    out = {
        "tools": [
            function_tool(name, tool.get("description"), object_parameters(tool["input_schema"]), tool.get("strict"))
            for name, tool in tools
        ]
    }
    if choice:
        mode = tool_choice(choice, names, tools)
        out["tool_choice"] = mode if isinstance(mode, str) else {"type": "function", "name": mode[1]}
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    return out


def _reasoning(body, dropped):
    """`reasoning` for a model that reasons: the effort asked for, and summaries for the thinking text.

    An explicit effort wins; else an enabled budget picks low/medium/high; a disabled thinking
    asks for low, the least every reasoning model takes; adaptive thinking leaves the model's default.
    """
    thinking = body.get("thinking") or {}
    if "display" in thinking:
        dropped.append("thinking.display")  # whether thinking is shown: summaries are asked for anyway
    effort = requested_effort(body)
    if effort:
        effort = EFFORTS[effort]
    elif thinking.get("type") == "enabled":
        budget = thinking["budget_tokens"]
        effort = "low" if budget < 4096 else "medium" if budget < 16384 else "high"
    elif thinking.get("type") == "disabled":
        effort = "low"
    return {"effort": effort, "summary": "auto"} if effort else {"summary": "auto"}


def _unreasoned(body):
    """What a model that does not reason cannot take: thinking and an effort, named as dropped."""
    thinking = body.get("thinking") or {}
    if thinking and thinking["type"] != "disabled":
        yield "thinking"
    if requested_effort(body):
        yield "output_config.effort"
