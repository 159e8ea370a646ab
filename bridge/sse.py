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
        self._event = None
        self._data = []

    def feed(self, chunk):
        """Return the events completed by this chunk of bytes."""
        buffer = self._tail + chunk
        lines = buffer.splitlines(keepends=True)
        # A trailing "\r" may be the first half of "\r\n": wait for more.
        if lines and (not lines[-1].endswith((b"\n", b"\r")) or lines[-1].endswith(b"\r")):
            self._tail = lines.pop()
        else:
            self._tail = b""
        events = []
        for line in lines:
            event = self._line(line.rstrip(b"\r\n"))
            if event is not None:
                events.append(event)
        return events

    def close(self):
        """Events left when the stream ends without a final blank line."""
        events = self.feed(b"\n") if self._tail else []
        event = self._line(b"")
        return events + ([event] if event is not None else [])

    def _line(self, line):
        if not line:
            # WHATWG: an empty data buffer dispatches nothing, whatever `event:` said.
            event = Event(self._event, "\n".join(self._data))
            self._event, self._data = None, []
            return event if event.data else None
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        text = value.decode("utf-8", errors="replace")
        if name == b"data":
            self._data.append(text)
        elif name == b"event":
            self._event = text
        return None


def encode(data, event=None):
    """Frame one event; `data` is already-serialised text without newlines.

    A lone surrogate (half an emoji the upstream sent as "\\ud83d") leaves as that same JSON
    escape: failing the UTF-8 encode would break the stream.
    """
    text = f"event: {event}\ndata: {data}\n\n" if event else f"data: {data}\n\n"
    return text.encode("utf-8", "backslashreplace")


def comment(text="keep-alive"):
    return f": {text}\n\n".encode()
