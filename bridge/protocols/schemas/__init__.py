"""The validation toolkit every front's schemas are built from.

Each front's module (anthropic.py, openai.py, responses.py) keeps only its protocol's
shapes; what they share is here, so every front refuses the same things in
the same words:

- `Schema`: unknown keys pass and are left out of the loaded copy (both
  protocols add optional fields often; the translators decide what to do
  with what they do not know).
- `Tagged`: an object whose `type` (or `role`) member picks its schema; an
  unknown tag is reported at that key with the tags that are known, and a
  tag the upstream cannot serve is refused with the reason.
- Strict scalars: `Number`, `Integer`, `Flag`. JSON "0.5" is not a
  temperature, 1 is not a flag, 2.0 is not a count.
- `refusal`: one 400 whose message starts with the dotted path of each bad
  field (`messages.0.content.1.type: ...`), which is what a person fixing
  the request needs; `param` is the first path.
- `load_request`: a request's fields, then the checks that look at the whole of it.
- `load_fields`, `loader`, `deserialize`, `List`, `Nested`: marshmallow's loading
  without the machinery that validation of thousands of blocks pays for. Each
  schema's fields get a loader, made once, that takes the values marshmallow
  would take as they are (a string for a String...); at the first value one does
  not take, anywhere in the request, the whole request goes marshmallow's way
  (`deserialize_fields`), once, which words the refusal.
"""

import functools
import math

import marshmallow
from marshmallow import EXCLUDE, ValidationError, fields, missing, validate

from .. import json_values
from ..errors import invalid


class Schema(marshmallow.Schema):
    class Meta:
        unknown = EXCLUDE


def json_type(value):
    """A JSON value's type as JSON names it, for messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


class Number(fields.Float):
    """A JSON number (not a numeric string, not a boolean)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.make_error("invalid", input=value)
        return super()._deserialize(value, attr, data, **kwargs)

    def fast_loader(self):
        def load(value):
            if type(value) is float and math.isfinite(value):
                return value
            if type(value) is int:
                try:
                    return float(value)
                except OverflowError:
                    raise Refer from None  # marshmallow's "Number too large."
            raise Refer

        return load


class Integer(fields.Integer):
    """A JSON integer (not 2.0, not "2")."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)

    def fast_loader(self):
        return _integer


def _of_type(kind):
    """A loader of the values of exactly `kind` (a bool is no int here, an int no bool)."""

    def load(value):
        if type(value) is kind:
            return value
        raise Refer

    return load


_integer = _of_type(int)


class Flag(fields.Boolean):
    """A JSON true/false (not "true", not 1)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError("Not a valid boolean.")
        return value

    def fast_loader(self):
        return _flag


_flag = _of_type(bool)


class Tagged(fields.Field):
    """An object whose `key` member (type, role) selects the schema that validates it.

    `refused` maps tags the upstream cannot serve to the reason, said at the key.
    The loaded copy keeps the tag.
    """

    def __init__(self, schemas, key="type", what="content block", refused=None, **kwargs):
        super().__init__(**kwargs)
        self.schemas = schemas
        self.key = key
        self.what = what
        self.refused = refused or {}

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError(f"expected an object, got {json_type(value)}")
        tag = value.get(self.key)
        schema = self.schemas.get(tag) if isinstance(tag, str) else None
        if schema is None:
            if isinstance(tag, str) and tag in self.refused:
                raise ValidationError({self.key: [self.refused[tag]]})
            expected = ", ".join(sorted(self.schemas))
            problem = "missing" if tag is None else f"{tag!r} is not a supported {self.what} {self.key}"
            raise ValidationError({self.key: [f"{problem}; expected one of: {expected}"]})
        loaded = deserialize_fields(schema, value)
        loaded[self.key] = tag
        return loaded

    def fast_loader(self):
        key = self.key
        loaders = {tag: schema_loader(schema) for tag, schema in self.schemas.items()}

        def load(value):
            if type(value) is dict:
                tag = value.get(key)
                take = loaders.get(tag) if type(tag) is str else None
                if take is not None:
                    loaded = take(value)
                    loaded[key] = tag
                    return loaded
            raise Refer

        return load


def refusal(error):
    """A ValidationError as the one 400 that names every bad field by its dotted path."""
    problems = list(_flatten(error.messages))
    return invalid(
        "; ".join(f"{path}: {message}" if path else message for path, message in problems), param=problems[0][0] or None
    )


def load_request(schema, body, checks=()):
    """The body with its declared fields loaded, or the one 400 naming every bad field.

    Undeclared top-level fields stay, for the translator to report as dropped. `checks`
    look at the whole request once its fields are sound (conversation structure, names
    that must match); each raises a ValidationError, and all of theirs are reported together.
    """
    try:
        request = {**body, **load_fields(schema, body)}
    except ValidationError as exc:
        raise refusal(exc) from None
    errors = {}
    for check in checks:
        try:
            check(request)
        except ValidationError as exc:
            errors.update(exc.messages)
    if errors:
        raise refusal(ValidationError(errors))
    return request


def _flatten(errors, prefix=()):
    """marshmallow's nested error dict as (dotted path, message) pairs, in document order."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            yield from _flatten(value, prefix if key == "_schema" else (*prefix, str(key)))
    elif isinstance(errors, list):
        for item in errors:
            yield from _flatten(item, prefix)
    else:
        yield ".".join(prefix), errors


def load_fields(schema, value):
    """What `schema.load(value)` returns, without the machinery load wraps around the fields.

    Requests, content blocks, parts and messages are loaded by the thousand, and Schema.load
    costs more before its first field, and per declared field absent, than most blocks' fields
    together (bench/RESULTS.md has the figures). For a schema that unknown=EXCLUDE and declares
    no hooks, data_key, attribute or load_default, with fields that leave Field.deserialize and
    _validate as they are and have no processors (tests/protocols/test_schemas.py keeps them so), loading
    is deserialising each field present, and the errors are the same dict load raises.

    The keys present are looked up in the schema's table of loaders (a request sends a few of
    the dozens of fields its schema declares). A loader that does not take its value, at any
    depth, gives up the whole load: the value is loaded again marshmallow's way, once, from the
    top (deserialize_fields), which says why in load's words and order. That second load decodes
    the JSON documents inside the value again, so it gets back what the first took of the
    request's budget of them (json_values).
    """
    mark = json_values.budget_mark()
    try:
        return schema_loader(schema)(value)
    except (Refer, ValidationError):
        pass
    json_values.rewind(mark)
    return deserialize_fields(schema, value)


def schema_loader(schema):
    """load_fields for `schema` as long as every loader takes its value, made once (schemas live
    as long as the process): its table of loaders, and the fields it requires. Anything else
    raises Refer, or a part's ValidationError, up to load_fields."""
    try:
        return schema.__dict__["_bridge_loader"]
    except KeyError:
        pass
    loaders = {name: loader(field) for name, field in schema.fields.items()}
    required = frozenset(name for name, field in schema.fields.items() if field.required)

    def load(value):
        if type(value) is not dict:
            raise Refer
        loaded = {}
        for name, raw in value.items():
            take = loaders.get(name)
            if take is not None:
                loaded[name] = take(raw)
        if required and not value.keys() >= required:
            raise Refer
        return loaded

    schema._bridge_loader = load
    return load


class Refer(Exception):
    """Raised by a field's loader for a value it does not take as it is: load_fields then loads
    the whole request marshmallow's way, which decides."""


def deserialize_fields(schema, value):
    """What `schema.load(value)` returns or raises, each field loaded marshmallow's way
    (deserialize) in the order the schema declares them, the schemas inside it too: a refusal's
    words, and their order, are load's."""
    if not isinstance(value, dict):
        raise ValidationError({"_schema": ["Invalid input type."]})
    loaded, errors = {}, {}
    for name, field in schema.fields.items():
        raw = value.get(name, missing)
        if raw is missing and not field.required:
            continue
        try:
            loaded[name] = deserialize(field, raw, name, value)
        except ValidationError as error:
            errors[name] = error.messages
    if errors:
        raise ValidationError(errors)
    return loaded


def loader(field):
    """A function that loads a present value of `field` the way deserialize does, or raises Refer
    (or the ValidationError of a part) where deserialize might not take the value as it is.

    A field says how its values load with `fast_loader()` (the toolkit's fields, and the fronts'
    own where they sit on every message); marshmallow's String, Dict and Raw are checked by
    type here; any other field is loaded by its _deserialize.
    """
    try:
        return field.__dict__["_bridge_loader"]
    except KeyError:
        pass
    if hasattr(field, "fast_loader"):
        take = field.fast_loader()
    elif type(field) in _STOCK and not getattr(field, "key_field", None) and not getattr(field, "value_field", None):
        take = _STOCK[type(field)]
    else:
        take = functools.partial(_plain_deserialize, field)
    validators, allow_none = tuple(field.validators), field.allow_none
    if validators or allow_none:
        take = _checked(take, validators, allow_none)
    field._bridge_loader = take
    return take


def _checked(take, validators, allow_none):
    """`take` with Field.deserialize's null handling and the field's validators around it; the
    one most names and lists have, Length(min=n), as a comparison."""
    least = None if allow_none else _least_length(validators)
    if least is not None and take is _string:

        def load(raw):
            if type(raw) is str and len(raw) >= least:
                return raw
            raise Refer

    elif least is not None:

        def load(raw):
            result = take(raw)
            if len(result) >= least:
                return result
            raise Refer

    elif not validators:

        def load(raw):
            return None if raw is None else take(raw)  # the field allows null, or it would not be here

    else:

        def load(raw):
            if raw is None:
                if allow_none:
                    return None
                raise Refer
            result = take(raw)
            for check in validators:
                check(result)
            return result

    return load


def _least_length(validators):
    """n, where the only validator is Length(min=n): the check most names and lists have."""
    if len(validators) == 1 and type(validators[0]) is validate.Length:
        length = validators[0]
        if length.min is not None and length.max is None and length.equal is None:
            return length.min
    return None


def _plain_deserialize(field, raw):
    if raw is None:
        raise Refer  # Field.deserialize's business: null allowed or not
    return field._deserialize(raw, None, None)


_string = _of_type(str)


def _mapping(raw):
    if type(raw) is dict:
        return dict(raw)
    raise Refer


def _raw(raw):
    if raw is None:
        raise Refer
    return raw


_STOCK = {fields.String: _string, fields.Dict: _mapping, fields.Raw: _raw}


def deserialize(field, value, name=None, data=None):
    """field.deserialize(value) for a field without pre_load or post_load processors, less the
    validator chain marshmallow 4 builds on every call (`Field._validate_all` makes an And() of
    the field's validators each time, a large share of validation): here it is built once per field."""
    if value is None or value is missing:
        return field.deserialize(value, name, data)  # required, allow_none, load_default
    result = field._deserialize(value, name, data)
    if field.validators:
        _validator_chain(field)(result)
    return result


@functools.lru_cache(maxsize=None)
def _validator_chain(field):
    """The And() that Field._validate would build for this call, kept: fields live as long as their schemas."""
    return validate.And(*field.validators)


class List(fields.List):
    """fields.List whose items go through deserialize() above: messages, blocks, parts, tools."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list):  # what is_collection lets through, among JSON values
            raise self.make_error("invalid")
        result, errors = [], {}
        for index, item in enumerate(value):
            try:
                result.append(deserialize(self.inner, item))
            except ValidationError as error:
                errors[index] = error.messages
        if errors:
            raise ValidationError(errors)
        return result

    def fast_loader(self):
        item = loader(self.inner)

        def load(value):
            if type(value) is list:
                return [item(one) for one in value]
            raise Refer

        return load


class Nested(fields.Nested):
    """fields.Nested through deserialize_fields: a function tool's definition loads field by field too."""

    def _deserialize(self, value, attr, data, **kwargs):
        return deserialize_fields(self.schema, value)

    def fast_loader(self):
        return schema_loader(self.schema)
