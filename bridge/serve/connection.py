"""What the worker (bridge/serve/worker.py) keeps per connection beside gunicorn's own TConn.

One ConnState, attached as `conn.state` where the worker first sees a connection (its
wait_for_first_byte) and never replaced: every field the worker adds is declared here, with
the threads that write it. They are gthread's main loop, a request thread (one of the pool's,
or a spare one) serving the connection's request, the stream loop's thread and its closer
threads (bridge/serve/stream_loop.py). A request is handed from one to the next (the main loop
submits it, the thread's end is deferred back to the main loop, a parked stream goes through
the loop's queue), so at most one of them writes a field at a time, except `deadline` and
`cut`, which the main loop writes while a request thread reads or writes them: each is one
reference, read once where it is used.
"""

import dataclasses


@dataclasses.dataclass(slots=True)
class ConnState:
    # -- read deadlines: the main loop cuts a request whose head or body is late --
    # (time.monotonic() it must be in by, the setting that says so), None: no deadline runs.
    # The main loop sets the head's (enqueue_req) and clears it once it cut; the request
    # thread sets the body's (admit) and clears it at the body's last byte (_Body).
    deadline: tuple | None = None
    # The setting whose deadline cut the read: set by the main loop (cut), read by the
    # request thread (its body reads as a 408, its answer closes the connection).
    cut: str | None = None

    # -- capacity (bridge/serve/thread_queue.py) --
    # The request is counted busy in the worker's queue until freed, once. Set by whichever
    # thread hands it to a thread (the main loop, or the request thread that frees its own and
    # hands it on: serve); cleared by the request thread (free).
    holds_thread: bool = False
    # Served by a spare thread beyond capacity: the seconds it was let wait for a thread
    # (OVER_CAPACITY in its environ); None: it holds a counted thread. Written with holds_thread.
    over_capacity: float | None = None
    # It waited in the queue, so its client may have left meanwhile: cleared by the main
    # loop for each request (enqueue_req), set by the thread that took it out of the queue.
    waited: bool = False

    # -- the answer, and a stream's hand-over to the stream loop (bridge/serve/handover.py) --
    # gunicorn's Response: set by the request thread (admit); read by it and the stream loop.
    response: object = None
    # The app's answer as the worker iterates it (handover.Answer): set by the request thread
    # (admit); closed and cleared by a stream's closer thread (StreamLoop.finish).
    answer: object = None
    # The Parking of a stream its request thread handed over (handover.park): read by the
    # main loop (finish_request: to the stream loop, not the poller) and the stream loop
    # (adopt); cleared by a closer thread when the stream ends (unparked) and by the main
    # loop for each request.
    parking: object = None
