"""What client limits in Redis cost a request: the bridge with and without them, side by side.

    python -m bench.redis_overhead                  # 5 rounds of 1,000 calls each way
    python -m bench.redis_overhead --calls 200 --rounds 1

Needs no wrk: bench/client.py drives both. Two gunicorn servers from deploy/gunicorn.conf.py
with one worker each, in front of the bench upstream, both with a client key: *plain* without
Redis, *limited* with its own redis-server on loopback and limits on that key high enough
never to refuse (rpm, tpm and tpd: the Lua script runs with all three checks, and the usage
pipeline after each answer). Rounds alternate between the two; per round, non-streamed
latency one call at a time (p50, p99) and calls per second over 16 connections. Prints a
Markdown table; only the differences within one run mean anything.
"""

import argparse
import json
import statistics
import tempfile
import time

from bench import client
from bench.processes import Gunicorn, RedisServer

from .load import start_upstream

BODY = json.dumps(
    {"model": "bench-n1", "messages": [{"role": "user", "content": "Tell me about Galaxy Day."}]}
).encode()
HEADERS = {"authorization": "Bearer sk-bench"}


def one_round(server, calls):
    sequential = client.run(server.url, "/v1/chat/completions", BODY, HEADERS, total=calls, concurrency=1)
    started = time.monotonic()
    concurrent = client.run(server.url, "/v1/chat/completions", BODY, HEADERS, total=calls, concurrency=16)
    elapsed = time.monotonic() - started
    statuses = {r.status for r in sequential + concurrent}
    assert statuses == {200}, f"{server.url} answered {statuses}"
    latencies = [r.end - r.start for r in sequential]
    return (
        client.percentile(latencies, 0.5) * 1000,
        client.percentile(latencies, 0.99) * 1000,
        len(concurrent) / elapsed,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not (1 <= args.calls <= 20000 and 1 <= args.rounds <= 50):
        parser.error("bounded: at most 20,000 calls and 50 rounds")
    upstream, upstream_url = start_upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-redis-bench-")
    redis_server = RedisServer(f"{workdir.name}/redis")
    common = {"BRIDGE_WORKERS": "1", "BRIDGE_LOG_LEVEL": "WARNING", "BRIDGE_CLIENT_KEYS": "bench:sk-bench"}
    never = "bench rpm=1000000000 tpm=1000000000000 tpd=1000000000000"
    targets = {}
    try:
        targets["plain"] = Gunicorn(f"{workdir.name}/plain", upstream_url, **common)
        targets["limited"] = Gunicorn(
            f"{workdir.name}/limited",
            upstream_url,
            **common,
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_CLIENT_LIMITS=never,
        )
        for server in targets.values():
            one_round(server, min(args.calls, 200))  # warm-up
        measured = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, server in targets.items():
                measured[name].append(one_round(server, args.calls))
    finally:
        for server in targets.values():
            server.stop()
        redis_server.stop()
        upstream.terminate()
        upstream.wait()
        workdir.cleanup()
    rows = {
        name: [statistics.median(column) for column in zip(*values, strict=True)] for name, values in measured.items()
    }
    print(f"{args.rounds} rounds of {args.calls} calls, medians over rounds; one worker each\n")
    print("| target | latency p50 (ms) | latency p99 (ms) | calls/s at c16 |")
    print("|---|---|---|---|")
    for name, (p50, p99, rate) in rows.items():
        print(f"| {name} | {p50:.2f} | {p99:.2f} | {rate:.0f} |")
    plain, limited = rows["plain"], rows["limited"]
    print(
        f"| limited - plain | {limited[0] - plain[0]:+.2f} | {limited[1] - plain[1]:+.2f} | "
        f"{(limited[2] / plain[2] - 1) * 100:+.1f}% |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
