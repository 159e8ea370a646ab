"""Relay an upstream event stream to the client, translating as it goes.

A reader thread (pooled: it outlives its stream and serves the next) decodes
the upstream body into SSE events and hands them over (_Handover), so the
response generator can send a keep-alive while the upstream is silent (a
reasoning model thinking) and nginx or the client do not time out. Each
event is translated (translator.py is the contract) and written the moment
it arrives. The hand-over is bounded: while the client does not read, the
generator is stuck in the server's write, and the reader stops reading the
upstream once a read's worth waits for it, so a stalled client holds a few
buffers, not the stream; the upstream is closed when the client has taken
nothing for BRIDGE_CLIENT_STALL_TIMEOUT. How the client's events, keep-alives
and end look on the wire is its protocol's Framing.
"""

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable

from . import json_codec, observability, sse
from .errors import BridgeError
from .translator import DONE
from .upstream import transport_error

log = logging.getLogger(__name__)

_END = object()
_READ_SIZE = 65536
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


def _named_event(item):
    return sse.encode(json_codec.dumps(item), event=item["type"])


def _data_only(item):
    return sse.encode(json_codec.dumps(item))


ANTHROPIC_SSE = Framing(_named_event, _named_event({"type": "ping"}))
CHAT_SSE = Framing(_data_only, sse.comment(), sse.encode(DONE))
# OpenAI Responses: named events. Codex resets its idle timer on any data event but not on a
# comment (CODEX.md §5), so the keep-alive is an event of a type no client acts on, as
# OpenAI's own `keepalive`: Codex and the openai SDK pass unknown types by. The SDK's
# `responses.stream()` helper refuses any event before `response.created`, so until the
# client's first event (the upstream silent before message_start) it is a comment.
RESPONSES_SSE = Framing(_named_event, _named_event({"type": "keepalive"}), opening_keepalive=sse.comment())


def relay(response, translator, framing, ping_interval, max_event_bytes=sse.MAX_EVENT_BYTES, client_stall_timeout=60.0):
    """Yield the client's bytes for one upstream streaming response."""
    frame = framing.frame
    record = observability.current()
    upstream = _Ending(response)
    events = _Handover(_READ_SIZE)

    def read():
        _read(response, events, max_event_bytes, client_stall_timeout)
        if events.stalled:  # the client took nothing for that long: the upstream is not kept for it
            upstream.close()
            record.error = "client_stalled"  # the access line's outcome, as "client_closed" is
            log.warning(
                "request %s: the client stopped reading; upstream closed after %g s (BRIDGE_CLIENT_STALL_TIMEOUT)",
                record.request_id,
                client_stall_timeout,
            )
            events.end(
                BridgeError(
                    "timeout",
                    f"the client read nothing of this stream for {client_stall_timeout:g} s; the bridge ended it",
                )
            )

    READERS.run(read)
    quiet_since = written_at = time.monotonic()  # when the client last got an event; any bytes
    keepalive = framing.opening_keepalive or framing.keepalive  # framing.keepalive after the first event
    # Events that are already here leave in one write (take() gives all of them): the reader
    # hands over each upstream chunk (usually one event) as it comes, and a write per event
    # costs a syscall, a chunk header and a thread switch each.
    pending = []
    try:
        while True:
            ended = False
            for batch in events.take(min(ping_interval, PROBE_INTERVAL)):
                if batch is _END:
                    ended = True
                    break
                if isinstance(batch, BaseException):
                    raise transport_error(batch) if not isinstance(batch, BridgeError) else batch
                for event in batch:
                    payload = _payload(event)
                    record.heard(payload)
                    for item in translator.feed(event.event, payload):
                        record.saw(item)
                        pending.append(frame(item))
            now = time.monotonic()
            if pending:
                quiet_since = written_at = now
                keepalive = framing.keepalive
                yield _take(pending)
            if ended or translator.done:
                break  # done: no keep-alive after the client's last event, no wait for [DONE]
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
        for item in translator.finish():
            record.saw(item)
            pending.append(frame(item))
    except Exception as error:
        if not isinstance(error, BridgeError):  # a bug: still the protocol's error event, not a cut stream
            log.exception("stream translation failed")
            error = BridgeError("api_error", "internal error in the bridge while translating the stream; see its log")
        if not events.stalled:  # else the reader recorded why: the client's doing, not the upstream's
            record.failed_mid_stream(error, translator.protocol)
        pending.extend(frame(item) for item in translator.fail(error))  # after what the same read produced
    else:
        pending.append(framing.end)
    finally:
        events.close()  # a reader waiting for room stops; one in recv() is woken by the close below
        upstream.close()
    if pending:
        yield _take(pending)


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


class _Readers:
    """Daemon threads that read upstream bodies, each kept for the next stream when its own ends.

    Starting a thread per stream costs more CPU than relaying a short stream's events. There
    is always a thread for every stream: an idle one if any, else a new one; so there are
    never more than the most streams open at once (at most gunicorn's threads per worker).
    """

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self._threads = self._idle = 0
        self._lock = threading.Lock()

    def run(self, job):
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1
            else:
                self._threads += 1
        if not reuse:
            threading.Thread(target=self._serve, daemon=True, name="upstream-reader").start()
        self._jobs.put(job)

    def busy(self):
        """How many threads are reading an upstream right now."""
        with self._lock:
            return self._threads - self._idle

    def _serve(self):
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


READERS = _Readers()


def _read(response, events, max_event_bytes, stall_timeout):
    """Reader thread: hand over lists of decoded events, then _END or the exception; stop early
    when the generator has gone or took nothing for `stall_timeout` seconds."""
    decoder = sse.Decoder(max_event_bytes)
    unsent = 0  # bytes read since the last hand-over
    try:
        raw = response.raw
        while True:
            chunk = raw.read1(_READ_SIZE)
            if not chunk:
                break
            unsent += len(chunk)
            decoded = decoder.feed(chunk)
            if decoded:
                if not events.put(decoded, unsent, stall_timeout):
                    return
                unsent = 0
        events.end(decoder.close(), _END)
    except BaseException as exc:  # handed to the generator, which reports it
        events.end(exc)


class _Handover:
    """Decoded events on their way from the reader to the generator, bounded in bytes.

    Once `limit` bytes of upstream body are handed over and not taken, the reader waits before
    it reads more; the generator takes all there is at once (events already here leave in one
    write). So a client that does not read holds what it was last given (stuck in the server's
    write) and less than `limit` plus one read here: a few reads, plus an event of up to
    max_event_bytes if one ends in them. Bytes, not a count of batches: a read is at most
    _READ_SIZE new bytes but anything from none to thousands of events, and small batches
    that never reach a byte bound still leave together.

    Each side keeps its own count (`_sent` the reader's, `_taken` the generator's), so a
    hand-over costs a C queue's put and get, as an unbounded one did; the lock is taken only
    to wait for room and to wake the waiting reader. The reader sets `_waiting` before it
    checks for room and the generator stores `_taken` before it reads `_waiting`, so one of
    them sees the other: no wake-up is lost.
    """

    def __init__(self, limit):
        self._queue = queue.SimpleQueue()  # (batch, _sent after it)
        self._limit = limit
        self._sent = self._taken = 0
        self._room = threading.Condition()
        self._waiting = self._closed = False
        self.stalled = False  # the generator took nothing for a whole stall timeout

    def put(self, events, size, timeout):
        """Reader: hand over `events`, `size` bytes of body, and wait for room if that filled it up.
        False when the reader should stop: the generator has closed, or took nothing for
        `timeout` seconds (then `stalled`)."""
        self._sent += size
        self._queue.put((events, self._sent))
        if self._sent - self._taken < self._limit:
            return True
        with self._room:
            self._waiting = True
            try:
                if not self._room.wait_for(self._has_room, timeout):
                    self.stalled = True
                    return False
            finally:
                self._waiting = False
            return not self._closed

    def _has_room(self):
        return self._sent - self._taken < self._limit or self._closed

    def end(self, *items):
        """Reader: the stream's last items (its tail, _END, an error): no read follows them."""
        for item in items:
            self._queue.put((item, self._sent))

    def take(self, timeout):
        """Generator: all that is handed over, after waiting up to `timeout` for it; [] if nothing came."""
        try:
            batch, taken = self._queue.get(timeout=timeout)
        except queue.Empty:
            return []
        batches = [batch]
        while not self._queue.empty():  # only this thread takes: not empty means get() will not wait
            batch, taken = self._queue.get()
            batches.append(batch)
        self._taken = taken
        if self._waiting:
            with self._room:
                self._room.notify()
        return batches

    def close(self):
        """Generator: it takes nothing more, and a reader waiting for room stops."""
        with self._room:
            self._closed = True
            self._room.notify()


class _Ending:
    """An upstream response that ends once: given back to the pool or closed, never both.

    urllib3 gives the connection back to its pool from inside the reader's read, the moment
    the body ends: first into the pool, then off the response. Closing the response in
    between (a translator done before the body's last bytes, a client leaving at the very
    end) would close the connection the pool has meanwhile handed to another stream. A lock
    makes giving back and closing exclusive: whichever comes first decides.
    """

    def __init__(self, response):
        self.response = response
        self._lock = threading.Lock()
        self._closed = False
        give_back = response.raw.release_conn

        def release_conn():
            with self._lock:
                if not self._closed:
                    give_back()

        response.raw.release_conn = release_conn

    def close(self):
        """Close at once, waking a reader blocked in recv(), unless the pool has it back."""
        with self._lock:
            self._closed = True
            try:
                self.response.raw.shutdown()  # refused once the connection is back in the pool
            except Exception:
                pass
        self.response.close()
