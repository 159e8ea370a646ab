"""Chat Completions request -> Anthropic Messages request (pure functions).

The body arrives validated by schemas/openai.py, so these functions only
translate: Chat's messages, tools, response_format, web_search_options,
sampling and reasoning fields become the Anthropic parts that
anthropic_request.py builds, where Anthropic's stricter rules are met.
"""

import dataclasses
import time

from ...protocols.errors import invalid
from ..anthropic_request import (
    THINKING_TYPES,
    TOOL_CHOICES,
    add_web_search,
    anthropic_tool,
    anthropic_tool_id,
    append_turn,
    cache_breakpoints,
    finish_prefill,
    native_format,
    opaque_user_id,
    response_format_tool,
    sampling,
    system_value,
    text_blocks,
    thinking_and_max_tokens,
    tool_request,
    tool_result,
    user_blocks,
)
from ..capabilities import capabilities_of
from ..model_map import map_model

# Parameters that only steer sampling or OpenAI's platform, with no Anthropic equivalent.
HINTS = (
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "logit_bias",
    "service_tier",
    "store",
    "prediction",
    "metadata",
    "verbosity",
    "prompt_cache_retention",
)
# Fields this module reads; anything else the client sent is reported as dropped.
KNOWN = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "n",
    "stream",
    "stream_options",
    "stop",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "thinking",
    "user",
    "safety_identifier",
    "logprobs",
    "top_logprobs",
    "modalities",
    "audio",
    "functions",
    "function_call",
    "web_search_options",
    "prompt_cache_key",
    *HINTS,
}


@dataclasses.dataclass
class Context:
    """What the response and stream translators need to know about the request."""

    stream: bool
    model: str  # the name the client asked for; responses carry it back
    created: int
    include_usage: bool = False
    json_tool: str = None  # the tool whose input is the message content (response_format)
    dropped: list = dataclasses.field(default_factory=list)


def to_messages_request(body, settings):
    """Translate a validated Chat body; returns (Anthropic body, Context)."""
    stream = bool(body.get("stream"))
    context = Context(
        stream=stream,
        model=body["model"],
        created=int(time.time()),
        include_usage=stream and bool((body.get("stream_options") or {}).get("include_usage")),
    )
    context.dropped = [name for name in body if name not in KNOWN or (name in HINTS and body[name] is not None)]
    system, messages = conversation(body["messages"])
    out = {"model": map_model(settings.model_map, body["model"]), "messages": messages}
    if system:
        out["system"] = system
    caps = capabilities_of(out["model"], settings.capabilities)
    out.update(tools_and_choice(body, context, caps))
    web_search_options(body.get("web_search_options"), settings, out, context)
    out.update(sampling(body, context))
    user = body.get("safety_identifier") or body.get("user")
    if user:
        out["metadata"] = {"user_id": opaque_user_id(user)}
    out.update(
        thinking_and_max_tokens(
            out,
            context,
            body.get("max_completion_tokens") or body.get("max_tokens"),
            settings.default_max_tokens,
            caps,
            effort=body.get("reasoning_effort"),
            thinking=body.get("thinking"),
        )
    )
    cache_breakpoints(out, settings.prompt_cache)
    if body.get("prompt_cache_key") and settings.prompt_cache == "off":
        context.dropped.append("prompt_cache_key")  # Anthropic keys its cache by the prefix itself
    if stream:
        out["stream"] = True
    return out, context


# -- conversation --------------------------------------------------------------------------


def conversation(chat_messages):
    """(system, messages): system/developer text hoisted, the rest as alternating turns."""
    system, turns = [], []
    for message in chat_messages:
        role = message["role"]
        if role in ("system", "developer"):
            system.extend(text_blocks(message["content"]))
        elif role == "user":
            append_turn(turns, "user", user_blocks(message["content"]))
        elif role == "tool":
            content = message["content"]
            append_turn(
                turns,
                "user",
                [tool_result(message["tool_call_id"], content if isinstance(content, str) else text_blocks(content))],
            )
        else:
            append_turn(turns, "assistant", assistant_blocks(message))
    finish_prefill(turns)
    if not turns:
        raise invalid("messages: every user and assistant message is empty; there is nothing to answer", "messages")
    return system_value(system), turns


def assistant_blocks(message):
    """Signed thinking first (Anthropic's order), then text, then tool_use blocks."""
    blocks = [
        _thinking_block(block)
        for block in message.get("thinking_blocks") or []
        if block["type"] == "redacted_thinking" or block.get("signature")
    ]
    content = message.get("content")
    if isinstance(content, str):
        blocks.extend(text_blocks(content))
    elif content:
        blocks.extend(text_blocks([{**part, "text": part.get("text", part.get("refusal", ""))} for part in content]))
    if message.get("refusal"):
        blocks.extend(text_blocks(message["refusal"]))
    for call in message.get("tool_calls") or []:
        blocks.append(
            {
                "type": "tool_use",
                "id": anthropic_tool_id(call["id"]),
                "name": call["function"]["name"],
                "input": call["function"]["arguments"],
            }
        )
    if all(block["type"] in THINKING_TYPES for block in blocks):
        return []  # Anthropic rejects an assistant turn that ends in thinking; reasoning alone says nothing
    return blocks


def _thinking_block(block):
    """Echoed back byte-exact: a signature is never invented, an unsigned block never sent."""
    if block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block["data"]}
    return {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}


# -- tools ---------------------------------------------------------------------------------


def tools_and_choice(body, context, caps):
    """Function tools, tool_choice and parallel_tool_calls; response_format is Anthropic's
    output_config.format on a model that takes it, else a forced tool."""
    response_format = body.get("response_format")
    native = native_format(response_format, caps)
    specs = [tool["function"] for tool in body.get("tools") or []]
    tools = [anthropic_tool(spec, caps) for spec in specs]
    if (response_format or {}).get("type") == "json_schema" and not native:
        specs.append(response_format["json_schema"])
    if not caps.structured_output and any(spec.get("strict") for spec in specs):
        context.dropped.append("strict")  # Anthropic tools follow the schema, but do not promise to
    choice = _tool_choice(body.get("tool_choice")) if tools else None
    out = tool_request(
        tools,
        choice,
        None if native else response_format_tool(response_format),
        body.get("parallel_tool_calls"),
        context,
        "response_format",
    )
    if native:
        out["output_config"] = {"format": native}
    return out


def web_search_options(options, settings, out, context):
    """Chat's web search as Anthropic's web search tool, only where the operator turned it on
    (each search costs): else dropped and named. Anthropic has no search_context_size."""
    if options is None:
        return
    if not settings.web_search:
        context.dropped.append("web_search_options")
        return
    if options.get("search_context_size"):
        context.dropped.append("web_search_options.search_context_size")
    add_web_search(out, settings.web_search_max_uses, (options.get("user_location") or {}).get("approximate"))


def _tool_choice(choice):
    """required is Anthropic's any (not auto), a named function its tool choice."""
    if choice is None:
        return None
    if isinstance(choice, dict):
        return {"type": "tool", "name": choice["function"]["name"]}
    return {"type": TOOL_CHOICES[choice]}
