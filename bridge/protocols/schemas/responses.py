"""marshmallow schemas for OpenAI Responses requests (`POST /v1/responses`), built from the toolkit.

Validation happens here, before any translation, so every rejection names the
field the way the client wrote it (`input.7.call_id`, `tools.5.tools.0.name`).
The content parts, the JSON-schema answer format and the tool-call arguments
are the Chat schema's own (schemas/openai.py). Besides shape, the schema
refuses what a stateless bridge in front of Anthropic or a Chat server cannot
do without changing the answer:

- state kept by a server: `previous_response_id`, `conversation`, stored
  prompts (`prompt`), `background` responses, `item_reference` and OpenAI
  `compaction` items. Nothing is stored; the client sends the full `input`.
- log probabilities (`top_logprobs`, `include: message.output_text.logprobs`),
  audio input, files uploaded to OpenAI (`file_id`), documents other than PDF.
- a tool call left unanswered before the conversation goes on, or an output
  that answers no call: Anthropic and Chat servers would refuse the request,
  and here the 400 names the item.
- a `tool_choice` naming a tool the request does not declare, or a hosted tool.

Hosted tools (`web_search`, `file_search`, `mcp`...) and the other fields the
translator drops pass validation (a `web_search` tool's fields are checked, since
the translator may send them on); the translator names them in
x-bridge-dropped-params. Unknown top-level fields are kept for that report;
unknown fields inside items, parts and tools are ignored, since clients echo
whole output items back (`id`, `status`, `annotations`, `phase`...).
"""

from marshmallow import ValidationError, fields, validate

from ..reasoning import carried
from . import Flag, Integer, List, Nested, Number, Schema, Tagged, deserialize, load_request, loader
from .openai import (
    NAME,
    NO_LOGPROBS,
    REASONING_EFFORTS,
    SEARCH_CONTEXT_SIZES,
    ApproximateLocation,
    JsonSchemaFormat,
    ObjectText,
    RefusalPart,
    ToolChoice,
    must_be_absent,
    must_be_false,
    string_or_parts,
    valid_image_url,
    valid_pdf_data_url,
)

EFFORTS = (*REASONING_EFFORTS, "max")
SUMMARIES = ("auto", "concise", "detailed")
# Tools OpenAI runs itself (or, for shell/apply_patch/local_shell, through item types of
# their own): no Anthropic equivalent here, so the translator drops them and says so.
# OpenAI's web search tool: Anthropic's web search where the operator enabled it, else dropped too.
WEB_SEARCH_TOOLS = (
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
)
HOSTED_TOOLS = (
    *WEB_SEARCH_TOOLS,
    "file_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "mcp",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "shell",
    "apply_patch",
    "tool_search",
    "programmatic_tool_calling",
)
CALLS = ("function_call", "custom_tool_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
_LINKED = (*CALLS, *OUTPUTS)
_ASSISTANT_ITEMS = (*CALLS, "reasoning", "end")  # "end": the end of input, which ends a turn too
_STATELESS = "bridge stores nothing: send the full conversation in `input`"
_URL_FILE = (
    "files uploaded to OpenAI cannot be read by the upstream; send the document "
    "inline as file_data (data:application/pdf;base64,...) or as file_url"
)
_URL_IMAGE = (
    "images uploaded to OpenAI cannot be read by the upstream; send the image as "
    "image_url (a base64 data URL or an http(s) URL)"
)


def _http_url(value):
    if not value.startswith(("https://", "http://")):
        raise ValidationError("must be an http(s) URL")


# -- content parts -------------------------------------------------------------------------


class InputText(Schema):
    text = fields.String(required=True)


class InputImage(Schema):
    file_id = must_be_absent(_URL_IMAGE)
    image_url = fields.String(required=True, validate=valid_image_url)
    detail = fields.String(allow_none=True)  # a Chat upstream's image_url.detail, where it is one Chat knows


class InputFile(Schema):
    """A PDF, inline (file_data) or by URL (file_url); _check_input requires one of them."""

    file_id = must_be_absent(_URL_FILE)
    file_data = fields.String(validate=valid_pdf_data_url)
    file_url = fields.String(validate=_http_url)
    filename = fields.String(allow_none=True)


USER_PARTS = Tagged(
    {"input_text": InputText(), "input_image": InputImage(), "input_file": InputFile()},
    what="content part",
    refused={"input_audio": "audio input is not supported by the upstream"},
)
SYSTEM_PARTS = Tagged({"input_text": InputText()}, what="content part")
ASSISTANT_PARTS = Tagged({"output_text": InputText(), "refusal": RefusalPart()}, what="content part")


# -- input items ---------------------------------------------------------------------------


class UserMessage(Schema):
    content = string_or_parts(USER_PARTS, required=True)


class SystemMessage(Schema):
    content = string_or_parts(SYSTEM_PARTS, required=True)


class AssistantMessage(Schema):
    content = string_or_parts(ASSISTANT_PARTS, required=True)


_SYSTEM = SystemMessage()
MESSAGE = Tagged(
    {"user": UserMessage(), "system": _SYSTEM, "developer": _SYSTEM, "assistant": AssistantMessage()},
    key="role",
    what="message",
)


class Call(Schema):
    call_id = fields.String(required=True, validate=validate.Length(min=1))
    name = fields.String(required=True, validate=validate.Length(min=1))
    namespace = fields.String(allow_none=True)


class FunctionCall(Call):
    arguments = ObjectText(required=True)


class CustomToolCall(Call):
    input = fields.String(required=True)


class CallOutput(Schema):
    call_id = fields.String(required=True, validate=validate.Length(min=1))
    output = string_or_parts(USER_PARTS, required=True)


class EncryptedReasoning(fields.String):
    """A reasoning item's `encrypted_content`, loaded as the reasoning of bridge's it carries (an
    Anthropic thinking block, a Chat upstream's reasoning_content), or None when it carries none
    of ours (another model's reasoning, which the translator names as dropped). Decoded once,
    here, within the request's limits (reasoning.carried)."""

    def _deserialize(self, value, attr, data, **kwargs):
        return carried(super()._deserialize(value, attr, data, **kwargs))


class ReasoningItem(Schema):
    encrypted_content = EncryptedReasoning(allow_none=True)


class Item(Tagged):
    """An input item, tagged by `type`; a message is tagged again by its `role`, and may leave
    its type out (the SDKs' EasyInputMessage)."""

    def __init__(self, schemas, **kwargs):
        super().__init__({"message": _SYSTEM, **schemas}, what="input item", **kwargs)  # "message": for the tag list
        self.messages = MESSAGE

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, dict) and value.get("type", "message" if "role" in value else None) == "message":
            return {"type": "message", **deserialize(self.messages, value)}
        return super()._deserialize(value, attr, data, **kwargs)

    def fast_loader(self):
        messages, items = loader(self.messages), super().fast_loader()

        def load(value):
            if type(value) is dict and value.get("type", "message" if "role" in value else None) == "message":
                return {"type": "message", **messages(value)}
            return items(value)

        return load


# -- tools ---------------------------------------------------------------------------------


class FunctionTool(Schema):
    name = fields.String(required=True, validate=NAME)
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)
    strict = Flag(allow_none=True)
    defer_loading = Flag(allow_none=True)


class Grammar(Schema):
    syntax = fields.String(required=True, validate=validate.OneOf(("lark", "regex")))
    definition = fields.String(required=True)


class CustomTool(Schema):
    name = fields.String(required=True, validate=NAME)
    description = fields.String(allow_none=True)
    format = Tagged({"text": Schema(), "grammar": Grammar()}, what="custom tool format", allow_none=True)
    defer_loading = Flag(allow_none=True)


class NamespaceTool(Schema):
    name = fields.String(required=True, validate=NAME)
    description = fields.String(allow_none=True)
    tools = List(Tagged({"function": FunctionTool(), "custom": CustomTool()}, what="namespace tool"), required=True)


class SearchFilters(Schema):
    allowed_domains = List(fields.String(), allow_none=True)


class WebSearchTool(Schema):
    filters = Nested(SearchFilters, allow_none=True)
    user_location = Nested(ApproximateLocation, allow_none=True)
    search_context_size = fields.String(allow_none=True, validate=validate.OneOf(SEARCH_CONTEXT_SIZES))
    external_web_access = Flag(allow_none=True)


_HOSTED = Schema()
TOOL = Tagged(
    {
        "function": FunctionTool(),
        "custom": CustomTool(),
        "namespace": NamespaceTool(),
        **{kind: _HOSTED for kind in HOSTED_TOOLS},
        **{kind: WebSearchTool() for kind in WEB_SEARCH_TOOLS},
    },
    what="tool",
)


class ToolList(Schema):
    """additional_tools (Codex's code mode declares its tools there) and tool_search_output items."""

    tools = List(TOOL, required=True)


ITEM = Item(
    {
        "function_call": FunctionCall(),
        "custom_tool_call": CustomToolCall(),
        "function_call_output": CallOutput(),
        "custom_tool_call_output": CallOutput(),
        "reasoning": ReasoningItem(),
        "additional_tools": ToolList(),
        "tool_search_output": ToolList(),
        "tool_search_call": Schema(),
        "web_search_call": Schema(),
    },
    refused={
        "item_reference": f"item references point at items a server stored; {_STATELESS}, the "
        "referenced items included",
        "compaction": "a compaction item carries context only OpenAI can decrypt; send the "
        "conversation it summarized (or a summary of your own) as input items",
    },
)


# -- options -------------------------------------------------------------------------------


class NamedTool(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1))


class AllowedTools(Schema):
    mode = fields.String(required=True, validate=validate.OneOf(("auto", "required")))
    tools = List(fields.Dict(), required=True)


# "auto" | "none" | "required" | {"type": "function" | "custom", "name"} | allowed_tools
NAMED_TOOL_CHOICE = Tagged(
    {"function": NamedTool(), "custom": NamedTool(), "allowed_tools": AllowedTools()},
    what="tool choice",
    refused={
        kind: f"{kind} is a hosted tool, which the upstream does not run; choose a function or custom tool"
        for kind in HOSTED_TOOLS
    },
)


class ReasoningConfig(Schema):
    effort = fields.String(allow_none=True, validate=validate.OneOf(EFFORTS))
    summary = fields.String(allow_none=True, validate=validate.OneOf(SUMMARIES))
    generate_summary = fields.String(allow_none=True, validate=validate.OneOf(SUMMARIES))  # summary's old name
    context = fields.String(allow_none=True)  # read by the translator, to name as dropped
    mode = fields.String(allow_none=True)


class TextConfig(Schema):
    format = Tagged(
        {"text": Schema(), "json_object": Schema(), "json_schema": JsonSchemaFormat()},
        what="text format",
        allow_none=True,
    )
    verbosity = fields.String(allow_none=True, validate=validate.OneOf(("low", "medium", "high")))


class StreamOptions(Schema):
    include_obfuscation = Flag(allow_none=True)


def _no_logprobs_include(values):
    if "message.output_text.logprobs" in values:
        raise ValidationError(f"message.output_text.logprobs: {NO_LOGPROBS}")


class ResponsesRequest(Schema):
    """The request's declared fields; validate_responses keeps the others, for the translator to report."""

    model = fields.String(required=True, validate=validate.Length(min=1))
    input = string_or_parts(ITEM, required=True)
    instructions = fields.String(allow_none=True)
    stream = Flag(allow_none=True)
    stream_options = Nested(StreamOptions, allow_none=True)
    max_output_tokens = Integer(allow_none=True, validate=validate.Range(min=1))
    max_tool_calls = Integer(allow_none=True, validate=validate.Range(min=1))
    temperature = Number(allow_none=True, validate=validate.Range(0, 2))
    top_p = Number(allow_none=True, validate=validate.Range(0, 1))
    top_logprobs = Integer(allow_none=True, validate=must_be_false(NO_LOGPROBS))
    tools = List(TOOL, allow_none=True)
    tool_choice = ToolChoice(NAMED_TOOL_CHOICE, "tool", allow_none=True)
    parallel_tool_calls = Flag(allow_none=True)
    reasoning = Nested(ReasoningConfig, allow_none=True)
    text = Nested(TextConfig, allow_none=True)
    include = List(fields.String(), allow_none=True, validate=_no_logprobs_include)
    user = fields.String(allow_none=True)
    safety_identifier = fields.String(allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)
    client_metadata = fields.Dict(allow_none=True)
    prompt_cache_key = fields.String(allow_none=True)
    service_tier = fields.String(allow_none=True)
    truncation = fields.String(allow_none=True, validate=validate.OneOf(("auto", "disabled")))
    store = Flag(allow_none=True)  # accepted and ignored: nothing is ever stored
    background = Flag(
        allow_none=True,
        validate=must_be_false(
            f"background responses are stored for polling; {_STATELESS} without background (stream it if it is long)"
        ),
    )
    previous_response_id = must_be_absent(f"{_STATELESS} instead of previous_response_id")
    conversation = must_be_absent(f"{_STATELESS} instead of a conversation")
    prompt = must_be_absent("stored prompts live on OpenAI's servers; send the prompt's text as instructions and input")


# -- whole-request checks ------------------------------------------------------------------


def input_items(request):
    """`input` as a list of items: a string is one user message."""
    value = request["input"]
    return [{"type": "message", "role": "user", "content": value}] if isinstance(value, str) else value


def _check_input(request):
    """Something to answer, documents that say where they are, and every tool call linked."""
    items = input_items(request)
    if not any(
        item["type"] in _LINKED
        or item["type"] == "message"
        and item["role"] in ("user", "assistant")
        and item["content"]
        for item in items
    ):
        raise ValidationError(
            {
                "input": [
                    "must contain at least one user or assistant message or tool call; "
                    "instructions and system or developer messages alone leave nothing "
                    "to answer"
                ]
            }
        )
    errors = {}
    for index, item in enumerate(items):
        parts = item.get("content") if item["type"] == "message" else item.get("output")
        for position, part in enumerate(parts if isinstance(parts, list) else []):
            if part["type"] == "input_file" and not (part.get("file_data") or part.get("file_url")):
                key = "content" if item["type"] == "message" else "output"
                errors.setdefault(index, {}).setdefault(key, {})[position] = {
                    "file_data": ["missing: send the document as file_data (a base64 data URL) or file_url"]
                }
    errors.update(_tool_link_errors(items))
    if errors:
        raise ValidationError({"input": dict(sorted(errors.items()))})


def _tool_link_errors(items):
    """{index: error} for calls left unanswered and outputs that answer nothing.

    Anthropic requires each tool_use to be answered by a tool_result in the next user turn.
    The turn of a call ends, and the conversation goes on, at the first assistant item
    (message, call or reasoning) after an output or a user-side message, or at the end of
    input; a message between a call and its output is fine (tool results go first in their
    turn). Parallel calls come as call, call, output, output.
    """
    errors, pending, answering = {}, {}, False
    for index, item in enumerate([*items, {"type": "end"}]):
        kind = item["type"]
        assistant = kind in _ASSISTANT_ITEMS or kind == "message" and item["role"] == "assistant"
        if assistant and (answering or kind == "end"):
            for call_id, position in pending.items():
                errors[position] = {
                    "call_id": [
                        f"call {call_id!r} has no {items[position]['type']}_output "
                        "answering it before the conversation goes on"
                    ]
                }
            pending, answering = {}, False
        if kind in CALLS:
            if item["call_id"] in pending:
                errors[index] = {"call_id": [f"{item['call_id']!r} is the call_id of an earlier call of the same turn"]}
            pending[item["call_id"]] = index
        elif kind in OUTPUTS:
            if pending.pop(item["call_id"], None) is None:
                errors[index] = {"call_id": [f"{item['call_id']!r} answers no call of the assistant turn before it"]}
            answering = True
        elif kind == "message" and item["role"] != "assistant":
            answering = True
    return errors


def declared_tools(request):
    """(path, tool, namespace tool or None) of every tool the request declares: `tools`, and the
    tools of additional_tools and tool_search_output items; a namespace gives each of its tools."""
    lists = [("tools", request.get("tools") or [])]
    lists += [
        (f"input.{i}.tools", item["tools"])
        for i, item in enumerate(input_items(request))
        if item["type"] in ("additional_tools", "tool_search_output")
    ]
    for path, tools in lists:
        for i, tool in enumerate(tools):
            if tool["type"] == "namespace":
                for j, inner in enumerate(tool["tools"]):
                    yield f"{path}.{i}.tools.{j}", inner, tool
            else:
                yield f"{path}.{i}", tool, None


def _check_chosen_tool(request):
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and choice["type"] in ("function", "custom"):
        if not any(
            tool["type"] == choice["type"] and tool["name"] == choice["name"] for _, tool, _ in declared_tools(request)
        ):
            raise ValidationError(
                {"tool_choice": {"name": [f"no {choice['type']} tool named {choice['name']!r} in tools"]}}
            )


_RESPONSES = ResponsesRequest()


def validate_responses(body):
    """The loaded request, or a 400 whose message names every bad field by its path."""
    return load_request(_RESPONSES, body, (_check_input, _check_chosen_tool))
