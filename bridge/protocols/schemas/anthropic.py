"""marshmallow schemas for Anthropic Messages requests, built from the toolkit in schemas/__init__.py.

The schemas only validate: the translators read the client's own dicts
afterwards, so nothing the client sent is rewritten here, and the loaded
copy (without unknown keys) is not read. Content blocks and messages are
tagged unions (`type`, `role`); Claude Code's newer fields (tool_reference
blocks, defer_loading, thinking.display, a system message's output_config)
are validated here and handled by the translator.
"""

from marshmallow import ValidationError, fields, validate

from ..errors import invalid
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
    deserialize_fields,
    json_type,
    load_fields,
    loader,
    refusal,
    schema_loader,
)


class Content(fields.Field):
    """Message content: a string, or a list of blocks of the kinds this role may send."""

    def __init__(self, blocks, **kwargs):
        super().__init__(**kwargs)
        self.blocks = List(blocks)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return deserialize(self.blocks, value)
        raise ValidationError(f"expected a string or an array of content blocks, got {json_type(value)}")

    def fast_loader(self):
        blocks = loader(self.blocks)

        def load(value):
            return value if type(value) is str else blocks(value)

        return load


# -- content blocks ------------------------------------------------------------


class TextBlock(Schema):
    text = fields.String(required=True)


class Base64Source(Schema):
    media_type = fields.String(required=True)
    data = fields.String(required=True)


class UrlSource(Schema):
    url = fields.String(required=True)


class PlainTextSource(Schema):
    data = fields.String(required=True)


class ImageBlock(Schema):
    source = Tagged({"base64": Base64Source(), "url": UrlSource()}, what="image source", required=True)


_TEXT = {"text": TextBlock()}
_IMAGE = {"image": ImageBlock()}


class ContentSource(Schema):
    content = Content(Tagged({**_TEXT, **_IMAGE}), required=True)


class DocumentBlock(Schema):
    source = Tagged(
        {"base64": Base64Source(), "url": UrlSource(), "text": PlainTextSource(), "content": ContentSource()},
        what="document source",
        required=True,
    )
    title = fields.String(allow_none=True)
    context = fields.String(allow_none=True)


_DOCUMENT = {"document": DocumentBlock()}


class ThinkingBlock(Schema):
    thinking = fields.String(required=True)
    signature = fields.String()


class RedactedThinkingBlock(Schema):
    data = fields.String(required=True)


class ToolUseBlock(Schema):
    id = fields.String(required=True, validate=validate.Length(min=1))
    name = fields.String(required=True, validate=validate.Length(min=1))
    input = fields.Dict(required=True)


class ToolReferenceBlock(Schema):
    """A tool that tool search loaded (Claude Code's ToolSearch): `{"type": "tool_reference", "tool_name"}`."""

    tool_name = fields.String(required=True, validate=validate.Length(min=1))


class ToolResultBlock(Schema):
    tool_use_id = fields.String(required=True, validate=validate.Length(min=1))
    content = Content(
        Tagged(
            {**_TEXT, **_IMAGE, **_DOCUMENT, "tool_reference": ToolReferenceBlock()}, what="tool_result content block"
        )
    )
    is_error = Flag()


USER_BLOCKS = {**_TEXT, **_IMAGE, **_DOCUMENT, "tool_result": ToolResultBlock()}
ASSISTANT_BLOCKS = {
    **_TEXT,
    "thinking": ThinkingBlock(),
    "redacted_thinking": RedactedThinkingBlock(),
    "tool_use": ToolUseBlock(),
}


class OutputFormat(Schema):
    schema = fields.Dict(required=True)


class OutputConfig(Schema):
    effort = fields.String(allow_none=True, validate=validate.OneOf(["low", "medium", "high", "xhigh", "max"]))
    format = Tagged({"json_schema": OutputFormat()}, what="output format", allow_none=True)


class UserMessage(Schema):
    content = Content(Tagged(USER_BLOCKS, what="user content block"), required=True)


class AssistantMessage(Schema):
    content = Content(Tagged(ASSISTANT_BLOCKS, what="assistant content block"), required=True)


class SystemMessage(Schema):
    content = Content(Tagged(_TEXT, what="system content block"), required=True)
    output_config = Nested(OutputConfig)  # per-turn control (Claude Code 2.1.332)


# -- tools and options -----------------------------------------------------------


class CustomTool(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1))
    description = fields.String()
    input_schema = fields.Dict(required=True)
    defer_loading = Flag()


class ServerTool(Schema):
    """A versioned Anthropic tool (web_search_20250305...): validated here, refused by the translator."""

    name = fields.String(required=True)


class ToolField(fields.Field):
    """A tool without `type` (or `custom`) is a client tool; any other type is an Anthropic server tool."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {json_type(value)}")
        kind = value.get("type")
        if kind is not None and not isinstance(kind, str):
            raise ValidationError({"type": ["Not a valid string."]})
        return deserialize_fields(_CUSTOM_TOOL if kind in (None, "custom") else _SERVER_TOOL, value)

    def fast_loader(self):
        custom, server = schema_loader(_CUSTOM_TOOL), schema_loader(_SERVER_TOOL)

        def load(value):
            if type(value) is dict:
                kind = value.get("type")
                if kind is None or kind == "custom":
                    return custom(value)
                if type(kind) is str:
                    return server(value)
            raise Refer

        return load


class ChoiceAuto(Schema):
    disable_parallel_tool_use = Flag()


class ChoiceTool(ChoiceAuto):
    name = fields.String(required=True, validate=validate.Length(min=1))


class ThinkingAdaptive(Schema):
    display = fields.String()  # "summarized", "omitted", Claude Code's TUI "updates"


class ThinkingEnabled(ThinkingAdaptive):
    budget_tokens = Integer(required=True, validate=validate.Range(min=1))


class Metadata(Schema):
    user_id = fields.String(allow_none=True)


class CountTokensRequest(Schema):
    model = fields.String(required=True, validate=validate.Length(min=1))
    messages = List(
        Tagged(
            {"user": UserMessage(), "assistant": AssistantMessage(), "system": SystemMessage()},
            key="role",
            what="message",
        ),
        required=True,
        validate=validate.Length(min=1, error="must contain at least one message"),
    )
    system = Content(Tagged(_TEXT, what="system content block"))
    tools = List(ToolField())
    tool_choice = Tagged(
        {"auto": ChoiceAuto(), "any": ChoiceAuto(), "tool": ChoiceTool(), "none": Schema()}, what="tool_choice"
    )
    thinking = Tagged(
        {"enabled": ThinkingEnabled(), "adaptive": ThinkingAdaptive(), "disabled": Schema()}, what="thinking"
    )
    output_config = Nested(OutputConfig)
    output_format = Tagged({"json_schema": OutputFormat()}, what="output format", allow_none=True)


class MessagesRequest(CountTokensRequest):
    max_tokens = Integer(required=True, validate=validate.Range(min=1))
    stream = Flag()
    stop_sequences = List(fields.String())
    temperature = Number(validate=validate.Range(min=0, max=1))
    top_p = Number(validate=validate.Range(min=0, max=1))
    top_k = Integer(validate=validate.Range(min=0))
    metadata = Nested(Metadata)


class ModelListQuery(Schema):
    """GET /v1/models' paging, from the query string: limit is a string there."""

    limit = fields.Integer(validate=validate.Range(min=1, max=1000))
    after_id = fields.String()
    before_id = fields.String()


_CUSTOM_TOOL = CustomTool()
_SERVER_TOOL = ServerTool()
_MESSAGES = MessagesRequest()
_COUNT_TOKENS = CountTokensRequest()
_MODEL_LIST_QUERY = ModelListQuery()


def validate_messages(body):
    """The body of POST /v1/messages, unchanged, or a 400 naming the first bad field."""
    return _validated(_MESSAGES, body)


def validate_count_tokens(body):
    """The body of POST /v1/messages/count_tokens (no max_tokens needed)."""
    return _validated(_COUNT_TOKENS, body)


def validate_model_list_query(args):
    """(limit, after_id, before_id) of an Anthropic models list, checked before the upstream is asked."""
    query = _validated(_MODEL_LIST_QUERY, args)
    if "after_id" in query and "before_id" in query:
        raise invalid("before_id: cannot be given with after_id; a page goes one way", param="before_id")
    return int(query.get("limit", 20)), query.get("after_id"), query.get("before_id")


def _validated(schema, body):
    try:
        load_fields(schema, body)
    except ValidationError as error:
        raise refusal(error) from None
    return body
