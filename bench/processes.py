"""Processes under test, started and waited for: gunicorn as deployed, a free port, a poll.

One home for what the bench, the load test (bench/load.py) and the deploy tests all need.
It lives with the tools, not in tests/: the tools are run on their own (`make bench`,
`python -m bench.load`), and tests depend on the tools they test, never the other way
round. What only tests need (the fake upstream, nginx, gated streams) stays in tests/helpers/.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
BIN = pathlib.Path(sys.executable).parent


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accepts(port):
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_for(condition, what, timeout=20.0):
    """Poll `condition` until it is true; a hang guard, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise TimeoutError(f"gave up waiting for {what}")


def upstream_env(url):
    """The settings that point the bridge at one server answering both protocols at `url`."""
    return {"BRIDGE_OPENAI_BASE_URL": f"{url}/v1", "BRIDGE_ANTHROPIC_BASE_URL": url}


class Gunicorn:
    """gunicorn started as an operator would: the venv's gunicorn with deploy/gunicorn.conf.py,
    which names the app, in front of the upstream at `upstream_url`.

    Its log and metrics go to `workdir`, where it also runs unless `cwd` says otherwise. Not the
    checkout: gunicorn puts its working directory first on sys.path, and a checkout's bridge/
    there would shadow the installed package. `env` adds to the environment: BRIDGE_*
    settings, or PYTHONPATH to serve an install other than the venv's. It listens on a free
    port, or on `port`: a bridge started again where one was. `prefix` goes before the command
    (taskset, to pin it to a core). With `healthz` false (an app without /healthz, the reference
    relay), any answer says a worker has loaded the app.
    """

    def __init__(self, workdir, upstream_url, *flags, cwd=None, port=None, prefix=(), healthz=True, **env):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir = pathlib.Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "gunicorn.log"
        self.metrics_dir = workdir / "metrics"
        self.healthz = healthz
        environ = {**os.environ, **upstream_env(upstream_url), "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir), **env}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    *prefix,
                    str(BIN / "gunicorn"),
                    "--config",
                    str(GUNICORN_CONF),
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    *flags,
                ],
                cwd=cwd or workdir,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._healthy, f"gunicorn on {self.url} (log: {self.log_path})")

    def _healthy(self):
        if self.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {self.process.returncode}:\n{self.log()}")
        try:  # the socket listens before a worker has loaded the app
            answer = requests.get(f"{self.url}/healthz", timeout=2)
            return answer.status_code == 200 or not self.healthz
        except requests.RequestException:
            return False

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_for(self, condition, what):
        """wait_for, with the end of gunicorn's log when it gives up."""
        try:
            wait_for(condition, what)
        except TimeoutError as error:
            lines = [line for line in self.log().splitlines() if "[DEBUG]" not in line]
            raise TimeoutError(f"{error}; gunicorn log ends:\n" + "\n".join(lines[-15:])) from None

    def access_lines(self):
        """The access lines written so far (a line being written is left for the next read)."""
        written = self.log()
        return [json.loads(line) for line in written[: written.rfind("\n") + 1].splitlines() if line.startswith("{")]

    def signal(self, sig):
        self.process.send_signal(sig)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class RedisServer:
    """Debian's redis-server on a free loopback port, its files in `workdir`, persisting nothing:
    never the system service. stop() kills it (a crash, as tests want it); start() brings it
    back, empty, on the same port. With `password`, clients must give it (the URL carries it)."""

    def __init__(self, workdir, password=None):
        self.port = free_port()
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.url = f"redis://{f':{password}@' if password else ''}127.0.0.1:{self.port}/0"
        self.process = None
        self.start()

    def start(self):
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if self.password:
            command += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            [*command, "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for(lambda: accepts(self.port), f"redis-server on port {self.port}")

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
