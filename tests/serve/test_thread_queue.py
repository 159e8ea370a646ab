"""The worker's request threads and the requests waiting for one (bridge/serve/thread_queue.py),
without gunicorn: connections are plain objects, times are given. The worker around it is
tested through gunicorn in tests/deploy/test_deploy_admission.py."""

import threading
from concurrent import futures

import prometheus_client

from bridge.serve.thread_queue import SPARE, THREAD, WAITING, ThreadQueue


def queue(threads=2, timeout=2.0):
    """A ThreadQueue with its own gauge, read back with `waiting(queue)`."""
    registry = prometheus_client.CollectorRegistry()
    made = ThreadQueue(threads, timeout, prometheus_client.Gauge("queued", "waiting", registry=registry))
    made.registry = registry
    return made


def waiting(made):
    """The gauge's value: requests waiting right now."""
    return made.registry.get_sample_value("queued")


def may_wait():
    return True


def test_requests_take_the_free_threads_then_wait_in_arrival_order():
    threads = queue(threads=2)
    assert [threads.take(name, 0.0, may_wait) for name in "ab"] == [THREAD, THREAD]
    assert [threads.take(name, 0.1, may_wait) for name in "cd"] == [WAITING, WAITING]
    assert threads.busy == 2 and waiting(threads) == 2
    assert threads.free().conn == "c"  # the oldest: the freed thread is c's at once
    assert threads.busy == 2 and waiting(threads) == 1
    assert threads.free().conn == "d"
    assert threads.free() is None and threads.free() is None  # nothing waits: counted free
    assert threads.busy == 0 and waiting(threads) == 0


def test_a_freed_thread_goes_to_the_waiting_request_not_to_a_newcomer():
    threads = queue(threads=1)
    threads.take("a", 0.0, may_wait)
    threads.take("b", 0.0, may_wait)
    assert threads.free().conn == "b"
    assert threads.take("c", 0.0, may_wait) == WAITING  # b holds the thread: c waits behind it


def test_only_a_request_that_finds_every_thread_busy_is_asked_whether_it_may_wait():
    threads = queue(threads=1)
    asked = []

    def health_check():
        asked.append(True)
        return False

    assert threads.take("a", 0.0, health_check) == THREAD and not asked
    assert threads.take("healthz", 0.0, health_check) == SPARE and asked == [True]
    assert waiting(threads) == 0 and threads.busy == 1


def test_with_no_queue_timeout_nothing_waits():
    threads = queue(threads=1, timeout=0)
    threads.take("a", 0.0, may_wait)
    assert threads.take("b", 0.0, may_wait) == SPARE


def test_a_wait_is_given_up_once_it_is_over_oldest_first():
    threads = queue(threads=1, timeout=2.0)
    threads.take("a", 0.0, may_wait)
    threads.take("b", 1.0, may_wait)
    threads.take("c", 1.5, may_wait)
    assert threads.next_expiry() == 3.0
    assert threads.expire(2.9) == []
    (over,) = threads.expire(3.2)
    assert (over.conn, over.since, over.allowed) == ("b", 1.0, 2.0)
    assert threads.next_expiry() == 3.5 and waiting(threads) == 1
    assert [w.conn for w in threads.expire(10.0)] == ["c"]
    assert threads.next_expiry() is None and threads.busy == 1  # a still holds its thread


def test_a_late_request_is_withdrawn_wherever_it_waits():
    threads = queue(threads=1)
    for name in "abcd":
        threads.take(name, 0.0, may_wait)
    assert threads.withdraw("c").conn == "c"
    assert threads.withdraw("c") is None and threads.withdraw("a") is None  # a holds a thread
    assert waiting(threads) == 2
    assert [threads.free().conn, threads.free().conn, threads.free()] == ["b", "d", None]


def test_a_stopping_worker_shortens_every_wait_begun_and_to_come():
    threads = queue(threads=1, timeout=30.0)
    threads.take("a", 0.0, may_wait)
    threads.take("b", 0.0, may_wait)
    threads.shorten(5.0, now=1.0)
    threads.take("c", 2.0, may_wait)
    assert [(w.conn, w.allowed) for w in threads.expire(7.0)] == [("b", 6.0), ("c", 5.0)]
    threads.shorten(60.0, now=8.0)  # never longer
    assert threads.timeout == 5.0


def test_every_request_is_served_once_while_threads_free_as_requests_arrive():
    """The main loop's takes against request threads freeing, each freed thread serving the
    request it is handed: none is lost or served twice, and the count ends at zero."""
    threads = queue(threads=4, timeout=3600.0)
    served = []
    lock = threading.Lock()
    pool = futures.ThreadPoolExecutor(8)

    def serve(conn):
        while conn is not None:
            with lock:
                served.append(conn)
            waited = threads.free()
            conn = waited and waited.conn

    for conn in range(2000):
        if threads.take(conn, 0.0, may_wait) == THREAD:
            pool.submit(serve, conn)
    pool.shutdown(wait=True)
    assert sorted(served) == list(range(2000))
    assert threads.busy == 0 and waiting(threads) == 0
