"""Start and stop the processes under test: the fake upstream, the relay, the bridge.

The bench itself and the upstream run on the last core, the proxy under
test (relay or bridge, gunicorn with deploy/gunicorn.conf.py) on core 0,
so the proxy has one core to itself and neither the load generator nor the
upstream steals its time. On a one-core machine nothing is pinned.
"""

import os
import shutil
import subprocess
import sys

from .directions import CLIENT_KEYS, bridge_routes
from .processes import BIN, GUNICORN_CONF, ROOT, accepts, free_port, upstream_env, wait_for

LOGS = ROOT / "bench" / "out"  # each server's output, as <name>.log


# The cores this process may use, read before pin_self() narrows them to one.
CORES = sorted(os.sched_getaffinity(0))


def pinning():
    """(proxy core, bench core) or None when there is only one core."""
    if len(CORES) < 2 or not shutil.which("taskset"):
        return None
    return CORES[0], CORES[-1]


def pin_self():
    """Move the bench (and so the upstream and wrk it starts) off the proxy's core."""
    pins = pinning()
    if pins:
        os.sched_setaffinity(0, {pins[1]})


class Server:
    def __init__(self, name, argv, env, port, settings=None):
        self.name = name
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.argv = argv
        self.settings = settings or {}  # the environment it was given beyond the bench's own
        self.log = open(LOGS / f"{name}.log", "w")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env={**env, **self.settings}, stdout=self.log, stderr=subprocess.STDOUT
        )
        wait_for(self._listening, f"{name} to listen on {port}", timeout=30)

    def _listening(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {LOGS / self.name}.log")
        return accepts(self.port)

    @property
    def command(self):
        """The command line as a person would type it, settings included."""
        return [f"{key}={value}" for key, value in self.settings.items()] + self.argv

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _env(extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def upstream():
    port = free_port()
    return Server("upstream", [sys.executable, "-m", "bench.upstream", str(port)], _env({}), port)


def gunicorn_argv(port, *app):
    """The command a proxy runs under: the bridge's own gunicorn config, pinned to its core.
    Without `app` (flags, then the app), gunicorn serves the one the config names (the bridge)."""
    argv = [
        str(BIN / "gunicorn"),
        "--config",
        str(GUNICORN_CONF.relative_to(ROOT)),
        "--bind",
        f"127.0.0.1:{port}",
        "--no-control-socket",
        *app,
    ]
    pins = pinning()
    return (["taskset", "-c", str(pins[0])] + argv) if pins else argv


def relay(upstream_url, workers=None):
    """The reference relay; `workers` overrides the config's BRIDGE_WORKERS. On gunicorn's own
    gthread worker: the config's (bridge/serve/worker.py) serves only the bridge app, and what it
    adds is part of what the bridge costs."""
    port = free_port()
    return Server(
        _name("relay", workers),
        gunicorn_argv(port, "--worker-class", "gthread", "bench.relay:app"),
        _env({"BENCH_UPSTREAM": upstream_url}),
        port,
        _workers(workers),
    )


def bridge(upstream_url, workers=None, clouds=None, settings=None, tree=None, name=None):
    """The bridge in front of the bench upstream, and of the fake clouds with `clouds` (their env);
    `settings` on top (BRIDGE_*), served from the checkout at `tree` when given, its log
    bench/out/`name`.log when named."""
    port = free_port()
    env = _env({**upstream_env(upstream_url), "BRIDGE_CLIENT_KEYS": CLIENT_KEYS, **(clouds or {})})
    env["BRIDGE_ROUTES"] = bridge_routes(upstream_url, env)
    argv = gunicorn_argv(port, *(("--chdir", str(tree)) if tree else ()))
    return Server(name or _name("bridge", workers), argv, env, port, {**_workers(workers), **(settings or {})})


def _workers(count):
    return {"BRIDGE_WORKERS": str(count)} if count else {}


def _name(proxy, workers):
    """Its log's name: bench/out/relay.log for the default config, relay-1-worker.log for one worker."""
    return f"{proxy}-{workers}-worker" if workers else proxy


def gunicorn_config():
    """workers and threads as deploy/gunicorn.conf.py resolves them in this environment."""
    values = {}
    exec(compile(GUNICORN_CONF.read_text(), str(GUNICORN_CONF), "exec"), values)
    return {key: values.get(key) for key in ("workers", "threads", "worker_class", "keepalive")}
