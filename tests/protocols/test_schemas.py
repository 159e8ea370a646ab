"""schemas.load_fields: what Schema.load returns, for the schemas the tagged unions load with it."""

import collections
import functools

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
    """Every schema instance validation loads field by field (load_fields, deserialize_fields): the
    requests', and those of tagged unions, tools and schemas.Nested fields."""
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


def test_a_fields_fast_loader_comes_with_its_deserialize():
    """A field's fast_loader stands for the _deserialize of the same class: a subclass that loads
    otherwise (responses.Item over Tagged) says how its values load too."""
    for schema in SCHEMAS:
        for field in fields_of(schema):
            if hasattr(field, "fast_loader"):
                mro = type(field).__mro__
                owner = next(c for c in mro if "fast_loader" in vars(c))
                assert mro.index(owner) <= mro.index(next(c for c in mro if "_deserialize" in vars(c))), field


def fields_of(schema):
    """Every field a schema holds, its parts' (List items, Content's blocks...) included."""
    todo, seen = list(schema.fields.values()), set()
    while todo:
        field = todo.pop()
        if id(field) in seen:
            continue
        seen.add(id(field))
        yield field
        held = [value for key, value in vars(field).items() if key not in ("parent", "root")]
        todo.extend(part for part in parts_of(held) if isinstance(part, fields.Field))


class Point(Schema):
    class Meta:
        unknown = EXCLUDE

    x = schemas.Integer(required=True)
    label = fields.String()


NAMED = schemas.Tagged({"point": Point()}, what="shape")
KINDS = [  # (field, values): each kind of field a loader takes, with values it takes and ones it refuses
    (fields.String(), ["a", "", 5, None, True, ["a"]]),
    (fields.String(validate=validate.Length(min=1)), ["a", ""]),
    (fields.String(allow_none=True, validate=validate.OneOf(["low", "high"])), ["low", "mid", None, 1]),
    (fields.String(validate=openai.NAME), ["get_weather", "get weather", "x" * 65]),
    (schemas.Integer(validate=validate.Range(min=1)), [1, 0, -3, True, 2.0, "2", None, 10**30]),
    (
        schemas.Number(allow_none=True, validate=validate.Range(0, 2)),
        [0, 1.5, 2, 3, -0.1, None, True, "1", float("nan"), float("inf"), 2**60, 10**400],
    ),
    (schemas.Flag(), [True, False, None, 1, "true"]),
    (schemas.Flag(allow_none=True, validate=openai.must_be_false(openai.NO_LOGPROBS)), [False, None, True]),
    (fields.Dict(), [{}, {"a": [1]}, [], "x", None]),
    (fields.Dict(allow_none=True, validate=openai._object_root), [{"type": "object"}, {"type": "array"}, None, 5]),
    (fields.Dict(keys=fields.String(), values=fields.String()), [{"a": "b"}, {"a": 1}]),
    (fields.Raw(allow_none=True, validate=openai._thinking), [None, {"type": "adaptive"}, {"type": "on"}, 7]),
    (openai.must_be_absent("not here"), [None, 0, {}, "x"]),
    (schemas.List(fields.String()), [[], ["a"], ["a", 1, None], "a", None, {"a": 1}]),
    (
        schemas.List(fields.Integer(strict=True), validate=validate.Length(min=1, error="at least one")),
        [[1], [], [1, "2"]],
    ),
    (schemas.Nested(Point), [{"x": 1}, {"x": "1"}, {}, [], None]),
    (schemas.Nested(Point, allow_none=True), [{"x": 1, "label": "a", "z": 0}, None, "p"]),
    (
        NAMED,
        [{"type": "point", "x": 1}, {"type": "line"}, {"type": 5}, {"type": ["point"]}, {"x": 1}, 3, None],
    ),
    (
        schemas.Tagged({"point": Point()}, key="role", what="part", refused={"line": "no lines"}, allow_none=True),
        [{"role": "point", "x": 2}, {"role": "line"}, None, {"role": "point", "x": None}],
    ),
    (schemas.List(NAMED), [[{"type": "point", "x": 1}], [{"type": "point", "x": 1}, {"type": "point"}, 4]]),
    (
        anthropic.Content(NAMED, required=True),
        ["hi", [{"type": "point", "x": 1}], [{"type": "point", "x": True}], [], 5, None, {"type": "point"}],
    ),
    (
        openai.string_or_parts(NAMED, allow_none=True),
        ["hi", [{"type": "point", "x": 1}], [{"type": "point"}], None, 5, {}],
    ),
    (openai.OneOrMany(fields.String(), fields.String()), ["a", ["a", "b"], ["a", 1], 1]),
    (openai.ObjectText(), ['{"a": 1}', "[1]", "{", 5]),
    (
        responses.ITEM,
        [
            {"role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]},
            {"type": "message", "role": "critic", "content": "x"},
            {"role": "user"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "", "name": "f", "arguments": "{"},
            {"type": "item_reference", "id": "x"},
            {"type": "message"},
            [],
        ],
    ),
    (anthropic.ToolField(), [{"name": "f", "input_schema": {}}, {"type": "web_search_20250305"}, {"type": 1}, []]),
    (openai.ToolChoice(openai.CHAT_TOOL_CHOICE, "function"), ["auto", "always", {"type": "function"}, 3]),
]
KIND_VALUES = [(field, value) for field, values in KINDS for value in values]


def one_field_schema(field):
    return type("One", (Schema,), {"Meta": Point.Meta, "f": field})()


def outcome(load, value):
    try:
        return "loaded", load(value)
    except ValidationError as error:
        return "refused", error.messages


@pytest.mark.parametrize("field, value", KIND_VALUES)
def test_loading_a_value_of_each_kind_gives_what_schema_load_gives(field, value):
    """The loaders' way and marshmallow's give the same loaded value, or the same words in the
    same places for a bad one (load_fields goes marshmallow's way once a loader does not take a value)."""
    schema = one_field_schema(field)
    for data in ({"f": value}, {"f": value, "g": 1}, {"f": [value]}, {}):
        assert outcome(functools.partial(load_fields, schema), data) == outcome(schema.load, data)


@pytest.mark.parametrize("field, value", KIND_VALUES)
def test_a_loader_takes_every_value_deserialize_takes(field, value):
    """A value marshmallow takes as it is loads without going marshmallow's way (else the table
    would cost a refusal per field), and a value it refuses is not taken."""
    schema = one_field_schema(field)
    expected = outcome(schema.load, {"f": value})
    load = schemas.loader(schema.fields["f"])
    if expected[0] == "loaded":
        assert load(value) == expected[1]["f"]
    else:
        with pytest.raises((schemas.Refer, ValidationError)):
            load(value)


def test_refusals_name_fields_in_the_order_the_schema_declares_them():
    """The keys present are read in the body's order; the refusal keeps the schema's."""
    body = {"temperature": "hot", "messages": [], "n": 2, "model": ""}
    with pytest.raises(BridgeError) as caught:
        openai.validate_chat(body)
    assert caught.value.message == (
        "model: Shorter than minimum length 1.; temperature: Not a valid number.; "
        "n: only one choice is supported by the Anthropic upstream, got 2"
    )
    assert caught.value.param == "model"


BAD_BODIES = [  # a bad value of each kind, in each front's request, somewhere deep
    (
        anthropic.validate_messages,
        anthropic._MESSAGES,
        {
            "stream": "yes",
            "max_tokens": 0,
            "model": "m",
            "temperature": 1.5,
            "top_k": 2.0,
            "metadata": {"user_id": 5},
            "tools": [{"name": "", "input_schema": []}, {"type": 7}, 3],
            "tool_choice": {"type": "tool"},
            "thinking": {"type": "enabled", "budget_tokens": True},
            "messages": [
                {"role": "user", "content": [{"type": "text"}, {"type": "image", "source": {"type": "file"}}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]},
                {"role": "system", "content": None, "output_config": {"effort": "extreme"}},
            ],
        },
    ),
    (
        openai.validate_chat,
        openai._CHAT,
        {
            "model": "m",
            "n": 1,
            "stop": ["a", 5],
            "max_tokens": -1,
            "top_p": "1",
            "logprobs": True,
            "reasoning_effort": "huge",
            "response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {"type": "array"}}},
            "web_search_options": {"user_location": {"type": "approximate", "approximate": {"type": "exact"}}},
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}, {"type": "x"}]},
                {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": 1}}]},
                {"role": "tool", "tool_call_id": "", "content": None},
                {"role": "function", "content": "x"},
            ],
        },
    ),
    (
        responses.validate_responses,
        responses._RESPONSES,
        {
            "model": "m",
            "include": ["message.output_text.logprobs"],
            "metadata": {"a": 1},
            "reasoning": {"effort": "max", "summary": "long"},
            "text": {"format": {"type": "json_schema", "name": ""}},
            "tools": [{"type": "function", "name": "f", "strict": "yes"}, {"type": "namespace", "name": "n"}],
            "tool_choice": {"type": "file_search"},
            "input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": 5}]},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "[]"},
                {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_audio"}]},
                {"type": "reasoning", "encrypted_content": 5},
                {"type": "compaction"},
            ],
            "background": True,
            "max_output_tokens": 0,
        },
    ),
]


@pytest.mark.parametrize("validate, schema, body", BAD_BODIES, ids=["messages", "chat", "responses"])
def test_each_front_refuses_in_schema_loads_words(validate, schema, body):
    with pytest.raises(ValidationError) as loaded:
        schema.load(body)
    with pytest.raises(BridgeError) as caught:
        validate(body)
    expected = schemas.refusal(loaded.value)
    assert (caught.value.message, caught.value.param) == (expected.message, expected.param)
    assert caught.value.message.count(": ") >= 12


LOADS = collections.Counter()  # how many times each value a Noted field holds was loaded, either way


class Noted(fields.String):
    """A string that counts its loads: the loaders' way and marshmallow's."""

    def _deserialize(self, value, attr, data, **kwargs):
        LOADS[value] += 1
        return super()._deserialize(value, attr, data, **kwargs)

    def fast_loader(self):
        def load(value):
            LOADS[value] += 1
            if type(value) is str:
                return value
            raise schemas.Refer

        return load


class Leaf(Point):
    note = Noted()


class Branch(Point):
    note = Noted()
    leaves = schemas.List(schemas.Tagged({"leaf": Leaf()}))


class Stem(Point):
    note = Noted()
    branch = schemas.Nested(Branch)


class Tree(Point):
    note = Noted()
    stems = schemas.List(schemas.Nested(Stem))


def test_a_refusal_deep_down_loads_each_value_twice_at_most():
    """The loaders' way until the first value one does not take, then marshmallow's way once,
    from the top: not again at every level above the bad value (a request's values parsed
    twice its depth times)."""
    leaf = {"type": "leaf", "note": "leaf"}
    tree = {
        "note": "tree",
        "x": 1,
        "stems": [
            {
                "note": "stem",
                "x": 1,
                "branch": {"note": "branch", "x": 1, "leaves": [{**leaf, "x": 1}, {**leaf, "x": "1"}]},
            }
        ],
    }
    refused = outcome(Tree().load, tree)
    assert refused == ("refused", {"stems": {0: {"branch": {"leaves": {1: {"x": ["Not a valid integer."]}}}}}})
    LOADS.clear()
    assert outcome(functools.partial(load_fields, Tree()), tree) == refused
    assert LOADS == {
        "tree": 2,
        "stem": 2,
        "branch": 2,
        "leaf": 4,
    }  # two leaves: each the loaders' way, then marshmallow's
