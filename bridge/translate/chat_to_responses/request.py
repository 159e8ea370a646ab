"""Chat Completions request -> OpenAI Responses request (pure functions).

The body arrives validated by schemas/openai.py (the Chat front's schema: `n` > 1, log
probabilities, audio, custom tools and legacy function calling are refused there), so these
functions only translate.

Stateless
- Always `store: false`; with it, on a model whose reasoning is encrypted (capabilities.py),
  `include: ["reasoning.encrypted_content"]`, so that every reasoning item comes back whole
  and the next request can carry it. No input item has an `id`: under `store: false` the
  upstream keeps none, and refuses an id it does not know. A client's `store: true` is
  named as dropped.

Conversation
- The leading `system`/`developer` messages are `instructions` (each message's text, a blank
  line between them); one later in the conversation stays where it is, an input message of
  its own role.
- A user message's string stays a string; its parts: `text` is `input_text`, `image_url`
  `input_image` (its `detail`, else `auto`), `file` `input_file` (`file_data`, `filename`).
- An assistant message is its reasoning items (below), its text (content parts, refusals
  included, as one string) as an assistant message, then each tool call a `function_call`
  (`call_id` the Chat id, `arguments` compact JSON). A `tool` message is a
  `function_call_output` of its text.
- `thinking_blocks` (the extension entries a Chat answer carries, see response.py): an
  entry whose `signature` is bridge's form of a reasoning item (protocols/reasoning.py) is
  that item again, byte for byte, ahead of its message; any other entry (an Anthropic
  signature, none) is dropped and named (`messages.3.thinking_blocks.0`), and so are the
  items of an assistant message with neither text nor tool calls, which OpenAI refuses
  (a reasoning item must be followed by the item it led to), and every entry on a model
  without reasoning.

Tools and answers
- `function` tools are Responses function tools, `strict` as the client sent it (off unless
  said: Responses would default it on). `tool_choice` (a named function as
  `{"type": "function", "name"}`) and `parallel_tool_calls` go with them.
- `response_format` is `text.format` (`json_schema` with its fields flat); `verbosity` is
  `text.verbosity`.

Limits, reasoning, sampling
- `max_completion_tokens`, else `max_tokens`, is `max_output_tokens`, raised to OpenAI's
  minimum of 16 (and named) when below it; without either the model's own limit holds.
- `reasoning_effort` is `reasoning.effort` with `summary: "auto"` (the summaries are the
  answer's `reasoning_content`); on a model without reasoning it is dropped and named, and
  `temperature`/`top_p` (which reasoning models refuse) are dropped and named on one with.
- `user` is `user`, and `prompt_cache_key` when the client sent none (a hash past OpenAI's
  64 characters); `safety_identifier`, `prompt_cache_key`, `prompt_cache_retention`,
  `service_tier` and `metadata` go as they are.
- Named as dropped: `stop`, `frequency_penalty`, `presence_penalty`, `seed`, `logit_bias`,
  `prediction`, `web_search_options`, Anthropic's `top_k` and `thinking`, and top-level
  fields this module does not know.
"""

import dataclasses
import hashlib
import time

from ...protocols import json_codec
from ...protocols.reasoning import reasoning_item
from ...protocols.schemas.openai import ChatRequest
from ..capabilities import capabilities_of
from ..model_map import map_model
from ..responses_request import MIN_OUTPUT_TOKENS, function_tool, sampling, stateless
from ..tokens import chat_input_tokens

# Parameters with no Responses equivalent: named as dropped when set.
HINTS = (
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "logit_bias",
    "prediction",
    "web_search_options",
    "top_k",
    "thinking",
)
# Parameters the Responses API takes as Chat does.
SAME = ("safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier", "metadata")
# Fields this module reads (the Chat schema's, and those it lets through); any other is named as dropped.
KNOWN = {*ChatRequest().fields, "verbosity", "store", *SAME, *HINTS}
# OpenAI refuses a longer prompt_cache_key.
MAX_CACHE_KEY = 64


@dataclasses.dataclass
class Context:
    """What the response and stream translators need to know about the request."""

    stream: bool
    model: str  # the name the client asked for; responses carry it back
    created: int
    include_usage: bool = False
    input_tokens: int = None  # a stream's input as bridge estimates it, until the upstream reports it
    dropped: list = dataclasses.field(default_factory=list)


def to_responses_request(body, settings):
    """Translate a validated Chat body; returns (Responses body, Context)."""
    stream = bool(body.get("stream"))
    context = Context(
        stream=stream,
        model=body["model"],
        created=int(time.time()),
        include_usage=stream and bool((body.get("stream_options") or {}).get("include_usage")),
        input_tokens=chat_input_tokens(body) if stream else None,
    )
    context.dropped = [name for name in body if name not in KNOWN or (name in HINTS and body[name] is not None)]
    model = map_model(settings.model_map, body["model"])
    caps = capabilities_of(model, settings.capabilities)
    instructions, items = conversation(body["messages"], caps.encrypted_reasoning, context)
    out = {"model": model}
    if instructions:
        out["instructions"] = instructions
    out["input"] = items
    out.update(tools_and_choice(body))
    out.update(text_options(body))
    out.update(reasoning(body, caps.encrypted_reasoning, context))
    out.update(sampling(body, caps.encrypted_reasoning, context.dropped))
    out.update(output_limit(body, context))
    out.update(user_fields(body))
    if body.get("store"):
        context.dropped.append("store")
    out.update(stateless(caps.encrypted_reasoning))
    if stream:
        out["stream"] = True
    return out, context


# -- conversation --------------------------------------------------------------------------


def conversation(messages, reasons, context):
    """(instructions, input items): the leading system/developer messages, then the rest as items;
    reasoning items only for a model that reasons (`reasons`)."""
    lead = next((n for n, message in enumerate(messages) if message["role"] not in INSTRUCTING), len(messages))
    instructions = "\n\n".join([_text(message["content"]) for message in messages[:lead]])
    items = []
    for index, message in enumerate(messages[lead:], lead):
        role = message["role"]
        if role == "user":
            items.append({"type": "message", "role": "user", "content": user_content(message["content"])})
        elif role == "assistant":
            items.extend(assistant_items(message, index, reasons, context))
        elif role == "tool":
            output = _text(message["content"])
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": output})
        else:
            items.append({"type": "message", "role": role, "content": _text(message["content"])})
    return instructions, items


INSTRUCTING = ("system", "developer")


def user_content(content):
    """A string as it is; parts as Responses input parts."""
    if isinstance(content, str):
        return content
    return [_input_part(part) for part in content]


def _input_part(part):
    if part["type"] == "text":
        return {"type": "input_text", "text": part["text"]}
    if part["type"] == "image_url":
        image = part["image_url"]
        return {"type": "input_image", "image_url": image["url"], "detail": image.get("detail") or "auto"}
    file = {"type": "input_file", "file_data": part["file"]["file_data"]}
    if part["file"].get("filename"):
        file["filename"] = part["file"]["filename"]
    return file


def assistant_items(message, index, reasons, context):
    """Reasoning items first (the order they were answered in), then the text, then the calls."""
    text = _text(message.get("content") or "") + (message.get("refusal") or "")
    calls = [
        {
            "type": "function_call",
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": json_codec.dumps_text(call["function"]["arguments"]),
        }
        for call in message.get("tool_calls") or []
    ]
    entries = message.get("thinking_blocks") or []
    items = reasoning_items(entries if reasons else [], f"messages.{index}.thinking_blocks", context)
    if not reasons:
        context.dropped.extend(f"messages.{index}.thinking_blocks.{n}" for n in range(len(entries)))
    if items and not (text or calls):
        context.dropped.extend(f"messages.{index}.thinking_blocks.{n}" for n in range(len(items)))
        items = []
    if text:
        items.append({"type": "message", "role": "assistant", "content": text})
    return items + calls


def reasoning_items(entries, where, context):
    """The reasoning items bridge's signatures carry; every other entry dropped and named."""
    items = []
    for position, entry in enumerate(entries):
        item = reasoning_item(entry.get("signature")) if entry["type"] == "thinking" else None
        if item is None:
            context.dropped.append(f"{where}.{position}")
        else:
            items.append(item)
    return items


def _text(content):
    """A string, or the text of text and refusal parts, joined."""
    if isinstance(content, str):
        return content
    return "".join([part.get("text") or part.get("refusal") or "" for part in content])


# -- tools and answers ---------------------------------------------------------------------


def tools_and_choice(body):
    """Function tools, and with them tool_choice and parallel_tool_calls."""
    specs = [tool["function"] for tool in body.get("tools") or []]
    tools = [function_tool(f["name"], f.get("description"), f.get("parameters"), f.get("strict")) for f in specs]
    if not tools:
        return {}
    out = {"tools": tools}
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        out["tool_choice"] = {"type": "function", "name": choice["function"]["name"]}
    elif choice is not None:
        out["tool_choice"] = choice
    if body.get("parallel_tool_calls") is not None:
        out["parallel_tool_calls"] = body["parallel_tool_calls"]
    return out


def text_options(body):
    """response_format as text.format, verbosity as text.verbosity."""
    text = {}
    response_format = body.get("response_format")
    if response_format:
        text["format"] = {"type": response_format["type"]}
        if response_format["type"] == "json_schema":
            schema = response_format["json_schema"]
            text["format"].update({name: value for name, value in schema.items() if value is not None})
            text["format"].setdefault("schema", {"type": "object"})
    if body.get("verbosity") is not None:
        text["verbosity"] = body["verbosity"]
    return {"text": text} if text else {}


# -- limits, reasoning, sampling -----------------------------------------------------------


def reasoning(body, reasons, context):
    """reasoning.effort, with summaries, on a model that reasons; named as dropped on another."""
    effort = body.get("reasoning_effort")
    if effort is None:
        return {}
    if not reasons:
        context.dropped.append("reasoning_effort")
        return {}
    return {"reasoning": {"effort": effort, "summary": "auto"}}


def output_limit(body, context):
    name = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
    limit = body.get(name)
    if not limit:
        return {}
    if limit < MIN_OUTPUT_TOKENS:
        context.dropped.append(name)
    return {"max_output_tokens": max(limit, MIN_OUTPUT_TOKENS)}


def user_fields(body):
    """The fields Responses takes as they are, and `user` as user and cache key."""
    out = {name: body[name] for name in SAME if body.get(name) is not None}
    user = body.get("user")
    if user:
        out["user"] = user
        if "prompt_cache_key" not in out:
            out["prompt_cache_key"] = user if len(user) <= MAX_CACHE_KEY else hashlib.sha256(user.encode()).hexdigest()
    return out
