"""gunicorn's threaded (gthread) worker, with admission control and client deadlines.

gthread hands every connection to a pool of BRIDGE_THREADS threads. An open stream holds its
thread for its whole length, and when all are held a new request - a health check too - waits
silently in the pool's queue until a stream ends. It reads a request's head and body with
blocking reads and no deadline, and on SIGTERM keeps its listening sockets open until the
drain is over, so the kernel queues new connections that nobody accepts. This worker keeps
gthread's main loop and threads; its overrides hand each change to an object of its own:

- Capacity (ThreadQueue, thread_queue.py): a request that finds every thread busy waits for
  one, holding none, in arrival order, for at most BRIDGE_QUEUE_TIMEOUT: the thread that
  frees next starts it at once. Past that wait (or its head's deadline) it is served by one
  of SPARE_THREADS threads instead, with OVER_CAPACITY in its environ, and the app
  (bridge/policy/admission.py) answers it at once with a 503 and `retry-after`, in the
  client's protocol. Health checks and scrapes (GET of the app's `always_answered` paths,
  told by peeking at the head no thread has read yet) never wait: they go to the spare
  threads at once, where the app answers them as usual. A request whose client closed while
  it waited is dropped unread, so nothing goes upstream for it. The wait is bounded by
  gunicorn's worker_connections: a waiting request is an accepted connection, and the worker
  accepts no more beyond that many.
- Read deadlines and write stalls (Deadlines, deadlines.py): a new connection waits for its
  first byte on the poller, holding no thread; a request whose head or body is late is cut,
  and a client that stops reading is reset.
- Streams (handover.py, stream_loop.py): a stream's relay that waits for its upstream leaves
  its thread, and the connection goes to the worker's stream loop instead of back to the
  poller; the loop gives it back, as a finished request, when the stream ends.
- Stop: the worker takes the connections the kernel already queued and closes its listening
  sockets at once (the master closed its own copy before signalling), so new connections are
  refused, which nginx answers with an immediate 502, while open requests drain as before.
  On a reload (SIGHUP) the master and the new workers keep the socket open and accepting.
  A worker whose master died stops the same way.
- gunicorn's own answers (a bad request line or header, an unmet `Expect`) are JSON errors.

What the worker keeps per connection is one ConnState (connection.py), attached where it
first sees the connection, each field with the threads that write it.

Written against gunicorn GUNICORN_VERSION's gthread: it extends ThreadWorker's enqueue_req,
finish_request, on_client_socket_readable, on_pending_socket_readable, murder_pending, handle,
handle_request, set_accept_enabled, is_parent_alive, get_thread_pool, load_wsgi, handle_error
(the base Worker's: it writes its page with util.write_error, which calls the socket's
gettimeout and sendall, status line first) and wait_for_and_dispatch_events (its main loop's
wait, called with at most 1 s), uses its tpool, pending_conns, keepalived_conns, nr_conns,
poller, method_queue, accept and _keepalive_after, TConn's initialized, data_ready, timeout,
is_http2, sock, client and parser (its unreader's buf, as gthread's finish_request reads it),
and Response's start_response, send_headers (which writes the head to its sock with one
sendall), headers_sent, response_length, chunked, sent, _omits_body, force_close and
should_close (a bound method of the Response is the start_response an app gets: its
__self__), and that handle_request lets a BaseException through after its `finally`.
tests/serve/test_worker.py fails on any other gunicorn version: read the new gthread.py
against this list before changing GUNICORN_VERSION.
"""

import contextlib
import json
import select
import selectors
import socket
import threading
import time
from concurrent import futures
from functools import partial

import gunicorn
from gunicorn import util
from gunicorn.workers import gthread

# Only light imports here: the gunicorn master imports this module to find the worker class,
# before the app (and its metrics, which need PROMETHEUS_MULTIPROC_DIR set) are loaded.
from ..protocols.errors import ANTHROPIC, OPENAI, BridgeError
from .connection import ConnState
from .deadlines import Deadlines
from .environ import CLOSES_ANSWERS, OVER_CAPACITY, STREAM_LOOP, THREADS
from .handover import Answer, Parked, park
from .stream_loop import StreamLoop
from .thread_queue import THREAD, WAITING, ThreadQueue

GUNICORN_VERSION = "27.0.1"
# Threads for what arrives while every request thread is busy: each answer takes a
# millisecond, or at most the header deadline for a client that sends its head slowly.
SPARE_THREADS = 4


class ThreadWorker(gthread.ThreadWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.queue = None  # the request threads' count and the requests waiting for one (ThreadQueue)
        self.deadlines = None  # read deadlines and the send timeout (bridge/serve/deadlines.py)
        self.always_answered = ()  # request heads that never wait: health checks and scrapes
        self.head_peek = 0  # bytes of a head enough to tell them
        self.queue_wait = None  # the queue's wait metric (bridge/serve/observability.py), once the app is loaded
        self.spare = None
        self.settings = None
        self.serving = threading.local()  # the connection this thread serves, for admit()
        self.streams = None  # the stream loop (bridge/serve/stream_loop.py), when streams may park

    def get_thread_pool(self):
        """The queue counts BRIDGE_THREADS requests busy; the pool has as many threads again,
        started only when needed, for threads that counted their request free before its last
        write (handover.Answer) and are still in it, to a client that may read slowly: the
        request started on their count must not wait in the pool's queue behind them."""
        self.spare = futures.ThreadPoolExecutor(SPARE_THREADS, thread_name_prefix="spare")
        return futures.ThreadPoolExecutor(2 * self.cfg.threads)

    def load_wsgi(self):
        super().load_wsgi()
        if gunicorn.__version__ != GUNICORN_VERSION:
            self.log.warning(
                "bridge.serve.worker was written against gunicorn %s, this is %s",
                GUNICORN_VERSION,
                gunicorn.__version__,
            )
        bridge = self.wsgi.extensions["bridge"]
        self.settings = bridge.settings  # the bridge app's, read and validated once
        self.deadlines = Deadlines(self.settings, self.log)
        self.always_answered = tuple(f"GET {path}{end}".encode() for path in bridge.always_answered for end in " ?")
        self.head_peek = max(map(len, self.always_answered))
        from .observability import QUEUE_WAIT, QUEUED

        self.queue = ThreadQueue(self.cfg.threads, self.settings.queue_timeout, QUEUED)
        self.queue_wait = QUEUE_WAIT
        for outcome in ("served", "refused"):  # at zero: an alert on refusals tells none from absent
            QUEUE_WAIT.labels(outcome)
        if self.settings.streams_per_worker and not self.cfg.is_ssl:  # the loop writes to plain sockets only
            self.streams = StreamLoop(self, self.settings.streams_per_worker, self.settings.client_stall_timeout)
        self.wsgi.wsgi_app = partial(self.admit, self.wsgi.wsgi_app)

    def enqueue_req(self, conn):
        now = time.monotonic()
        if not conn.initialized and not conn.data_ready:
            self.wait_for_first_byte(conn, now)
            return
        self.deadlines.reading_head(conn, now)
        conn.state.parking = None
        conn.state.waited = False
        placed = self.queue.take(conn, now, lambda: not self.answered_at_once(conn))
        if placed != WAITING:
            self.serve(conn, placed == THREAD)

    def serve(self, conn, holds_thread, allowed=0.0):
        """Hand the request to a request thread (counted busy by the queue) or to a spare one,
        saying how long it was let wait for a thread (for the refusal's text)."""
        conn.state.holds_thread = holds_thread
        conn.state.over_capacity = None if holds_thread else allowed
        future = (self.tpool if holds_thread else self.spare).submit(self.handle, conn)
        future.add_done_callback(lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def answered_at_once(self, conn):
        """Whether the request is a health check or a scrape, which must not wait behind the
        queue: told from the head's first bytes, peeked at as no thread has read them yet (or
        read already, after the previous request on a connection that pipelines). Too few bytes
        in (or a TLS socket, which takes no flags) and it waits with the rest."""
        head = conn.parser.unreader.buf.getvalue()[: self.head_peek] if conn.parser is not None else b""
        if not head:
            try:
                head = conn.sock.recv(self.head_peek, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (OSError, ValueError):
                return False
        return head.startswith(self.always_answered)

    def wait_for_and_dispatch_events(self, timeout):
        """Wake for the oldest waiting request's deadline too, not only at the 1 s tick: murder_pending
        refuses it right after."""
        expiry = self.queue.next_expiry()
        if expiry is not None:
            timeout = min(timeout, max(expiry - time.monotonic(), 0.0))
        super().wait_for_and_dispatch_events(timeout)

    def wait_for_first_byte(self, conn, now):
        """Park a new connection on the poller until it sends something, as gthread parks one
        that sent nothing for 5 s: idle connections must not hold the threads that count."""
        conn.state = ConnState()  # the one place: every connection starts here
        self.deadlines.connected(conn, now)  # murder_pending closes it at its `timeout`
        self.pending_conns.append(conn)  # stays sorted: every entry gets the same timeout
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def on_client_socket_readable(self, conn, client):
        if not self.closed_by_client(conn, self.keepalived_conns):
            super().on_client_socket_readable(conn, client)

    def on_pending_socket_readable(self, conn, client):
        if not self.closed_by_client(conn, self.pending_conns):
            super().on_pending_socket_readable(conn, client)

    def closed_by_client(self, conn, waiting):
        """Close here a connection waiting on the poller that its client closed (nginx ending
        an idle one, a port probe). gthread hands it to a thread to find the end, which counts
        as busy meanwhile: a request arriving then for the last free thread would be refused."""
        try:
            if conn.sock.recv(1, socket.MSG_PEEK):
                return False
        except BlockingIOError:  # nothing to read after all
            return False
        except OSError:  # reset
            pass
        self.poller.unregister(conn.sock)
        waiting.remove(conn)
        self.nr_conns -= 1
        conn.close()
        return True

    def finish_request(self, conn, fs):
        self.deadlines.done(conn)
        if conn.state.parking is not None:  # its thread is done with it: the stream loop takes it over
            self.streams.adopt(conn)
            return
        super().finish_request(conn, fs)

    def unparked(self, conn, keepalive):
        """A parked stream's end (from the stream loop): the connection back to the main loop,
        as if its thread had ended the request."""
        conn.state.parking = None
        done = futures.Future()
        try:
            done.set_result(self._keepalive_after(conn, keepalive))
        except Exception:  # the request body could not be drained: the connection is not kept
            done.set_result(False)
        self.method_queue.defer(self.finish_request, conn, done)

    def murder_pending(self):
        """Close connections that sent nothing in time (gthread's), refuse requests that waited
        for a thread as long as they may, and cut requests whose head or body is late: the main
        loop calls this every second, and when the oldest wait is over."""
        super().murder_pending()
        now = time.monotonic()
        late = []
        for conn, setting in self.deadlines.late(now):
            waited = self.queue.withdraw(conn)  # still waiting: its head is late all the same
            if waited is not None:
                late.append(waited)
            self.deadlines.cut(conn, setting)  # before any thread may take it
        late += self.queue.expire(now)
        for waited in late:
            self.refuse(waited, now)

    def refuse(self, waited, now):
        """A request out of the queue that no thread took in time: to the spare threads, for the 503."""
        try:
            self.waited_for(waited, "refused", now)
        finally:
            self.serve(waited.conn, holds_thread=False, allowed=waited.allowed)

    def waited_for(self, waited, outcome, now):
        """Count a wait over, by the one thread that took the request out of the queue."""
        self.queue_wait.labels(outcome).observe(now - waited.since)
        waited.conn.state.waited = True

    def handle(self, conn):
        self.serving.conn = conn
        try:
            if conn.state.waited and peer_closed(conn.sock):  # its client left while it waited
                return False
            return super().handle(conn)
        finally:
            self.free(conn)

    def free(self, conn):
        """Count the request's thread free: when the answer's last byte is handed to gunicorn,
        before the client can see the end (its next request must not find the thread busy),
        or when handle() returns. Not from finish_request: the main loop runs that later.
        The oldest waiting request, if any, takes the thread over (still counted busy) at once."""
        if conn.state.holds_thread:
            conn.state.holds_thread = False
            waited = self.queue.free()
            if waited is None:
                return
            try:
                self.waited_for(waited, "served", time.monotonic())
            finally:  # served whatever the metrics do, or the thread and the request would be lost
                self.serve(waited.conn, holds_thread=True)

    def handle_request(self, req, conn):
        try:
            keepalive = super().handle_request(req, conn)
        except BlockingIOError:  # a send outlasted SO_SNDTIMEO
            self.deadlines.reset_stalled(conn)
            return False
        except Parked:
            park(conn.state)
            return False
        return keepalive

    def handle_error(self, req, client, addr, exc):
        """What gunicorn answers itself (a request line or header it cannot parse, an `Expect`
        other than 100-continue, a head over its limits, a 500 outside the app) as a JSON error
        in the protocol its path tells (OpenAI's when no path was read), not as an HTML page.
        gunicorn still picks the status and logs; its page goes to a stand-in, read for the status."""
        page = _Page()
        super().handle_error(req, page, addr, exc)
        status, reason = page.status_line()
        path = getattr(req or getattr(exc, "req", None), "path", None) or ""
        protocol = ANTHROPIC if path.removeprefix("/v1").startswith("/messages") else OPENAI  # as app.client_protocol
        kind = "api_error" if status >= 500 else "permission" if status == 403 else "invalid_request"
        message = str(exc) if status < 500 else "internal error in the bridge's HTTP server"
        body = json.dumps(BridgeError(kind, message, status=status).body_for(protocol)).encode()
        head = f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        with contextlib.suppress(OSError):  # the client is gone
            util.write_nonblock(client, f"{head}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body)

    def admit(self, app, environ, start_response):
        """WSGI middleware around the app: mark a request served beyond capacity, and start its
        body's deadline (or end the head's, when it has no body)."""
        conn = self.serving.conn
        state = conn.state
        state.response = start_response.__self__  # gunicorn's Response, for park and the stream loop
        if state.over_capacity is not None:
            environ[OVER_CAPACITY] = state.over_capacity
        start_response = self.deadlines.reading_body(state, environ, start_response)
        environ[CLOSES_ANSWERS] = True
        environ[THREADS] = self.cfg.threads
        if self.streams is not None and not conn.is_http2:
            environ[STREAM_LOOP] = self.streams
        state.answer = Answer(app(environ, start_response), partial(self.free, conn), state.response)
        return state.answer

    def is_parent_alive(self):
        """A worker whose master died stops as on SIGTERM (its waits shortened, its listeners
        closed), not with gthread's plain drain, which lets a wait outlast the worker."""
        if super().is_parent_alive():
            return True
        self.alive = False
        return False

    def set_accept_enabled(self, enabled):
        super().set_accept_enabled(enabled and self.alive)
        if not self.alive and self.sockets:
            self.close_listeners()

    def close_listeners(self):
        """Stopping: accept what the kernel already queued (it is served, with Connection:
        close), then close the listening sockets, so that once the master and every worker
        have closed theirs the kernel refuses new connections instead of queueing them.
        Requests waiting for a thread keep waiting, served or refused before half the drain
        (graceful_timeout) is over, so that none is still waiting when the worker exits."""
        self.queue.shorten(self.cfg.graceful_timeout / 2, time.monotonic())
        from .observability import write_access_lines_at_once  # loaded with the app, long before

        write_access_lines_at_once()
        for listener in self.sockets:
            listener.setblocking(False)
            while select.select([listener], [], [], 0)[0]:
                self.accept(listener)  # gthread's: another worker taking it first is fine
            listener.close()
        self.sockets = []


class _Page:
    """A client socket for gunicorn's handle_error to write its HTML page to."""

    def __init__(self):
        self.written = b""

    def gettimeout(self):
        return 0.0

    def sendall(self, data):
        self.written += data

    def status_line(self):
        """(status, reason) of the page's `HTTP/1.1 417 Expectation Failed`."""
        _, status, reason = self.written.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        return int(status), reason


def peer_closed(sock):
    """Whether the client has closed its side (nginx never half-closes a request it still wants).
    Only a closed side counts, never bytes to read: a kept-alive connection may hold the client's
    next request already. Also what a call waiting for its upstream watches (bridge/gateway/upstream.py)."""
    return polled(sock, select.POLLRDHUP)


def polled(sock, events):
    """Whether `events` (or a hang-up or an error, which always count) are on `sock` now."""
    poll = select.poll()
    poll.register(sock, events)
    return bool(poll.poll(0))
