"""A request's read deadlines and its client's send timeout (bridge/serve/worker.py).

gthread reads a request's head and body with blocking reads and no deadline. Here a new
connection waits for its first byte on the poller, holding no thread; a request's head must
be in within BRIDGE_CLIENT_HEADER_TIMEOUT of the connection (or of a kept-alive connection's
next byte), and its body within BRIDGE_CLIENT_BODY_TIMEOUT of the head: whole deadlines, so a
client sending a byte a second is cut all the same. The main loop, which wakes every second,
shuts the reading side of a late request's socket: a late head is closed quietly, a late body
is answered 408 in the client's protocol.

Client sockets have a send timeout of BRIDGE_CLIENT_STALL_TIMEOUT (and the stream loop the
same deadline), so a client that stops reading is cut with one log line, not a traceback.
"""

import contextlib
import socket
import struct
import time

from ..protocols.errors import BridgeError


class Deadlines:
    """The deadlines' settings, the requests watched for them, and how a late one is cut.

    The main loop calls connected, reading_head, late, cut and done; the request thread
    reading_body; reset_stalled is called by whichever thread's write to the client stalled.
    """

    def __init__(self, settings, log):
        self.header = settings.client_header_timeout
        self.body = settings.client_body_timeout
        self.stall = settings.client_stall_timeout
        self.log = log  # gunicorn's
        self.watched = set()  # connections a thread serves or waits for: the main loop's only

    def connected(self, conn, now):
        """A new connection: its sends time out after BRIDGE_CLIENT_STALL_TIMEOUT, and it must
        send its head by BRIDGE_CLIENT_HEADER_TIMEOUT from now (gthread's `timeout`, at which
        murder_pending closes it while it sends nothing)."""
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval(self.stall))
        conn.timeout = now + self.header

    def reading_head(self, conn, now):
        """A request's head is to be read: due at a new connection's `timeout` (from its accept),
        or BRIDGE_CLIENT_HEADER_TIMEOUT from now on a kept-alive one; watched until done()."""
        due = conn.timeout if not conn.initialized else now + self.header
        conn.state.deadline = (due, "BRIDGE_CLIENT_HEADER_TIMEOUT")
        self.watched.add(conn)

    def reading_body(self, state, environ, start_response):
        """As the app is called (in the request thread): start the body's deadline, or end the
        head's when there is no body. Returns the start_response to give the app."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if not (length or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()):
            state.deadline = None
            return start_response
        state.deadline = (time.monotonic() + self.body, "BRIDGE_CLIENT_BODY_TIMEOUT")
        environ["wsgi.input"] = _Body(environ["wsgi.input"], state, length or None, self.body)
        return _closing_if_cut(state, start_response)

    def done(self, conn):
        """Its thread is done with the request."""
        self.watched.discard(conn)

    def late(self, now):
        """The watched requests whose deadline is over: (connection, setting) pairs."""
        over = []
        for conn in self.watched:
            deadline = conn.state.deadline  # once: a request thread may change it meanwhile
            if deadline is not None and deadline[0] <= now:
                over.append((conn, deadline[1]))
        return over

    def cut(self, conn, setting):
        """Stop reading a late request: its thread's read returns at once, as if the client had
        stopped sending (the head parser gives up quietly, the body reads as a 408); the
        writing side stays open for that answer."""
        conn.state.cut = setting
        conn.state.deadline = None
        self.log.info("client %s: request not in within %s; connection closed", _address(conn.client), setting)
        with contextlib.suppress(OSError):  # the client is gone already
            conn.sock.shutdown(socket.SHUT_RD)

    def reset_stalled(self, conn):
        """Cut a client that stopped reading for BRIDGE_CLIENT_STALL_TIMEOUT."""
        self.log.info(
            "client %s stopped reading for %ss (BRIDGE_CLIENT_STALL_TIMEOUT); connection reset",
            _address(conn.client),
            self.stall,
        )
        # Reset, not a graceful close: that would wait for a client that is not reading,
        # and the unsent bytes would linger in the kernel.
        with contextlib.suppress(OSError):  # the client may have reset it already
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.sock.shutdown(socket.SHUT_RD)


class _Body:
    """wsgi.input that ends the body's deadline at its last byte, and reads as a 408 in the
    client's protocol once the deadline cut it short."""

    def __init__(self, body, state, length, timeout):
        self._body = body
        self._state = state
        self._left = length  # None: chunked, ends with an empty read
        self._timeout = timeout

    def read(self, size=None):
        return self._checked(self._body.read, size)

    def readline(self, size=None):
        return self._checked(self._body.readline, size)

    def readlines(self, hint=None):
        return list(self)

    def __iter__(self):
        return iter(self.readline, b"")

    def _checked(self, read, size):
        try:
            data = read(size)
        except OSError:  # gunicorn's chunked reader, cut short
            if not self._state.cut:
                raise
        if self._state.cut:
            raise BridgeError(
                "invalid_request",
                f"the request body did not arrive within {self._timeout:g}s (BRIDGE_CLIENT_BODY_TIMEOUT)",
                status=408,
            ) from None
        if self._left is not None:
            self._left -= len(data)
            done = self._left <= 0
        else:
            done = not data and size != 0
        if done:
            self._state.deadline = None
        return data


def _closing_if_cut(state, start_response):
    """gunicorn's start_response, announcing `Connection: close` when the body's read was cut:
    the connection cannot carry another request."""

    def start(status, headers, exc_info=None):
        if state.cut:
            state.response.force_close()
        return start_response(status, headers, exc_info)

    return start


def timeval(seconds):
    """A struct timeval for SO_SNDTIMEO and SO_RCVTIMEO."""
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))


def _address(client):
    return client[0] if isinstance(client, tuple) else client
