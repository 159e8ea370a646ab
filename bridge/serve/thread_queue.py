"""The worker's request threads as a count, and the requests waiting for one (bridge/serve/worker.py).

BRIDGE_THREADS requests hold a thread at once; one that finds them all busy waits here,
holding none, in arrival order, for at most BRIDGE_QUEUE_TIMEOUT. The thread that frees next
takes the oldest waiting request over at once, without counting itself free in between, so
no newcomer can pass it. A request that waited as long as it may is given up on (the worker
has it refused by a spare thread). The main loop takes and gives up; request threads free.
Connections are opaque here: the queue holds them, it never reads or writes them.
"""

import collections
import dataclasses
import threading

# Where take() puts a request.
THREAD = "thread"  # it holds a request thread, counted busy
WAITING = "waiting"  # it waits for free() to hand it a thread, or expire() to give up on it
SPARE = "spare"  # every thread is busy and it may not wait: a spare thread answers it


@dataclasses.dataclass(slots=True)
class Waited:
    """A request out of the queue: when it came in, and the longest it was let wait."""

    conn: object
    since: float
    until: float

    @property
    def allowed(self):
        """The wait it was allowed (BRIDGE_QUEUE_TIMEOUT, or less once the worker stops)."""
        return self.until - self.since


class ThreadQueue:
    """`threads` request threads counted busy or free, and the requests waiting for one.

    `queued` is a gauge set to the number waiting whenever it changes (bridge_queued_requests).
    Times are time.monotonic()'s, given by the caller.
    """

    def __init__(self, threads, timeout, queued):
        self.threads = threads
        self.timeout = timeout  # BRIDGE_QUEUE_TIMEOUT, shortened when the worker stops (shorten)
        self.busy = 0  # requests holding a thread, spare ones not counted
        self._waiting = collections.OrderedDict()  # connection: Waited, oldest first
        self._lock = threading.Lock()
        self._queued = queued

    def take(self, conn, now, may_wait):
        """THREAD, WAITING or SPARE (above) for a request arriving `now`. `may_wait()` is asked
        only when every thread is busy, under the queue's lock."""
        with self._lock:
            if self.busy < self.threads:
                self.busy += 1
                return THREAD
            if not self.timeout or not may_wait():
                return SPARE
            self._waiting[conn] = Waited(conn, now, now + self.timeout)
            self._queued.set(len(self._waiting))
            return WAITING

    def free(self):
        """A request thread is done with its request: the oldest waiting request, which takes
        the thread over (still counted busy), or None, and the thread is counted free."""
        with self._lock:
            if not self._waiting:
                self.busy -= 1
                return None
            _, waited = self._waiting.popitem(last=False)
            self._queued.set(len(self._waiting))
        return waited

    def withdraw(self, conn):
        """Take `conn` out of the queue (its head is late): its Waited, or None if it is not waiting."""
        with self._lock:
            waited = self._waiting.pop(conn, None)
            if waited is not None:
                self._queued.set(len(self._waiting))
        return waited

    def expire(self, now):
        """The requests that waited as long as they may, taken out of the queue (Waited each)."""
        over = []
        if not self._waiting:  # read unlocked: only the main loop, which calls this, adds to it
            return over
        with self._lock:
            while self._waiting and next(iter(self._waiting.values())).until <= now:
                over.append(self._waiting.popitem(last=False)[1])
            if over:
                self._queued.set(len(self._waiting))
        return over

    def next_expiry(self):
        """When the oldest wait is over, or None when nothing waits."""
        if not self._waiting:  # read unlocked, as in expire()
            return None
        with self._lock:
            return next(iter(self._waiting.values())).until if self._waiting else None

    def shorten(self, most, now):
        """No wait, begun or to come, lasts past `most` seconds from `now` (the worker stops)."""
        with self._lock:
            self.timeout = min(self.timeout, most)
            until = now + self.timeout
            for waited in self._waiting.values():
                waited.until = min(waited.until, until)
