"""Relay an upstream event stream to the client, translating as it goes.

The relay reads the upstream body itself (_UpstreamBody), waiting for it at most a quarter of
a second at a time, so that while the upstream is silent (a reasoning model thinking) it can
send a keep-alive, which nginx and the client need, and a probe that finds a client gone.
Each event is translated (translator.py is the contract) and written the moment it arrives.
Under gunicorn the relay does not wait in its request's thread: it yields its Parking, and
the worker's stream loop (bridge/serve/stream_loop.py) resumes it when the upstream socket is
readable or the wait is over, so thousands of streams share one thread and one wake-up per
batch of events; a turn there is bounded (a read, EVENTS_PER_TURN events), so a stream of giant
or endless events holds the others for one turn at a time. Elsewhere (werkzeug, or the loop
full) it waits in poll() in its own thread.
Back-pressure comes with either: while the client does not read, the relay is not resumed
(or its thread is stuck in the server's write) and reads nothing more, so a stalled client
holds the socket buffers, not the stream; after BRIDGE_CLIENT_STALL_TIMEOUT the client is
cut (bridge/serve/deadlines.py), and the upstream is closed. How the client's events, keep-alives
and end look on the wire is its protocol's Framing.
"""

import dataclasses
import itertools
import logging
import select
import ssl
import time
from collections.abc import Callable

from ..protocols import json_codec, sse
from ..protocols.errors import BridgeError
from ..translate.translator import DONE
from . import observability

log = logging.getLogger(__name__)

# A stream's turn in the stream loop: one read of at most _READ_SIZE bytes, and at most
# EVENTS_PER_TURN of the events they complete translated and written; the rest wait for its
# next turn, after every other stream's. One read completes at most one event larger than
# itself, up to BRIDGE_MAX_EVENT_BYTES: that one is translated whole.
_READ_SIZE = 65536
EVENTS_PER_TURN = 64
# How long a complete answer waits for the end of its upstream body (a chunked body's last,
# empty chunk, which upstreams write apart from the last event), so that its connection goes
# back to the pool: a new connection to a TLS upstream costs a handshake.
_DRAIN_WAIT = 0.05
_NOTHING = object()
# A server learns that the client has gone only when a write fails, and that is the second
# write after it left (the first one draws the reset). While the upstream is silent a bare SSE
# comment, which every client ignores, goes out this often, so a departed client is noticed
# and the upstream closed within about half a second instead of two ping intervals.
PROBE_INTERVAL = 0.25
_PROBE = sse.comment("")


@dataclasses.dataclass(frozen=True)
class Framing:
    """How one client protocol writes an event, a keep-alive, and the end of a completed answer.

    `opening_keepalive` is the keep-alive while the client has had no event yet, for a
    protocol whose clients take no event before their first one (None: `keepalive`).
    """

    frame: Callable[[dict], bytes]
    keepalive: bytes
    end: bytes = b""
    opening_keepalive: bytes = None


# sse.encode's frames, written here: a call fewer for every event of every stream.
def _named_event(item):
    return b"event: %s\ndata: %s\n\n" % (item["type"].encode(), json_codec.dumps(item))


def _data_only(item):
    return b"data: %s\n\n" % json_codec.dumps(item)


ANTHROPIC_SSE = Framing(_named_event, _named_event({"type": "ping"}))
CHAT_SSE = Framing(_data_only, sse.comment(), sse.encode(DONE))
# OpenAI Responses: named events. Codex resets its idle timer on any data event but not on a
# comment (tests/fixtures/clients/codex-0.171.0/CODEX.md §5), so the keep-alive is an event of
# a type no client acts on, as OpenAI's own `keepalive`: Codex and the openai SDK pass unknown
# types by. The SDK's `responses.stream()` helper refuses any event before `response.created`,
# so until the client's first event (the upstream silent before message_start) it is a comment.
RESPONSES_SSE = Framing(_named_event, _named_event({"type": "keepalive"}), opening_keepalive=sse.comment())


def relay(
    response,
    translator,
    framing,
    ping_interval,
    max_event_bytes=sse.MAX_EVENT_BYTES,
    client_stall_timeout=60.0,
    loop=None,
    decoder=None,
):
    """Yield the client's bytes for one upstream streaming response.

    `decoder` reads the upstream's bytes as events (feed, close): sse.Decoder by default, an
    AWS event-stream one for Bedrock (gateway/bedrock.py).

    With the worker's stream `loop` (bridge/serve/stream_loop.py) and room in it, the relay waits
    for its upstream by yielding its Parking, and the loop resumes it; otherwise it waits in
    its own thread.
    """
    frame = framing.frame
    record = observability.current()
    record.translator = translator
    body = _UpstreamBody(response)
    parking = loop.parking(body.socket) if loop is not None else None
    wait = min(ping_interval, PROBE_INTERVAL)
    decoder = decoder or sse.Decoder(max_event_bytes)
    # A translator's fast path writes the usual event without parsing it or making its items
    # (translator.py); a record that keeps the answer's text sees every item instead.
    keeps_text = type(record).saw is not observability.Record.saw
    fast = translator.fast if translator.fast_text is not None and not keeps_text else None
    quiet_since = written_at = time.monotonic()  # when the client last got an event; any bytes
    keepalive = framing.opening_keepalive or framing.keepalive  # framing.keepalive after the first event
    # Events that are already here leave in one write (read() gives all that has come): a
    # write per event costs a syscall and a chunk header each.
    pending = []
    try:
        chunk = body.read(0)  # what came with the head, without a wait
        while True:
            ended = chunk is None
            events = decoder.close() if ended else decoder.feed(chunk)
            for first in range(0, len(events), EVENTS_PER_TURN):
                if first:  # a turn's worth is out: the rest once the loop's other streams had theirs
                    yield from _next_turn(parking)
                for event in events[first : first + EVENTS_PER_TURN]:
                    if fast is not None:
                        written = fast(event)
                        if written is not None:  # the usual event, already the client's bytes
                            if written:
                                pending.append(written)
                            continue
                    payload = _payload(event)
                    record.heard(payload)
                    for item in translator.feed(event.event, payload):
                        record.saw(item)
                        pending.append(frame(item))
                if pending:
                    quiet_since = written_at = time.monotonic()
                    keepalive = framing.keepalive
                    yield _take(pending)
            if ended or translator.done:
                break  # done: no keep-alive after the client's last event, no wait for [DONE]
            now = time.monotonic()
            if now - quiet_since >= ping_interval:
                # An upstream ping (or an event with nothing for the client) keeps only the
                # upstream's side of the connection alive: the client's side needs its own.
                quiet_since = written_at = now
                yield keepalive
            elif now - written_at >= PROBE_INTERVAL:
                # Upstream events with nothing for the client (thinking it is not shown) are no
                # write either: without one, a client that left goes unnoticed.
                written_at = now
                yield _PROBE
            chunk = yield from _read(body, wait, parking)
        for item in translator.finish():
            record.saw(item)
            pending.append(frame(item))
    except GeneratorExit:  # the server stopped writing: the client left, or stopped reading
        if time.monotonic() - written_at >= client_stall_timeout:  # the write waited that long: gunicorn cut it
            record.error = "client_stalled"  # the access line's outcome, as "client_closed" is
            log.warning(
                "request %s: the client stopped reading; upstream closed after %g s (BRIDGE_CLIENT_STALL_TIMEOUT)",
                record.request_id,
                client_stall_timeout,
            )
        raise
    except Exception as error:
        if not isinstance(error, BridgeError):  # a bug: still the protocol's error event, not a cut stream
            log.exception("stream translation failed")
            error = BridgeError("api_error", "internal error in the bridge while translating the stream; see its log")
        record.failed_mid_stream(error, translator.protocol)
        pending.extend(frame(item) for item in translator.fail(error))  # after what the same turn produced
    else:
        pending.append(framing.end)
        yield _take(pending)  # the client's last bytes first: what follows is for the pool
        yield from _drain(body, parking)
    finally:
        body.close()
        if parking is not None:
            parking.release()
    if pending:
        yield _take(pending)


def _next_turn(parking):
    """Parked, let the stream loop's other streams have their turn first; in a thread, go on."""
    if parking is not None:
        yield parking.later()


def _read(body, timeout, parking):
    """The body's next bytes (b"": none within `timeout`; None: its end), waited for in this
    thread or, parked, in the stream loop."""
    if parking is None:
        return body.read(timeout)
    yield parking.wait(timeout)
    return body.read(0, ready=parking.ready)


def _drain(body, parking):
    """Read what is left of a body whose answer is complete, for up to _DRAIN_WAIT and one
    read's worth of bytes, so that closing it gives its connection back to the pool."""
    deadline = time.monotonic() + _DRAIN_WAIT
    drained = 0
    try:
        while not body.complete and drained <= _READ_SIZE:
            left = deadline - time.monotonic()
            data = (yield from _read(body, left, parking)) if left > 0 else None
            if data is None:
                return
            drained += len(data)
    except BridgeError:  # a cut or malformed end: the answer is whole, the connection is not kept
        return


def _payload(event):
    data = event.data.strip()
    if data == DONE:
        return DONE
    try:
        return json_codec.loads(data)
    except ValueError:
        raise BridgeError(
            "api_error", "upstream sent a stream event that is not JSON: " + repr(data[:80]), status=502
        ) from None
    except RecursionError:
        raise BridgeError("api_error", "upstream sent a stream event nested too deeply", status=502) from None


def _take(frames):
    """All pending frames as one bytes object, leaving the list empty."""
    data = b"".join(frames)
    frames.clear()
    return data


class _UpstreamBody:
    """The body of an upstream's streaming answer, read by the relay, which must not block in
    a read for longer than it may leave the client without a byte (in the stream loop, not at all).

    http.client reads only blocking (a socket timeout leaves its reader unusable), so this
    takes the socket over once the head is parsed: it reads non-blocking, waits in poll() for
    at most the caller's timeout (or not at all when the stream loop's epoll found it ready),
    and undoes the body's framing (chunked, content-length, or to the close) itself. Whatever
    http.client's buffer and OpenSSL already hold is taken before any wait, so no event waits
    behind a poll; otherwise an event costs a poll and a recv. A body read
    to its end gives the connection back to the pool; any other end closes it.

    Written against urllib3 2 (setup.cfg pins it below 3): it uses its HTTPResponse's `_fp` and
    `_connection` and http.client's `fp`, `chunked`, `length`, `will_close` and `_close_conn`;
    tests/serve/test_streaming.py exercises each of them.
    """

    def __init__(self, response):
        self._response = response
        raw = response.raw  # urllib3's HTTPResponse
        self._head = raw._fp  # http.client's HTTPResponse, of which only the head was read
        self._file = self._head.fp  # its buffered reader of the socket
        self.socket = raw._connection.sock
        self._pending = getattr(self.socket, "pending", None)  # a TLS socket's decrypted bytes
        self._read_timeout = self.socket.gettimeout()  # urllib3 set it to BRIDGE_READ_TIMEOUT
        self.socket.settimeout(0)
        self._poller = select.poll()
        self._poller.register(self.socket, select.POLLIN)
        self._silent_since = time.monotonic()
        self._chunks = _Dechunker() if self._head.chunked else None
        self._left = self._head.length  # content-length still to come, None: not framed by one
        self.complete = False
        self._first = True

    def read(self, timeout, ready=False):
        """The body bytes that have come, after waiting up to `timeout` for some (none when the
        socket is known to be `ready`): b"" if none came, None once the body is over."""
        if self.complete:
            return None
        if self._first:  # what came with the head may wait in http.client's buffer, unseen by poll()
            self._first = False
            data = self._take()
            if data is _NOTHING or not data:
                return b""
        elif not ready and not self._wait(timeout):
            return b""
        else:
            data = self._take()
            if data is _NOTHING:  # a TLS record with no data for the body (a session ticket)
                return b""
            if not data:  # readable, and nothing to read: the upstream closed
                data = self._closed()
                if data is None:
                    return None
        self._silent_since = time.monotonic()
        if self._chunks is not None:
            data = self._chunks.feed(data)
            if self._chunks.done:
                self.complete = True
                return data or None  # the last chunk's bytes, if any, then the end
        elif self._left is not None:
            data = data[: self._left]
            self._left -= len(data)
            if not self._left:
                self.complete = True
                return data or None
        return data

    def _take(self):
        """What can be read without waiting: bytes; b"" at the end (or, from a plain socket,
        for nothing yet); _NOTHING when TLS has nothing yet."""
        try:
            # The buffer's bytes, else one recv of up to 64 KiB: more than the buffer holds (8
            # KiB) and than a TLS record (16 KiB). What OpenSSL decrypted beyond them (the rest
            # of the record the head came in) is read too: poll() cannot see it.
            data = self._file.read1(_READ_SIZE)
            while data and self._pending is not None and self._pending():
                data += self._file.read1(_READ_SIZE)
            return data
        except (BlockingIOError, ssl.SSLWantReadError):
            return _NOTHING
        except OSError as exc:  # a reset
            raise _cut(type(exc).__name__) from None

    def _wait(self, timeout):
        """Whether the socket became readable within `timeout`; raises once it has been silent
        for the read timeout, as a blocking read would have."""
        if self._poller.poll(timeout * 1000):
            return True
        if self._read_timeout is not None and time.monotonic() - self._silent_since >= self._read_timeout:
            raise BridgeError(
                "timeout",
                f"upstream did not answer in time: nothing for {self._read_timeout:g} s (BRIDGE_READ_TIMEOUT)",
                status=504,
            )
        return False

    def _closed(self):
        """The upstream closed the connection: the end of a body framed by the close, else a cut."""
        if self._chunks is None and self._left is None:
            return None
        raise BridgeError("api_error", "the upstream closed the connection mid-response (IncompleteRead)", status=502)

    def close(self):
        """Give a body read to its end back to the pool (urllib3 sets the socket's timeout
        again before it sends on it); close any other (the client left, an error) at once: its
        rest is never read."""
        if self.complete and not self._head.will_close:
            self._head._close_conn()  # http.client's own end of a body: the connection may serve again
            self._response.raw.release_conn()
        else:
            self._response.close()


class _Dechunker:
    """Undo HTTP/1.1 chunked framing, fed any cut of the body; bounded: a chunk-size line longer
    than 1 KiB, or one that is not hex, is a malformed answer."""

    _MAX_LINE = 1024

    def __init__(self):
        self._buffer = b""
        self._left = 0  # bytes of the current chunk's data still to come
        self._crlf = False  # the CRLF after a chunk's data is next
        self._trailer = False  # after the last chunk: trailer lines until an empty one
        self.done = False

    def feed(self, data):
        """The payload bytes in `data`."""
        buffer = self._buffer + data if self._buffer else data
        payload, at, size = [], 0, len(buffer)
        whole = False  # the whole chunks of this read taken at once (_whole_chunks), once
        while at < size and not self.done:
            if not (whole or self._left or self._crlf or self._trailer):
                whole = True
                at += _whole_chunks(buffer[at:] if at else buffer, payload)
                continue
            if self._left:
                part = buffer[at : at + self._left]
                payload.append(part)
                at += len(part)
                self._left -= len(part)
                self._crlf = not self._left
                continue
            end = buffer.find(b"\r\n", at)
            if end < 0:
                if size - at > self._MAX_LINE:
                    raise _malformed("a chunk-size line longer than 1 KiB")
                break
            line, at = buffer[at:end], end + 2
            if self._crlf:
                if line:
                    raise _malformed("chunk data longer than its size")
                self._crlf = False
            elif self._trailer:
                self.done = not line
            else:
                self._left = _chunk_size(line)
                self._trailer = self._left == 0
                stop = at + self._left
                if self._left and buffer[stop : stop + 2] == b"\r\n":  # the whole chunk is here: the usual case
                    payload.append(buffer[at:stop])
                    at, self._left = stop + 2, 0
        self._buffer = buffer[at:]
        return b"".join(payload)


def _whole_chunks(buffer, payload):
    """The usual read, whole chunks of one event each, undone in a few C calls: append the data
    of the whole chunks `buffer` starts with to `payload` and return their length in bytes, or
    0 (nothing taken) unless each is hex digits, CRLF, that many bytes without a CRLF, CRLF.
    What follows them (an unfinished chunk, the last chunk) is for _Dechunker.feed's rules."""
    last = buffer.find(b"\r\n0\r\n")  # the last chunk, after the events of a short answer
    parts = (buffer[: last + 2] if last >= 0 else buffer).split(b"\r\n")
    pairs = (len(parts) - 1) // 2 * 2  # the last part is what follows the last CRLF: unfinished
    lines, data = parts[0:pairs:2], parts[1:pairs:2]
    if not all(map(bytes.isalnum, lines)):
        return 0
    try:
        sizes = list(map(int, lines, itertools.repeat(16, len(lines))))
    except ValueError:
        return 0
    if sizes != list(map(len, data)) or 0 in sizes:  # 0: a last chunk written "00"
        return 0
    payload += data
    return sum(sizes) + sum(map(len, lines)) + 4 * len(lines)


def _chunk_size(line):
    field = line if line.isalnum() else line.split(b";", 1)[0].strip()  # hex digits alone, as a rule
    try:
        if field.isalnum():  # int() would also take a sign, spaces and underscores
            return int(field, 16)
    except ValueError:
        pass
    raise _malformed(f"a chunk size {line[:40]!r}")


def _cut(how):
    return BridgeError("api_error", f"the upstream closed the connection mid-response ({how})", status=502)


def _malformed(what):
    return BridgeError("api_error", f"the upstream's answer was malformed: {what}", status=502)
