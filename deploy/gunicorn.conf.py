"""gunicorn settings for bridge: threaded workers sized for long-lived streams.

Every knob an operator turns is an environment variable (documented in
deploy/systemd/bridge.env.example); command-line flags still win over this
file, which is how the tests choose ports.
"""

import ctypes
import gc
import glob
import logging
import os
import shutil
import tempfile


def _count(name, default, least=1):
    value = os.environ.get(name, str(default))
    if not value.isdigit() or int(value) < least:
        raise SystemExit(f"{name}: must be a whole number of at least {least}, got {value!r}")
    return int(value)


# The installed package's app factory, so what runs is what `pip install` put in the venv.
wsgi_app = "bridge.app:create_app()"
bind = os.environ.get("BRIDGE_BIND", "127.0.0.1:8080")
# gunicorn's gthread, with admission control and client deadlines (bridge/serve/worker.py).
worker_class = "bridge.serve.worker.ThreadWorker"
# Sized for a 2-core VM: one process per core (the GIL), and threads for the
# requests being served - a stream holds its thread only until the worker's
# stream loop takes it over (BRIDGE_STREAMS_PER_WORKER, below), so workers x
# threads is how many requests are translated or waited for at once; more wait
# for a thread up to BRIDGE_QUEUE_TIMEOUT, then are refused (503 with
# retry-after; health checks never wait).
# Threads are started only when needed; an idle one costs ~60 KiB.
workers = _count("BRIDGE_WORKERS", 2)
threads = _count("BRIDGE_THREADS", 256)
# gthread accepts no more than worker_connections connections per worker, those its threads
# serve and the idle kept-alive ones together, and keeps only worker_connections - threads
# alive: at gunicorn's default of 1,000, a worker of 1,000 threads served at most 1,000
# streams and kept no connection alive. Room for every thread, every stream parked in the
# worker's stream loop (BRIDGE_STREAMS_PER_WORKER, bridge/serve/stream_loop.py; the app validates
# it) and 1,000 idle connections beside.
worker_connections = threads + _count("BRIDGE_STREAMS_PER_WORKER", 1000, least=0) + 1000
# gthread's main thread heartbeats every second while the request threads do
# their work (ThreadWorker.run), so this restarts a worker whose main loop is
# stuck but never one busy with a long stream.
timeout = 30
# On SIGTERM (stop) or SIGHUP (reload) open requests get this long to finish;
# systemd's TimeoutStopSec must be longer (deploy/systemd/bridge.service).
graceful_timeout = _count("BRIDGE_GRACEFUL_TIMEOUT", 120)
# Longer than nginx's upstream keepalive_timeout (60s in deploy/nginx/bridge.conf):
# nginx closes an idle connection first and never reuses one gunicorn just closed.
keepalive = _count("BRIDGE_KEEPALIVE", 75)
# The heartbeat file lives in memory, never on a disk that may stall.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# Reload goes through signals (systemd's ExecReload); the control socket would
# want a writable $HOME, which the sandboxed service does not have.
control_socket_disable = True


def on_starting(server):
    """Give the workers one shared directory for their metrics, emptied of a previous run's."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        path = server.bridge_metrics_tmpdir = tempfile.mkdtemp(prefix="bridge-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    os.makedirs(path, exist_ok=True)
    for stale in glob.glob(os.path.join(path, "*.db")):
        os.remove(stale)
    _large_blocks_back_to_the_kernel()


def _large_blocks_back_to_the_kernel():
    """Keep glibc from holding on to freed large blocks, in the master and so in every worker.

    A request body's bytes and their copies are blocks of megabytes. glibc maps the first one
    from the kernel and unmaps it when freed, but then raises its threshold for doing so to that
    size, and later ones come from the heap of whichever thread asked, where freed memory stays:
    six 30 MB bodies read one after another by six threads left the worker 190 MiB larger, though
    the large-body slots let only two in at once (86 MiB with the threshold fixed). Setting it
    turns that adjustment off; 128 KiB is glibc's own starting value.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl): nothing to set
        return
    m_mmap_threshold = -3  # malloc.h
    libc.mallopt(m_mmap_threshold, 128 * 1024)


def post_worker_init(worker):
    """The app is loaded and lives as long as the worker: leave its ~45,000 objects out of
    every full garbage collection. Walking them took 20-35 ms of CPU each time, every thread
    of the worker stalled behind the GIL meanwhile (streams included), and under load it came
    every few seconds; without them a full collection takes 1-5 ms.

    Also log where the served app was loaded from, so an operator (and the deploy tests) can
    tell the installed package from a checkout that shadows it.
    """
    root = getattr(worker.wsgi, "root_path", None)  # a Flask app's: its package's directory
    if root:
        worker.log.info("Serving the app from %s", root)
    gc.freeze()


def child_exit(server, worker):
    """A dead worker's open-streams gauge no longer counts."""
    from prometheus_client import multiprocess  # only now: the directory above is set

    multiprocess.mark_process_dead(worker.pid)


def worker_exit(server, worker):
    """Cut what is still open when graceful_timeout has run out.

    gthread stops waiting at graceful_timeout, but its request threads are not
    daemons, so on a reload (SIGHUP) the old worker would otherwise live on
    until its longest stream ended.
    """
    still_open = getattr(worker, "nr_conns", 0)
    if still_open:
        server.log.warning(
            "worker %s: graceful_timeout (%ss) is over; closing %d open connection(s)",
            worker.pid,
            server.cfg.graceful_timeout,
            still_open,
        )
        logging.shutdown()
        os._exit(0)


def on_exit(server):
    tmpdir = getattr(server, "bridge_metrics_tmpdir", None)
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
