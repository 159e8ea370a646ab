"""Relay an upstream event stream to the client, translating as it goes.

A reader thread (pooled: it outlives its stream and serves the next) decodes
the upstream body into SSE events and hands them over a queue, so the
response generator can send a keep-alive while the upstream is silent (a
reasoning model thinking) and nginx or the client do not time out. Each
event is translated (translator.py is the contract) and written the moment
it arrives; nothing is buffered beyond the SSE decoder's unfinished event.
How the client's events, keep-alives and end look on the wire is its
protocol's Framing.
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


def relay(response, translator, framing, ping_interval, max_event_bytes=sse.MAX_EVENT_BYTES):
    """Yield the client's bytes for one upstream streaming response."""
    frame = framing.frame
    record = observability.current()
    upstream = _Ending(response)
    events = queue.SimpleQueue()
    READERS.run(lambda: _read(response, events.put, max_event_bytes))
    quiet_since = written_at = time.monotonic()  # when the client last got an event; any bytes
    keepalive = framing.opening_keepalive or framing.keepalive  # framing.keepalive after the first event
    # Events that are already here leave in one write: the reader hands over each upstream
    # chunk (usually one event) as it comes, and a write per event costs a syscall, a chunk
    # header and a thread switch each.
    pending = []
    try:
        while True:
            try:
                arrived = events.get(timeout=min(ping_interval, PROBE_INTERVAL))
            except queue.Empty:
                arrived = None
            ended = False
            for batch in _with_queued(arrived, events) if arrived is not None else ():
                if batch is _END:
                    ended = True
                    break
                if isinstance(batch, BaseException):
                    raise transport_error(batch) if not isinstance(batch, BridgeError) else batch
                for event in batch:
                    for item in translator.feed(event.event, _payload(event)):
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
        record.failed_mid_stream(error, translator.protocol)
        pending.extend(frame(item) for item in translator.fail(error))  # after what the same read produced
    else:
        pending.append(framing.end)
    finally:
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


def _with_queued(first, events):
    """`first` and whatever else the reader has queued meanwhile, without waiting for more."""
    batches = [first]
    while batches[-1] is not _END and not isinstance(batches[-1], BaseException):
        try:
            batches.append(events.get_nowait())
        except queue.Empty:
            break
    return batches


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


def _read(response, put, max_event_bytes):
    """Reader thread: push lists of decoded events, then _END or the exception."""
    decoder = sse.Decoder(max_event_bytes)
    try:
        raw = response.raw
        while True:
            chunk = raw.read1(_READ_SIZE)
            if not chunk:
                break
            events = decoder.feed(chunk)
            if events:
                put(events)
        put(decoder.close())
        put(_END)
    except BaseException as exc:  # handed to the generator, which reports it
        put(exc)


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
