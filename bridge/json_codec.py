"""JSON in and out: orjson's speed, the json module's answers where orjson has none.

JSON is most of the bridge's own work: every request and answer is parsed and
written once, every stream event twice. orjson does both several times faster
than the json module. It refuses some of what the json module lets through: a lone
UTF-16 surrogate (an upstream's half emoji, which the bridge passes on as the
escape it came as), NaN and Infinity when reading, integers beyond 64 bits
when writing. Those rare inputs go to the json module, so they are handled
exactly as before.

One difference remains: orjson reads an integer beyond the 64-bit range as a
float, as JavaScript does. A model's tool arguments, where a client might put
such a number, are read with the json module instead: by the Chat schema for a
client's history, by the messages -> chat translators for an upstream's answer.
"""
import json

import orjson


def loads(data, fallback=json.loads):
    """The value of JSON text or bytes; what orjson refuses goes to `fallback` (raises ValueError)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return fallback(data)


def dumps(value):
    """`value` as compact UTF-8 JSON bytes; a lone surrogate leaves as its JSON escape."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace")


def dumps_text(value):
    """`value` as compact JSON text, for a JSON document carried in a string (tool arguments)."""
    return dumps(value).decode()
