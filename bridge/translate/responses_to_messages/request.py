"""OpenAI Responses request -> Anthropic Messages request (pure functions).

The body arrives validated by schemas/responses.py, so these functions only
translate; what this front shares with the Chat front (text, images, PDFs,
tool results, merging turns, the JSON-answer tool, thinking budgets, the
hashed user id) is anthropic_request.py, which both fronts use; what it shares
with the Responses front's other pairs (the Context and its echo, the fields
named as dropped, the tools' names, namespaces and custom tools, tool_choice)
is responses_client.py.

Stateless
- Nothing is stored. `store` is accepted and ignored (the Response says
  `store: false`); `previous_response_id`, `conversation`, stored `prompt`s,
  `background` and `item_reference` items are a 400 that says to send the full
  `input` (schema). Codex sends the whole history on every request anyway.

System and turns
- `instructions`, then the leading run of `system`/`developer` messages, are
  the Anthropic `system`. A `system`/`developer` message later in the history
  (Codex inserts one on resume) is user text where it stands: never dropped,
  never moved.
- `input` is a string (one user message) or a list of items; item `id`s and
  `status`es are ignored. User parts: `input_text`; `input_image` (a data URL
  as base64 with the type its bytes show, an http(s) URL as a URL source);
  `input_file`, a PDF (`file_data` as base64, `file_url` as a URL document).
  Assistant `output_text` and `refusal` parts are text.
- `function_call` / `custom_tool_call` items are `tool_use` blocks whose id is
  the `call_id` (cleaned to Anthropic's id characters as on the Chat front, the
  same way for the call and its output); `arguments` is the parsed object, a
  custom call's free text is `{"input": text}`. Their outputs (a string, or
  input_text/input_image/input_file parts) are `tool_result` blocks.
- Consecutive items merge into alternating turns, parallel calls (call, call,
  output, output) into one assistant turn and one user turn. A user turn's tool
  results come first (Anthropic's rule), ahead of a message that came between
  a call and its output.
- `reasoning` items: `encrypted_content` is the signed Anthropic thinking block
  bridge served (protocols/reasoning.py, decoded by the schema within the request's
  limits), put back in the assistant turn it belongs to,
  before that turn's tool_use. One that does not decode (another model's
  reasoning, or none) is dropped and named (`input.N.encrypted_content`), and so
  is one whose turn then says nothing (`input.N`): Anthropic refuses a turn of
  thinking alone.
- The first turn must be a user turn: a history that opens with the assistant
  (a greeting) gets a one-line user turn (STARTED) in front. A final assistant
  message is a prefill (no thinking, no trailing whitespace).

Tools
- `function` tools are Anthropic tools; `strict: true` is named as dropped
  (Anthropic tools follow the schema, but do not promise to).
- `custom` tools (Codex's `apply_patch`, a lark grammar) are tools taking one
  string, `input`, whose description holds the grammar; a `custom_tool_call` in
  the history is a tool_use with `{"input": text}`.
- `namespace` tools are flattened to `<namespace>__<name>` (the namespace's
  description leads each tool's own), and `function_call` items carrying
  `namespace` are mapped the same way; a name outside Anthropic's
  `[a-zA-Z0-9_-]{1,64}` is shortened with a hash (bridge/protocols/tool_names.py), one
  that collides with another tool's gets the hashed form. `Context.tools` maps
  every upstream name back to `{"kind", "name", "namespace"}`.
- The tools of `additional_tools` items (where Codex's code mode declares its
  tools when the model slug is one of OpenAI's) and of `tool_search_output`
  items join `tools`; every tool goes upstream inline, so `tool_search`,
  `defer_loading`, and `tool_search_call`/`tool_search_output` items are
  dropped and named. Hosted tools (`file_search`, `mcp`...) and `web_search_call`
  items are dropped and named, and so is `web_search` unless the operator turned
  web search on (BRIDGE_WEB_SEARCH, a deployment's `web_search`): then the first
  `web_search` tool is Anthropic's web search tool (web_search()).
- `tool_choice`: `auto`, `none`, `required` (Anthropic `any`), a named
  function or custom tool; `allowed_tools` sends only the tools it lists, with
  its mode (`required` is `any`). `parallel_tool_calls: false` is
  `disable_parallel_tool_use`.
- `text.format` as the Chat front's `response_format`: `json_schema` is
  Anthropic's output_config.format on a model that takes it (capabilities.py),
  `strict` honoured; else a forced tool whose input is the answer
  (Context.json_tool), and `text.format.strict` is named as dropped.

Limits, reasoning, sampling
- `max_output_tokens` is `max_tokens`; without it (Codex never sends it),
  BRIDGE_RESPONSES_DEFAULT_MAX_TOKENS. Either bounds thinking and answer
  together, as OpenAI counts reasoning in `max_output_tokens`.
- `reasoning.effort` is adaptive thinking with output_config.effort, or a thinking
  budget (THINKING_BUDGETS, at most half of `max_tokens`), as the model takes
  (capabilities.py; `max` as `xhigh`); `none`, or no effort, leaves thinking off. Thinking is left off
  and `reasoning.effort` named where Anthropic would refuse it (a forced tool, a
  prefill, a last tool-use turn whose thinking the client did not echo).
  `reasoning.summary` (or `generate_summary`) asks for the thinking as summary
  text (Context.summary).
- `temperature` (capped at 1) and `top_p` as on the Chat front; with thinking
  on both go, named. `user` / `safety_identifier` reach Anthropic as
  `metadata.user_id`, hashed.
- Prompt caching (BRIDGE_PROMPT_CACHE, per deployment `prompt_cache`) marks
  the stable prefix as the Chat front does (anthropic_request.cache_breakpoints).
  `prompt_cache_key` asks for what happens anyway (Anthropic's cache is keyed by
  the prefix itself); it is named as dropped only when caching is off.
- Named as dropped when they ask for something: `store: true`, `metadata`,
  `client_metadata`, `service_tier`, `truncation: auto`, `text.verbosity`,
  `max_tool_calls`, `stream_options.include_obfuscation`, `include` entries
  other than `reasoning.encrypted_content`, `reasoning.context`,
  `reasoning.mode`, and top-level fields this module does not know.

`Context.echo` holds what an OpenAI Response repeats of its request, with
OpenAI's defaults where the client sent nothing.
"""

import dataclasses

from ...protocols.errors import invalid
from ...protocols.schemas.responses import WEB_SEARCH_TOOLS, declared_tools, input_items
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
from ..responses_client import Context as ResponsesContext
from ..responses_client import (
    allowed_names,
    call_name,
    chat_response_format,
    client_tools,
    context_for,
    forced_name,
    tool_description,
    tool_parameters,
)

# The user turn put before a history that opens with the assistant: Anthropic wants a user turn first.
STARTED = "(The conversation starts here.)"
# Responses efforts beyond Chat's: the largest Chat budget serves them.
_EFFORTS = {"max": "xhigh"}


@dataclasses.dataclass
class Context(ResponsesContext):
    """What the response and stream translators need to know about the request (responses_client.Context)."""

    json_tool: str = None  # the forced tool whose input is the answer (text.format json_*)


def to_messages_request(body, settings):
    """Translate a validated Responses body; returns (Anthropic body, Context)."""
    stream = bool(body.get("stream"))
    reasoning = body.get("reasoning") or {}
    context = context_for(body, Context)
    model = map_model(settings.model_map, body["model"])
    caps = capabilities_of(model, settings.capabilities)
    tools, names = declare_tools(body, context, caps, settings.web_search)
    system, messages = conversation(body.get("instructions"), input_items(body), names, context)
    out = {"model": model, "messages": messages}
    if system:
        out["system"] = system
    choice, tools = tool_choice(body.get("tool_choice"), tools, context) if tools else (None, tools)
    native = native_format(chat_response_format(body), caps)
    out.update(
        tool_request(
            tools,
            choice,
            None if native else response_format_tool(chat_response_format(body)),
            body.get("parallel_tool_calls"),
            context,
            "text.format",
        )
    )
    if native:
        out["output_config"] = {"format": native}
    elif ((body.get("text") or {}).get("format") or {}).get("strict") is True:
        context.dropped.append("text.format.strict")
    if settings.web_search:
        web_search(body, settings, out, context)
    out.update(sampling({"temperature": body.get("temperature"), "top_p": body.get("top_p")}, context))
    user = body.get("safety_identifier") or body.get("user")
    if user:
        out["metadata"] = {"user_id": opaque_user_id(user)}
    cap = body.get("max_output_tokens") or settings.responses_default_max_tokens
    effort = reasoning.get("effort")
    out.update(
        thinking_and_max_tokens(
            out,
            context,
            cap,
            cap,
            caps,
            effort=_EFFORTS.get(effort, effort),
            effort_param="reasoning.effort",
        )
    )
    cache_breakpoints(out, settings.prompt_cache)
    if body.get("prompt_cache_key") and settings.prompt_cache == "off":
        context.dropped.append("prompt_cache_key")
    if stream:
        out["stream"] = True
    context.dropped = list(dict.fromkeys(context.dropped))
    return out, context


# -- conversation --------------------------------------------------------------------------


def conversation(instructions, items, names, context):
    """(system, messages): the leading system text hoisted, the items as alternating turns."""
    system = text_blocks(instructions or "")
    turns, thinking, leading = [], [], True  # thinking: (index, block) waiting for its turn's content
    for index, item in enumerate(items):
        kind = item["type"]
        if leading and kind == "message" and item["role"] in ("system", "developer"):
            system.extend(text_blocks(item["content"]))
            continue
        leading = leading and kind == "additional_tools"
        if kind == "reasoning":
            block = item.get("encrypted_content")  # the reasoning of bridge's it carries (schema), or None
            if block is None or block["type"] not in THINKING_TYPES:  # not an Anthropic model's
                context.dropped.append(f"input.{index}.encrypted_content")
            elif turns and turns[-1]["role"] == "assistant":
                append_turn(turns, "assistant", [block])
            else:
                thinking.append((index, block))
            continue
        side, blocks = _blocks(item, names)
        if side == "assistant" and blocks:
            append_turn(turns, "assistant", [block for _, block in thinking] + blocks)
            thinking = []
        elif side == "user" and blocks:
            context.dropped.extend(f"input.{i}" for i, _ in thinking)  # a turn of thinking alone
            thinking = []
            append_turn(turns, "user", blocks)
        elif side is None and kind != "additional_tools":
            context.dropped.append(f"input.{index}")
    context.dropped.extend(f"input.{i}" for i, _ in thinking)
    finish_prefill(turns)
    if not turns:
        raise invalid("input: every message is empty; there is nothing to answer", "input")
    if turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": STARTED}]})
    return system_value(system), turns


def _blocks(item, names):
    """("user" | "assistant" | None, the item's Anthropic blocks); None: nothing goes upstream."""
    kind = item["type"]
    if kind == "message":
        if item["role"] == "assistant":
            content = item["content"]
            parts = (
                content
                if isinstance(content, str)
                else [{"text": part.get("text", part.get("refusal", ""))} for part in content]
            )
            return "assistant", text_blocks(parts)
        return "user", user_blocks(item["content"])  # user, or system/developer past the leading run
    if kind in ("function_call", "custom_tool_call"):
        name = call_name(item, names)
        arguments = item["arguments"] if kind == "function_call" else {"input": item["input"]}
        return "assistant", [
            {"type": "tool_use", "id": anthropic_tool_id(item["call_id"]), "name": name, "input": arguments}
        ]
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item["output"]
        return "user", [tool_result(item["call_id"], output if isinstance(output, str) else user_blocks(output))]
    return None, []


# -- tools ---------------------------------------------------------------------------------


def declare_tools(body, context, caps, web_search_on=False):
    """(Anthropic tools, {(namespace, name): upstream name}) for the function and custom tools
    the request declares (responses_client.client_tools); a web_search tool where web search
    is on is web_search's to translate."""
    declared, names = client_tools(body, context, lambda tool: web_search_on and tool["type"] in WEB_SEARCH_TOOLS)
    tools = []
    for name, tool, namespace in declared:
        if tool.get("strict") and not caps.structured_output:
            context.dropped.append("tools.strict")
        spec = {
            "name": name,
            "description": tool_description(tool, namespace),
            "strict": tool.get("strict"),
            "parameters": tool_parameters(tool),
        }
        tools.append(anthropic_tool(spec, caps))
    return tools, names


def web_search(body, settings, out, context):
    """The first web_search tool declared as Anthropic's web search tool: its allowed domains
    and user location kept, search_context_size named as dropped (Anthropic has none). One that
    asks for cached results only (external_web_access false) is dropped: Anthropic searches live."""
    tool = next((tool for _, tool, _ in declared_tools(body) if tool["type"] in WEB_SEARCH_TOOLS), None)
    if tool is None:
        return
    if tool.get("external_web_access") is False:
        context.dropped.append(f"tools.{tool['type']}.external_web_access")
        return
    if tool.get("search_context_size"):
        context.dropped.append(f"tools.{tool['type']}.search_context_size")
    domains = (tool.get("filters") or {}).get("allowed_domains")
    add_web_search(out, settings.web_search_max_uses, tool.get("user_location"), domains)


def tool_choice(choice, tools, context):
    """(Anthropic tool_choice or None, the tools to send): allowed_tools narrows the tools."""
    if choice is None or isinstance(choice, str):
        return (choice and {"type": TOOL_CHOICES[choice]}), tools
    if choice["type"] == "allowed_tools":
        allowed = allowed_names(choice, context)
        return {"type": TOOL_CHOICES[choice["mode"]]}, [tool for tool in tools if tool["name"] in allowed]
    return {"type": "tool", "name": forced_name(choice, context)}, tools
