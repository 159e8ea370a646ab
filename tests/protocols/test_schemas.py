"""schemas.load_fields: what Schema.load returns, for the schemas the tagged unions load with it."""

import pytest
from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from bridge.protocols import schemas
from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas import anthropic, load_fields, openai, responses


def parts_of(value):
    """Field and Schema instances held by a field: its inner fields, its tagged schemas."""
    if isinstance(value, (fields.Field, Schema)):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from parts_of(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from parts_of(item)


TOP_LEVEL = [
    anthropic._MESSAGES,
    anthropic._COUNT_TOKENS,
    anthropic._MODEL_LIST_QUERY,
    openai._CHAT,
    responses._RESPONSES,
]


def schemas_loaded_field_by_field():
    """Every schema instance validation hands to load_fields: the requests', and those of tagged unions,
    tools and schemas.Nested fields."""
    found, seen = {id(s): s for s in TOP_LEVEL}, set()
    todo = list(TOP_LEVEL)
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Schema):
            todo.extend(item.fields.values())
            continue
        if isinstance(item, schemas.Tagged):
            found.update((id(s), s) for s in item.schemas.values())
        if isinstance(item, anthropic.ToolField):
            found.update((id(s), s) for s in (anthropic._CUSTOM_TOOL, anthropic._SERVER_TOOL))
        if isinstance(item, schemas.Nested):
            found[id(item.schema)] = item.schema
        if isinstance(item, fields.Nested):
            todo.append(item.schema)
        todo.extend(part for attribute in vars(item).values() for part in parts_of(attribute))
    return list(found.values())


SCHEMAS = schemas_loaded_field_by_field()


def test_every_schema_loaded_field_by_field_is_found():
    names = {type(s).__name__ for s in SCHEMAS}
    assert {
        "MessagesRequest",
        "CountTokensRequest",
        "ChatRequest",
        "TextBlock",
        "ToolUseBlock",
        "ToolResultBlock",
        "UserMessage",
        "CustomTool",  # Messages
        "TextPart",
        "ImagePart",
        "ToolCall",
        "AssistantMessage",
        "FunctionTool",
        "FunctionDefinition",
        "FunctionCall",
        "Metadata",  # Chat
        "ResponsesRequest",
        "InputFile",
        "NamespaceTool",
        "CustomToolCall",
        "Grammar",
        "JsonSchemaFormat",
        "ReasoningItem",
    } <= names  # Responses


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{type(s).__module__.rsplit('.', 1)[1]}.{type(s).__name__}")
def test_no_tagged_schema_has_what_load_does_beyond_its_fields(schema):
    """Hooks (@validates, @validates_schema, @pre_load...), data_key, attribute and load_default
    are Schema.load's business: load_fields would skip them without a word."""
    assert schema.unknown == EXCLUDE
    assert not any(type(schema)._hooks.values())
    for name, field in schema.fields.items():
        assert field.data_key is None and field.attribute is None, name
        assert field.load_default is fields.missing_, name
        assert type(field).deserialize is fields.Field.deserialize, name  # load_fields may skip it
        assert_deserialize_may_be_skipped(field)


def assert_deserialize_may_be_skipped(field):
    """schemas.deserialize does what Field.deserialize does for fields with no processors and
    the stock _validate; a List's items go through it too."""
    assert not field.pre_load and not field.post_load, field
    assert type(field)._validate is fields.Field._validate, field
    if isinstance(field, fields.List):
        assert isinstance(field, schemas.List), f"{field}: a fields.List builds a validator chain per item"
    held = [value for key, value in vars(field).items() if key not in ("parent", "root")]
    for part in parts_of(held):  # a List's items, Content's blocks, OneOrMany's forms
        if isinstance(part, fields.Field):
            assert_deserialize_may_be_skipped(part)


FIELDS = [  # (field, values): valid ones, and ones each of its checks refuses
    (fields.String(validate=validate.Length(min=1)), ["ok", "", 5, None]),
    (fields.Integer(strict=True, validate=[validate.Range(min=1), validate.Range(max=3)]), [2, 0, 9, "2", 2.5]),
    (fields.String(validate=[validate.Length(max=1), lambda value: value != "x"]), ["a", "x", "long"]),
    (fields.Raw(allow_none=True, validate=lambda value: value != 1), [None, 1, 2]),
    (fields.String(required=True), [fields.missing_, "a"]),
    (schemas.List(fields.String(validate=validate.Length(min=1))), [["a", "b"], ["a", "", 3], "ab", {}, None, []]),
    (schemas.List(fields.Integer(strict=True), validate=validate.Length(min=1)), [[1], [], [1, "2"]]),
]


@pytest.mark.parametrize("field, value", [(f, v) for f, values in FIELDS for v in values])
def test_deserialize_returns_or_raises_what_field_deserialize_does(field, value):
    try:
        expected = field.deserialize(value)
    except ValidationError as error:
        with pytest.raises(ValidationError) as caught:
            schemas.deserialize(field, value)
        assert caught.value.messages == error.messages
    else:
        assert schemas.deserialize(field, value) == expected


@pytest.mark.parametrize("value", [["a", "b"], ["a", "", None, 4], [], "ab", {"a": 1}, 5])
def test_schemas_list_returns_or_raises_what_marshmallow_list_does(value):
    ours, theirs = (kind(fields.String(validate=validate.Length(min=1))) for kind in (schemas.List, fields.List))
    try:
        expected = theirs.deserialize(value)
    except ValidationError as error:
        with pytest.raises(ValidationError) as caught:
            ours.deserialize(value)
        assert caught.value.messages == error.messages
    else:
        assert ours.deserialize(value) == expected


SAMPLES = [
    (anthropic.ToolUseBlock(), {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}, "cache_control": {}}),
    (anthropic.ToolUseBlock(), {"type": "tool_use", "id": "", "input": "x"}),
    (anthropic.ToolResultBlock(), {"tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}], "is_error": True}),
    (anthropic.ToolResultBlock(), {"tool_use_id": "t1", "content": [{"type": "text"}, 5], "is_error": "yes"}),
    (
        openai.AssistantMessage(),
        {
            "role": "assistant",
            "content": None,
            "annotations": [],
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
    ),
    (openai.AssistantMessage(), {"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}),
    (openai.UserMessage(), {"role": "user", "content": [{"type": "text", "text": "hi", "extra": 1}], "name": "n"}),
    (openai._CHAT, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "extra": 1}),
    (openai._CHAT, {"messages": "hi", "temperature": 3, "n": 2, "audio": None}),
    (
        anthropic._MESSAGES,
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": "u"},
            "extra": 1,
        },
    ),
    (anthropic._MESSAGES, {"model": "", "messages": [], "stream": "yes"}),
    (anthropic._MESSAGES, ["not", "an", "object"]),
    (openai.FunctionTool(), {"type": "function", "function": {"name": "get weather", "parameters": [], "x": 1}}),
    (openai.FunctionTool(), {"type": "function", "function": "get_weather"}),
    (openai.FunctionTool(), {"type": "function", "function": {"name": "f", "strict": True}}),
]


@pytest.mark.parametrize("schema, value", SAMPLES)
def test_load_fields_returns_or_raises_what_schema_load_does(schema, value):
    try:
        expected = schema.load(value)
    except ValidationError as error:
        with pytest.raises(ValidationError) as caught:
            load_fields(schema, value)
        assert caught.value.messages == error.messages
    else:
        assert load_fields(schema, value) == expected


@pytest.mark.parametrize(
    "validate, body, expected",
    [
        (
            anthropic.validate_messages,
            {"model": "m", "max_tokens": 1, "temperature": "0.5", "messages": [{"role": "user", "content": "x"}]},
            "temperature: Not a valid number.",
        ),
        (
            openai.validate_chat,
            {"model": "m", "temperature": "0.5", "messages": [{"role": "user", "content": "x"}]},
            "temperature: Not a valid number.",
        ),
        (
            anthropic.validate_messages,
            {"model": "m", "max_tokens": 1, "messages": [{"role": "critic", "content": "x"}]},
            "messages.0.role: 'critic' is not a supported message role; expected one of: assistant, system, user",
        ),
        (
            openai.validate_chat,
            {"model": "m", "messages": [{"role": "critic", "content": "x"}]},
            "messages.0.role: 'critic' is not a supported message role; expected one of: "
            "assistant, developer, system, tool, user",
        ),
        (
            anthropic.validate_messages,
            {"model": "m", "max_tokens": 1, "messages": [7]},
            "messages.0: expected an object, got number",
        ),
        (openai.validate_chat, {"model": "m", "messages": [7]}, "messages.0: expected an object, got number"),
    ],
)
def test_both_fronts_refuse_in_the_same_words(validate, body, expected):
    """One toolkit: a number is a number on every front, and an unknown tag is said one way."""
    with pytest.raises(BridgeError) as caught:
        validate(body)
    assert caught.value.message == expected and caught.value.status == 400
