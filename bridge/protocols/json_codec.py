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


class Repeats:
    """Read a stream's events that repeat an earlier one but for one string, without parsing them.

    A long answer is mostly text deltas, each the same JSON but for its text (a Chat chunk's
    `choices[0].delta.content`, an Anthropic `delta.text`): parsing each whole costs more than
    the rest of its translation. Once an event with a string at `path` was parsed, its text
    around that string is kept; an event that is the same text around another string literal
    is that event with the new string, which only the literal's parse reads. It is exact: JSON
    tokens do not run across a string literal's quotes, and the template is checked when kept
    (the same text around another string parses to the same value with that string). Values
    beside the path are scalars, so each event read is a value of its own.
    """

    _TRIES = 4  # templates kept per stream at most: an upstream whose events differ elsewhere costs a few checks

    def __init__(self, path):
        self._path = path
        self._prefix = self._suffix = None
        self._value = None
        self._tries = self._TRIES

    def read(self, text):
        """The value of `text` when it repeats the template, else None."""
        prefix, suffix = self._prefix, self._suffix
        if prefix is None or not text.startswith(prefix) or not text.endswith(suffix):
            return None
        literal = text[len(prefix) : len(text) - len(suffix)]
        if literal[:1] != '"':
            return None
        try:
            string = orjson.loads(literal)
        except orjson.JSONDecodeError:
            return None
        return _filled(self._value, self._path, string) if type(string) is str else None

    def learn(self, text, value):
        """Keep `text` (whose parsed value is `value`) as the template, when its path holds a string."""
        if not self._tries or type(text) is not str:
            return
        string = _at(value, self._path)
        if type(string) is not str:
            return
        self._tries -= 1
        key = '"%s":' % self._path[-1]
        at = text.rfind(key)
        found = _STRING.match(text, at + len(key)) if at >= 0 else None
        if found is None:
            return
        prefix, suffix = text[: found.start()], text[found.end() :]
        marker = "~" if string != "~" else "~~"  # not the string: the check then tells the places apart
        try:
            if orjson.loads(found.group()) != string or orjson.loads(f'{prefix}"{marker}"{suffix}') != _filled(
                value, self._path, marker
            ):
                return
        except orjson.JSONDecodeError:
            return
        self._prefix, self._suffix, self._value = prefix, suffix, value


def _at(value, path):
    """What `value` holds at `path` (keys and indexes), when every value beside it is a scalar."""
    for step in path:
        if type(value) is dict:
            if step not in value or any(type(v) in (dict, list) for k, v in value.items() if k != step):
                return None
        elif type(value) is list:
            if not 0 <= step < len(value) or len(value) != 1:
                return None
        else:
            return None
        value = value[step]
    return value


def _filled(value, path, string):
    """A copy of `value` with `string` at `path`: new containers along it, the scalars beside shared."""
    if not path:
        return string
    step = path[0]
    if type(value) is list:
        return [_filled(value[0], path[1:], string)]
    out = dict(value)
    out[step] = _filled(value[step], path[1:], string)
    return out
