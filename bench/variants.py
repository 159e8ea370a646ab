"""python -m bench.variants: CPU per call, calls per second and context switches under wrk,
for bridge configurations (or other checkouts) side by side, round by round.

    python -m bench.variants plain limited:REDIS=1
    python -m bench.variants new:REDIS=1 old:REDIS=1,TREE=../wt-old --rounds 15

A variant is NAME[:SETTING=VALUE,...]: BRIDGE_* settings for its bridge, and two of the bench's
own: REDIS=1 puts a redis-server on loopback behind it, with limits on the bench's client key
that never refuse (bench.redis_overhead's *limited*); TREE=PATH serves the bridge from another
checkout (a git worktree of another commit, with a `.venv` link to this one's). Each is one
gunicorn worker on the proxy core, called with the direction's everyday request
(bench/directions.py) by wrk over 16 connections from the other core. Rounds alternate
between the variants, so that a slow minute of a shared VM falls on all of them; the table
gives each one's medians over rounds and its CPU per call over the first variant's.
Voluntary context switches count the times a thread of the worker slept: on a socket, a lock
or the GIL.
"""

import argparse
import statistics
import tempfile

from . import procstat, servers, wrk
from .directions import DIRECTIONS
from .processes import RedisServer
from .profile import encode

MODEL = "bench-n50"
NEVER = "rpm=1000000000 tpm=1000000000000 tpd=1000000000000"  # limits no run reaches


def parse(variant):
    """(name, settings, tree, redis) of NAME[:KEY=VALUE,...]."""
    name, _, listed = variant.partition(":")
    settings = dict(item.split("=", 1) for item in listed.split(",") if item)
    return name, settings, settings.pop("TREE", None), settings.pop("REDIS", None) == "1"


def measure(variants, direction, rounds, seconds):
    """{variant: [(calls/s, CPU µs a call, voluntary switches a call), one per round]}."""
    d = DIRECTIONS[direction]
    servers.pin_self()
    upstream = servers.upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-variants-")
    redis_server = None
    started = {}
    try:
        for variant in variants:
            name, settings, tree, redis = parse(variant)
            if redis:
                redis_server = redis_server or RedisServer(f"{workdir.name}/redis")
                settings.update(BRIDGE_REDIS_URL=redis_server.url, BRIDGE_CLIENT_LIMITS=f"bench {NEVER}")
            started[variant] = servers.bridge(
                upstream.url, workers=1, settings=settings, tree=tree, name=f"variant-{name}"
            )
        call = (d.client_path, encode(d.client_body(MODEL, False)), d.client_headers)
        for server in started.values():
            wrk.run(server.url + call[0], *call[1:], 16, 2)  # warm-up
        measured = {variant: [] for variant in variants}
        for _ in range(rounds):
            for variant, server in started.items():
                pid = server.proc.pid
                cpu, slept = procstat.cpu_seconds(pid), procstat.voluntary_switches(pid)
                result = wrk.run(server.url + call[0], *call[1:], 16, seconds)
                assert result["errors"] == 0, f"{variant}: {result['errors']} errors"
                calls = result["requests"]
                cpu = (procstat.cpu_seconds(pid) - cpu) / calls * 1e6
                measured[variant].append((result["rps"], cpu, (procstat.voluntary_switches(pid) - slept) / calls))
        return measured
    finally:
        for server in started.values():
            server.stop()
        upstream.stop()
        if redis_server is not None:
            redis_server.stop()
        workdir.cleanup()


def table(measured):
    first = statistics.median(row[1] for row in next(iter(measured.values())))
    out = ["| variant | calls/s | CPU µs a call | ÷ the first | voluntary switches a call |", "|---|---|---|---|---|"]
    for variant, rows in measured.items():
        rate, cpu, slept = (statistics.median(column) for column in zip(*rows, strict=True))
        out.append(f"| {variant} | {rate:.0f} | {cpu:.0f} | {cpu / first:.3f} | {slept:.2f} |")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="+", help="NAME[:SETTING=VALUE,...]")
    parser.add_argument("--direction", choices=DIRECTIONS, default="messages_to_chat")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=int, default=3, help="of wrk, per variant and round")
    args = parser.parse_args(argv)
    if not (1 <= args.rounds <= 50 and 1 <= args.seconds <= 60):
        parser.error("bounded: at most 50 rounds of 60 s")
    measured = measure(args.variants, args.direction, args.rounds, args.seconds)
    print(f"{args.rounds} rounds of {args.seconds} s each, {args.direction}, medians over rounds\n")
    print("\n".join(table(measured)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
