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
import re

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


# A string literal's content that reads as itself: no quote, backslash or control character.
plain = re.compile(r'[^"\\\x00-\x1f]*').fullmatch


def around(data, key, value):
    """`data`, compact JSON text whose one member named `key` is the plain string `value`, as the
    text before and after that string's content; None for any other `data`.

    Text that is the same before and after, with a plain string between, is the same document
    but for that string: a stream's repeated event can be read without parsing it (an
    orjson.loads costs mostly its fixed cost, whatever the size), and the string written out
    as it came, since orjson.dumps writes a plain string as itself.
    """
    marker = '"%s":"' % key
    if not plain(value) or data.count(marker) != 1:
        return None
    start = data.find(marker)
    end = start + len(marker)
    # After "{" or ",", the marker's first quote opens a key (in a string it would be escaped).
    if start == 0 or data[start - 1] not in "{," or data[end : end + len(value) + 1] != value + '"':
        return None
    return data[:end], data[end + len(value) :]


def loads_partial(text):
    """What a JSON document cut off anywhere holds so far, as jiter's partial mode reads it.

    A tool call that `max_tokens` cuts short leaves its streamed input unfinished. The
    anthropic SDK folds such a stream with jiter's partial mode (open objects and arrays
    closed, a member or element whose value is cut short left out), and a non-streamed
    answer holds the same; reading it the same way makes a cut-off call the same value
    either way, and valid JSON. A finished document is read by the json module, exactly.
    Raises ValueError for text that is not the beginning of one JSON document.
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    reader = _PartialReader(text)
    try:
        value = reader.value()
    except _Unfinished:
        raise ValueError("the JSON text ends inside its only value") from None
    if not reader.at_end():
        raise ValueError(f"unexpected {text[reader.pos]!r} at {reader.pos} in JSON text")
    return value


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRING_START = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*\\?\Z', re.S)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
_TOKEN = re.compile(r"[-+.0-9eE]+|[a-z]+")
_LITERALS = {"true": True, "false": False, "null": None}


class _Unfinished(Exception):
    """The text ends inside a string, number or literal: that value is not there."""


class _PartialReader:
    def __init__(self, text):
        self.text, self.pos = text, 0

    def at_end(self):
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n\r":
            self.pos += 1
        return self.pos == len(self.text)

    def value(self):
        if self.at_end():
            raise _Unfinished
        opener = self.text[self.pos]
        if opener in "{[":
            self.pos += 1
            return self.members({}, "}") if opener == "{" else self.members([], "]")
        if opener == '"':
            return self.string()
        return self.scalar()

    def members(self, out, closer):
        """An object's members or an array's elements, up to the closer or the end of the text."""
        while not self.at_end():
            if self.text[self.pos] == closer and not out:
                self.pos += 1
                return out
            try:
                if closer == "]":
                    out.append(self.value())
                else:
                    key = self.string()
                    if self.at_end():
                        return out
                    self.expect(":")
                    out[key] = self.value()
            except _Unfinished:
                return out
            if self.at_end():
                return out
            if self.text[self.pos] == closer:
                self.pos += 1
                return out
            self.expect(",")
            if self.at_end():
                return out
        return out

    def string(self):
        if self.text.startswith('"', self.pos):
            found = _STRING.match(self.text, self.pos)
            if found:
                self.pos = found.end()
                return json.loads(found.group())
            if _STRING_START.match(self.text, self.pos):
                self.pos = len(self.text)
                raise _Unfinished
        raise ValueError(f"expected a string at {self.pos} in JSON text")

    def scalar(self):
        found = _TOKEN.match(self.text, self.pos)
        token = found.group() if found else ""
        self.pos += len(token)
        complete = token in _LITERALS or _NUMBER.match(token)
        if (
            self.pos == len(self.text)
            and not complete
            and (any(word.startswith(token) for word in _LITERALS) or _NUMBER.match(token + "0"))
        ):
            raise _Unfinished
        if not token or not complete:
            raise ValueError(f"unexpected {token or self.text[self.pos : self.pos + 1]!r} in JSON text")
        return _LITERALS[token] if token in _LITERALS else json.loads(token)

    def expect(self, char):
        if not self.text.startswith(char, self.pos):
            raise ValueError(f"expected {char!r} at {self.pos} in JSON text")
        self.pos += 1
