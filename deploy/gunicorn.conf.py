"""gunicorn settings for bridge: threaded workers sized for long-lived streams.

Every knob an operator turns is an environment variable (documented in
deploy/systemd/bridge.env.example); command-line flags still win over this
file, which is how the tests choose ports.
"""

import contextlib
import copy
import ctypes
import functools
import gc
import glob
import io
import logging
import os
import pickle
import re
import shutil
import subprocess
import sys
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
# The exit status of a start refused for an invalid configuration (sysexits' EX_CONFIG): the
# systemd unit does not restart on it (RestartPreventExitStatus), as it would read the same files.
INVALID_CONFIGURATION = 78
# The longest the configuration's check may take (a key file on a hung network mount).
CHECK_TIMEOUT = 60


def on_starting(server):
    """Start only with a valid configuration, held for the workers (post_fork); check every
    reload's before it replaces a worker (_reload_if_valid); give the workers one shared
    directory for their metrics, emptied of a previous run's. Another app served with this
    file (the bench's relay: `gunicorn --config ... bench.relay:app`) loads as it would."""
    server.bridge_configuration = None
    if server.app.app_uri == wsgi_app:
        server.bridge_configuration, problem = _bridge_configuration()
        if problem:
            server.log.error("not started: %s", problem)
            raise SystemExit(INVALID_CONFIGURATION)
        server.reload = functools.partial(_reload_if_valid, server, server.reload)
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        path = server.bridge_metrics_tmpdir = tempfile.mkdtemp(prefix="bridge-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    os.makedirs(path, exist_ok=True)
    for stale in glob.glob(os.path.join(path, "*.db")):
        os.remove(stale)
    _large_blocks_back_to_the_kernel()


def _reload_if_valid(server, reload):
    """gunicorn's reload (SIGHUP), once the configuration it is to load checks out.

    gunicorn's own forks new workers and stops the old ones at once; a new worker that cannot
    load the app then stops the master (exit status 3), and systemd restarts it into the same
    files. So the whole new configuration is loaded first: gunicorn's settings (this file),
    then bridge's settings and every file they name, which the new workers are given as
    loaded. A refused reload changes nothing: one ERROR line names the file and the entry, and
    the running workers keep serving.
    """
    problem = _gunicorn_configuration_problem(server)
    if not problem:
        loaded, problem = _bridge_configuration()
    if problem:
        server.log.error("reload refused, the running workers keep serving: %s", problem)
        return
    server.bridge_configuration = loaded
    reload()


def _gunicorn_configuration_problem(server):
    """What keeps gunicorn from loading its settings again (a typo in this file, a bad value), or
    None: gunicorn's own loading, on a copy of its application, which prints the error and exits."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            copy.copy(server.app).do_load_config()
    except SystemExit as stop:
        lines = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
        what = lines[-1] if lines else str(stop.code)  # this file's own SystemExit prints nothing
        path = server.cfg.config
        line = re.findall(rf'File "{re.escape(path)}", line (\d+)', printed.getvalue())
        return f"{path}{f' line {line[-1]}' if line else ''}: {what}"
    return None


def _bridge_configuration():
    """(the settings and routes as `bridge check` loads them, pickled; None) or (None, why not).

    Loaded by `bridge check --pickle` in a new interpreter, with the environment the workers
    get: it runs the code installed now (after a `pip install`, not the master's), and the
    master loads no module of the settings or the app (only the worker class's), so a worker
    forked from it imports them afresh. Not in the workers' metrics directory: a process that
    is no worker leaves no file there.
    """
    environ = {name: value for name, value in os.environ.items() if name != "PROMETHEUS_MULTIPROC_DIR"}
    command = [sys.executable, "-m", "bridge.cli", "check", "--pickle"]
    try:
        checked = subprocess.run(command, env=environ, capture_output=True, timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"`bridge check` did not finish within {CHECK_TIMEOUT} s"
    if checked.returncode == 0:
        return checked.stdout, None
    said = checked.stderr.decode(errors="replace").strip().splitlines()
    return None, (said or [f"`bridge check` exited with {checked.returncode}"])[-1].removeprefix("bridge: ")


def post_fork(server, worker):
    """The worker's app is to be built from the configuration the master checked last (at start,
    or at the last reload it accepted): a worker started later, a dead one's replacement, reads
    no file again, which may have changed, and broken, since. Built where gunicorn loads an app,
    once the worker handles its signals: a stop that comes meanwhile is not lost."""
    if server.bridge_configuration is not None:
        worker.app.load = functools.partial(_checked_app, server.bridge_configuration)


def _checked_app(configuration):
    from bridge.app import create_app  # in the worker only (_bridge_configuration says why)

    return create_app(*pickle.loads(configuration))


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
