"""One thread per gunicorn worker that relays every open stream: the worker's stream loop.

A stream that keeps its request thread costs that thread a wake-up per upstream event, and
each wake-up takes the worker's GIL from every other thread: with hundreds of paced streams
on a worker, the wake-ups, not the events, are where the CPU goes. So once a stream waits
for its upstream for the first time, its request thread hands it here and goes back to the
pool (bridge/serve/handover.py: the hand-over's contract). This loop waits for all the
parked streams' upstream sockets in one epoll, and for each one that is readable (or whose
wait is over) it resumes the stream's answer - the relay generator (streaming.py) and the
WSGI layers around it - until the relay waits again, writing what it yields to the client
without blocking. One wake-up then carries the events of every stream that has one.

The relay yields its Parking where it would wait: the loop resumes it with `ready` set when
the upstream socket is readable, or unset once the wait's timeout is over (the relay then
sends its keep-alive or disconnect probe). A stream's turn is bounded: the relay reads once
and translates at most EVENTS_PER_TURN events (streaming.py) before it yields; with events
still in hand it yields its Parking as `later()`, and the loop resumes it at its next turn,
after every other stream that is ready, whether or not its socket has more to read (epoll
cannot see the events it holds). A write the client's socket cannot take whole
stops the stream - it is not resumed, so its upstream is not read - until the client reads
again; with no progress for BRIDGE_CLIENT_STALL_TIMEOUT the client is reset, as a request
thread's blocked write is. A stream ends here as gunicorn ends a response: the chunked
body's last chunk, the answer closed, and the connection back to the worker's main loop.
"""

import concurrent.futures
import heapq
import itertools
import logging
import os
import queue
import selectors
import socket
import threading
import time

log = logging.getLogger(__name__)

_END = b"0\r\n\r\n"  # a chunked body's last chunk
# Threads that close ended streams' answers (the upstream closed, the access line written, the
# usage queued: never a wait for Redis, which usage.py's writer thread does), so that a close
# that waits (a full log pipe) does not hold back the ends of the streams behind it.
CLOSERS = 4


class Parking:
    """A stream's place in the loop, and what its relay yields to wait for the upstream."""

    __slots__ = (
        "_loop",
        "_upstream",
        "timeout",
        "ready",
        "_conn",
        "_chunks",
        "_out",
        "_watching",
        "_timer",
        "_timer_at",
        "_deadline",
        "_ending",
        "_open",
        "_place",
        "_queued",
    )

    def __init__(self, loop, upstream):
        self._loop = loop
        self._upstream = upstream  # the upstream's socket
        self.timeout = 0.0
        self.ready = False  # resumed because the upstream socket is readable
        self._timer = None  # the token of its timer in the loop's heap, None: no timer
        self._timer_at = self._deadline = 0.0
        self._open = False
        self._place = True  # one of the loop's BRIDGE_STREAMS_PER_WORKER places, taken by parking()
        self._queued = False  # waiting for its next turn, with events in hand (later())

    def wait(self, timeout):
        """Itself, for the relay to yield: resume it when the upstream is readable or after `timeout` s."""
        self.timeout = timeout
        self.ready = False
        return self

    def later(self):
        """Itself, for the relay to yield: resume it at the loop's next turn, after the other streams."""
        self.timeout = None
        self.ready = False
        return self

    def start(self, conn):
        """Take the stream over (in the loop's thread) from the request thread that parked it."""
        self._open = True
        self._conn = conn
        self._chunks = conn.state.answer.chunks
        self._out = b""
        self._watching = None
        self._ending = False
        self._watch(self._upstream, selectors.EVENT_READ)
        self._parked()

    def go_on(self):
        """Its next turn, after later(): translate the events it holds (unless closed meanwhile)."""
        self._queued = False
        if self._open:
            self._resume()

    def on_event(self):
        """Its socket is ready: the upstream readable, or the client writable again."""
        if self._watching is self._upstream:
            self.ready = True
            self._resume()
        else:
            self._writable()

    def expired(self, token):
        """A timer ran out: the relay's wait, or the client's time to take a write."""
        if token != self._timer:
            return  # replaced by an earlier one
        self._timer = None
        if self._deadline > self._timer_at:  # moved later since the timer was set: wait on
            self._wait_until(self._deadline)
            return
        if self._watching is self._upstream:
            self._resume()
        else:
            self._loop.worker.deadlines.reset_stalled(self._conn)
            self._close(keepalive=False)

    def _resume(self):
        """Run the answer until the relay waits again, ends, or a write must wait for the client."""
        if self._queued:  # its turn comes from the loop's queue: not its socket's or a timer's call
            return
        response = self._conn.state.response
        while True:
            try:
                item = next(self._chunks)
            except StopIteration:
                self._end()
                return
            except Exception:  # after the head went out, as gunicorn does: logged, connection closed
                log.exception("Error handling request")
                self._close(keepalive=False)
                return
            if item is self:
                if self._watching is not self._upstream:
                    self._watch(self._upstream, selectors.EVENT_READ)
                self._parked()
                return
            if item:
                response.sent += len(item)
                self._out = b"%X\r\n%s\r\n" % (len(item), item) if response.chunked else item
                if not self._flush():
                    return

    def _parked(self):
        """The relay yielded its Parking: wait for the upstream, or for the next turn."""
        if self.timeout is None:
            self._queued = True
            self._loop.later(self)
        else:
            self._wait_until(time.monotonic() + self.timeout)

    def _flush(self):
        """Write what is pending without blocking: True once all of it is out."""
        try:
            sent = self._conn.sock.send(self._out, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:  # the client is gone (reset, broken pipe)
            self._close(keepalive=False)
            return False
        if sent == len(self._out):
            self._out = b""
            return True
        self._out = memoryview(self._out)[sent:]  # a view: the rest of a large write is not copied per send
        if self._watching is not self._conn.sock:
            self._watch(self._conn.sock, selectors.EVENT_WRITE)
        elif not sent:
            return False
        self._wait_until(time.monotonic() + self._loop.stall_timeout)  # no progress for this long: stalled
        return False

    def _wait_until(self, deadline):
        """Act (resume, or reset a stalled client) at `deadline`. Most deadlines only move later
        (a wait ended by an event, the next one begins), so the timer in the loop's heap stays
        and is moved on when it runs out: a heap entry per stream and wait interval, not per
        event."""
        self._deadline = deadline
        if self._timer is None or deadline < self._timer_at:
            self._timer, self._timer_at = self._loop.timer(self, deadline), deadline

    def _writable(self):
        if not self._flush():
            return
        if self._ending:
            self._close(keepalive=not self._conn.state.response.should_close())
        else:  # caught up: a later write that must wait starts a new stall timer
            self._watch(self._upstream, selectors.EVENT_READ)
            self._resume()

    def _end(self):
        self._ending = True
        if self._conn.state.response.chunked:
            self._out = _END
            if not self._flush():
                return
        self._close(keepalive=not self._conn.state.response.should_close())

    def release(self):
        """Give its place in the loop back: its relay has ended (parked or not, whatever happened)."""
        if self._place:
            self._place = False
            self._loop.places.release()

    def _watch(self, sock, events):
        selector = self._loop.selector
        if self._watching is not None:
            selector.unregister(self._watching)
        selector.register(sock, events, self)
        self._watching = sock

    def abort(self):
        """Close the stream after a bug in the loop's own handling of it."""
        if self._open:
            self._close(keepalive=False)

    def _close(self, keepalive):
        """Leave the loop, then close the answer and give the connection back on the loop's
        closer thread: closing writes the access record, which may wait for the log, and no
        other stream may wait meanwhile."""
        self._open = False
        self._timer = None  # no timer acts on it any more
        try:
            if self._watching is not None:
                self._loop.selector.unregister(self._watching)
                self._watching = None
        finally:
            self._loop.closer.submit(self._loop.finish, self._conn, keepalive)


class StreamLoop:
    """The worker's stream loop: its thread, its epoll, and the parked streams' timers."""

    def __init__(self, worker, capacity, stall_timeout):
        self.worker = worker
        # Taken by the request thread that may park a stream, not when the loop starts it:
        # streams parking at the same moment must not all pass a count the loop has not raised.
        self.places = threading.BoundedSemaphore(capacity)
        self.stall_timeout = stall_timeout
        self.selector = selectors.DefaultSelector()
        self._incoming = queue.SimpleQueue()
        self._wake, self._waker = os.pipe()
        os.set_blocking(self._wake, False)
        os.set_blocking(self._waker, False)
        self.selector.register(self._wake, selectors.EVENT_READ, None)
        self._timers = []  # heap of (deadline, token, parking); a token no longer the parking's is stale
        self._later = []  # streams with events in hand, for the next turn (Parking.later)
        self._tokens = itertools.count()
        self.closer = concurrent.futures.ThreadPoolExecutor(CLOSERS, thread_name_prefix="stream-end")
        threading.Thread(target=self._run, name="stream-loop", daemon=True).start()

    def parking(self, upstream):
        """A Parking for a stream reading `upstream`, holding one of the loop's places until its
        relay ends (Parking.release), or None when the loop is full: the stream then keeps its
        request thread."""
        return Parking(self, upstream) if self.places.acquire(blocking=False) else None

    def adopt(self, conn):
        """Hand over a parked stream (any thread): the loop starts it at its next wake-up."""
        self._incoming.put(conn)
        try:
            os.write(self._waker, b"\0")
        except BlockingIOError:  # the pipe is full of wake-ups already
            pass

    def finish(self, conn, keepalive):
        """Close a stream's answer and hand its connection back to the worker, whatever happens."""
        answer = conn.state.answer
        answer.parking = None
        try:
            answer.close()
        except Exception:
            log.exception("Error closing a stream")
            keepalive = False
        finally:
            conn.state.answer = None  # what the answer holds goes with it
            self.worker.unparked(conn, keepalive)

    def later(self, parking):
        """Resume `parking` (go_on) at the next turn, after the streams ready by then."""
        self._later.append(parking)

    def timer(self, parking, deadline):
        """Call parking.expired(token) at `deadline` (time.monotonic()); returns the token."""
        token = next(self._tokens)
        heapq.heappush(self._timers, (deadline, token, parking))
        return token

    def _adopt(self):
        try:
            os.read(self._wake, 4096)
        except BlockingIOError:
            pass
        while True:
            try:
                conn = self._incoming.get_nowait()
            except queue.Empty:
                return
            _guarded(conn.state.parking, conn.state.parking.start, conn)

    def _run(self):
        """Turn after turn: each ready stream's step, then each stream that had events left after
        its step in the last turn (which a step of this turn puts off to the next)."""
        timers = self._timers
        while True:
            later, self._later = self._later, []
            timeout = 0.0 if later else max(0.0, timers[0][0] - time.monotonic()) if timers else None
            for key, _ in self.selector.select(timeout):
                parking = key.data
                if parking is None:
                    self._adopt()
                else:
                    _guarded(parking, parking.on_event)
            for parking in later:
                _guarded(parking, parking.go_on)
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, token, parking = heapq.heappop(timers)
                _guarded(parking, parking.expired, token)


def _guarded(parking, step, *args):
    """Run one step of a stream; a bug in it closes that stream, never the loop."""
    try:
        step(*args)
    except Exception:
        log.exception("stream loop: closing a stream after an error")
        try:
            parking.abort()
        except Exception:
            log.exception("stream loop: a stream could not be closed")
