"""Server-sent events: an incremental decoder (bytes -> events) and the encoder.

The decoder follows the WHATWG event-stream rules that matter on the wire:
any of CRLF, LF or CR ends a line, `:` lines are comments, `data:` lines
join with newlines, a blank line dispatches. It keeps only the unfinished
event between feeds, so memory stays flat however long the stream runs, and
an event that grows past `max_event` bytes is an upstream error: an endless
event would otherwise hold memory and keep the client waiting for nothing.
Its work is linear in the bytes it reads: a chunk that cannot end the
unfinished event is only kept, not joined and searched with it again, and
the kept bytes are not searched again when a chunk ends their event.
"""

import collections

from .errors import BridgeError

Event = collections.namedtuple("Event", "event data")
# Event(name, text) calls the namedtuple's __new__, a Python function: this is the same without it.
_new_event = tuple.__new__
MAX_EVENT_BYTES = 16 * 1024 * 1024


class Decoder:
    def __init__(self, max_event=MAX_EVENT_BYTES):
        self._parts = []  # the unfinished event's chunks
        self._size = 0
        self._max_event = max_event

    def feed(self, chunk):
        """Return the events completed by this chunk of bytes.

        Whole events are cut at blank lines in one pass; only the unfinished event (and a
        "\r" that may be the first half of "\r\n") waits for the next chunk.
        """
        if not chunk:  # a wait with nothing read: kept, it would hide the last bytes from the check below
            return []
        start = 0  # where the first blank line may begin
        if self._parts:
            # The kept bytes hold no blank line, but for a last "\r" held back (it may be half of
            # "\r\n"): the pairs a blank line can be are checked across that edge and in the chunk.
            if not _ends_an_event(self._parts[-1][-2:] + chunk[:1]) and not _ends_an_event(chunk):
                self._keep(chunk)
                return []
            start = self._size - 1
            self._parts.append(chunk)
            buffer = b"".join(self._parts)
            self._parts, self._size = [], 0
        else:
            buffer = chunk
        held = b""
        if b"\r" in buffer:
            start = 0  # the line ends replaced below move the bytes
            if buffer.endswith(b"\r"):
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buffer.rfind(b"\n\n")  # the last blank line: what follows is the unfinished event
        rest = buffer[end + 2 :] + held if end >= 0 else buffer + held
        if rest:
            self._keep(rest)
        if end < 0:
            return []
        # The first event apart, found from where the kept bytes end: it may have taken many
        # reads, and a blank-line search is slower than a copy. One decode for every other
        # whole event: a character never spans a blank line.
        first = buffer.find(b"\n\n", start)
        blocks = [buffer[:first].decode("utf-8", "replace")]
        if first < end:
            blocks += buffer[first + 2 : end].decode("utf-8", "replace").split("\n\n")
        events = []
        for block in blocks:
            event = _event(block)
            if event is not None:
                events.append(event)
        return events

    def close(self):
        """The event left when the stream ends without a final blank line."""
        tail = b"".join(self._parts).replace(b"\r", b"\n")
        self._parts, self._size = [], 0
        event = _event(tail.decode("utf-8", "replace"))
        return [event] if event is not None else []

    def _keep(self, data):
        self._parts.append(data)
        self._size += len(data)
        if self._size > self._max_event:
            raise BridgeError(
                "api_error",
                f"upstream sent a stream event larger than {self._max_event} bytes (BRIDGE_MAX_EVENT_BYTES)",
                status=502,
            )


def _ends_an_event(data):
    """Whether `data` holds a blank line, in any of the line ends the rules allow: two line ends
    in a row, which is one of these pairs wherever CRLF, LF and CR mix ("\r\n" alone is one).
    A line end at all is looked for first (one byte's search is the faster): a giant event's
    middle has none."""
    if b"\n" not in data and b"\r" not in data:
        return False
    return b"\n\n" in data or b"\n\r" in data or b"\r\r" in data


def _event(block):
    """One event's lines (text) as an Event, or None when it has no data (WHATWG: nothing to dispatch)."""
    name, line = None, block
    # Prefixes compared as slices: str.startswith parses its arguments, which costs more here.
    if block[:7] == "event: ":
        name, _, line = block.partition("\n")
        name = name[7:]
    if line[:6] == "data: " and "\n" not in line:  # the usual event: [a name and] one data line
        text = line[6:]
        return _new_event(Event, (name, text)) if text else None
    return _event_lines(block)


def _event_lines(block):
    """_event for any block: every line by the rules."""
    name, data = None, []
    for line in block.split("\n"):
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    # A comment (empty field name) and a blank line fall through above: they carry nothing.
    text = "\n".join(data)
    return Event(name, text) if text else None


def encode(data, event=None):
    """Frame one event; `data` is serialised JSON (bytes, or text) without newlines."""
    if isinstance(data, str):
        data = data.encode()
    return b"event: %s\ndata: %s\n\n" % (event.encode(), data) if event else b"data: %s\n\n" % data


def comment(text="keep-alive"):
    return f": {text}\n\n".encode()
