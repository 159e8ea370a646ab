"""marshmallow schemas for OpenAI Chat Completions requests, built from the toolkit in schemas/__init__.py.

Validation happens here, before any translation, so every rejection names
the field the way the client wrote it (`messages.2.tool_calls.0.function.arguments`).
Besides shape, the schemas refuse what the Anthropic upstream cannot express
without changing the answer (docs/translation.md): several choices, log
probabilities, audio, custom tools, legacy function calling, content parts
it cannot read, and conversations with nothing to answer.

Unknown top-level fields are kept (the translator reports them as dropped);
unknown fields inside messages and parts are ignored, because clients echo
whole response messages back (`annotations`, `reasoning_content`, SDK-only
fields), and so are those Anthropic has no place for (`name`); image `detail` is kept for
the Responses upstream, and ignored for Anthropic.
"""

import base64
import json
import re

from marshmallow import ValidationError, fields, validate

from ..json_values import loads_decoded
from . import (
    Flag,
    Integer,
    List,
    Nested,
    Number,
    Refer,
    Schema,
    Tagged,
    deserialize,
    json_type,
    load_request,
    loader,
)

DATA_URL = re.compile(r"^data:(?P<media_type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# How each of those formats begins (a WebP file: "RIFF", its size, then "WEBP").
_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))
# Function and response_format names become Anthropic tool names, which follow the same rule.
NAME = validate.Regexp(r"^[a-zA-Z0-9_-]{1,64}$", error="must be 1-64 characters of a-z, A-Z, 0-9, _ and -")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class OneOrMany(fields.Field):
    """Chat's `string or array of parts` (and `string or array of strings`) fields."""

    def __init__(self, single, item, **kwargs):
        super().__init__(**kwargs)
        self.single, self.many = single, List(item)

    def _deserialize(self, value, attr, data, **kwargs):
        """Its form loaded as load_fields loads a field (deserialize): with no validator chain
        built anew per value, as every message's `content` is one of these."""
        return deserialize(self.many if isinstance(value, list) else self.single, value, attr, data)

    def fast_loader(self):
        single, many = loader(self.single), loader(self.many)

        def load(value):
            return many(value) if type(value) is list else single(value)

        return load


def must_be_absent(reason):
    """A field that is fine when absent or null and refused with `reason` otherwise."""

    def check(value):
        if value is not None:
            raise ValidationError(reason)

    return fields.Raw(allow_none=True, validate=check)


# -- content parts -------------------------------------------------------------------------


class Part(Schema):
    """A content part; Anthropic's prompt-caching marker may ride on it."""

    cache_control = fields.Dict(allow_none=True)


class TextPart(Part):
    text = fields.String(required=True)


def image_media_type(match):
    """The type a data URL's bytes show, else its label.

    OpenAI reads the image and ignores the label (image/jpg, or a PNG labelled
    jpeg, are common); Anthropic refuses a label outside IMAGE_TYPES or one
    that does not match the bytes.
    """
    try:
        head = base64.b64decode(match["data"][:16])
    except ValueError:
        return match["media_type"]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next(
        (media_type for signature, media_type in _SIGNATURES if head.startswith(signature)), match["media_type"]
    )


def valid_image_url(url):
    match = DATA_URL.match(url)
    if match:
        if image_media_type(match) not in IMAGE_TYPES:
            raise ValidationError(
                f"image type {match['media_type']!r} is not supported by the Anthropic "
                f"upstream; use one of {', '.join(IMAGE_TYPES)}"
            )
    elif not url.startswith(("https://", "http://")):
        raise ValidationError("must be an http(s) URL or a base64 data URL (data:image/png;base64,...)")


class ImageUrl(Schema):
    url = fields.String(required=True, validate=valid_image_url)
    detail = fields.String(allow_none=True)  # OpenAI's resolution; the Responses upstream takes it


class ImagePart(Part):
    image_url = Nested(ImageUrl, required=True)


def valid_pdf_data_url(value):
    match = DATA_URL.match(value)
    if not match:
        raise ValidationError("must be a base64 data URL (data:application/pdf;base64,...)")
    if match["media_type"] != "application/pdf":
        raise ValidationError(
            f"file type {match['media_type']!r} is not supported by the Anthropic "
            "upstream; only application/pdf documents are"
        )


class File(Schema):
    file_id = must_be_absent(
        "files uploaded to OpenAI cannot be read by the Anthropic upstream; send the document inline as file_data"
    )
    file_data = fields.String(required=True, validate=valid_pdf_data_url)
    filename = fields.String(allow_none=True)


class FilePart(Part):
    file = Nested(File, required=True)


class RefusalPart(Schema):
    refusal = fields.String(required=True)


_AUDIO_INPUT = "audio input is not supported by the Anthropic upstream"
TEXT_PARTS = Tagged({"text": TextPart()}, what="content part")
USER_PARTS = Tagged(
    {"text": TextPart(), "image_url": ImagePart(), "file": FilePart()},
    what="content part",
    refused={"input_audio": _AUDIO_INPUT},
)
ASSISTANT_PARTS = Tagged({"text": TextPart(), "refusal": RefusalPart()}, what="content part")


def string_or_parts(parts, **kwargs):
    """Message content: a string, or an array of the parts `parts` (a Tagged) validates."""
    return OneOrMany(fields.String(), parts, **kwargs)


# -- messages ------------------------------------------------------------------------------


class SystemMessage(Schema):
    content = string_or_parts(TEXT_PARTS, required=True)


class UserMessage(Schema):
    content = string_or_parts(USER_PARTS, required=True)


class ObjectText(fields.String):
    """A JSON object encoded as a string (a tool call's `arguments`), loaded as that object.

    Read once, here, for the translator too, within the request's limits (json_values.loads_decoded);
    with the json module, so a model's integers stay exact however long.
    """

    def _deserialize(self, value, attr, data, **kwargs):
        return self._object(super()._deserialize(value, attr, data, **kwargs))

    def fast_loader(self):
        def load(value):
            if type(value) is str:
                return self._object(value)
            raise Refer

        return load

    @staticmethod
    def _object(text):
        try:
            parsed = loads_decoded(text, "a tool call's arguments", json.loads)
        except ValueError as exc:
            raise ValidationError(f"must be a JSON object encoded as a string; it is not valid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise ValidationError(f"must be a JSON object encoded as a string, got {json_type(parsed)}")
        return parsed


class FunctionCall(Schema):
    name = fields.String(required=True)
    arguments = ObjectText(required=True)


class ToolCall(Schema):
    id = fields.String(required=True, validate=validate.Length(min=1))
    function = Nested(FunctionCall, required=True)


class ThinkingBlock(Schema):
    thinking = fields.String(required=True)
    signature = fields.String(allow_none=True)


class RedactedThinkingBlock(Schema):
    data = fields.String(required=True)


_CUSTOM_CALL = (
    "custom tool calls carry free-form text, which Anthropic tool_use blocks cannot express; use function tools"
)


class AssistantMessage(Schema):
    content = string_or_parts(ASSISTANT_PARTS, allow_none=True)
    refusal = fields.String(allow_none=True)
    tool_calls = List(
        Tagged({"function": ToolCall()}, what="tool call", refused={"custom": _CUSTOM_CALL}), allow_none=True
    )
    # The bridge's extension: signed thinking blocks echoed back from an earlier response.
    thinking_blocks = List(
        Tagged({"thinking": ThinkingBlock(), "redacted_thinking": RedactedThinkingBlock()}, what="thinking block"),
        allow_none=True,
    )
    function_call = must_be_absent("legacy function calling is not supported; use tool_calls")
    audio = must_be_absent("audio output is not supported by the Anthropic upstream")


class ToolMessage(Schema):
    tool_call_id = fields.String(required=True, validate=validate.Length(min=1))
    content = string_or_parts(TEXT_PARTS, required=True)


_SYSTEM = SystemMessage()
MESSAGE = Tagged(
    {
        "system": _SYSTEM,
        "developer": _SYSTEM,
        "user": UserMessage(),
        "assistant": AssistantMessage(),
        "tool": ToolMessage(),
    },
    key="role",
    what="message",
    refused={
        "function": 'role "function" (legacy function calling) is not supported: its results '
        'carry no tool_call_id to link them to a call; use tool_calls and role "tool"'
    },
)


# -- tools and options ---------------------------------------------------------------------


class FunctionDefinition(Schema):
    name = fields.String(required=True, validate=NAME)
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)
    strict = Flag(allow_none=True)


class FunctionTool(Schema):
    function = Nested(FunctionDefinition, required=True)


class ChosenFunction(Schema):
    name = fields.String(required=True)


class NamedToolChoice(Schema):
    function = Nested(ChosenFunction, required=True)


class ToolChoice(fields.Field):
    """ "auto" | "none" | "required" | a named choice, which `named` (a Tagged on `type`) validates:
    Chat's {"type": "function", "function": {"name": ...}}, the Responses API's own shapes."""

    def __init__(self, named, what, **kwargs):
        super().__init__(**kwargs)
        self.named, self.what = named, what

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if value not in ("auto", "none", "required"):
                raise ValidationError(f"must be 'auto', 'none', 'required' or a named {self.what}, got {value!r}")
            return value
        return deserialize(self.named, value, attr, data)

    def fast_loader(self):
        named = loader(self.named)

        def load(value):
            if type(value) is str:
                if value in ("auto", "none", "required"):
                    return value
                raise Refer
            return named(value)

        return load


CHAT_TOOL_CHOICE = Tagged(
    {"function": NamedToolChoice()},
    what="tool choice",
    refused={
        "custom": "custom tool choices are not supported; only function tools can be chosen",
        "allowed_tools": "allowed_tools tool choices are not supported; send only the tools the model may call",
    },
)


def _object_root(schema):
    """The answer is a tool's input, which Anthropic requires to be an object."""
    if schema.get("type", "object") != "object":
        raise ValidationError("the root of the schema must be an object (type: object)")


class JsonSchemaFormat(Schema):
    """Chat's response_format.json_schema; the Responses API's text.format, where the same fields sit flat."""

    name = fields.String(required=True, validate=NAME)
    description = fields.String(allow_none=True)
    schema = fields.Dict(allow_none=True, validate=_object_root)
    strict = Flag(allow_none=True)


class ResponseFormatJsonSchema(Schema):
    json_schema = Nested(JsonSchemaFormat, required=True)


class StreamOptions(Schema):
    include_usage = Flag(allow_none=True)


SEARCH_CONTEXT_SIZES = ("low", "medium", "high")


class ApproximateLocation(Schema):
    """Where the user roughly is, for web search: Chat nests it in user_location.approximate,
    Responses gives it flat in the web_search tool's user_location."""

    type = fields.String(allow_none=True, validate=validate.Equal("approximate"))
    city = fields.String(allow_none=True)
    region = fields.String(allow_none=True)
    country = fields.String(allow_none=True)
    timezone = fields.String(allow_none=True)


class ChatUserLocation(Schema):
    type = fields.String(required=True, validate=validate.Equal("approximate"))
    approximate = Nested(ApproximateLocation, required=True)


class WebSearchOptions(Schema):
    search_context_size = fields.String(allow_none=True, validate=validate.OneOf(SEARCH_CONTEXT_SIZES))
    user_location = Nested(ChatUserLocation, allow_none=True)


def _thinking(value):
    if not isinstance(value, dict) or value.get("type") not in ("enabled", "disabled", "adaptive"):
        raise ValidationError(
            'must be Anthropic\'s thinking object: {"type": "enabled", "budget_tokens": N}, '
            '{"type": "adaptive"} or {"type": "disabled"}'
        )
    budget = value.get("budget_tokens")
    if value["type"] == "enabled" and (type(budget) is not int or budget < 1024):
        raise ValidationError("budget_tokens must be an integer of at least 1024 when thinking is enabled")


def _one(value):
    if value != 1:
        raise ValidationError(f"only one choice is supported by the Anthropic upstream, got {value}")


def _no_audio_modality(value):
    if "audio" in value:
        raise ValidationError("audio output is not supported by the Anthropic upstream")


def must_be_false(reason):
    """A field refused with `reason` when it is set (true, non-zero)."""

    def check(value):
        if value:
            raise ValidationError(reason)

    return check


NO_LOGPROBS = "log probabilities are not available from the Anthropic upstream"


class ChatRequest(Schema):
    """The request's declared fields; validate_chat keeps the others, for the translator to report as dropped."""

    model = fields.String(required=True, validate=validate.Length(min=1))
    messages = List(MESSAGE, required=True)
    max_tokens = Integer(allow_none=True, validate=validate.Range(min=1))
    max_completion_tokens = Integer(allow_none=True, validate=validate.Range(min=1))
    temperature = Number(allow_none=True, validate=validate.Range(0, 2))
    top_p = Number(allow_none=True, validate=validate.Range(0, 1))
    top_k = Integer(
        allow_none=True, validate=validate.Range(min=0)
    )  # Anthropic's own, passed by the openai SDK's extra_body
    n = Integer(allow_none=True, validate=_one)
    stream = Flag(allow_none=True)
    stream_options = Nested(StreamOptions, allow_none=True)
    stop = OneOrMany(fields.String(), fields.String(), allow_none=True)
    tools = List(
        Tagged(
            {"function": FunctionTool()},
            what="tool",
            refused={
                "custom": "custom tools take free-form text input, which Anthropic tools cannot express; "
                "use function tools"
            },
        ),
        allow_none=True,
    )
    tool_choice = ToolChoice(CHAT_TOOL_CHOICE, "function", allow_none=True)
    parallel_tool_calls = Flag(allow_none=True)
    response_format = Tagged(
        {"text": Schema(), "json_object": Schema(), "json_schema": ResponseFormatJsonSchema()},
        what="response format",
        allow_none=True,
    )
    reasoning_effort = fields.String(allow_none=True, validate=validate.OneOf(REASONING_EFFORTS))
    thinking = fields.Raw(allow_none=True, validate=_thinking)  # Anthropic's own, via extra_body
    user = fields.String(allow_none=True)
    safety_identifier = fields.String(allow_none=True)
    logprobs = Flag(allow_none=True, validate=must_be_false(NO_LOGPROBS))
    top_logprobs = fields.Raw(allow_none=True, validate=must_be_false(NO_LOGPROBS))
    modalities = List(fields.String(), allow_none=True, validate=_no_audio_modality)
    audio = must_be_absent("audio output is not supported by the Anthropic upstream")
    functions = must_be_absent("legacy function calling is not supported; use tools")
    function_call = must_be_absent("legacy function calling is not supported; use tool_choice")
    web_search_options = Nested(WebSearchOptions, allow_none=True)


def _check_conversation(request):
    messages = request["messages"]
    if not any(m["role"] in ("user", "assistant", "tool") for m in messages):
        raise ValidationError(
            {
                "messages": [
                    "must contain at least one user or assistant message; system "
                    "and developer messages alone leave nothing to answer"
                ]
            }
        )
    _check_tool_links(messages)


def _check_chosen_tool(request):
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and request.get("tools"):
        name = choice["function"]["name"]
        if name not in {tool["function"]["name"] for tool in request["tools"]}:
            raise ValidationError({"tool_choice": {"function": {"name": [f"no function named {name!r} in tools"]}}})


def _check_tool_links(messages):
    """Every tool call answered by the role:"tool" messages right after it, and every answer called.

    Anthropic requires each tool_use to be followed by its tool_result in the
    next user turn; saying so here names the Chat field instead of an index
    in a request the client never saw.
    """
    errors = {}
    pending, caller = {}, None
    for index, message in enumerate([*messages, {"role": "end"}]):
        role = message["role"]
        if role in ("system", "developer"):
            continue  # hoisted to the top-level system: they do not break a call from its results
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in pending:
                errors[index] = {
                    "tool_call_id": [
                        f"{call_id!r} does not answer a tool call of the assistant message before it"
                        if caller is not None
                        else 'a role "tool" message must follow an assistant message with tool_calls'
                    ]
                }
            pending.pop(call_id, None)
            continue
        for call_id, position in pending.items():
            errors.setdefault(caller, {}).setdefault("tool_calls", {})[position] = {
                "id": [f'tool call {call_id!r} has no role "tool" message answering it']
            }
        pending, caller = {}, None
        if role == "assistant" and message.get("tool_calls"):
            caller = index
            pending = {call["id"]: position for position, call in enumerate(message["tool_calls"])}
    if errors:
        raise ValidationError({"messages": errors})


_CHAT = ChatRequest()


def validate_chat(body):
    """The loaded request, or a 400 whose message names every bad field by its path."""
    return load_request(_CHAT, body, (_check_conversation, _check_chosen_tool))
