"""marshmallow schemas for Anthropic Messages requests.

The schemas only validate: the translators read the client's own dicts
afterwards, so nothing the client sent is rewritten here. Every failure
becomes one 400 whose message starts with the path of the first bad field,
`messages.0.content.1.type: ...`, because that is what a person fixing the
request needs.

Unknown keys pass everywhere (Anthropic adds optional fields often; the
translator forwards only what it knows). They are left out of marshmallow's
loaded copy, which nobody reads: copying them cost a tenth of the validation.
A tagged block is loaded field by field (schemas.load_fields), not by a
nested Schema.load.

Content blocks and messages are tagged unions: `type` (or `role`) picks the
schema, so an unknown tag is reported at that key. Numbers and booleans are
strict: JSON "0.5" or 1 is not a temperature or a flag.
"""
from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from ..errors import invalid
from . import List, Nested, load_fields


class _Schema(Schema):
    class Meta:
        unknown = EXCLUDE


class Number(fields.Float):
    """A JSON number (not a numeric string, not a boolean)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.make_error("invalid", input=value)
        return super()._deserialize(value, attr, data, **kwargs)


class Flag(fields.Boolean):
    """A JSON true/false (not "true", not 1)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError("Not a valid boolean.")
        return value


def _json_type(value):
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


class Tagged(fields.Field):
    """An object whose `key` member (type, role) selects the schema that validates it."""

    def __init__(self, schemas, key="type", what="content block", **kwargs):
        super().__init__(**kwargs)
        self.schemas = schemas
        self.key = key
        self.what = what

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {_json_type(value)}")
        tag = value.get(self.key)
        schema = self.schemas.get(tag) if isinstance(tag, str) else None
        if schema is None:
            expected = ", ".join(sorted(self.schemas))
            problem = "missing" if tag is None else f"{tag!r} is not a supported {self.what} {self.key}"
            raise ValidationError({self.key: [f"{problem}; expected one of: {expected}"]})
        return load_fields(schema, value)


class Content(fields.Field):
    """Message content: a string, or a list of blocks of the kinds this role may send."""

    def __init__(self, blocks, **kwargs):
        super().__init__(**kwargs)
        self.blocks = List(blocks)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return self.blocks.deserialize(value)
        raise ValidationError(f"expected a string or an array of content blocks, got {_json_type(value)}")


# -- content blocks ------------------------------------------------------------

class TextBlock(_Schema):
    text = fields.String(required=True)


class Base64Source(_Schema):
    media_type = fields.String(required=True)
    data = fields.String(required=True)


class UrlSource(_Schema):
    url = fields.String(required=True)


class PlainTextSource(_Schema):
    data = fields.String(required=True)


class ImageBlock(_Schema):
    source = Tagged({"base64": Base64Source(), "url": UrlSource()}, what="image source", required=True)


_TEXT = {"text": TextBlock()}
_IMAGE = {"image": ImageBlock()}


class ContentSource(_Schema):
    content = Content(Tagged({**_TEXT, **_IMAGE}), required=True)


class DocumentBlock(_Schema):
    source = Tagged({"base64": Base64Source(), "url": UrlSource(), "text": PlainTextSource(),
                     "content": ContentSource()}, what="document source", required=True)
    title = fields.String(allow_none=True)
    context = fields.String(allow_none=True)


_DOCUMENT = {"document": DocumentBlock()}


class ThinkingBlock(_Schema):
    thinking = fields.String(required=True)
    signature = fields.String()


class RedactedThinkingBlock(_Schema):
    data = fields.String(required=True)


class ToolUseBlock(_Schema):
    id = fields.String(required=True, validate=validate.Length(min=1))
    name = fields.String(required=True, validate=validate.Length(min=1))
    input = fields.Dict(required=True)


class ToolResultBlock(_Schema):
    tool_use_id = fields.String(required=True, validate=validate.Length(min=1))
    content = Content(Tagged({**_TEXT, **_IMAGE, **_DOCUMENT}))
    is_error = Flag()


USER_BLOCKS = {**_TEXT, **_IMAGE, **_DOCUMENT, "tool_result": ToolResultBlock()}
ASSISTANT_BLOCKS = {**_TEXT, "thinking": ThinkingBlock(), "redacted_thinking": RedactedThinkingBlock(),
                    "tool_use": ToolUseBlock()}


class UserMessage(_Schema):
    content = Content(Tagged(USER_BLOCKS, what="user content block"), required=True)


class AssistantMessage(_Schema):
    content = Content(Tagged(ASSISTANT_BLOCKS, what="assistant content block"), required=True)


class SystemMessage(_Schema):
    content = Content(Tagged(_TEXT, what="system content block"), required=True)


# -- tools and options -----------------------------------------------------------

class CustomTool(_Schema):
    name = fields.String(required=True, validate=validate.Length(min=1))
    description = fields.String()
    input_schema = fields.Dict(required=True)


class ServerTool(_Schema):
    """A versioned Anthropic tool (web_search_20250305...): validated here, refused by the translator."""
    name = fields.String(required=True)


class ToolField(fields.Field):
    """A tool without `type` (or `custom`) is a client tool; any other type is an Anthropic server tool."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {_json_type(value)}")
        kind = value.get("type")
        if kind is not None and not isinstance(kind, str):
            raise ValidationError({"type": ["Not a valid string."]})
        return load_fields(_CUSTOM_TOOL if kind in (None, "custom") else _SERVER_TOOL, value)


class ChoiceAuto(_Schema):
    disable_parallel_tool_use = Flag()


class ChoiceTool(ChoiceAuto):
    name = fields.String(required=True, validate=validate.Length(min=1))


class ThinkingEnabled(_Schema):
    budget_tokens = fields.Integer(strict=True, required=True, validate=validate.Range(min=1))


class Metadata(_Schema):
    user_id = fields.String(allow_none=True)


class OutputFormat(_Schema):
    schema = fields.Dict(required=True)


class OutputConfig(_Schema):
    effort = fields.String(allow_none=True,
                           validate=validate.OneOf(["low", "medium", "high", "xhigh", "max"]))
    format = Tagged({"json_schema": OutputFormat()}, what="output format", allow_none=True)


class CountTokensRequest(_Schema):
    model = fields.String(required=True, validate=validate.Length(min=1))
    messages = List(
        Tagged({"user": UserMessage(), "assistant": AssistantMessage(), "system": SystemMessage()},
               key="role", what="message"),
        required=True, validate=validate.Length(min=1, error="must contain at least one message"))
    system = Content(Tagged(_TEXT, what="system content block"))
    tools = List(ToolField())
    tool_choice = Tagged({"auto": ChoiceAuto(), "any": ChoiceAuto(), "tool": ChoiceTool(),
                          "none": _Schema()}, what="tool_choice")
    thinking = Tagged({"enabled": ThinkingEnabled(), "adaptive": _Schema(), "disabled": _Schema()},
                      what="thinking")
    output_config = Nested(OutputConfig)


class MessagesRequest(CountTokensRequest):
    max_tokens = fields.Integer(strict=True, required=True, validate=validate.Range(min=1))
    stream = Flag()
    stop_sequences = List(fields.String())
    temperature = Number(validate=validate.Range(min=0, max=1))
    top_p = Number(validate=validate.Range(min=0, max=1))
    top_k = fields.Integer(strict=True, validate=validate.Range(min=0))
    metadata = Nested(Metadata)


class ModelListQuery(_Schema):
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
        problems = list(_flatten(error.messages))
        raise invalid("; ".join(f"{path}: {message}" if path else message for path, message in problems),
                      param=problems[0][0] or None) from None
    return body


def _flatten(errors, prefix=()):
    """marshmallow's nested error dict as (dotted path, first message) pairs, in document order."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            yield from _flatten(value, prefix if key == "_schema" else (*prefix, str(key)))
    elif isinstance(errors, list) and errors and all(isinstance(e, str) for e in errors):
        yield ".".join(prefix), errors[0]
    elif isinstance(errors, list):
        for item in errors:
            yield from _flatten(item, prefix)
