"""An Anthropic Messages request built from OpenAI-shaped parts: what the Chat and the
Responses fronts share (pure functions).

Each front reads its own request (chat_to_messages/request.py, responses_to_messages/request.py)
and builds its Anthropic parts here. Where Anthropic is stricter than OpenAI (alternating
roles, non-empty text, tool id characters, thinking rules) the request is adjusted here so
that a valid OpenAI conversation is a valid Messages conversation. The rules for user
content (text, images, PDFs), tool results, the JSON-answer tool, web search, sampling,
thinking budgets and the prompt-cache marks are the same on both fronts.
"""

import hashlib
import re

from ..protocols.errors import invalid
from ..protocols.schemas.openai import DATA_URL, image_media_type

# reasoning_effort -> Anthropic thinking budget. 1024 is Anthropic's minimum.
MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 8192, "high": 16384, "xhigh": 24576}
# reasoning_effort -> Anthropic output_config.effort on adaptive-thinking models: the first level
# the model takes (capabilities.py). OpenAI's xhigh is its top: Anthropic's xhigh, else max.
ADAPTIVE_EFFORTS = {
    "minimal": ("low",),
    "low": ("low",),
    "medium": ("medium",),
    "high": ("high",),
    "xhigh": ("xhigh", "max", "high"),
}

# OpenAI's tool_choice strings -> Anthropic's tool_choice type: required is any, not auto.
TOOL_CHOICES = {"auto": "auto", "none": "none", "required": "any"}

# The forced tool that carries a json_object answer (json_schema answers use the schema's name).
JSON_OBJECT_TOOL = "json_response"

# Anthropic's web search server tool. 20250305 runs on every model that searches; 20260209 adds
# dynamic filtering, which needs the code execution tool and runs on a few models only.
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}
LOCATION_FIELDS = ("city", "region", "country", "timezone")

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
THINKING_TYPES = ("thinking", "redacted_thinking")


def opaque_user_id(user):
    """Anthropic asks for an opaque id and refuses one that looks like an e-mail address or is
    longer than 256 characters; Chat clients often send exactly that. A hash is the same for the
    same user, so abuse tracking still works, and the upstream never sees who it is."""
    return hashlib.sha256(user.encode()).hexdigest()


# -- conversation --------------------------------------------------------------------------


def append_turn(turns, role, blocks):
    """Anthropic requires alternating roles: consecutive same-role messages become one turn.

    An empty message is skipped, so the messages around it still merge. Merging keeps the
    order Anthropic wants inside a turn: a user turn's tool results before its other content,
    an assistant turn's thinking before its tool_use (a Responses history may bring them later).
    """
    if not blocks:
        return
    if not turns or turns[-1]["role"] != role:
        turns.append({"role": role, "content": list(blocks)})
        return
    content = turns[-1]["content"]
    for block in blocks:
        if block["type"] == "tool_result":
            content.insert(_first(content, lambda b: b["type"] != "tool_result"), block)
        elif block["type"] in THINKING_TYPES:
            content.insert(_first(content, lambda b: b["type"] == "tool_use"), block)
        else:
            content.append(block)


def _first(content, wanted):
    return next((k for k, block in enumerate(content) if wanted(block)), len(content))


def system_value(blocks):
    """One part is the string form; several keep their boundaries as blocks."""
    if not blocks:
        return None
    if len(blocks) == 1 and set(blocks[0]) == {"type", "text"}:
        return blocks[0]["text"]
    return blocks


def text_blocks(content):
    """Text content (string or text parts) as Anthropic text blocks; empty text is dropped."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_cache_control(part, {"type": "text", "text": part["text"]}) for part in content if part["text"]]


def _cache_control(part, block):
    """Anthropic's prompt-caching marker, when a client put one on a Chat part, is kept."""
    if part.get("cache_control"):
        block["cache_control"] = part["cache_control"]
    return block


def user_blocks(content):
    """A string, or text, image and PDF parts, as Anthropic blocks: Chat's parts (text,
    image_url, file) and the Responses API's (input_text, input_image, input_file)."""
    if isinstance(content, str):
        return text_blocks(content)
    blocks = []
    for part in content:
        kind = part["type"]
        if kind in ("text", "input_text"):
            blocks.extend(text_blocks([part]))
        elif kind in ("image_url", "input_image"):
            url = part["image_url"]["url"] if kind == "image_url" else part["image_url"]
            blocks.append(_cache_control(part, image_block(url)))
        else:
            blocks.append(_cache_control(part, document_block(part["file"] if kind == "file" else part)))
    return blocks


def image_block(url):
    """A data URL becomes a base64 source of the type its bytes show, anything else a URL source."""
    match = DATA_URL.match(url)
    source = _base64_source(image_media_type(match), match) if match else {"type": "url", "url": url}
    return {"type": "image", "source": source}


def document_block(file):
    """A PDF sent inline (file_data), or by URL (a Responses input_file's file_url)."""
    match = file.get("file_data") and DATA_URL.match(file["file_data"])
    source = _base64_source(match["media_type"], match) if match else {"type": "url", "url": file["file_url"]}
    block = {"type": "document", "source": source}
    if file.get("filename"):
        block["title"] = file["filename"]
    return block


def _base64_source(media_type, data_url):
    return {"type": "base64", "media_type": media_type, "data": data_url["data"]}


def tool_result(call_id, content):
    """The result of one call; its content (a string or blocks) is left out when empty."""
    result = {"type": "tool_result", "tool_use_id": anthropic_tool_id(call_id)}
    if content:
        result["content"] = content
    return result


def anthropic_tool_id(chat_id):
    """Anthropic ids must match ^[a-zA-Z0-9_-]+$; others are cleaned, with a hash so they stay unique.

    The same function serves tool_calls[].id and tool_call_id, so the call
    and its result stay linked.
    """
    if _ANTHROPIC_ID.match(chat_id):
        return chat_id
    digest = hashlib.sha256(chat_id.encode()).hexdigest()[:12]
    return f"{re.sub(r'[^a-zA-Z0-9_-]', '_', chat_id)}_{digest}"


def finish_prefill(turns):
    """A final assistant turn is a prefill, which Anthropic takes only without thinking blocks
    (thinking is never on with a prefill) and without trailing whitespace; one left empty goes."""
    if not turns or turns[-1]["role"] != "assistant":
        return
    blocks = [block for block in turns[-1]["content"] if block["type"] not in THINKING_TYPES]
    while blocks and blocks[-1]["type"] == "text":
        text = blocks[-1]["text"].rstrip()
        if text:
            blocks[-1] = {**blocks[-1], "text": text}
            break
        blocks.pop()
    if blocks:
        turns[-1]["content"] = blocks
    else:
        turns.pop()


# -- prompt caching ------------------------------------------------------------------------

# BRIDGE_PROMPT_CACHE -> Anthropic's cache_control marker (5 minutes is its default TTL).
CACHE_MARKERS = {"5m": {"type": "ephemeral"}, "1h": {"type": "ephemeral", "ttl": "1h"}}


def cache_breakpoints(out, ttl):
    """Anthropic caches the prompt up to each block marked cache_control (at most four marks).

    An OpenAI client cannot mark its prompt, so the bridge marks where a conversation's
    stable prefix ends: the last tool, the system prompt, the end of the conversation
    (what the next request of an agent loop starts with) and the end of the turn the
    previous request ended with (what this request can read from cache, however many
    blocks were added since). A client that marked blocks itself keeps its own marks.
    `ttl` is off, 5m or 1h.
    """
    marker = CACHE_MARKERS.get(ttl)
    if marker is None or _client_marked(out):
        return
    if out.get("tools"):
        out["tools"][-1] = {**out["tools"][-1], "cache_control": marker}
    system = out.get("system")
    if system:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        out["system"] = [*blocks[:-1], {**blocks[-1], "cache_control": marker}]
    messages = out["messages"]
    users = [turn for turn in messages[:-1] if turn["role"] == "user"]
    for turn in (users[-1], messages[-1]) if users else (messages[-1],):
        # Never a thinking block: a user turn has none, a final assistant turn (a prefill) neither.
        turn["content"][-1] = {**turn["content"][-1], "cache_control": marker}


def _client_marked(out):
    system = out.get("system")
    for blocks in (out.get("tools") or (), system if isinstance(system, list) else ()):
        if any("cache_control" in block for block in blocks):
            return True
    for turn in out["messages"]:
        for block in turn["content"]:
            if "cache_control" in block:
                return True
    return False


# -- tools ---------------------------------------------------------------------------------


def native_format(response_format, caps):
    """Anthropic's output_config.format for a json_schema answer, on a model that takes it: the
    answer is the message text, constrained to the schema, and thinking stays allowed (a forced
    tool would turn it off). json_object has no schema to give it and stays a forced tool."""
    if not caps.structured_output or (response_format or {}).get("type") != "json_schema":
        return None
    return {"type": "json_schema", "schema": _object_schema(response_format["json_schema"].get("schema"))}


def tool_request(tools, choice, json_tool, parallel_tool_calls, context, format_param):
    """Anthropic's tools and tool_choice: the JSON-answer tool (from `format_param`) added to the
    client's tools, and parallel calls switched off when the client asked."""
    if json_tool:
        if any(tool["name"] == json_tool["name"] for tool in tools):
            raise invalid(
                f"{format_param}: its tool name {json_tool['name']!r} is also the name of a "
                "function in tools; rename one of them",
                format_param,
            )
        context.json_tool = json_tool["name"]
        # The answer must come through the JSON tool unless the client's own tools may be called
        # (then any tool: one of theirs, or the answer); a named choice stays as the client set it.
        if not (choice and choice["type"] == "tool"):
            may_call_tools = tools and (choice is None or choice["type"] != "none")
            choice = {"type": "any"} if may_call_tools else {"type": "tool", "name": json_tool["name"]}
        tools.append(json_tool)
    if not tools:
        return {}
    if parallel_tool_calls is False:
        choice = {"type": "auto", **(choice or {})}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    return {"tools": tools, **({"tool_choice": choice} if choice else {})}


def anthropic_tool(function, caps):
    """A function as an Anthropic tool; `strict` kept where the model takes structured output."""
    tool = {"name": function["name"], "input_schema": _object_schema(function.get("parameters"))}
    if function.get("description"):
        tool["description"] = function["description"]
    if function.get("strict") and caps.structured_output:
        tool["strict"] = True
    return tool


def add_web_search(out, max_uses, location=None, allowed_domains=None):
    """Anthropic's web search server tool joins the request's tools, at most `max_uses` searches."""
    tools = out.get("tools") or []
    if any(tool["name"] == WEB_SEARCH_TOOL["name"] for tool in tools):
        raise invalid(
            f"tools: a function named {WEB_SEARCH_TOOL['name']!r} would clash with the web search this "
            "request asks for; rename the function",
            "tools",
        )
    tool = {**WEB_SEARCH_TOOL, "max_uses": max_uses}
    if allowed_domains:
        tool["allowed_domains"] = list(allowed_domains)
    place = {name: (location or {}).get(name) for name in LOCATION_FIELDS}
    if any(place.values()):
        tool["user_location"] = {"type": "approximate", **{name: value for name, value in place.items() if value}}
    out["tools"] = [*tools, tool]


def response_format_tool(response_format):
    """The known technique for JSON output: a forced tool whose input is the answer."""
    kind = (response_format or {}).get("type")
    if kind == "json_object":
        return {
            "name": JSON_OBJECT_TOOL,
            "description": "Respond with your answer as a JSON object.",
            "input_schema": {"type": "object"},
        }
    if kind == "json_schema":
        spec = response_format["json_schema"]
        return {
            "name": spec["name"],
            "input_schema": _object_schema(spec.get("schema")),
            "description": spec.get("description") or "Respond with your answer in this JSON format.",
        }
    return None


def _object_schema(schema):
    """Anthropic's input_schema must say type object; Chat lets it go unsaid (or the schema be absent)."""
    return {"type": "object", **(schema or {})}


# -- sampling ------------------------------------------------------------------------------


def sampling(body, context):
    """temperature capped to Anthropic's 0-1; top_p dropped beside it (Claude 4 refuses both)."""
    out = {}
    if body.get("temperature") is not None:
        out["temperature"] = min(body["temperature"], 1.0)
    if body.get("top_p") is not None:
        if "temperature" in out:
            context.dropped.append("top_p")
        else:
            out["top_p"] = body["top_p"]
    if body.get("top_k") is not None:
        out["top_k"] = body["top_k"]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    kept = [s for s in stops if s.strip()]
    if len(kept) < len(stops):
        context.dropped.append("stop")  # Anthropic refuses whitespace-only stop sequences
    if kept:
        out["stop_sequences"] = kept
    return out


# -- thinking and max_tokens ---------------------------------------------------------------


def thinking_and_max_tokens(
    out, context, cap, default_max_tokens, caps, effort=None, thinking=None, effort_param="reasoning_effort"
):
    """max_tokens, plus a thinking config when one was asked for and can be honoured.

    The client's reasoning `effort` (Chat `reasoning_effort`, Responses
    `reasoning.effort`: `effort_param` names it) is adaptive thinking with
    output_config.effort on a model that takes it (`caps`, capabilities.py),
    else a budget (fit_budget), else dropped; max_tokens leaves the budget's
    room either way. Anthropic's own `thinking` (openai SDK extra_body) is
    passed as given, max_tokens raised above its budget when needed. `cap` is
    the client's max_tokens, if any. Thinking is left off, and the parameter
    reported as dropped, when Anthropic would refuse it (thinking_allowed): a
    forced tool choice (including the JSON-answer tool), an assistant prefill,
    or a final assistant tool-use turn without a signed thinking block (the
    client did not echo it back).
    With thinking on Anthropic requires the default sampling, so
    temperature, top_p and top_k go, unless the model takes them.
    """
    config, max_tokens, level = requested_thinking(thinking, effort, cap, default_max_tokens, caps)
    if effort in THINKING_BUDGETS and not thinking and not config:
        context.dropped.append(effort_param)  # the model takes neither adaptive thinking nor a budget
    if config and config["type"] != "disabled" and not thinking_allowed(out):
        context.dropped.append("thinking" if thinking else effort_param)
        config = None
    if not config or config["type"] == "disabled":
        return {"max_tokens": cap or default_max_tokens, **({"thinking": config} if config else {})}
    if not caps.temperature_with_thinking:
        for name in ("temperature", "top_p", "top_k"):
            if out.pop(name, None) is not None:
                context.dropped.append(name)
    if level:
        return {
            "max_tokens": max_tokens,
            "thinking": config,
            "output_config": {**out.get("output_config", {}), "effort": level},
        }
    return {"max_tokens": max_tokens, "thinking": config}


def requested_thinking(thinking, effort, cap, default_max_tokens, caps):
    """(thinking config or None, max_tokens that leaves room for it, output_config.effort or None)."""
    max_tokens = cap or default_max_tokens
    if thinking:
        budget = thinking.get("budget_tokens", 0)
        return thinking, max_tokens + budget if max_tokens <= budget else max_tokens, None
    if effort not in THINKING_BUDGETS or not (caps.efforts or caps.budget_tokens):
        return None, max_tokens, None
    budget, max_tokens = fit_budget(THINKING_BUDGETS[effort], cap, default_max_tokens)
    if caps.efforts:
        level = next((level for level in ADAPTIVE_EFFORTS[effort] if level in caps.efforts), None)
        return {"type": "adaptive"}, max_tokens, level
    return {"type": "enabled", "budget_tokens": budget}, max_tokens, None


def fit_budget(budget, cap, default_max_tokens):
    """(budget_tokens, max_tokens) with MIN_THINKING_BUDGET <= budget < max_tokens.

    Without a client cap the default bounds the answer and the budget comes
    on top. A client cap bounds reasoning and answer together (as OpenAI's
    max_completion_tokens does), thinking taking at most half; a cap too
    small for the minimum budget is raised to twice that minimum.
    """
    if cap is None:
        return budget, default_max_tokens + budget
    budget = max(MIN_THINKING_BUDGET, min(budget, cap // 2))
    return budget, max(cap, 2 * budget)


def thinking_allowed(out):
    """Anthropic refuses thinking with a forced tool, a prefill, or an unsigned tool-use turn."""
    if (out.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return False
    messages = out["messages"]
    if messages[-1]["role"] == "assistant":
        return False
    assistant = [turn["content"] for turn in messages if turn["role"] == "assistant"]
    if not assistant or not any(block["type"] == "tool_use" for block in assistant[-1]):
        return True
    return assistant[-1][0]["type"] in THINKING_TYPES
