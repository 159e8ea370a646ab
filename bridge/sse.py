"""Server-sent events: an incremental decoder (bytes -> events) and the encoder.

The decoder follows the WHATWG event-stream rules that matter on the wire:
any of CRLF, LF or CR ends a line, `:` lines are comments, `data:` lines
join with newlines, a blank line dispatches. It keeps only the unfinished
tail between feeds, so memory stays flat however long the stream runs.
"""

import collections

Event = collections.namedtuple("Event", "event data")


class Decoder:
    def __init__(self):
        self._tail = b""

    def feed(self, chunk):
        """Return the events completed by this chunk of bytes.

        Whole events are cut at blank lines in one pass; only the unfinished event (and a
        "\r" that may be the first half of "\r\n") waits for the next chunk.
        """
        buffer = self._tail + chunk
        held = b""
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buffer.split(b"\n\n")
        self._tail = blocks.pop() + held
        events = []
        for block in blocks:
            event = _event(block)
            if event is not None:
                events.append(event)
        return events

    def close(self):
        """The event left when the stream ends without a final blank line."""
        tail, self._tail = self._tail.replace(b"\r", b"\n"), b""
        event = _event(tail)
        return [event] if event is not None else []


def _event(block):
    """One event's lines as an Event, or None when it has no data (WHATWG: nothing to dispatch)."""
    name, data = None, []
    for line in block.split(b"\n"):
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            data.append(value)
        elif field == b"event":
            name = value.decode("utf-8", errors="replace")
    # A comment (empty field name) and a blank line fall through above: they carry nothing.
    text = b"\n".join(data).decode("utf-8", errors="replace")
    return Event(name, text) if text else None


def encode(data, event=None):
    """Frame one event; `data` is serialised JSON (bytes, or text) without newlines."""
    if isinstance(data, str):
        data = data.encode()
    return b"event: %s\ndata: %s\n\n" % (event.encode(), data) if event else b"data: %s\n\n" % data


def comment(text="keep-alive"):
    return f": {text}\n\n".encode()
