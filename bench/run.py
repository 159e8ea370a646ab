"""python -m bench [--quick] [--direction NAME] [--no-thousands] [--per-core-only]: measure, write RESULTS.md.

Per translation direction, three targets answer the same conversation:
*direct* (the fake upstream itself, the floor of the machine), *relay* (the
reference relay: gunicorn + Flask + requests forwarding bytes, the floor of
the bridge's stack) and *bridge*. Every metric is taken in rounds that
rotate through the targets, so drift in the machine hits all three alike.

The proxy under test gets one core, so the per-request and per-stream
metrics run it with one worker, the config's own rule (a process per core).
Two workers sharing that core made each round a draw: wrk's keep-alive
connections land on one worker or are split between both, and split rounds
served 15-25% fewer requests, for relay and bridge alike. The directions
beyond the two main ones get fewer metrics in fewer rounds, so that every
direction fits one run. The capacity per core raises paced streams through
one pinned worker until a latency limit passes. Streams held at
once and memory are measured with the default config. The thousands-of-streams
thousands of streams come last (bench.load), unpinned, the default config
on all the cores beside its load client and fake upstream.
"""

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import threading
import time
import traceback
from importlib import metadata

from . import client, corpus, instructions, load, procstat, redis_overhead, report, servers, translate, wrk
from . import clouds as clouds_module
from .directions import CLOUD_DIRECTIONS, DIRECTIONS

EVERY = {**DIRECTIONS, **CLOUD_DIRECTIONS}  # the bench upstream's directions, then the fake clouds'

DEFAULT_OUT = servers.ROOT / "bench" / "RESULTS.md"
QUICK_OUT = servers.ROOT / "bench" / "out" / "RESULTS-quick.md"
PER_CORE_OUT = servers.ROOT / "bench" / "out" / "RESULTS-per-core.md"


@dataclasses.dataclass(frozen=True)
class Thousands:
    """One bench.load of the thousands of streams (bench/README.md)."""

    streams: int
    ramp: int  # seconds over which they start; 0: all at once
    reference: bool = False  # first the same streams straight to the fake upstream
    relay: bool = False  # then through the reference relay

    def argv(self, plan):
        return [
            "--streams", str(self.streams), "--requests", "0", "--events", str(plan.thousands_events),
            "--pace", f"{plan.thousands_pace_ms / 1000:g}",
            "--rounds", "1", "--warm-up-events", str(plan.thousands_warm_up_events),
            *(["--ramp", str(self.ramp)] if self.ramp else []), *(["--reference"] if self.reference else []),
            *(["--relay"] if self.relay else []),
        ]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Plan:
    rounds: int = 5  # throughput ratios move by up to 0.1 between runs of 3
    latency_requests: int = 400  # per target per round, concurrency 1
    streams: int = 100  # unpaced 50-event streams per target per round, concurrency 1
    wrk_seconds: int = 4
    paced_streams: int = 4  # per target per round, concurrency 1
    paced_events: int = 20
    paced_ms: int = 20
    paced_concurrency: int = 32
    hold_streams: int = 512  # opened at once to find how many are served at once
    hold_events: int = 10
    hold_pace_ms: int = 400
    long_events: int = 20000  # one stream this long: memory must stay flat
    translate_repeats: int = 30
    large_body_bytes: int = 5_000_000  # requests this large, one after another, beside a paced stream
    large_body_events: int = 50
    # The 2,000 ramped row also carries the reference and the targets; 4,000 is where it breaks.
    thousands: tuple = (
        Thousands(500, 10),
        Thousands(1000, 10),
        Thousands(2000, 10, reference=True),
        Thousands(2000, 0, relay=True),
        Thousands(4000, 10),
    )
    thousands_events: int = 400  # 20 s
    thousands_pace_ms: int = 50  # 20 events/s, an agent's token rate
    thousands_warm_up_events: int = 20
    # Every row for these; the other directions get OTHER_METRICS in other_rounds, and instructions.
    main_directions: tuple = ("messages_to_chat", "chat_to_messages")
    other_rounds: int = 3
    # Capacity per core: paced streams this many at once, one step after another until a limit passes.
    per_core_steps: tuple = (100, 200, 300, 400, 500, 600, 700, 800, 1000, 1200)
    per_core_rate: int = 20  # events per second per stream
    per_core_opens: int = 200  # streams opened per second while a step ramps up
    per_core_seconds: float = 5.0  # measured, once every stream of the step is open
    # What limits in Redis cost (bench/redis_overhead.py): calls per measurement, rounds.
    redis_calls: int = 1000
    redis_rounds: int = 3


QUICK = Plan(
    rounds=1,
    latency_requests=150,
    streams=40,
    wrk_seconds=2,
    paced_streams=2,
    paced_events=10,
    hold_streams=300,
    long_events=5000,
    translate_repeats=5,
    thousands=(Thousands(200, 2, reference=True),),
    thousands_events=100,
    other_rounds=1,
    per_core_steps=(50, 100),
    per_core_seconds=2.0,
    redis_calls=200,
    redis_rounds=1,
)
# Every tool started and every table filled, at toy scale (tests/deploy/test_bench_smoke.py).
SMOKE = Plan(
    rounds=1,
    latency_requests=5,
    streams=3,
    wrk_seconds=1,
    paced_streams=1,
    paced_events=3,
    paced_ms=5,
    paced_concurrency=2,
    hold_streams=4,
    hold_events=4,
    hold_pace_ms=100,
    long_events=100,
    translate_repeats=1,
    large_body_bytes=100_000,
    large_body_events=3,
    thousands=(Thousands(20, 0, reference=True, relay=True),),
    thousands_events=5,
    thousands_warm_up_events=2,
    other_rounds=1,
    per_core_steps=(5,),
    per_core_seconds=0.5,
    redis_calls=20,
    redis_rounds=1,
)


@dataclasses.dataclass
class Target:
    name: str
    url: str
    path: str
    make_body: object
    headers: dict
    end: bytes
    pid: int
    broken: str = ""
    route: object = None  # (model, stream) -> path, where the path names them (the clouds)

    def at(self, model, stream):
        return self.route(model, stream) if self.route else self.path

    def body(self, model, stream):
        return json.dumps(self.make_body(model, stream), ensure_ascii=False).encode()

    def send(self, model, stream, **options):
        return client.run(self.url, self.at(model, stream), self.body(model, stream), self.headers, **options)


def targets_for(direction, upstream, relay, bridge):
    """direct, relay (unless None) and bridge, each sent its protocol's form of the conversation."""
    d = direction
    upstream_side = (d.upstream_path, d.upstream_body, d.upstream_headers, d.upstream_end)
    targets = [
        Target("direct", upstream.url, *upstream_side, upstream.pid, route=d.upstream_route),
        Target("bridge", bridge.url, d.client_path, d.client_body, d.client_headers, d.client_end, bridge.pid),
    ]
    if relay:
        relay_target = Target("relay", relay.url, *upstream_side, relay.pid, route=d.upstream_route)
        targets.insert(1, relay_target)
    return targets


# ---------------------------------------------------------------- measurements


def smoke(target):
    """'' when the target answers a body and a stream correctly, else why not."""
    for stream in (False, True):
        result = target.send("bench-n5", stream, total=1, concurrency=1, keep_body=True, timeout=10)[0]
        if result.error or result.status != 200:
            return f"{'stream' if stream else 'body'}: HTTP {result.status} {result.error} {result.body[:160]!r}"
        if stream and target.end not in result.body:
            return f"stream did not end with {target.end!r}: {result.body[-160:]!r}"
        if not stream:
            try:
                json.loads(result.body)
            except ValueError:
                return f"body is not JSON: {result.body[:160]!r}"
    return ""


def _check(results, what):
    bad = [r for r in results if r.error or r.status != 200]
    if bad:
        raise RuntimeError(
            f"{what}: {len(bad)} of {len(results)} failed, e.g. HTTP {bad[0].status} "
            f"{bad[0].error} {bad[0].body[:200]!r}"
        )
    return results


def latency(target, plan, _upstream_pid):
    results = _check(target.send("bench-n50", False, total=plan.latency_requests, concurrency=1), "latency")
    return {"latency": [r.latency * 1000 for r in results]}


def streams(target, plan, _upstream_pid):
    results = _check(target.send("bench-n50", True, total=plan.streams, concurrency=1), "streams")
    return {"ttfb": [r.ttfb * 1000 for r in results], "ttlb": [r.latency * 1000 for r in results]}


def paced(target, plan, _upstream_pid, concurrency=1):
    model = f"bench-n{plan.paced_events}-p{plan.paced_ms}"
    total = plan.paced_streams if concurrency == 1 else concurrency
    results = _check(target.send(model, True, total=total, concurrency=concurrency, stamps=True), "paced")
    delays = [d * 1000 for r in results for d in r.delays]
    if len(delays) != total * plan.paced_events:
        raise RuntimeError(f"paced: expected {total * plan.paced_events} stamped events, got {len(delays)}")
    return {"delay": delays}


def large_body(target, plan, _upstream_pid):
    """A paced stream's delays while requests of large_body_bytes go through the same worker one
    after another: reading, validating and translating a large body holds the GIL, and every
    stream of the worker waits meanwhile."""
    model = target.make_body("bench-n1", False)["model"]  # with the prefix that routes the direction
    large = corpus.LARGE[target.path](plan.large_body_bytes)
    raw = json.dumps({**large, "model": model, "stream": False}, ensure_ascii=False)
    stop, sent = threading.Event(), []

    def send_large_bodies():
        while not stop.is_set():
            sent.extend(client.run(target.url, target.path, raw.encode(), target.headers, total=1, concurrency=1))

    sender = threading.Thread(target=send_large_bodies, daemon=True)
    sender.start()
    try:
        model = f"bench-n{plan.large_body_events}-p{plan.paced_ms}"
        results = _check(target.send(model, True, total=1, concurrency=1, stamps=True), "large body: paced stream")
    finally:
        stop.set()
        sender.join()
    _check(sent, "large body: requests")
    return {"delay_large": [d * 1000 for r in results for d in r.delays]}


def paced_many(target, plan, upstream_pid):
    return {"delay_many": paced(target, plan, upstream_pid, plan.paced_concurrency)["delay"]}


def throughput(key, model, stream, connections):
    def measure(target, plan, upstream_pid):
        cpu, upstream_cpu = procstat.cpu_seconds(target.pid), procstat.cpu_seconds(upstream_pid)
        out = wrk.run(
            target.url + target.at(model, stream),
            target.body(model, stream),
            target.headers,
            connections,
            plan.wrk_seconds,
        )
        cpu = procstat.cpu_seconds(target.pid) - cpu
        upstream_cpu = procstat.cpu_seconds(upstream_pid) - upstream_cpu
        if out["errors"]:
            raise RuntimeError(f"{key}: wrk saw {out['errors']} errors of {out['requests']}")
        return {
            key: out["rps"],
            f"{key}_cpu": (cpu, out["requests"]),
            f"{key}_upstream_busy": upstream_cpu / plan.wrk_seconds,
        }

    measure.__name__ = key
    return measure


METRICS = [
    latency,
    streams,
    throughput("rps16", "bench-n50", False, 16),
    throughput("rps64", "bench-n50", False, 64),
    throughput("sps32", "bench-n50", True, 32),
    paced,
    paced_many,
    large_body,
]
# The directions beyond Plan.main_directions: enough to see each within the ratios, in a session.
OTHER_METRICS = [latency, METRICS[2]]


def warm_up(target):
    target.send("bench-n50", False, total=200, concurrency=8)
    target.send("bench-n50", True, total=100, concurrency=8)


def hold_open(target, plan):
    """Open many slow streams at once; count those served before any could finish."""
    model = f"bench-n{plan.hold_events}-p{plan.hold_pace_ms}"
    duration = plan.hold_events * plan.hold_pace_ms / 1000
    sample = {}
    start = time.monotonic()

    def tick(now):
        if not sample and now - start >= duration / 2:
            sample["rss"], sample["pss"] = procstat.memory_mib(target.pid)
            sample["threads"] = procstat.threads(target.pid)

    results = target.send(
        model, True, total=plan.hold_streams, concurrency=plan.hold_streams, timeout=duration * 0.75, on_tick=tick
    )
    served = sorted(r.ttfb * 1000 for r in results if r.first_byte and r.status == 200)  # not a 503
    procstat.settle(target.pid)
    return {
        "asked": plan.hold_streams,
        "held": len(served),
        "ttfb_p50": client.percentile(served, 0.5),
        "ttfb_max": served[-1] if served else None,
        **sample,
    }


def long_stream(target, plan):
    """One stream of many events: peak memory against idle, CPU per event."""
    idle = procstat.memory_mib(target.pid)[0]
    peak = [idle]
    cpu = procstat.cpu_seconds(target.pid)
    result = target.send(
        f"bench-n{plan.long_events}",
        True,
        total=1,
        concurrency=1,
        timeout=300,
        on_tick=lambda now: peak.append(procstat.memory_mib(target.pid)[0]),
    )[0]
    cpu = procstat.cpu_seconds(target.pid) - cpu
    if result.error or result.status != 200:
        raise RuntimeError(f"long stream failed: HTTP {result.status} {result.error}")
    return {
        "idle": idle,
        "peak": max(peak),
        "seconds": result.latency,
        "cpu_us_per_event": cpu / plan.long_events * 1e6,
    }


def thousands(plan, log):
    """The thousands-of-streams rows, bench.load in this process: the cores they ran on, and per row
    (row, its argv, its report or why it failed).

    Run last, with every other server stopped, and unpinned: the bridge as deployed, on all the
    cores, which it shares with the load client (this process) and the fake upstream.
    """
    os.sched_setaffinity(0, servers.CORES)  # undo pin_self(): the processes started now inherit it
    rows = []
    for row in plan.thousands:
        argv = row.argv(plan)
        log(f"thousands of streams: python -m bench.load {' '.join(argv)}")
        try:
            result = load.run(load.parse(argv))
        except Exception as exc:  # one row's failure is a finding, not the end of the run
            result = f"{type(exc).__name__}: {exc}".strip()
            log(f"  failed: {result}")
        rows.append((row, argv, result))
    return {"cores": sorted(os.sched_getaffinity(0)), "rows": rows}


# ---------------------------------------------------------------- capacity per core

PER_CORE_DIRECTION = "messages_to_chat"
PER_CORE_LIMITS = {"added_p99": 10.0, "healthz_p99": 50.0, "floor_p99": 5.0}  # ms


def paced_step(target, plan, streams):
    """`streams` paced streams opened over a ramp, their events measured once all are open: delay
    p50/p99 (ms) of those events and /healthz p99 (ms) asked meanwhile on fresh connections."""
    ramp = max(1.0, streams / plan.per_core_opens)
    settled = ramp + 0.5  # the last stream opened, its first event out
    events = round((settled + plan.per_core_seconds) * plan.per_core_rate)
    model = f"bench-n{events}-p{1000 / plan.per_core_rate:g}"
    probe = load.HealthProbe(target.url)
    began = time.monotonic()
    try:
        results = target.send(
            model,
            True,
            total=streams,
            concurrency=streams,
            stamps=True,
            ramp=ramp,
            timeout=events / plan.per_core_rate + 60,
        )
    finally:
        health = probe.stop()
    _check(results, f"{streams} paced streams")
    delays = [d * 1000 for r in results for d, e in zip(r.delays, r.emitted, strict=True) if e >= began + settled]
    if not delays:
        raise RuntimeError(f"{streams} paced streams: no event after all were open")
    return {
        "p50": client.percentile(delays, 0.5),
        "p99": client.percentile(delays, 0.99),
        "events": len(delays),
        "healthz_p99": health["p99"],
        "healthz_failed": health["failed"],
    }


def per_core(plan, upstream, bridge, log):
    """Capacity per core: paced streams raised step by step until the bridge's added delay p99 or
    its /healthz p99 passes its limit, each step first sent straight to the upstream (the floor).

    The bridge (one worker) is on the proxy core, the fake upstream and this process on the
    other: when the floor passes its own limit, the load side is what stops, not the bridge."""
    direction = DIRECTIONS[PER_CORE_DIRECTION]
    direct, target = targets_for(direction, upstream, None, bridge)
    broken = smoke(target)
    if broken:
        return {"direction": PER_CORE_DIRECTION, "limits": PER_CORE_LIMITS, "steps": [], "error": broken}
    target.send(f"bench-n20-p{1000 / plan.per_core_rate:g}", True, total=50, concurrency=50)  # warm-up
    steps = []
    for streams in plan.per_core_steps:
        step = {"streams": streams}
        try:
            step["floor"] = paced_step(direct, plan, streams)
            log(f"  {streams} streams, floor: p99 {step['floor']['p99']:.1f} ms")
            step["bridge"] = paced_step(target, plan, streams)
            log(
                f"  {streams} streams, bridge: p99 {step['bridge']['p99']:.1f} ms, "
                f"healthz p99 {step['bridge']['healthz_p99']} ms"
            )
        except RuntimeError as exc:
            step["error"] = str(exc)
            log(f"    failed: {exc}")
        step["verdict"] = step_verdict(step)
        steps.append(step)
        if step["verdict"] != "within":
            break
    within = [step["streams"] for step in steps if step["verdict"] == "within"]
    return {
        "direction": PER_CORE_DIRECTION,
        "limits": PER_CORE_LIMITS,
        "steps": steps,
        "capacity": max(within, default=0),
    }


def step_verdict(step):
    """within (every limit met), bridge (its delay or /healthz passed), load (the floor passed:
    the load side is the limit at this step) or failed."""
    if "error" in step:
        return "failed"
    if step["floor"]["p99"] > PER_CORE_LIMITS["floor_p99"]:
        return "load"
    added = step["bridge"]["p99"] - step["floor"]["p99"]
    health = step["bridge"]["healthz_p99"]
    if added > PER_CORE_LIMITS["added_p99"] or health is None or health > PER_CORE_LIMITS["healthz_p99"]:
        return "bridge"
    if step["bridge"]["healthz_failed"]:
        return "failed"
    return "within"


# ---------------------------------------------------------------- the run


def measure_direction(direction, plan, upstream, relay, bridge, log):
    """Every per-request and per-stream metric, in rounds: (targets, {target name: samples}); a
    direction beyond the main ones only OTHER_METRICS, in fewer rounds."""
    targets = targets_for(direction, upstream, relay, bridge)
    data = {t.name: {} for t in targets}
    live = _ready(targets, log)
    main = direction.name in plan.main_directions
    rounds, metrics = (plan.rounds, METRICS) if main else (plan.other_rounds, OTHER_METRICS)
    for number in range(rounds):
        for metric in metrics:
            order = live[number % len(live) :] + live[: number % len(live)]
            for target in order:
                log(f"  round {number + 1}/{rounds} {metric.__name__} {target.name}")
                samples = data[target.name]
                for key, value in _attempt(samples, log, metric, target, plan, upstream.pid).items():
                    samples.setdefault(key, []).append(value)
    return targets, data


def measure_capacity(direction, plan, upstream, relay, bridge, data, log):
    """Idle memory, streams held at once and one long stream, into `data`: the default config's."""
    proxies = [t for t in targets_for(direction, upstream, relay, bridge) if t.name != "direct"]
    for target in _ready(proxies, log):
        procstat.settle(target.pid)
        samples = data[target.name]
        samples["idle_rss"], samples["idle_pss"] = procstat.memory_mib(target.pid)
        for name, test in (("hold", hold_open), ("long", long_stream)):
            log(f"  {name} {target.name}")
            result = _attempt(samples, log, test, target, plan)
            if result:
                samples[name] = result
    for target in proxies:
        if target.broken:
            data[target.name].setdefault("errors", []).append(f"default config: {target.broken}")


def _ready(targets, log):
    """The targets that answer correctly, warmed up; the others are marked broken."""
    for target in targets:
        target.broken = smoke(target)
        if target.broken:
            log(f"  {target.name}: not measured: {target.broken}")
        else:
            warm_up(target)
    return [t for t in targets if not t.broken]


def _attempt(samples, log, measure, *args):
    """measure(*args), or {} with the reason it failed noted in the target's samples."""
    try:
        return measure(*args)
    except RuntimeError as exc:
        samples.setdefault("errors", []).append(str(exc))
        log(f"    failed: {exc}")
        return {}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short round (about a minute)")
    parser.add_argument(
        "--out",
        help=f"results file (default {DEFAULT_OUT.relative_to(servers.ROOT)}, "
        f"or {QUICK_OUT.relative_to(servers.ROOT)} with --quick)",
    )
    parser.add_argument(
        "--direction", choices=sorted(EVERY), action="append", help="measure only this direction (repeatable)"
    )
    parser.add_argument(
        "--logs",
        default=str(servers.LOGS),
        help=f"where the servers' logs go (default {servers.LOGS.relative_to(servers.ROOT)})",
    )
    parser.add_argument(
        "--no-thousands",
        action="store_true",
        help="skip the thousands of streams (about 7 minutes of the full run)",
    )
    parser.add_argument(
        "--per-core-only",
        action="store_true",
        help=f"only the capacity per core (default out {PER_CORE_OUT.relative_to(servers.ROOT)})",
    )
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not wrk.available():
        print(wrk.INSTALL_HINT, file=sys.stderr)
        return 2
    plan = SMOKE if args.smoke else QUICK if args.quick else Plan()
    out = args.out or (PER_CORE_OUT if args.per_core_only else QUICK_OUT if args.quick or args.smoke else DEFAULT_OUT)
    names = [] if args.per_core_only else args.direction or list(EVERY)
    counts = instructions.available() and not (args.smoke or args.quick)
    run_thousands = not (args.no_thousands or args.per_core_only)
    servers.LOGS = pathlib.Path(args.logs)
    servers.LOGS.mkdir(parents=True, exist_ok=True)
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    servers.pin_self()
    started = time.monotonic()
    cpu_before = _cpu_marks()

    def log(message):
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    log(f"estimated duration: {estimate(plan, names, counts, run_thousands) / 60:.1f} minutes")

    translations = {}
    for name in [n for n in names if n in DIRECTIONS]:  # a cloud's request is its Messages client's
        log(f"in-process validate+translate: {name}")
        try:
            translations[name] = translate.measure(name, plan.translate_repeats)
        except Exception as exc:  # a direction not written yet must not stop the run
            translations[name] = f"{type(exc).__name__}: {exc}".strip()
            log(f"  not measured: {translations[name]}")

    running, commands = [], {}

    def start(label, server):
        running.append(server)
        commands[label] = server.command
        return server

    try:
        upstream = start("upstream", servers.upstream())
        relay = start("relay, one worker (per request and per stream)", servers.relay(upstream.url, workers=1))
        bridge = start("bridge, one worker (per request and per stream)", servers.bridge(upstream.url, workers=1))
        results = {}
        for name in [n for n in names if n in DIRECTIONS]:
            log(f"direction {name}")
            results[name] = measure_direction(DIRECTIONS[name], plan, upstream, relay, bridge, log)
        for server in (relay, bridge):  # the capacity per core has the proxy core to itself
            server.stop()
        clouds = [n for n in names if n in CLOUD_DIRECTIONS]
        if clouds:  # the relay has one upstream: the fake clouds get a relay and a bridge of their own
            fake = clouds_module.start()
            running.append(fake)  # its scratch directory removed at the end
            start("fake clouds", fake.server)
            relay = start("relay to the fake clouds, one worker", servers.relay(fake.url, workers=1))
            bridge = start("bridge, one worker, with the clouds' routes", servers.bridge(upstream.url, 1, fake.env))
            for name in clouds:
                log(f"direction {name}")
                results[name] = measure_direction(CLOUD_DIRECTIONS[name], plan, fake.server, relay, bridge, log)
            for server in (relay, bridge):
                server.stop()
        per_core_bridge = start("bridge, one worker (capacity per core)", servers.bridge(upstream.url, workers=1))
        log(f"capacity per core: {PER_CORE_DIRECTION}")
        capacity = per_core(plan, upstream, per_core_bridge, log)
        per_core_bridge.stop()
        redis = None if args.per_core_only else redis_costs(plan, log)
        for name in [n for n in names if n in plan.main_directions]:  # fresh processes: idle memory
            for server in (relay, bridge):
                server.stop()
            relay = start("relay, default config (streams held, memory)", servers.relay(upstream.url))
            bridge = start("bridge, default config (streams held, memory)", servers.bridge(upstream.url))
            log(f"capacity {name}")
            measure_capacity(DIRECTIONS[name], plan, upstream, relay, bridge, results[name][1], log)
        counted = {}
        if counts:
            # A direction a target did not answer (a pair not written yet) has nothing to count.
            answered = [name for name in names if not any(target.broken for target in results[name][0])]
            counting = [n for n in answered if n in DIRECTIONS] + list(CLOUD_DIRECTIONS)
            log(f"instructions per request and per upstream event (callgrind): {', '.join(counting)}")
            counted = instructions.measure_all(counting)
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        for server in reversed(running):
            server.stop()
    many_streams = thousands(plan, log) if run_thousands else None

    env = environment()
    env["other_cores"] = _other_cores(cpu_before, _cpu_marks(), time.monotonic() - started)
    text = report.render(
        plan,
        args,
        {n: EVERY[n].title for n in names},
        results,
        translations,
        counted,
        commands,
        time.monotonic() - started,
        env,
        many_streams,
        capacity,
        redis,
    )
    print(text)
    out = pathlib.Path(out)
    out.write_text(text)
    log(f"wrote {out}")
    log(f"took {(time.monotonic() - started) / 60:.1f} minutes")
    return 0


def redis_costs(plan, log):
    """bench/redis_overhead.py's measurement, each bridge on the proxy core, or why it was not taken."""
    if not shutil.which("redis-server"):
        return {"error": "redis-server is not installed (Debian's redis-server package)"}
    log(f"limits in Redis: python -m bench.redis_overhead --calls {plan.redis_calls} --rounds {plan.redis_rounds}")
    pins = servers.pinning()
    try:
        return redis_overhead.measure(plan.redis_calls, plan.redis_rounds, core=pins[0] if pins else None)
    except Exception as exc:  # the rest of the run still stands
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}".strip()}


def estimate(plan, names, counts, run_thousands):
    """Seconds the run should take on an idle machine: each step's known length plus what each
    took in a measured run (start-ups, warm-ups, callgrind), rough but enough to plan a session."""
    per_target = (
        plan.latency_requests * 0.005
        + plan.streams * 0.006
        + 3 * (plan.wrk_seconds + 0.3)
        + plan.paced_streams * plan.paced_events * plan.paced_ms / 1000
        + 2 * plan.paced_events * plan.paced_ms / 1000  # 32 at once; beside large requests
        + plan.large_body_events * plan.paced_ms / 1000
        + 6  # the large requests: building, sending, the last one after the stream
    )
    other_target = plan.latency_requests * 0.005 + plan.wrk_seconds + 0.3
    main = [n for n in names if n in plan.main_directions]
    seconds = 10 + 2 * len(names)  # start-ups, in-process translation
    seconds += len(main) * (3 * (5 + plan.rounds * per_target))
    seconds += (len(names) - len(main)) * 3 * (5 + plan.other_rounds * other_target)
    hold = plan.hold_events * plan.hold_pace_ms / 1000 * 0.75 + 5
    seconds += len(main) * 2 * (10 + hold + plan.long_events * 0.0002)
    seconds += 200 if counts else 0  # callgrind: every direction in two runs per target, on both cores
    for streams in plan.per_core_steps:  # floor and bridge, often stopped before the last
        seconds += 2 * (max(1.0, streams / plan.per_core_opens) + 1.5 + plan.per_core_seconds)
    seconds += 15 + (plan.redis_rounds + 1) * 3 * plan.redis_calls / 400  # sequential, then 16 at once
    for row in plan.thousands if run_thousands else ():
        length = row.ramp + plan.thousands_events * plan.thousands_pace_ms / 1000
        seconds += 15 + (2 + row.reference + 2 * row.relay) * length
    return seconds


def _cpu_marks():
    """(CPU seconds the whole machine has been busy, CPU seconds of this process and its reaped children)."""
    with open("/proc/stat") as fh:
        user, nice, system = map(int, fh.readline().split()[1:4])  # interrupts are nobody's
    own = os.times()
    return (
        (user + nice + system) / os.sysconf("SC_CLK_TCK"),
        own.user + own.system + own.children_user + own.children_system,
    )


def _other_cores(before, after, seconds):
    """Cores' worth of CPU that processes other than the bench's used while it ran.

    Every process the bench starts (upstream, relay, bridge, wrk) has been stopped and reaped
    by now, so its CPU is in this process's children times; the load average would instead
    count the bench's own hundreds of held streams.
    """
    machine, own = after[0] - before[0], after[1] - before[1]
    return max(0.0, machine - own) / seconds


def environment():
    """Machine and versions, for the results header."""

    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=servers.ROOT).stdout.strip()
        except OSError:
            return "?"

    cpu = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as fh:
        memory = int(fh.readline().split()[1]) / 1024 / 1024
    # The results file itself, written by an earlier run, is no change to the code measured.
    dirty = first(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/RESULTS.md"])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {len(servers.CORES)} cores usable",
        "cores": servers.CORES,
        "memory": f"{memory:.1f} GiB",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": ", ".join(
            f"{name} {metadata.version(name)}"
            for name in ("gunicorn", "flask", "werkzeug", "requests", "urllib3", "marshmallow")
        ),
        "wrk": wrk.version(),
        "commit": first(["git", "rev-parse", "--short", "HEAD"]) + (" (+ uncommitted changes)" if dirty else ""),
        "gunicorn": servers.gunicorn_config(),
        "pinning": servers.pinning(),
    }
