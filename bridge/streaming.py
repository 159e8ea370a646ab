"""Relay an upstream event stream to the client, translating as it goes.

A reader thread (pooled: it outlives its stream and serves the next) decodes
the upstream body into SSE events and hands them over a queue, so the
response generator can send a keep-alive while the upstream is silent (a
reasoning model thinking) and nginx or the client do not time out. Each
event is translated and written the moment it arrives; nothing is buffered
beyond the SSE decoder's unfinished event.

Translators are pure state machines with two methods:
`feed(event_name, payload) -> [outgoing]` and `finish() -> [outgoing]`,
where payload is the parsed JSON data or the string "[DONE]". They raise
BridgeError when the stream cannot go on; the relay renders it as the
client protocol's error event and ends the stream. A translator may set
`done` once it has sent the client's last event: the relay then ends the
response at once instead of waiting (and pinging) for the upstream's end.
"""
import logging
import queue
import threading
import time

from . import json_codec, observability, sse
from .errors import ANTHROPIC, BridgeError
from .upstream import transport_error

log = logging.getLogger(__name__)

DONE = "[DONE]"
# A translator returns this to send the client a keep-alive (for OpenAI clients an SSE comment),
# e.g. for an upstream ping: the upstream is alive even when nothing in its events is for the client.
KEEPALIVE = "keep-alive"
_END = object()
_READ_SIZE = 65536
# A server learns that the client has gone only when a write fails, and that is the second
# write after it left (the first one draws the reset). While the upstream is silent a bare SSE
# comment, which every client ignores, goes out this often, so a departed client is noticed
# and the upstream closed within about half a second instead of two ping intervals.
PROBE_INTERVAL = 0.25
_PROBE = sse.comment("")


def relay(response, translator, protocol, ping_interval):
    """Yield the client's bytes for one upstream streaming response."""
    frame = _anthropic_event if protocol == ANTHROPIC else _openai_chunk
    keepalive = _anthropic_event({"type": "ping"}) if protocol == ANTHROPIC else sse.comment()
    record = observability.current()
    upstream = _Ending(response)
    events = queue.SimpleQueue()
    READERS.run(lambda: _read(response, events.put))
    quiet_since = time.monotonic()
    # Events that are already here leave in one write: the reader hands over each upstream
    # chunk (usually one event) as it comes, and a write per event costs a syscall, a chunk
    # header and a thread switch each.
    pending = []
    try:
        while True:
            try:
                batch = events.get(timeout=min(ping_interval, PROBE_INTERVAL))
            except queue.Empty:
                if time.monotonic() - quiet_since >= ping_interval:
                    quiet_since = time.monotonic()
                    yield keepalive
                else:
                    yield _PROBE
                continue
            quiet_since = time.monotonic()
            ended = False
            for batch in _with_queued(batch, events):
                if batch is _END:
                    ended = True
                    break
                if isinstance(batch, BaseException):
                    raise transport_error(batch) if not isinstance(batch, BridgeError) else batch
                for event in batch:
                    for item in translator.feed(event.event, _payload(event)):
                        record.saw(item)
                        pending.append(frame(item))
            if pending:
                yield _take(pending)
            if ended or getattr(translator, "done", False):
                break  # done: no keep-alive after the client's last event, no wait for [DONE]
        for item in translator.finish():
            record.saw(item)
            pending.append(frame(item))
    except Exception as error:
        if not isinstance(error, BridgeError):  # a bug: still the protocol's error event, not a cut stream
            log.exception("stream translation failed")
            error = BridgeError("api_error", "internal error in the bridge while translating the "
                                "stream; see its log")
        record.failed_mid_stream(error, protocol)
        pending.append(error_event(error, protocol))  # after what the same read already produced
    finally:
        upstream.close()
    if pending:
        yield _take(pending)


def error_event(error, protocol):
    """The mid-stream form of an error: after the first byte no status can change."""
    body = error.body_for(protocol)
    if protocol == ANTHROPIC:
        return sse.encode(json_codec.dumps(body), event="error")
    return sse.encode(json_codec.dumps(body))


def _payload(event):
    data = event.data.strip()
    if data == DONE:
        return DONE
    try:
        return json_codec.loads(data)
    except ValueError:
        raise BridgeError("api_error", "upstream sent a stream event that is not JSON: "
                          + repr(data[:80]), status=502) from None
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


def _anthropic_event(item):
    return sse.encode(json_codec.dumps(item), event=item["type"])


def _openai_chunk(item):
    if item == DONE:
        return sse.encode(DONE)
    if item == KEEPALIVE:
        return sse.comment()
    return sse.encode(json_codec.dumps(item))


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


def _read(response, put):
    """Reader thread: push lists of decoded events, then _END or the exception."""
    decoder = sse.Decoder()
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
