"""OpenAI Responses request -> Chat Completions request (pure functions).

The body arrives validated by schemas/responses.py; what this pair shares with the
Responses front's other pairs (the Context, the fields named as dropped, tool names,
namespaces, custom tools, tool_choice) is responses_client.py, and what it shares with the
Messages front's Chat pair (strict servers' rules) is chat_request.py.

Stateless, as on every pair of this front: `previous_response_id`, `conversation`, stored
`prompt`s, `background` and `item_reference` items are a 400 that says to send the full
`input` (schema).

Messages
- `instructions`, then the leading run of `system`/`developer` messages, are one leading
  `system` message (some chat templates take a system message only first). A
  `system`/`developer` message later in the history (Codex inserts one on resume) is user
  text where it stands. Consecutive user-side messages are one user message (strict
  templates want roles to alternate), text-only content flattened to a string.
- User parts: `input_text`; `input_image` as an `image_url` part (its `detail` kept when
  Chat knows it); `input_file`, a PDF sent inline (`file_data`), as a `file` part. A
  `file_url` is a 400: a Chat server cannot fetch it, and answering without the document
  would change the answer.
- Assistant `output_text` and `refusal` parts are the assistant message's text.
  `function_call` / `custom_tool_call` items are its `tool_calls` (consecutive calls, and
  the text before them, one assistant message: Codex sends call, call, output, output),
  their `arguments` the call's JSON, a custom call's `{"input": text}`; the id is the
  `call_id` (hashed past OpenAI's 40 characters, the same way for the call and its output).
- `function_call_output` / `custom_tool_call_output` items are `role: "tool"` messages, their
  text the output's (a string, or its `input_text` parts joined); the images and files an
  output holds follow the tool messages in a user message (chat_request.tool_attachments).
  A user message that came between a call and its output follows the tool messages too:
  Chat wants them right after the assistant message that called.
- `reasoning` items: `encrypted_content` carrying a Chat upstream's reasoning (bridge's,
  protocols/reasoning.py) is the next assistant message's `reasoning_content` when the
  deployment wants its reasoning back (BRIDGE_OPENAI_REASONING_HISTORY, DeepSeek's thinking
  mode), else left out. One that carries anything else (OpenAI's encrypted reasoning, the
  Anthropic thinking of the Anthropic pair, none) is dropped and named
  (`input.N.encrypted_content`), and so is reasoning that no assistant message follows
  (`input.N`). Other items (`web_search_call`, `tool_search_*`) are dropped and named.

Tools
- `function` tools are Chat function tools (`strict` only when true); `custom` tools
  (Codex's `apply_patch`) are functions taking one string, `input`, whose description holds
  the grammar, and their calls come back as `custom_tool_call`s with that text;
  `namespace` tools are flattened to `<namespace>__<name>` and restored, with their
  `namespace`, in the answer. Hosted tools (`web_search`, `file_search`, `mcp`...) are
  dropped and named: a Chat server runs none.
- `tool_choice` as Chat's (`auto`, `none`, `required`, a named function or custom tool as a
  function choice); `allowed_tools` sends only the tools it lists, with its mode.
  `parallel_tool_calls: false` is sent; true is every server's default.

The rest
- `text.format` is `response_format` (`json_schema` with its name, schema, strict and
  description; `json_object`); `max_output_tokens` is the deployment's max_tokens_param
  (BRIDGE_OPENAI_MAX_TOKENS_PARAM), without it the server's own default; `temperature`,
  `top_p` as they are; `safety_identifier` (else `user`) is `user`, hashed past 64
  characters.
- `reasoning.effort` is `reasoning_effort` (low, medium, high: `none` and `minimal` as low,
  `xhigh` and `max` as high) where the deployment takes it (BRIDGE_OPENAI_REASONING_EFFORT),
  else dropped and named; `reasoning.summary` asks for the upstream's reasoning as summary
  text (Context.summary). `prompt_cache_key` goes nowhere: a Chat server caches prefixes
  itself. A streamed request asks for the usage chunk (BRIDGE_OPENAI_STREAM_USAGE).
- What responses_client.dropped_options names is dropped and named.
"""

import dataclasses

from ...protocols.errors import invalid
from ...protocols.schemas.responses import CALLS, OUTPUTS, input_items
from ..chat_request import (
    CHAT_EFFORTS,
    chat_tool,
    chat_user,
    file_part,
    flattened,
    join,
    openai_call_id,
    stream_fields,
    tool_attachments,
)
from ..model_map import map_model
from ..responses_client import Context as ResponsesContext
from ..responses_client import (
    allowed_names,
    call_name,
    chat_response_format,
    client_tools,
    context_for,
    forced_name,
    model_json,
    tool_description,
    tool_parameters,
)
from ..tokens import chat_input_tokens

_CHAT_DETAILS = ("auto", "low", "high")  # the image details Chat takes


@dataclasses.dataclass
class Context(ResponsesContext):
    """What the response and stream translators need to know about the request (responses_client.Context)."""

    input_tokens: int = 0  # a stream's input estimate (the Chat request's), for usage when none comes


def to_chat_request(body, settings):
    """Translate a validated Responses body; returns (Chat body, Context)."""
    context = context_for(body, Context)
    tools, names = declare_tools(body, context)
    chat = {
        "model": map_model(settings.model_map, body["model"]),
        "messages": messages(body, names, settings.openai_reasoning_history, context),
    }
    if body.get("max_output_tokens"):
        chat[settings.openai_max_tokens_param] = body["max_output_tokens"]  # a deployment's cap: caps.py
    for field in ("temperature", "top_p"):
        if body.get(field) is not None:
            chat[field] = body[field]
    user = body.get("safety_identifier") or body.get("user")
    if user:
        chat["user"] = chat_user(user)
    chat.update(tool_fields(body, tools, context))
    response_format = chat_response_format(body)
    if response_format and response_format["type"] != "text":
        chat["response_format"] = response_format
    chat.update(reasoning_effort(body, settings.openai_reasoning_effort, context))
    if context.stream:
        chat.update(stream_fields(settings.openai_stream_usage))
        context.input_tokens = chat_input_tokens(chat)
    context.dropped = list(dict.fromkeys(context.dropped))
    return chat, context


# -- messages ------------------------------------------------------------------------------


@dataclasses.dataclass
class _Conversation:
    """The Chat messages as the items come, and what waits for its place among them."""

    out: list = dataclasses.field(default_factory=list)
    unanswered: int = 0  # calls of the last assistant message not answered yet
    held: list = dataclasses.field(default_factory=list)  # user parts waiting for those answers
    reasoning: list = dataclasses.field(default_factory=list)  # (index, text) waiting for an assistant message


def messages(body, names, reasoning_history, context):
    """The Chat messages for the request's instructions and input items."""
    system = [body["instructions"]] if body.get("instructions") else []
    chat, leading = _Conversation(), True
    for index, item in enumerate(input_items(body)):
        kind = item["type"]
        if leading and kind == "message" and item["role"] in ("system", "developer"):
            system.extend(part["text"] for part in _parts(item["content"]) if part["text"])
            continue
        leading = leading and kind == "additional_tools"
        if kind == "reasoning":
            _reasoning(chat, index, item, reasoning_history, context)
        elif kind == "message" and item["role"] == "assistant":
            _assistant(chat, text=_assistant_text(item["content"]))
        elif kind in CALLS:
            _assistant(chat, call=_tool_call(item, names))
        elif kind in OUTPUTS:
            _tool_output(chat, index, item)
        elif kind == "message":
            _user(chat, _user_parts(item["content"], f"input.{index}.content"), context)
        elif kind != "additional_tools":
            context.dropped.append(f"input.{index}")
    _flush(chat)
    _drop_reasoning(chat, context)  # no assistant message took it
    if system:
        chat.out.insert(0, {"role": "system", "content": join(system)})
    return chat.out


def _reasoning(chat, index, item, reasoning_history, context):
    """A Chat upstream's reasoning waits for the assistant message it led to; any other is dropped."""
    carried = item.get("encrypted_content")  # the reasoning of bridge's it carries (schema), or None
    if carried is None or carried["type"] != "reasoning_content":
        context.dropped.append(f"input.{index}.encrypted_content")
    elif reasoning_history and carried["text"]:
        chat.reasoning.append((index, carried["text"]))


def _assistant(chat, text="", call=None):
    """Text or a call joins the assistant message the conversation ends with, or starts one."""
    if not text and call is None:
        return
    _flush(chat)
    last = chat.out[-1] if chat.out else None
    if last is None or last["role"] != "assistant":
        last = {"role": "assistant", "content": None}
        chat.out.append(last)
    if text:
        last["content"] = join([last["content"], text]) if last["content"] else text
    if call is not None:
        last.setdefault("tool_calls", []).append(call)
        chat.unanswered += 1
    if chat.reasoning:
        texts = [last["reasoning_content"]] if "reasoning_content" in last else []
        last["reasoning_content"] = join(texts + [thought for _, thought in chat.reasoning])
        chat.reasoning = []


def _assistant_text(content):
    if isinstance(content, str):
        return content
    texts = [part["text"] if part["type"] == "output_text" else part["refusal"] for part in content]
    return join([text for text in texts if text])


def _tool_call(item, names):
    """A call of the history; its arguments (read as JSON by the schema) written as models write
    them, json.dumps' own separators: the same text the model wrote, in the common case."""
    arguments = item["arguments"] if item["type"] == "function_call" else {"input": item["input"]}
    return {
        "id": openai_call_id(item["call_id"]),
        "type": "function",
        "function": {"name": call_name(item, names), "arguments": model_json(arguments)},
    }


def _tool_output(chat, index, item):
    """A role:"tool" message, right after the calls; its images and files wait in `held`."""
    call_id = openai_call_id(item["call_id"])
    output = item["output"]
    if isinstance(output, str):
        text, media = output, []
    else:
        parts = _user_parts(output, f"input.{index}.output")
        text = join([part["text"] for part in parts if part["type"] == "text"])
        media = [part for part in parts if part["type"] != "text"]
    chat.out.append({"role": "tool", "tool_call_id": call_id, "content": text})
    chat.held.extend(tool_attachments(call_id, media))
    chat.unanswered = max(chat.unanswered - 1, 0)
    if not chat.unanswered:
        _flush(chat)


def _user(chat, parts, context):
    """User content goes after the tool messages still owed, joining a user message just before;
    reasoning waiting for an assistant message has none now."""
    _drop_reasoning(chat, context)
    chat.held.extend(parts)
    if not chat.unanswered:
        _flush(chat)


def _drop_reasoning(chat, context):
    """The reasoning waiting for an assistant message is dropped and named."""
    if chat.reasoning:
        context.dropped.extend(f"input.{index}" for index, _ in chat.reasoning)
        chat.reasoning = []


def _flush(chat):
    """The held user parts as a user message (merged into one the conversation ends with)."""
    if not chat.held:
        return
    last = chat.out[-1] if chat.out else None
    if last is not None and last["role"] == "user":
        earlier = last["content"]
        parts = [{"type": "text", "text": earlier}] if isinstance(earlier, str) else earlier
        last["content"] = flattened(parts + chat.held)
    else:
        chat.out.append({"role": "user", "content": flattened(chat.held)})
    chat.held = []


def _parts(content):
    return [{"type": "input_text", "text": content}] if isinstance(content, str) else content


def _user_parts(content, path):
    """Chat content parts for a message's (or a tool output's) Responses parts; empty text left out."""
    parts = []
    for position, part in enumerate(_parts(content)):
        kind = part["type"]
        if kind == "input_text":
            if part["text"]:
                parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            image = {"url": part["image_url"]}
            if part.get("detail") in _CHAT_DETAILS:
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        elif part.get("file_data"):
            parts.append(file_part(part.get("filename"), part["file_data"]))
        else:
            raise invalid(
                f"{path}.{position}.file_url: an OpenAI-compatible upstream cannot fetch documents by "
                "URL; send the PDF inline as file_data (data:application/pdf;base64,...)",
                f"{path}.{position}.file_url",
            )
    return parts


# -- tools and the rest ---------------------------------------------------------------------


def declare_tools(body, context):
    """(Chat tools, {(namespace, name): upstream name}) for the function and custom tools the
    request declares (responses_client.client_tools); hosted tools are dropped and named."""
    declared, names = client_tools(body, context)
    tools = []
    for name, tool, namespace in declared:
        parameters = tool_parameters(tool) or {"type": "object"}
        tools.append(chat_tool(name, tool_description(tool, namespace), parameters, tool.get("strict")))
    return tools, names


def tool_fields(body, tools, context):
    """`tools`, `tool_choice` and `parallel_tool_calls`; a choice without tools to choose is dropped."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice["type"] == "allowed_tools":
        allowed = allowed_names(choice, context)
        tools = [tool for tool in tools if tool["function"]["name"] in allowed]
        choice = choice["mode"]
    if not tools:
        if choice not in (None, "auto", "none"):
            context.dropped.append("tool_choice")
        return {}
    out = {"tools": tools}
    if isinstance(choice, dict):
        out["tool_choice"] = {"type": "function", "function": {"name": forced_name(choice, context)}}
    elif choice is not None:
        out["tool_choice"] = choice
    if body.get("parallel_tool_calls") is False:
        out["parallel_tool_calls"] = False
    return out


def reasoning_effort(body, enabled, context):
    """reasoning.effort as Chat's reasoning_effort, for deployments that take it."""
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is None:
        return {}
    if not enabled:
        context.dropped.append("reasoning.effort")
        return {}
    return {"reasoning_effort": CHAT_EFFORTS[effort]}
