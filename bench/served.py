"""python -m bench.served: a request's cost as gunicorn serves it, relay against bridge.

bench/instructions.py counts the apps called in-process, so it leaves out what the worker
class does around each request: the relay runs on gunicorn's gthread worker, the bridge on its
own (bridge/serve/worker.py). This counts that part too. Each proxy runs with one worker under
callgrind (`--trace-children`), takes a warm-up, then two measured batches of keep-alive
requests; `callgrind_control` zeroes the counters before a batch and dumps them after, so
the worker's instructions per request are the difference of the batches over their sizes
(start-up and idle wake-ups cancel out). With `--syscalls`, the same batches under
`strace -c -f` attached to the worker: system calls per request by name, the kernel side
that callgrind does not see.
"""

import argparse
import contextlib
import http.client
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from . import processes, servers
from .directions import CLIENT_KEYS, DIRECTIONS, bridge_routes
from .profile import encode

WARM_UP = 60
BATCHES = (100, 300)
MODEL = "bench-n50"


def _requests(port, call, count):
    """`count` keep-alive requests of `call` (path, body, headers), each answered 200."""
    path, body, headers = call
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _ in range(count):
            connection.request("POST", path, body=body, headers={**headers, "content-type": "application/json"})
            answer = connection.getresponse()
            text = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{path} answered {answer.status}: {text[:300]!r}")
    finally:
        connection.close()


def _proxy(target, direction, upstream_url, port, scratch):
    """(argv, env, call) of one gunicorn worker serving `target` in front of the upstream."""
    d = DIRECTIONS[direction]
    env = {**os.environ, "BRIDGE_WORKERS": "1", "PYTHONHASHSEED": "0", "PROMETHEUS_MULTIPROC_DIR": scratch}
    if target == "relay":
        argv = servers.gunicorn_argv(port, "--worker-class", "gthread", "bench.relay:app")
        env["BENCH_UPSTREAM"] = upstream_url
        call = (d.upstream_at(MODEL, False), encode(d.upstream_body(MODEL, False)), d.upstream_headers)
    else:
        argv = servers.gunicorn_argv(port)
        env.update(processes.upstream_env(upstream_url), BRIDGE_ROUTES=bridge_routes(upstream_url))
        env["BRIDGE_CLIENT_KEYS"] = CLIENT_KEYS
        call = (d.client_path, encode(d.client_body(MODEL, False)), d.client_headers)
    return argv, env, call


def _worker(master):
    """The pid of the one worker gunicorn's master `master` forked."""
    children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    if len(children) != 1:
        raise RuntimeError(f"gunicorn {master} has {len(children)} workers, not one")
    return children[0]


def _summary(path):
    found = re.search(r"^(?:summary|totals): (\d+)$", pathlib.Path(path).read_text(), re.MULTILINE)
    return int(found.group(1)) if found else 0


@contextlib.contextmanager
def _serving(target, direction, upstream_url, prefix=lambda scratch: []):
    """(scratch directory, gunicorn's pid, its port, the request) of one worker serving `target`,
    started under the command `prefix(scratch)` gives (valgrind's, or none), warmed up, stopped
    at the end."""
    with tempfile.TemporaryDirectory(prefix="bench-served-") as scratch:
        port = processes.free_port()
        argv, env, call = _proxy(target, direction, upstream_url, port, scratch)
        with open(os.path.join(scratch, "gunicorn.log"), "w") as log:
            proc = subprocess.Popen([*prefix(scratch), *argv], cwd=processes.ROOT, env=env, stdout=log, stderr=log)
        try:
            processes.wait_for(lambda: processes.accepts(port), f"the {target} to listen", timeout=300)
            _requests(port, call, WARM_UP)
            yield scratch, proc.pid, port, call
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def instructions(target, direction, upstream_url):
    """The gunicorn worker's instructions per request, from two batches under callgrind."""

    def valgrind(scratch):
        return [
            "valgrind",
            "--tool=callgrind",
            "--trace-children=yes",
            f"--callgrind-out-file={scratch}/callgrind.%p",
            f"--log-file={scratch}/valgrind.%p",
        ]

    with _serving(target, direction, upstream_url, valgrind) as (scratch, master, port, call):
        # Only the worker's counters: callgrind_control without a pid would zero and dump
        # every callgrind run of the machine's user.
        worker = _worker(master)
        totals = []
        for count in BATCHES:
            subprocess.run(["callgrind_control", "--zero", worker], capture_output=True, check=True)
            _requests(port, call, count)
            subprocess.run(["callgrind_control", "--dump", worker], capture_output=True, check=True)
            dumps = sorted(
                (name for name in os.listdir(scratch) if name.startswith(f"callgrind.{worker}.")),
                key=lambda name: int(name.rsplit(".", 1)[1]),
            )
            totals.append(_summary(os.path.join(scratch, dumps[-1])))
    return round((totals[1] - totals[0]) / (BATCHES[1] - BATCHES[0]))


def syscalls(target, direction, upstream_url, count=BATCHES[1]):
    """System calls per request of the gunicorn worker, by name, from strace -c -f."""
    with _serving(target, direction, upstream_url) as (scratch, master, port, call):
        report = os.path.join(scratch, "strace.txt")
        strace = subprocess.Popen(
            ["strace", "-c", "-f", "-p", _worker(master), "-o", report], stderr=subprocess.DEVNULL
        )
        time.sleep(1.5)  # strace attached to every thread
        _requests(port, call, count)
        strace.terminate()
        strace.wait()
        text = pathlib.Path(report).read_text()
    rows = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", text, re.M)
    return {name: round(int(calls) / count, 1) for calls, name in rows if int(calls) >= count / 2}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.served", description=__doc__.splitlines()[0])
    parser.add_argument("directions", nargs="*", default=["messages_to_chat", "chat_to_messages"])
    parser.add_argument("--syscalls", action="store_true", help="system calls per request (strace) instead")
    args = parser.parse_args(argv)
    needed = "strace" if args.syscalls else "callgrind_control"
    if not shutil.which(needed):
        print(f"bench.served needs {needed} (valgrind / strace)", file=sys.stderr)
        return 2
    servers.LOGS.mkdir(parents=True, exist_ok=True)
    upstream = servers.upstream()
    try:
        for direction in args.directions:
            if args.syscalls:
                for target in ("relay", "bridge"):
                    print(direction, target, syscalls(target, direction, upstream.url), flush=True)
                continue
            relay, bridge = (instructions(target, direction, upstream.url) for target in ("relay", "bridge"))
            print(f"{direction}: relay {relay:,} bridge {bridge:,} per request, {bridge / relay:.3f}×", flush=True)
    finally:
        upstream.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
