"""What client limits, budgets and keys in Redis cost a request: the bridge with and without
them, side by side.

    python -m bench.redis_overhead                  # 5 rounds of 1,000 calls each way
    python -m bench.redis_overhead --calls 200 --rounds 1
    python -m bench.redis_overhead --front messages  # Messages calls, translated to Chat

Needs no wrk: bench/client.py drives them: Chat calls passed through to a Chat deployment, or
with `--front messages` Messages calls translated to it, whose admission round trip overlaps
their translation. Four gunicorn servers from deploy/gunicorn.conf.py
with one worker each, in front of the bench upstream (a priced deployment), each with a client
key: *plain* without Redis; *limited* with a redis-server on loopback and limits on that key
high enough never to refuse (rpm, tpm and tpd: the Lua script runs with all three checks, and
the usage writer counts each answer); *ahead*, the same with BRIDGE_ADMIT_AHEAD (a key far
from its limits admitted before Redis's verdict, its admission sent by the usage writer);
*budgeted* with the same Redis, its key held there
(BRIDGE_REDIS_KEYS: a model allow list, its own limits and budget), and budgets on its team and
user too, all too high to refuse: admission reserves tokens and money in three budgets, the
usage writer settles them and writes the spend. Rounds alternate; per round, non-streamed
latency one call at a time (p50, p99), calls per second over 16 connections, and the CPU time a
call costs the bridge (its worker, the usage writer's thread included) and Redis, steadier than
the timings on a shared machine; and a Redis round trip (a PING's p50) to read the differences
by. Then, in this process, one admission's time and round trips with the limited target's
limits and with the budgeted one's budgets.
Prints a Markdown table; only the differences within one run mean anything.
"""

import argparse
import contextlib
import json
import statistics
import tempfile
import time

import redis

from bench import client, corpus, procstat
from bench.processes import Gunicorn, RedisServer
from bridge import settings
from bridge.gateway import routes
from bridge.policy import keys, usage
from bridge.serve import observability

from .load import start_upstream

QUESTION = [{"role": "user", "content": "Tell me about Galaxy Day."}]
# The call measured, by client front (--front), both to the same Chat deployment: a question
# passed through (chat), or the bench's everyday Messages call (a short tool-using
# conversation: bench/corpus.py) translated, as Claude Code's calls are (messages).
CALLS = {
    "chat": ("/v1/chat/completions", json.dumps({"model": "bench-n1", "messages": QUESTION}).encode()),
    "messages": ("/v1/messages", json.dumps(corpus.anthropic_small("bench-n1", False)).encode()),
}
BODY = CALLS["chat"][1]  # admissions()'s
HEADERS = {"authorization": "Bearer sk-bench"}
NEVER = 10**12  # a limit or budget no run reaches
AHEAD = "0.5"  # the *ahead* target's BRIDGE_ADMIT_AHEAD


def one_round(server, call, calls, headers, redis_server):
    cpu = procstat.cpu_seconds(server.process.pid), procstat.cpu_seconds(redis_server.process.pid)
    sequential = client.run(server.url, *call, headers, total=calls, concurrency=1)
    started = time.monotonic()
    concurrent = client.run(server.url, *call, headers, total=calls, concurrency=16)
    elapsed = time.monotonic() - started
    bridge_cpu = procstat.cpu_seconds(server.process.pid) - cpu[0]
    redis_cpu = procstat.cpu_seconds(redis_server.process.pid) - cpu[1]
    statuses = {r.status for r in sequential + concurrent}
    assert statuses == {200}, f"{server.url} answered {statuses}"
    latencies = [r.end - r.start for r in sequential]
    return (
        client.percentile(latencies, 0.5) * 1000,
        client.percentile(latencies, 0.99) * 1000,
        len(concurrent) / elapsed,
        bridge_cpu / (2 * calls) * 1000,
        redis_cpu / (2 * calls) * 1000,
    )


def admissions(url, count=2000):
    """{config: (ms, round trips) per admission}, in this process: usage.Accounts.admit for one
    call's body with the limited target's limits, and with the budgeted target's key, team and
    user budgets too (the key from BRIDGE_CLIENT_KEYS here: a Redis key is found in memory).
    Round trips are the commands written to Redis's connections."""
    document = {"routes": [{"models": ["bench-*"], "deployments": [{"name": "bench", "protocol": "openai-chat"}]}]}
    document["routes"][0]["deployments"][0].update(base_url="http://127.0.0.1:9/v1", prices={"input": 1, "output": 2})
    limited = {
        "BRIDGE_ROUTES": json.dumps(document),
        "BRIDGE_REDIS_URL": url,
        "BRIDGE_CLIENT_KEYS": "bench:sk-bench team=bench-team user=bench-user",
        "BRIDGE_CLIENT_LIMITS": f"bench rpm={NEVER} tpm={NEVER} tpd={NEVER}",
    }
    budgets = f"key:bench month={NEVER},team:bench-team month={NEVER},user:bench-user day={NEVER}"
    body = json.loads(BODY)
    measured = {}
    for name, environ in (("limited", limited), ("budgeted", {**limited, "BRIDGE_BUDGETS": budgets})):
        loaded = settings.load(environ)
        accounts = usage.Accounts(loaded, routes.load(loaded))
        key = loaded.client_keys[0]
        admit(accounts, key, body)  # connects: the handshake is no admission's round trip
        with _counted(accounts.redis.connection_pool.connection_class) as sent:
            started = time.perf_counter()
            for _ in range(count):
                admit(accounts, key, body)
            measured[name] = ((time.perf_counter() - started) / count * 1000, sent[0] / count)
    return measured


def admit(accounts, key, body):
    """One admission of the bench's call for `key`."""
    record = observability.Record()
    record.client, record.key, record.team, record.user, record.model = "bench", key, key.team, key.user, "bench-n1"
    accounts.admit(record, (BODY, body))


@contextlib.contextmanager
def _counted(connection_class):
    """A one-item list counting what connections of `connection_class` write meanwhile."""
    sent = [0]
    send = connection_class.send_packed_command

    def counting(connection, *args, **kwargs):
        sent[0] += 1
        return send(connection, *args, **kwargs)

    connection_class.send_packed_command = counting
    try:
        yield sent
    finally:
        connection_class.send_packed_command = send


def round_trip(store, count=1000):
    """A PING's p50 in ms, from redis-py: one loopback round trip."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        store.ping()
        times.append(time.perf_counter() - started)
    return client.percentile(times, 0.5) * 1000


def measure(calls, rounds, core=None, front="chat"):
    """The four targets side by side, `rounds` rounds of `calls` calls of CALLS[front]: {"rows": {target: the
    medians over rounds of one_round's columns}, "ping": a Redis round trip's p50 in ms, "alone":
    admissions()}. With `core`, each bridge runs pinned to it (taskset), and Redis, the upstream and
    the client where this process runs, as in `make bench`."""
    upstream, upstream_url = start_upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-redis-bench-")
    redis_server = RedisServer(f"{workdir.name}/redis")
    deployment = {"name": "bench", "protocol": "openai-chat", "base_url": f"{upstream_url}/v1"}
    document = {
        "routes": [{"models": ["bench-*"], "deployments": [{**deployment, "prices": {"input": 1, "output": 2}}]}]
    }
    common = {"BRIDGE_WORKERS": "1", "BRIDGE_LOG_LEVEL": "WARNING", "BRIDGE_ROUTES": json.dumps(document)}
    pinned = ("taskset", "-c", str(core)) if core is not None else ()
    never = f"bench rpm={NEVER} tpm={NEVER} tpd={NEVER}"
    targets = {}
    try:
        store = redis.Redis.from_url(redis_server.url)
        targets["plain"] = Gunicorn(
            f"{workdir.name}/plain", upstream_url, prefix=pinned, **common, BRIDGE_CLIENT_KEYS="bench:sk-bench"
        )
        limits = {**common, "BRIDGE_CLIENT_KEYS": "bench:sk-bench", "BRIDGE_REDIS_URL": redis_server.url}
        limits["BRIDGE_CLIENT_LIMITS"] = never
        targets["limited"] = Gunicorn(f"{workdir.name}/limited", upstream_url, prefix=pinned, **limits)
        targets["ahead"] = Gunicorn(
            f"{workdir.name}/ahead", upstream_url, prefix=pinned, **limits, BRIDGE_ADMIT_AHEAD=AHEAD
        )
        held = keys.create(
            store,
            "held",
            team="bench-team",
            user="bench-user",
            models=("bench-*",),
            limits=settings.Limits(NEVER, NEVER, NEVER),
            budget=settings.Budget("key", "held", day=NEVER, month=NEVER),
        )
        targets["budgeted"] = Gunicorn(
            f"{workdir.name}/budgeted",
            upstream_url,
            prefix=pinned,
            **common,
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_REDIS_KEYS="true",
            BRIDGE_BUDGETS=f"team:bench-team month={NEVER},user:bench-user day={NEVER}",
        )
        headers = {
            "plain": HEADERS,
            "limited": HEADERS,
            "ahead": HEADERS,
            "budgeted": {"authorization": f"Bearer {held}"},
        }
        for name, server in targets.items():
            one_round(server, CALLS[front], min(calls, 200), headers[name], redis_server)  # warm-up
        measured = {name: [] for name in targets}
        pings = []
        for _ in range(rounds):
            for name, server in targets.items():
                measured[name].append(one_round(server, CALLS[front], calls, headers[name], redis_server))
            pings.append(round_trip(store))
        alone = admissions(redis_server.url)
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
    return {"rows": rows, "ping": statistics.median(pings), "alone": alone}


def table(result):
    """measure()'s result as Markdown lines: the targets, their differences, a round trip."""
    rows = result["rows"]
    columns = "latency p50 (ms) | latency p99 (ms) | calls/s at c16 | bridge CPU ms a call | Redis CPU ms a call"
    out = [f"| target | {columns} |", "|---|---|---|---|---|---|"]
    for name, (p50, p99, rate, bridge_cpu, redis_cpu) in rows.items():
        out.append(f"| {name} | {p50:.2f} | {p99:.2f} | {rate:.0f} | {bridge_cpu:.3f} | {redis_cpu:.3f} |")
    for more, less in (("limited", "plain"), ("ahead", "plain"), ("budgeted", "limited")):
        high, low = rows[more], rows[less]
        out.append(
            f"| {more} - {less} | {high[0] - low[0]:+.2f} | {high[1] - low[1]:+.2f} | "
            f"{(high[2] / low[2] - 1) * 100:+.1f}% | {high[3] - low[3]:+.3f} | {high[4] - low[4]:+.3f} |"
        )
    out += ["", f"A Redis round trip (PING, p50): {result['ping']:.2f} ms."]
    for name, (took, trips) in result["alone"].items():
        out.append(f"Admission alone, {name}: {took:.3f} ms, {trips:g} round trips a call.")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--core", type=int, help="pin each bridge to this core (taskset), as make bench does")
    parser.add_argument("--front", choices=CALLS, default="chat", help="the client front called (CALLS)")
    args = parser.parse_args(argv)
    if not (1 <= args.calls <= 20000 and 1 <= args.rounds <= 50):
        parser.error("bounded: at most 20,000 calls and 50 rounds")
    result = measure(args.calls, args.rounds, args.core, args.front)
    path = CALLS[args.front][0]
    print(f"{args.rounds} rounds of {args.calls} calls to {path}, medians over rounds; one worker each\n")
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
