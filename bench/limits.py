"""Client limits under load: concurrent clients of one client key against its limits, and Redis hung.

    python -m bench.limits                       # rpm=200 and tpm=10,600, 16 clients, 600 calls each
    python -m bench.limits --clients 32 --limit 500

The bridge runs as deployed (gunicorn from deploy/gunicorn.conf.py, its workers as the config
sizes them) with its own redis-server on loopback, in front of the benchmark's fake upstream,
whose non-streamed answer reports 106 tokens and whose streams 66. Four phases, each with a
client key of its own, the first three each inside one UTC minute (the run waits for a fresh
one when less than 30 s are left):

- requests per minute = --limit: exactly --limit calls are admitted (tolerance 0: the check and
  the count are one Lua script, atomic in Redis), the rest get 429;
- tokens per minute = --limit x 53 (half the calls' worth): each call asks for at most the 90
  output tokens it gets, and reserves that plus its input's estimate (usage.estimate) while
  it runs; it is admitted while the minute's tokens and those reserved are under the limit.
  Admitted calls are at most ceil(limit / 106) + 1 (one call past the limit, as its
  reservation covers what it uses);
- tokens in flight: 60 streams at once (each a second long, 66 tokens, asking for 50 output
  tokens at most) against tokens per day = 132, two calls' worth: 2 are admitted, not 60;
- Redis hung: 20 calls one after another on one kept-alive connection, then the same with
  redis-server stopped (SIGSTOP) and BRIDGE_REDIS_TIMEOUT=0.25: each call waits one timeout
  for its admission and is served (fail-open); its previous answer's usage count must add
  no second wait. Then 200 connections of the same key each run two streams (a second long)
  one after the other: a stream's end must not wait for Redis before its connection takes
  the next. Once Redis goes on (SIGCONT), every count is in Redis or counted in
  bridge_usage_dropped_total, none twice.

The report is one JSON object; the exit status is 0 when every phase is within its bound and
no call got anything but 200 or 429.
"""

import argparse
import json
import math
import signal
import tempfile
import time

import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from bench import client
from bench.processes import Gunicorn, RedisServer, wait_for
from bridge.policy import usage

from .load import start_upstream

TOKENS_PER_CALL = 16 + 90  # bench/upstream.py's Anthropic answer
TOKENS_PER_STREAM = 16 + 50  # and its stream, whatever its length
QUESTION = [{"role": "user", "content": "Tell me about Galaxy Day."}]
BODY = json.dumps({"model": "bench-n1", "max_tokens": 90, "messages": QUESTION}).encode()
STREAM = json.dumps({"model": "bench-n50-p20", "max_tokens": 50, "stream": True, "messages": QUESTION}).encode()
STREAMS = 60
HUNG_STREAMS = 200
REDIS_TIMEOUT = 0.25
KEYS = "by-requests:sk-requests,by-tokens:sk-tokens,by-day:sk-day,steady:sk-steady"


def fresh_minute(needed=30):
    """Wait, if need be, so that the next `needed` seconds stay inside one UTC minute (the
    limits' window): calls that straddle two minutes are counted in both."""
    if time.time() % 60 > 60 - needed:
        time.sleep(60 - time.time() % 60 + 0.5)


def phase(bridge, key, calls, clients, body=BODY):
    fresh_minute()
    headers = {"authorization": f"Bearer {key}"}
    results = client.run(bridge.url, "/v1/chat/completions", body, headers, total=calls, concurrency=clients)
    statuses = {}
    for result in results:
        statuses[result.status or result.error] = statuses.get(result.status or result.error, 0) + 1
    return statuses


def hung_redis(bridge, redis_server):
    """Latencies of 20 calls on one connection with Redis up, then stopped, and of streams
    ending together meanwhile; and where their counts went once it is back."""
    headers = {"authorization": "Bearer sk-steady"}
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)

    def calls(body=BODY, total=20, concurrency=1):
        results = client.run(bridge.url, "/v1/chat/completions", body, headers, total=total, concurrency=concurrency)
        return [result.latency for result in results if result.status == 200]

    def stored():
        return int(store.hget(usage.usage_key("steady", time.time()), "requests") or 0)

    baseline = calls()
    wait_for(lambda: stored() == 20, "the first 20 counts in Redis")
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        hung = calls()
        streams = calls(STREAM, 2 * HUNG_STREAMS, HUNG_STREAMS)  # two each: the second waits for the first's end
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    total = 40 + 2 * HUNG_STREAMS
    wait_for(lambda: stored() + dropped(bridge) >= total, "every count stored or dropped")
    p99 = (client.percentile(baseline, 0.99), client.percentile(hung, 0.99))
    return {
        "served": [len(baseline), len(hung)],
        "baseline_p50_ms": round(client.percentile(baseline, 0.5) * 1000, 1),
        "baseline_p99_ms": round(p99[0] * 1000, 1),
        "hung_p50_ms": round(client.percentile(hung, 0.5) * 1000, 1),
        "hung_p99_ms": round(p99[1] * 1000, 1),
        "bound_ms": round((p99[0] + 1.5 * REDIS_TIMEOUT) * 1000, 1),
        "streams": len(streams),
        "streams_p50_ms": round(client.percentile(streams, 0.5) * 1000),
        "streams_max_ms": round(max(streams) * 1000),
        "counts_in_redis": stored(),
        "counts_dropped": dropped(bridge),
        "ok": len(hung) == 20 and p99[1] < p99[0] + 1.5 * REDIS_TIMEOUT and stored() <= total,
    }


def counted_today(redis_server, client, calls):
    """The client's tokens today in Redis, once its `calls` are counted."""
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    now = time.time()
    wait_for(lambda: int(store.hget(usage.usage_key(client, now), "requests") or 0) >= calls, f"{client}'s counts")
    return int(store.get(f"bridge:tpd:{client}:{usage.day(now)}") or 0)


def dropped(bridge):
    text = requests.get(f"{bridge.url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "bridge_usage_dropped_total"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent connections of the one client key")
    parser.add_argument("--limit", type=int, default=200, help="requests per minute; tpm is 53 times it")
    parser.add_argument("--calls", type=int, default=600, help="calls per phase, all within a minute")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 256 and 1 <= args.limit <= 5000 and args.limit < args.calls <= 20000):
        parser.error("bounded: 1-256 clients, a limit of 1-5,000 below --calls, at most 20,000 calls")
    tpm = args.limit * TOKENS_PER_CALL // 2
    tpd = 2 * TOKENS_PER_STREAM
    upstream, upstream_url = start_upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-limits-")
    redis_server = RedisServer(f"{workdir.name}/redis")
    try:
        bridge = Gunicorn(
            f"{workdir.name}/bridge",
            upstream_url,
            BRIDGE_LOG_LEVEL="WARNING",
            BRIDGE_CLIENT_KEYS=KEYS,
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_REDIS_TIMEOUT=str(REDIS_TIMEOUT),
            BRIDGE_CLIENT_LIMITS=f"by-requests rpm={args.limit}, by-tokens tpm={tpm}, by-day tpd={tpd}, "
            "steady rpm=100000",
        )
        try:
            by_requests = phase(bridge, "sk-requests", args.calls, args.clients)
            by_tokens = phase(bridge, "sk-tokens", args.calls, args.clients)
            in_flight = phase(bridge, "sk-day", STREAMS, STREAMS, STREAM)
            day_tokens = counted_today(redis_server, "by-day", in_flight.get(200, 0))
            hung = hung_redis(bridge, redis_server)
        finally:
            bridge.stop()
    finally:
        redis_server.stop()
        upstream.terminate()
        upstream.wait()
        workdir.cleanup()
    most = math.ceil(tpm / TOKENS_PER_CALL) + 1
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
            "most": most,
            "statuses": by_tokens,
            "ok": 0 < by_tokens.get(200, 0) <= most and set(by_tokens) <= {200, 429},
        },
        "tokens_in_flight": {
            "limit": tpd,
            "streams_at_once": STREAMS,
            "tokens_per_stream": TOKENS_PER_STREAM,
            "reserved_per_stream": usage.estimate(STREAM, json.loads(STREAM), 8192),
            "admitted": in_flight.get(200, 0),
            "tokens_counted": day_tokens,
            "statuses": in_flight,
            "ok": in_flight.get(200, 0) == 2 and day_tokens == tpd and set(in_flight) <= {200, 429},
        },
        "redis_hung": hung,
    }
    report["ok"] = all(report[name]["ok"] for name in report if isinstance(report[name], dict))
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
