"""marshmallow schemas that validate client requests before any translation."""
import functools

from marshmallow import ValidationError, fields, missing, validate


def load_fields(schema, value):
    """What `schema.load(value)` returns, without the machinery load wraps around the fields.

    Requests, content blocks, parts and messages are loaded by the thousand, and Schema.load
    costs about 2.5 µs before its first field and more per declared field absent: more than
    most blocks' fields together (the bench's tool-using request validated in 80 µs (Chat)
    and 52 µs (Messages) that way, 38 and 32 this way, 27 and 18 with deserialize() and List
    below). For a schema that unknown=EXCLUDE and declares no hooks, data_key, attribute or
    load_default, with fields that leave Field.deserialize and _validate as they are and have
    no processors (tests/test_schemas.py keeps them so), loading is deserialising each field
    present, and the errors are the same dict load raises.
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
    the field's validators each time: 29% of validation time): here it is built once per field."""
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
    """fields.Nested through load_fields: a function tool's definition loaded in 4 µs instead of 14."""

    def _deserialize(self, value, attr, data, **kwargs):
        return load_fields(self.schema, value)
