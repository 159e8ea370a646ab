"""How a stream leaves its request thread for the worker's stream loop: the hand-over's contract.

Under gunicorn the app finds the worker's stream loop (bridge/serve/stream_loop.py) in its
environ (STREAM_LOOP; none on TLS or HTTP/2 connections), and a stream's relay
(bridge/serve/streaming.py) that got a place in it yields its Parking, instead of bytes,
wherever it would wait for its upstream: the Parking travels in the answer's body, the one
path from the relay to the worker. Then, in turn:

1. The worker's own layer, the outermost (Answer, put around the app by ThreadWorker.admit),
   meets the Parking and raises Parked, a BaseException, which gthread's handle_request lets
   through; the close() it calls on its way out is ignored while the stream is parked.
2. The request thread sends the answer's head (park) and ends; its thread counts free.
3. The main loop (finish_request) hands the connection to the stream loop instead of the
   poller, and the loop iterates the body on from where the thread stopped (Answer.chunks),
   writing its bytes and waiting on each Parking, until it ends.
4. A closer thread of the loop closes the answer, and with it every layer, and gives the
   connection back to the main loop (ThreadWorker.unparked), as if its thread had ended the
   request.

So every WSGI layer around the app's wsgi_app - the bridge's access record (observability)
and per-client count (admission) are two, werkzeug's Response a third, an operator's
middleware set in the app factory another - must hand each item of the body on as it is, one
for one, and pass close() on: `for item in body: yield item`, or an iterator returning
next(body). It may look at an item (admission gives a client's count back at the Parking).
But a layer that hands on only bytes keeps the stream on its request thread, where the
relay, resumed at once instead of after its wait, polls its upstream without ever waiting:
a thread held, and busy, for the stream's whole length. A layer that joins, encodes or
measures the items fails the stream: a Parking is not bytes. Once a stream is parked, a
layer's code runs on the stream loop's thread and its close() on a closer thread, so what it
keeps per request must not live in the request thread (thread-locals, context variables).
A layer put around the app after the worker loaded it, outside Answer, sees the body only up
to the first Parking: its iteration ends there, and the loop goes on beneath it.
tests/serve/test_handover.py serves the app behind a layer handing every item on, and behind
one handing on bytes only.
"""

from gunicorn.http.wsgi import Response

from .stream_loop import Parking


class Parked(BaseException):
    """Raised through gthread's handle_request when the answer's relay waits in the stream loop:
    not an Exception, which gthread would take for the app's error and close the connection."""


class Answer:
    """The app's answer as the worker iterates it, calling `free` as its last chunk goes to
    gunicorn's `response` (known by its Content-Length; else at its end, or when closed before
    it), and raising Parked when the relay yields its Parking (the stream loop iterates
    `chunks` then). A body that comes whole in one chunk goes out with the head, in one write."""

    def __init__(self, body, free, response):
        self._body = body
        self.chunks = iter(body)
        self._free = free
        self._response = response
        self.parking = None  # the Parking it yielded: the stream loop closes it, not gthread

    def __iter__(self):
        return self

    def __next__(self):
        try:
            item = next(self.chunks)
        except StopIteration:
            self._free()
            raise
        if item.__class__ is Parking:
            self.parking = item
            raise Parked
        response = self._response
        length = response.response_length
        if length is not None and response.sent + len(item) >= length:
            self._free()  # before the write: once the client has it all, its next request may come
            if len(item) == length <= JOINED_BODY and _writes_its_own_head(response):
                _send_with_head(response, item)
        return item

    def close(self):
        if self.parking is not None:
            return
        try:
            if hasattr(self._body, "close"):
                self._body.close()
        finally:
            self._free()


# A body up to this size goes out in the one write that carries its head (one system call and
# one segment instead of two), an answer's here and an upstream request's (gateway/upstream.py);
# a larger one is not copied to be joined.
JOINED_BODY = 64 * 1024


class _KeptHead:
    """Stands in for the client's socket while gunicorn's Response writes its head: keeps it."""

    data = b""

    def sendall(self, data):
        self.data = data


def _writes_its_own_head(response):
    """Whether gunicorn's `response` has its head still to write, on its socket (HTTP/1; an
    HTTP/2 one writes through its connection's framing), and a body to write after it."""
    return response.__class__ is Response and not response.headers_sent and not response._omits_body


def _send_with_head(response, body):
    """Send gunicorn's `response`, head and whole `body`, in one write where gunicorn would make
    two: its send_headers writes the head to a stand-in, and its write of the body then finds it
    all sent (Response.sent) and writes nothing."""
    sock, response.sock = response.sock, _KeptHead()
    try:
        response.send_headers()
        head = response.sock.data
    finally:
        response.sock = sock
    sock.sendall(head + body)
    response.sent = len(body)


def park(state):
    """The answer waits for its upstream (Parked, in its request thread): its head goes out now,
    from this thread, and the rest from the stream loop once finish_request hands the
    connection over. `state` is the connection's ConnState."""
    answer = state.answer
    try:
        state.response.send_headers()  # no-op once the first bytes went out
    except BaseException:
        answer.parking = None
        answer.close()
        raise
    state.parking = answer.parking
