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
- `load_fields`, `deserialize`, `List`, `Nested`: marshmallow's loading
  without the machinery that validation of thousands of blocks pays for.
"""

import functools

import marshmallow
from marshmallow import EXCLUDE, ValidationError, fields, missing, validate

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


class Integer(fields.Integer):
    """A JSON integer (not 2.0, not "2")."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)


class Flag(fields.Boolean):
    """A JSON true/false (not "true", not 1)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError("Not a valid boolean.")
        return value


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
        loaded = load_fields(schema, value)
        loaded[self.key] = tag
        return loaded


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
    """
    if not isinstance(value, dict):
        raise ValidationError({"_schema": ["Invalid input type."]})
    loaded, errors = {}, {}
    for name, field in schema.fields.items():
        raw = value.get(name, missing)
        if raw is missing and not field.required:
            continue  # what deserialize would return, without the call
        try:
            result = deserialize(field, raw, name, value)
        except ValidationError as error:
            errors[name] = error.messages
        else:
            if result is not missing:
                loaded[name] = result
    if errors:
        raise ValidationError(errors)
    return loaded


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


class Nested(fields.Nested):
    """fields.Nested through load_fields: a function tool's definition loads field by field too."""

    def _deserialize(self, value, attr, data, **kwargs):
        return load_fields(self.schema, value)
