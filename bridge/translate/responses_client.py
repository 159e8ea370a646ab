"""Reading a Responses client's request: what every pair serving one shares, whatever the upstream
(pure functions).

The body arrives validated by schemas/responses.py. Nothing is stored: each response gets a
fresh id (`Context.response_id`), and what an OpenAI Response repeats of its request, with
OpenAI's defaults where the client sent nothing, is `Context.echo`.

- Request fields no upstream of ours can do anything with are named as dropped when they ask
  for something (dropped_options): `store: true`, `metadata`, `client_metadata`,
  `service_tier`, `truncation: auto`, `text.verbosity`, `max_tool_calls`,
  `stream_options.include_obfuscation`, `include` entries other than
  `reasoning.encrypted_content`, `reasoning.context`, `reasoning.mode`, and top-level fields
  this module does not know.
- Tools (declared_tools): `function` and `custom` tools, also inside a `namespace` (flattened
  to `<namespace>__<name>`, the namespace's description leading each tool's own) and in
  `additional_tools` and `tool_search_output` items (where Codex's code mode declares its
  tools). A name outside the upstreams' `[a-zA-Z0-9_-]{1,64}` is shortened with a hash
  (protocols/tool_names.py), one that collides with another tool's gets the hashed form.
  `Context.tools` maps every upstream name back to `{"kind", "name", "namespace"}`. Every
  tool goes upstream inline, so `defer_loading` is named as dropped; hosted tools
  (`web_search`, `file_search`, `mcp`...) are dropped and named unless the pair runs them.
  A custom tool (Codex's `apply_patch`) becomes a tool taking one string, `input`, whose
  description holds its grammar.
- `tool_choice`: `auto`, `none`, `required`, a named function or custom tool
  (forced_name), or `allowed_tools`, whose mode applies to the tools it lists
  (allowed_names).
"""

import dataclasses
import json
import time

from ..protocols import ids
from ..protocols.errors import invalid
from ..protocols.schemas.responses import HOSTED_TOOLS, declared_tools
from ..protocols.tool_names import safe_tool_name

# Top-level fields the pairs read (or the schema refuses); any other is reported as dropped.
KNOWN = {
    "model",
    "input",
    "instructions",
    "stream",
    "stream_options",
    "max_output_tokens",
    "max_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "include",
    "user",
    "safety_identifier",
    "metadata",
    "client_metadata",
    "prompt_cache_key",
    "service_tier",
    "truncation",
    "store",
    "background",
    "previous_response_id",
    "conversation",
    "prompt",
}


# JSON as models write it (json.dumps' own separators, non-ASCII as it is), for tool arguments:
# json.dumps(value, ensure_ascii=False) without a new encoder per call.
model_json = json.JSONEncoder(ensure_ascii=False).encode

# What a Response repeats of its request: these as the client sent them (None when it did not),
_ECHOED = ("instructions", "max_output_tokens", "max_tool_calls", "user", "safety_identifier", "prompt_cache_key")
# these with OpenAI's default where the client sent none,
_ECHO_DEFAULTS = {
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "temperature": 1.0,
    "top_p": 1.0,
    "truncation": "disabled",
    "metadata": {},
    "top_logprobs": 0,
}
# and these as nothing is stored or run in the background.
_ECHO_FIXED = {"store": False, "background": False, "service_tier": "default", "previous_response_id": None}


@dataclasses.dataclass
class Context:
    """What the response and stream translators need to know about the request."""

    model: str  # the name the client asked for; the response carries it back
    stream: bool
    response_id: str  # resp_<32 hex>, minted per request: nothing is stored
    created_at: int  # unix seconds
    echo: dict  # request parameters a Response object repeats (instructions, tools,
    # tool_choice, parallel_tool_calls, temperature, top_p,
    # max_output_tokens, reasoning, text, metadata, store, truncation, user)
    tools: dict  # upstream tool name -> {"kind": "function" | "custom",
    # "name": the client's name, "namespace": str or None}
    summary: bool = False  # reasoning.summary asked for: reasoning text shown as summary_text
    dropped: list = dataclasses.field(default_factory=list)  # for x-bridge-dropped-params


def context_for(body, context_class):
    """A pair's Context (a subclass of Context) for a validated body."""
    reasoning = body.get("reasoning") or {}
    return context_class(
        model=body["model"],
        stream=bool(body.get("stream")),
        response_id=f"resp_{ids.random_hex()}",
        created_at=int(time.time()),
        echo=echo(body),
        tools={},
        dropped=dropped_options(body),
        summary=bool(reasoning.get("summary") or reasoning.get("generate_summary")),
    )


def echo(body):
    """The request parameters an OpenAI Response repeats, with OpenAI's defaults where the client sent none."""
    reasoning, text = body.get("reasoning") or {}, body.get("text") or {}
    shown = {name: body.get(name) for name in _ECHOED}
    for name, default in _ECHO_DEFAULTS.items():
        value = body.get(name)
        shown[name] = default if value is None else value
    shown["reasoning"] = {
        "effort": reasoning.get("effort"),
        "summary": reasoning.get("summary") or reasoning.get("generate_summary"),
    }
    shown["text"] = {"format": text.get("format") or {"type": "text"}, "verbosity": text.get("verbosity") or "medium"}
    shown.update(_ECHO_FIXED)
    return shown


def dropped_options(body):
    """Request fields with no upstream equivalent, named when they ask for something."""
    reasoning, text = body.get("reasoning") or {}, body.get("text") or {}
    asked = {
        "store": body.get("store") is True,
        "metadata": bool(body.get("metadata")),
        "client_metadata": bool(body.get("client_metadata")),
        "service_tier": body.get("service_tier") is not None,
        "truncation": body.get("truncation") == "auto",
        "max_tool_calls": body.get("max_tool_calls") is not None,
        "stream_options.include_obfuscation": (body.get("stream_options") or {}).get("include_obfuscation") is True,
        "include": any(entry != "reasoning.encrypted_content" for entry in body.get("include") or []),
        "text.verbosity": text.get("verbosity") is not None,
        "reasoning.context": reasoning.get("context") is not None,
        "reasoning.mode": reasoning.get("mode") is not None,
    }
    return [name for name in body if name not in KNOWN] + [name for name, dropped in asked.items() if dropped]


# -- tools ---------------------------------------------------------------------------------


def upstream_name(namespace, name):
    """A namespaced tool's name flattened to one both upstreams accept."""
    return safe_tool_name(f"{namespace}__{name}" if namespace else name)


def client_tools(body, context, runs_hosted=lambda tool: False):
    """(upstream name, tool, namespace tool or None) of each function and custom tool the request
    declares, and {(namespace, name): upstream name}; Context.tools gets the way back,
    Context.dropped the hosted tools (but those `runs_hosted(tool)` says the pair runs) and
    `defer_loading`."""
    declared, names = [], {}
    for path, tool, namespace in declared_tools(body):
        if tool["type"] in HOSTED_TOOLS:
            if not runs_hosted(tool):
                context.dropped.append(f"tools.{tool['type']}")
            continue
        key = (namespace and namespace["name"], tool["name"])
        if key in names:
            where = f" in namespace {key[0]!r}" if key[0] else ""
            raise invalid(f"{path}.name: a tool named {tool['name']!r} is declared twice{where}", f"{path}.name")
        name = upstream_name(*key)
        if name in context.tools:  # another tool flattens to the same name
            name = safe_tool_name(f"{key[0]}/{key[1]}")
        names[key] = name
        context.tools[name] = {"kind": tool["type"], "name": tool["name"], "namespace": key[0]}
        if tool.get("defer_loading"):
            context.dropped.append("tools.defer_loading")  # every tool goes upstream inline
        declared.append((name, tool, namespace))
    return declared, names


def call_name(item, names):
    """The upstream name of the tool a function_call or custom_tool_call item of the history called."""
    return names.get((item.get("namespace"), item["name"])) or upstream_name(item.get("namespace"), item["name"])


def tool_description(tool, namespace):
    """A tool's description, its namespace's leading it."""
    descriptions = [(namespace or {}).get("description"), tool.get("description")]
    return "\n\n".join([text for text in descriptions if text])


def tool_parameters(tool):
    """The JSON schema of a tool's arguments: a custom tool's is one string, `input`."""
    if tool["type"] == "custom":
        return custom_input_schema(tool.get("format"))
    return tool.get("parameters")


def custom_input_schema(input_format):
    """A custom tool takes free text; upstream tools take objects: one string, with the grammar
    in its description so the model knows the format."""
    about = "The tool's whole input: free-form text, not JSON."
    if (input_format or {}).get("type") == "grammar":
        about += f" It must match this {input_format['syntax']} grammar:\n{input_format['definition']}"
    return {"type": "object", "properties": {"input": {"type": "string", "description": about}}, "required": ["input"]}


def allowed_names(choice, context):
    """The upstream names of the tools an allowed_tools choice lists."""
    return {name for name, info in context.tools.items() if _allowed(info, choice["tools"])}


def forced_name(choice, context):
    """The upstream name of the function or custom tool a named choice forces: the top-level one
    first, if a namespace has one of the same name (the schema checked that one is declared)."""
    matches = sorted(
        (info["namespace"] is not None, name)
        for name, info in context.tools.items()
        if info["kind"] == choice["type"] and info["name"] == choice["name"]
    )
    return matches[0][1]


def _allowed(info, entries):
    """Whether an allowed_tools entry ({"type": "function" | "custom", "name"}, or a namespace) lists the tool."""
    return any(
        entry.get("type") == info["kind"]
        and entry.get("name") == info["name"]
        and entry.get("namespace") in (None, info["namespace"])
        or entry.get("type") == "namespace"
        and entry.get("name") == info["namespace"]
        for entry in entries
    )


def chat_response_format(body):
    """text.format in the shape of Chat's response_format (its json_schema fields nested)."""
    spec = (body.get("text") or {}).get("format")
    if spec and spec["type"] == "json_schema":
        return {"type": "json_schema", "json_schema": {key: value for key, value in spec.items() if key != "type"}}
    return spec
