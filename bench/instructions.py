"""CPU work per request counted in instructions (valgrind's callgrind): the ratio noise cannot move.

CPU seconds on a shared VM move by 10-30% between runs, and the bridge, touching more code,
moves more than the relay. The instructions a request executes do not move. Relay and bridge
run in-process as in bench.profile, but as deployed: access log on, metrics in a
PROMETHEUS_MULTIPROC_DIR. Each is run twice under callgrind, with FEW and MANY requests
after a warm-up, and the difference divided by MANY - FEW is one request's instructions,
start-up excluded; per_event() does the same with one long unpaced stream of FEW_EVENTS and
of MANY_EVENTS upstream events, so the difference is one upstream event's instructions.
gunicorn is left out; it does the same work for both, so the server's ratio lies between
this one and 1. Kernel time (the sockets) is not counted either.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

FEW, MANY, WARM_UP = 0, 150, 20
FEW_EVENTS, MANY_EVENTS = 500, 3000


def available():
    return shutil.which("valgrind") is not None


def per_request(upstream_url, direction):
    """{"relay": instructions, "bridge": instructions} for one non-streamed request of `direction`."""
    return {
        target: (_count(upstream_url, target, direction, MANY) - _count(upstream_url, target, direction, FEW))
        / (MANY - FEW)
        for target in ("relay", "bridge")
    }


def per_event(upstream_url, direction):
    """{"relay": instructions, "bridge": instructions} for one upstream event of a long stream."""
    return {
        target: (
            _count(upstream_url, target, direction, MANY_EVENTS, "events")
            - _count(upstream_url, target, direction, FEW_EVENTS, "events")
        )
        / (MANY_EVENTS - FEW_EVENTS)
        for target in ("relay", "bridge")
    }


def _count(upstream_url, target, direction, count, unit="requests"):
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as scratch:
        report = os.path.join(scratch, "valgrind.log")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                f"--log-file={report}",
                sys.executable,
                "-m",
                "bench.instructions",
                upstream_url,
                target,
                direction,
                str(count),
                unit,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": scratch},
        )
        with open(report) as fh:
            found = re.search(r"Collected : (\d+)", fh.read())
    if not found:
        raise RuntimeError(f"callgrind reported no instruction count for {target} {direction}")
    return int(found.group(1))


def _serve(upstream_url, target, direction, count, unit):
    """The child under valgrind: WARM_UP + `count` requests through one app, or (unit "events")
    WARM_UP short streams and then one stream of `count` events."""
    from . import profile
    from .directions import DIRECTIONS

    relay_app, bridge_app = profile.apps(upstream_url, log_level="INFO")
    d = DIRECTIONS[direction]
    if target == "relay":
        app, path, make_body, headers = relay_app, d.upstream_path, d.upstream_body, d.upstream_headers
    else:
        app, path, make_body, headers = bridge_app, d.client_path, d.client_body, d.client_headers

    # Each body is encoded once, before the requests: building and encoding it is the client's
    # work, and counted per request it added the same to both targets.
    body = profile.encode(make_body("bench-n50", unit == "events"))
    for _ in range(WARM_UP):
        profile.call(app, path, body, headers)
    if unit == "events":
        profile.call(app, path, profile.encode(make_body(f"bench-n{count}", True)), headers)
    else:
        for _ in range(count):
            profile.call(app, path, body, headers)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
