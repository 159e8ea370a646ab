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

import itertools
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
_INTEGER = re.compile("0|[1-9][0-9]*")


def _integer(text):
    """Whether `text` is a JSON integer of digits alone (no sign, no leading zero)."""
    return text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1)


def _integer_bytes(text):
    """_integer() of bytes."""
    return text.isdigit() and (text[:1] != b"0" or len(text) == 1)


_plain_bytes = re.compile(rb'[^"\\\x00-\x1f]*').fullmatch


def _plain_utf8(value):
    """plain() of UTF-8 bytes: a hole of an encoded Shape whose value is not handed on."""
    if not _plain_bytes(value):
        return False
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


# A Shape's hole checks (check, whether its value is read) -> an encoded Shape's: a value read is
# the reader's to take as UTF-8.
_UTF8_CHECKS = {
    (plain, True): _plain_bytes,
    (plain, False): _plain_utf8,
    (_integer, True): _integer_bytes,
    (_integer, False): _integer_bytes,
}


class Shape:
    """Compact JSON text learned from one document, to read the next ones that are the same text
    but for a few values (the holes): a stream's repeated event read without parsing it (an
    orjson.loads costs mostly its fixed cost, whatever the size).

    The holes are the string of the member `key`, whose content `read` returns, and the members
    named in `vary` (a plain string or an integer, as learned: OpenAI's `obfuscation` padding,
    a `sequence_number`). A string hole takes a plain string only (no quote, backslash or
    control character: its content is its value, and orjson.dumps writes it as it came), an
    integer hole digits, so what `read` takes is always the learned document with other
    values, never another shape. A `padded` shape also takes any JSON whitespace before the
    closing brace (Anthropic pads its events so, with a new length each time).
    """

    __slots__ = ("padded", "head", "start", "holes", "last", "tail", "tail_length")

    def __init__(self, data, holes, padded):
        """`holes`: (start, end, check, keep) of each hole in `data`, in order, apart."""
        self.padded = padded
        self.head = data[: holes[0][0]]
        self.start = len(self.head)
        # each hole but the last: its check, the text after it up to the next one, whose first
        # character ends the hole, that text's length, and whether its value is the one read
        self.holes = tuple(
            (check, data[end:after], data[end], after - end, keep)
            for (_, end, check, keep), (after, _, _, _) in itertools.pairwise(holes)
        )
        _, end, check, keep = holes[-1]
        self.last = check, keep
        self.tail = data[end:]  # after the last hole, to the end
        self.tail_length = len(self.tail)

    @classmethod
    def learn(cls, data, key, value, vary=(), padded=False):
        """The shape of `data`, in which the member `key` is the plain string `value`; None when
        `data` is not one a shape reads (`key` not once, a `vary` member more than once)."""
        if padded:
            data = _unpadded(data)
        text = _hole(data, key)
        if text is None or text[2] is not plain or data[text[0] : text[1]] != value:
            return None
        holes = [(*text, True)]
        for name in vary:
            if '"%s":' % name in data:
                hole = _hole(data, name)
                if hole is None:
                    return None
                holes.append((*hole, False))
        holes.sort(key=lambda hole: hole[0])
        if any(left[1] >= right[0] for left, right in itertools.pairwise(holes)):  # overlapping, or no text between
            return None
        return cls(data, holes, padded)

    def read(self, data):
        """The content of `key`'s string in `data`, if `data` is the learned text but for its
        holes' values; else None."""
        if not data.endswith(self.tail):
            if not self.padded:
                return None
            data = _unpadded(data)  # only a padded document can end otherwise
            if not data.endswith(self.tail):
                return None
        if not data.startswith(self.head):
            return None
        at, kept, stop = self.start, None, len(data) - self.tail_length
        for check, after, first, length, keep in self.holes:
            end = data.find(first, at)
            value = data[at:end]
            if end < 0 or not check(value) or not data.startswith(after, end):
                return None
            if keep:
                kept = value
            at = end + length
        check, keep = self.last
        value = data[at:stop]
        if at > stop or not check(value):  # at > stop: the head or a hole's text overlaps the tail
            return None
        return value if keep else kept

    def encoded(self):
        """This shape reading its documents' UTF-8 bytes (Bedrock's events): `read` takes bytes
        and gives the key's content as bytes, which the caller reads as UTF-8 (the other holes
        are checked here)."""
        twin = object.__new__(Shape)
        twin.padded = self.padded
        twin.head = self.head.encode()
        twin.start = len(twin.head)
        twin.holes = tuple(
            (_UTF8_CHECKS[check, keep], after.encode(), first.encode(), len(after.encode()), keep)
            for check, after, first, _, keep in self.holes
        )
        check, keep = self.last
        twin.last = _UTF8_CHECKS[check, keep], keep
        twin.tail = self.tail.encode()
        twin.tail_length = len(twin.tail)
        return twin


def _unpadded(data):
    """`data` without JSON whitespace before its last character (a closing brace, if it is JSON)."""
    return data[:-1].rstrip(b" \t\n\r" if type(data) is bytes else " \t\n\r") + data[-1:]


def _hole(data, name):
    """(start, end, check) of the value of the one member `name` in compact JSON text `data`:
    a plain string's content, or an integer; None for anything else."""
    marker = '"%s":' % name
    if data.count(marker) != 1:
        return None
    start = data.find(marker)
    # After "{" or ",", the marker's first quote opens a key (in a string it would be escaped).
    if start == 0 or data[start - 1] not in "{,":
        return None
    at = start + len(marker)
    if data[at : at + 1] == '"':
        end = data.find('"', at + 1)
        return (at + 1, end, plain) if end > at and plain(data, at + 1, end) else None
    number = _INTEGER.match(data, at)
    if number is None or data[number.end() : number.end() + 1] not in (",", "}"):
        return None
    return at, number.end(), _integer


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
