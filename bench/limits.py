"""Client limits under load: 16 concurrent clients of one client key against its limits.

    python -m bench.limits                       # rpm=200 and tpm=10,600, 16 clients, 600 calls each
    python -m bench.limits --clients 32 --limit 500

The bridge runs as deployed (gunicorn from deploy/gunicorn.conf.py, its workers as the config
sizes them) with its own redis-server on loopback, in front of the benchmark's fake upstream,
whose non-streamed answer reports 106 tokens. Two phases, each inside one UTC minute (the run
waits for a fresh one when less than 30 s are left), each with a client key of its own:

- requests per minute = --limit: exactly --limit calls are admitted (tolerance 0: the check and
  the count are one Lua script, atomic in Redis), the rest get 429;
- tokens per minute = --limit x 53 (half the calls' worth): a call is admitted while the
  minute's tokens are under the limit when it starts, and its tokens count when it ends, so
  up to one call per concurrent client may pass the limit. Admitted calls are between
  ceil(limit / 106) and that plus --clients - 1.

The report is one JSON object; the exit status is 0 when both phases are within tolerance and
no call got anything but 200 or 429.
"""

import argparse
import json
import math
import tempfile
import time

from bench import client
from bench.processes import Gunicorn, RedisServer

from .load import start_upstream

TOKENS_PER_CALL = 16 + 90  # bench/upstream.py's Anthropic answer
BODY = json.dumps(
    {"model": "bench-n1", "messages": [{"role": "user", "content": "Tell me about Galaxy Day."}]}
).encode()


def fresh_minute(needed=30):
    """Wait, if need be, so that the next `needed` seconds stay inside one UTC minute (the
    limits' window): calls that straddle two minutes are counted in both."""
    if time.time() % 60 > 60 - needed:
        time.sleep(60 - time.time() % 60 + 0.5)


def phase(bridge, key, calls, clients):
    fresh_minute()
    headers = {"authorization": f"Bearer {key}"}
    results = client.run(bridge.url, "/v1/chat/completions", BODY, headers, total=calls, concurrency=clients)
    statuses = {}
    for result in results:
        statuses[result.status or result.error] = statuses.get(result.status or result.error, 0) + 1
    return statuses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent connections of the one client key")
    parser.add_argument("--limit", type=int, default=200, help="requests per minute; tpm is 53 times it")
    parser.add_argument("--calls", type=int, default=600, help="calls per phase, all within a minute")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 256 and 1 <= args.limit <= 5000 and args.limit < args.calls <= 20000):
        parser.error("bounded: 1-256 clients, a limit of 1-5,000 below --calls, at most 20,000 calls")
    tpm = args.limit * TOKENS_PER_CALL // 2
    upstream, upstream_url = start_upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-limits-")
    redis_server = RedisServer(f"{workdir.name}/redis")
    try:
        bridge = Gunicorn(
            f"{workdir.name}/bridge",
            upstream_url,
            BRIDGE_LOG_LEVEL="WARNING",
            BRIDGE_CLIENT_KEYS="by-requests:sk-requests,by-tokens:sk-tokens",
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_CLIENT_LIMITS=f"by-requests rpm={args.limit}, by-tokens tpm={tpm}",
        )
        try:
            by_requests = phase(bridge, "sk-requests", args.calls, args.clients)
            by_tokens = phase(bridge, "sk-tokens", args.calls, args.clients)
        finally:
            bridge.stop()
    finally:
        redis_server.stop()
        upstream.terminate()
        upstream.wait()
        workdir.cleanup()
    fewest = math.ceil(tpm / TOKENS_PER_CALL)
    report = {
        "clients": args.clients,
        "calls_per_phase": args.calls,
        "requests_per_minute": {
            "limit": args.limit,
            "admitted": by_requests.get(200, 0),
            "tolerance": 0,
            "statuses": by_requests,
            "ok": by_requests.get(200, 0) == args.limit and set(by_requests) <= {200, 429},
        },
        "tokens_per_minute": {
            "limit": tpm,
            "tokens_per_call": TOKENS_PER_CALL,
            "admitted": by_tokens.get(200, 0),
            "admitted_range": [fewest, fewest + args.clients - 1],
            "statuses": by_tokens,
            "ok": fewest <= by_tokens.get(200, 0) <= fewest + args.clients - 1 and set(by_tokens) <= {200, 429},
        },
    }
    report["ok"] = report["requests_per_minute"]["ok"] and report["tokens_per_minute"]["ok"]
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
