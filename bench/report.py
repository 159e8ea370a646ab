"""Render the measurements as the markdown of bench/RESULTS.md."""

import os
import shlex
import statistics

from . import client, instructions, redis_overhead, wrk
from .processes import ROOT


def _pct(values, fraction):
    return client.percentile(values, fraction) if values else None


def _pool(data, key):
    return [v for chunk in data.get(key, []) for v in chunk]


def _median(data, key):
    values = data.get(key)
    return statistics.median(values) if values else None


def _cpu_ms(data, key):
    runs = data.get(key)
    if not runs:
        return None
    return sum(cpu for cpu, _ in runs) / max(1, sum(n for _, n in runs)) * 1000


def summarize(data):
    """One target's raw samples -> the numbers the tables show."""
    s = {}
    s["lat_p50"], s["lat_p99"] = _pct(_pool(data, "latency"), 0.5), _pct(_pool(data, "latency"), 0.99)
    s["ttfb_p50"], s["ttlb_p50"] = _pct(_pool(data, "ttfb"), 0.5), _pct(_pool(data, "ttlb"), 0.5)
    s["ttfb_p99"], s["ttlb_p99"] = _pct(_pool(data, "ttfb"), 0.99), _pct(_pool(data, "ttlb"), 0.99)
    for key in ("rps16", "rps64", "sps32"):
        s[key] = _median(data, key)
        s[f"{key}_cpu"] = _cpu_ms(data, f"{key}_cpu")
        busy = data.get(f"{key}_upstream_busy")
        s[f"{key}_upstream_busy"] = statistics.mean(busy) * 100 if busy else None
    for key in ("delay", "delay_many", "delay_large"):
        s[f"{key}_p50"], s[f"{key}_p99"] = _pct(_pool(data, key), 0.5), _pct(_pool(data, key), 0.99)
        s[f"{key}_max"] = _pct(_pool(data, key), 1.0)
    return s


def _added(s, direct, key):
    if s.get(key) is None or direct.get(key) is None:
        return None
    return s[key] - direct[key]


def _fmt(value, digits=2):
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return f"{value:,.{digits}f}"


def _ratio(bridge, relay):
    if bridge is None or relay in (None, 0):
        return None
    return bridge / relay


ROWS = [  # (label, key, digits, added-over-direct?)
    ("latency p50, concurrency 1 (ms)", "lat_p50", 2, False),
    ("latency p99, concurrency 1 (ms)", "lat_p99", 2, False),
    ("added latency p50 over direct (ms)", "lat_p50", 2, True),
    ("requests/s, concurrency 16", "rps16", 0, False),
    ("requests/s, concurrency 64", "rps64", 0, False),
    ("server CPU per request (ms, c16 run)", "rps16_cpu", 3, False),
    ("stream time to first byte p50 (ms)", "ttfb_p50", 2, False),
    ("stream time to last byte p50 (ms)", "ttlb_p50", 2, False),
    ("stream time to last byte p99 (ms)", "ttlb_p99", 2, False),
    ("streams/s, concurrency 32 (50 events each)", "sps32", 0, False),
    ("server CPU per stream (ms, c32 run)", "sps32_cpu", 3, False),
    ("paced: emission → receipt p50 (ms)", "delay_p50", 3, False),
    ("paced: emission → receipt p99 (ms)", "delay_p99", 3, False),
    ("paced: emission → receipt max (ms)", "delay_max", 3, False),
    ("paced: added delay p50 over direct (ms)", "delay_p50", 3, True),
    ("paced: added delay p99 over direct (ms)", "delay_p99", 3, True),
    ("paced, 32 streams at once: delay p50 (ms)", "delay_many_p50", 3, False),
    ("paced, 32 streams at once: delay p99 (ms)", "delay_many_p99", 3, False),
    ("paced, 32 streams at once: delay max (ms)", "delay_many_max", 3, False),
    ("paced, beside large requests on the same worker: delay p99 (ms)", "delay_large_p99", 3, False),
    ("paced, beside large requests on the same worker: delay max (ms)", "delay_large_max", 3, False),
    ("upstream's core busy during the c64 run (%)", "rps64_upstream_busy", 0, False),
]


def direction_table(targets, data):
    s = {t.name: summarize(data[t.name]) for t in targets}
    lines = ["| metric | direct | relay | bridge | bridge ÷ relay |", "|---|---:|---:|---:|---:|"]
    for label, key, digits, added in ROWS:
        cells, values = [], {}
        for name in ("direct", "relay", "bridge"):
            value = _added(s[name], s["direct"], key) if added else s[name].get(key)
            if added and name == "direct":
                value = None
            values[name] = value
            cells.append(_fmt(value, digits))
        if all(value is None for value in values.values()):
            continue  # a metric not taken for this direction
        ratio = _ratio(values["bridge"], values["relay"]) if "upstream" not in key else None
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {_fmt(ratio)} |")
    return "\n".join(lines), s


def process_table(data, plan):
    lines = ["| | relay | bridge |", "|---|---:|---:|"]

    def row(label, pick, digits=1):
        cells = []
        for name in ("relay", "bridge"):
            try:
                cells.append(_fmt(pick(data[name]), digits))
            except (KeyError, TypeError):
                cells.append("—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("RSS at idle, whole gunicorn tree (MiB)", lambda d: d["idle_rss"])
    row("PSS at idle (MiB)", lambda d: d["idle_pss"])
    row(
        f"streams opened at once ({plan.hold_events} events, {plan.hold_pace_ms} ms apart)",
        lambda d: d["hold"]["asked"],
        0,
    )
    row("… of which served at once (first byte before any could end)", lambda d: d["hold"]["held"], 0)
    row("… time to first byte p50 of those served (ms)", lambda d: d["hold"]["ttfb_p50"])
    row("RSS with those streams open (MiB)", lambda d: d["hold"]["rss"])
    row("PSS with those streams open (MiB)", lambda d: d["hold"]["pss"])
    row("threads in the tree with those streams open", lambda d: d["hold"]["threads"], 0)
    row(f"one {plan.long_events}-event stream: RSS before (MiB)", lambda d: d["long"]["idle"])
    row(f"one {plan.long_events}-event stream: peak RSS during (MiB)", lambda d: d["long"]["peak"])
    row(f"one {plan.long_events}-event stream: seconds", lambda d: d["long"]["seconds"], 2)
    row("server CPU per upstream event (µs, long stream)", lambda d: d["long"]["cpu_us_per_event"], 1)
    return "\n".join(lines)


def translation_table(rows):
    if isinstance(rows, str):
        return f"not measured: `{rows}`"
    lines = [
        "| request | size (KB) | parse | validate | translate | encode | total (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, size, ms in rows:
        lines.append(
            f"| {label} | {size / 1000:.0f} | {ms['parse']:.2f} | {ms['validate']:.2f} | "
            f"{ms['translate']:.2f} | {ms['encode']:.2f} | **{ms['total']:.2f}** |"
        )
    return "\n".join(lines)


def _spread(data, key):
    """The lowest and highest bridge ÷ relay of single rounds, when the metric is taken per round:
    how far the machine moved the ratio within this run."""

    def rounds(samples):
        values = samples.get(key) or []
        return [cpu / n for cpu, n in values if n] if key.endswith("_cpu") else values

    bridge, relay = rounds(data["bridge"]), rounds(data["relay"])
    if len(bridge) != len(relay):  # a failed round: the others no longer pair up
        return ""
    ratios = [b / r for b, r in zip(bridge, relay, strict=True) if r]
    return f" (rounds {min(ratios):.2f}–{max(ratios):.2f})" if len(ratios) > 1 else ""


def _verdict(ok):
    return "—" if ok is None else ("yes" if ok else "**no**")


def targets_table(s, data, translation, counted, plan):
    relay, bridge, direct = s["relay"], s["bridge"], s["direct"]
    checks = []

    def check(label, measured, ok, goal):
        if ok is not None or measured.strip("—") and "— vs —" not in measured:  # else not taken
            checks.append(f"| {label} | {measured} | {goal} | {_verdict(ok)} |")

    def ratio_check(label, key, goal, at_most, added=False):
        b = _added(bridge, direct, key) if added else bridge.get(key)
        r = _added(relay, direct, key) if added else relay.get(key)
        ratio = _ratio(b, r)
        ok = None if ratio is None else (ratio <= goal if at_most else ratio >= goal)
        check(
            label,
            f"{_fmt(b)} vs {_fmt(r)} → {_fmt(ratio)}×{_spread(data, key)}",
            ok,
            f"{'≤' if at_most else '≥'} {goal}× relay",
        )

    ratio_check("added latency p50, c1 (ms)", "lat_p50", 1.2, True, added=True)
    ratio_check("server CPU per request (ms)", "rps16_cpu", 1.1, True)

    def instructions_check(label, kind, scale, digits):
        bridge, relay = counted["bridge"][kind], counted["relay"][kind]
        shown = f"{bridge / scale:.{digits}f} vs {relay / scale:.{digits}f} → {bridge / relay:.2f}×"
        check(label, shown, bridge <= relay, "≤ 1.0× relay")

    if counted:
        instructions_check("CPU per request in instructions, in-process (callgrind; millions)", "request", 1e6, 2)
        label = "CPU per upstream event of a long stream in instructions (callgrind; thousands)"
        instructions_check(label, "event", 1e3, 1)
    ratio_check("requests/s, c16", "rps16", 0.9, False)
    ratio_check("streams/s, c32", "sps32", 0.85, False)
    for pct, goal in (("p50", 0.5), ("p99", 2.0)):
        added = _added(bridge, direct, f"delay_{pct}")
        check(f"paced added delay {pct} (ms)", _fmt(added, 3), None if added is None else added < goal, f"< {goal} ms")
    worst = bridge.get("delay_max")
    check(
        "no paced event waits for the next (max delay, c1)",
        _fmt(worst, 3),
        None if worst is None else worst < plan.paced_ms,
        f"< {plan.paced_ms} ms (the pace)",
    )
    worst = bridge.get("delay_large_max")
    check(
        f"paced event delay beside {plan.large_body_bytes / 1e6:g} MB requests on its worker (max)",
        _fmt(worst, 3),
        None if worst is None else worst < 50,
        "< 50 ms",
    )
    hold = data["bridge"].get("hold")
    check(
        "streams served at once, default config",
        f"{hold['held']} of {hold['asked']}" if hold else "—",
        None if not hold else hold["held"] >= 256,
        "≥ 256",
    )
    rss = hold.get("rss") if hold else None
    check("RSS with those streams open (MiB)", _fmt(rss, 1), None if rss is None else rss < 200, "< 200 MiB")
    long = data["bridge"].get("long")
    growth = long["peak"] - long["idle"] if long else None
    check(
        "RSS growth over one long stream (MiB)",
        _fmt(growth, 1),
        None if growth is None else growth < 5,
        "flat (< 5 MiB)",
    )
    large = None
    if translation is not None and not isinstance(translation, str):
        large = next((ms["total"] for label, _, ms in translation if label.startswith("500 KB")), None)
    check("validate + translate a 500 KB request (ms)", _fmt(large), None if large is None else large < 10, "< 10 ms")
    return "\n".join(["| target | measured (bridge vs relay) | goal | met |", "|---|---|---|---|"] + checks)


def _cells(quantiles, *keys):
    return " / ".join(_fmt(quantiles.get(key), 1) for key in keys)


def _held(streams):
    """The streams of a bench.load report that were served to their end: neither refused nor failed."""
    return streams["count"] - streams["refused"] - streams["failed"]


def _start(row):
    return f"{row.streams:,}, " + (f"over {row.ramp} s" if row.ramp else "at once")


def thousands_table(rows):
    """One row per bench.load, the reference's beside the run it came with."""
    lines = [
        "| streams, start | held / refused / failed | first byte p50 / p99 (ms) | event delay p50 / p99 / max (ms) "
        "| /healthz p99 / max (ms) | RSS peak (MiB) | bridge CPU per paced event, µs (cores busy) "
        "| load client / fake upstream / other work (CPU-s) | streams took, max (s) |",
        "|---|---|---|---|---|---:|---:|---|---:|",
    ]
    for row, _, result in rows:
        label = _start(row)
        if isinstance(result, str):
            lines.append(f"| {label} | not measured: `{result[:200]}` |" + " |" * 7)
            continue
        s, health, cpu = result["streams"], result["healthz_ms"], result["cpu"]
        held = _held(s)
        failed_probes = f" ({health['failed']} of {health['count']} failed)" if health["failed"] else ""
        lines.append(
            f"| {label} | {held:,} / {s['refused']:,} / {s['failed']:,} | {_cells(s['ttfb_ms'], 'p50', 'p99')} "
            f"| {_cells(s['event_delay_ms'], 'p50', 'p99', 'max')} | {_cells(health, 'p99', 'max')}{failed_probes} "
            f"| {_fmt(result['rss_mib']['peak'], 0)} | {_fmt(cpu['us_per_event_or_request'], 0)} "
            f"({_fmt(cpu['cores_busy'])}) | {_fmt(cpu['load_client_seconds'], 1)} / {_fmt(cpu['upstream_seconds'], 1)} "
            f"/ {_fmt(cpu['other_work_seconds'], 1)} | {_fmt(s['duration_ms']['max'] / 1000, 1)} |"
        )
        reference = result.get("reference_straight_to_upstream")
        if reference:
            lines.append(
                f"| {label}, straight to the fake upstream (reference) "
                f"| {_held(reference):,} / {reference['refused']:,} "
                f"/ {reference['failed']:,} | {_cells(reference['ttfb_ms'], 'p50', 'p99')} "
                f"| {_cells(reference['event_delay_ms'], 'p50', 'p99', 'max')} |" + " — |" * 5
            )
        relay = result.get("through_the_relay")
        if relay:
            delays, health = relay["event_delay_ms"], relay["healthz_ms"]
            lines.append(
                f"| {label}, through the reference relay | {_held(relay):,} / {relay['refused']:,} "
                f"/ {relay['failed']:,} | {_cells(relay['ttfb_ms'], 'p50', 'p99')} "
                f"| {_cells(delays, 'p50', 'p99', 'max')} | {_cells(health, 'p99', 'max')} |" + " — |" * 4
            )
    return "\n".join(lines)


def burst_targets(row, result):
    """The burst's targets (streams opened at once), the bridge beside the relay's same round."""
    s, health, relay = result["streams"], result["healthz_ms"], result["through_the_relay"]
    checks = ["| target | bridge | relay | goal | met |", "|---|---|---|---|---|"]
    for label, bridge_ms, relay_ms, goal_ms in (
        ("first byte p99 (ms)", s["ttfb_ms"]["p99"], relay["ttfb_ms"]["p99"], 1000),
        ("/healthz max (ms)", health["max"], relay["healthz_ms"]["max"], 200),
        ("event delay p99 (ms)", s["event_delay_ms"]["p99"], relay["event_delay_ms"]["p99"], 500),
    ):
        ok = None if bridge_ms is None else bridge_ms < goal_ms
        checks.append(f"| {label} | {_fmt(bridge_ms, 0)} | {_fmt(relay_ms, 0)} | < {goal_ms:,} ms | {_verdict(ok)} |")
    return "\n".join(checks)


def thousands_targets(row, result):
    """The thousands-of-streams targets, for the run that has the reference (2,000 streams over 10 s)."""
    s, reference = result["streams"], result["reference_straight_to_upstream"]
    checks = ["| target | measured | goal | met |", "|---|---|---|---|"]

    def check(label, measured, ok, goal):
        checks.append(f"| {label} | {measured} | {goal} | {_verdict(ok)} |")

    errors = s["count"] - _held(s)
    held = f"{_held(s):,} of {s['count']:,}, {errors:,} errors"
    check(f"{row.streams:,} streams held", held, not errors, "all, zero errors")
    added = _added(s["event_delay_ms"], reference["event_delay_ms"], "p99")
    ok = None if added is None else added < 10
    check("paced-event added delay p99 (ms; p99 minus the reference's)", _fmt(added, 1), ok, "< 10 ms")
    health = result["healthz_ms"]["p99"]
    check("/healthz p99 (ms)", _fmt(health, 1), None if health is None else health < 50, "< 50 ms")
    rss = result["rss_mib"]["peak"]
    check("RSS peak, whole gunicorn tree (MiB)", _fmt(rss, 0), rss < 1024, "< 1 GiB")
    return "\n".join(checks)


def log_table(log):
    """bench.load's summary of gunicorn's and the bridge's own log lines (numbers as #)."""
    if not log:
        return "none: gunicorn and the bridge logged nothing but their access lines"
    lines = ["| log line (numbers as #) | times |", "|---|---:|"]
    root = str(ROOT) + os.sep  # the checkout's path names the machine, not the finding
    for message, count in log.items():
        message = message.replace(root, "").replace("|", "\\|")
        lines.append(f"| {message} | {count:,} |")
    return "\n".join(lines)


def thousands_section(thousands, env, plan):
    if thousands is None:
        return ["## Thousands of streams", "", "Not run (`--no-thousands`).", ""]
    rows, cores = thousands["rows"], thousands["cores"]
    measured = [(row, result) for row, _, result in rows if not isinstance(result, str)]
    g = env["gunicorn"]
    out = [
        "## Thousands of streams",
        "",
        f"`python -m bench.load` (bench/load.py), called by the bench after the measurements above: "
        f"paced streams of {plan.thousands_events} events {plan.thousands_pace_ms} ms apart, half through "
        "each direction, no other requests, one warm-up round at full size first, then one measured round. "
        f"The bridge runs with the default configuration ({g['workers']} workers × {g['threads']} threads) and is "
        f"**not pinned**: the bridge, the load client (the bench process) and the fake upstream share "
        f"cores {', '.join(map(str, cores))} of the machine's {len(env['cores'])}, so CPU figures include "
        "their contention; see bench/README.md.",
        "",
    ]
    out += [f"- `python -m bench.load {' '.join(argv)}`" for _, argv, _ in rows]
    out += ["", thousands_table(rows), ""]
    problems = [(row, p) for row, result in measured for p in result["streams"]["problems"]]
    out += [f"- {row.streams:,} streams: a stream failed: `{p[:300]}`" for row, p in problems]
    target = next(((row, r) for row, r in measured if "reference_straight_to_upstream" in r), None)
    if target:
        out += [f"### Targets, {_start(target[0])}", "", thousands_targets(*target), ""]
    for row, result in measured:
        if "through_the_relay" in result:
            out += [f"### Targets, {_start(row)} (a burst)", "", burst_targets(row, result), ""]
    if measured:
        row, result = max(measured, key=lambda item: item[0].streams)
        out += [
            f"### Where it breaks: the log of the {row.streams:,}-stream run",
            "",
            log_table(result["log"]),
            "",
        ]
    return out


def redis_section(redis, plan):
    """What client limits and budgets in Redis add to a call, against the same bridge without them."""
    out = [
        "## Limits in Redis",
        "",
        f"bench/redis_overhead.py, {plan.redis_rounds} round(s) of {plan.redis_calls:,} calls per target "
        "(medians over rounds): four bridges with one worker each, pinned to the proxy core, in front of a "
        "priced deployment; Redis, the client (bench/client.py) and the fake upstream on the other core. "
        "*plain* has a client key and no Redis; *limited* adds limits in Redis on that key (rpm, tpm, tpd), "
        "each call waiting for its admission's verdict; *ahead* the same limits with "
        f"`BRIDGE_ADMIT_AHEAD={redis_overhead.AHEAD}` (a key far from its limits admitted before the verdict); "
        "*budgeted* a key held in Redis with its own limits and budget, and team and user budgets; none high "
        "enough to refuse. CPU is each bridge's (its worker and usage writer) and redis-server's.",
        "",
    ]
    if redis.get("error"):
        return out + [f"Not measured: `{redis['error']}`", ""]
    plain = redis["rows"]["plain"]
    out += ["| target | measured (vs plain) | goal | met |", "|---|---|---|---|"]
    for name in ("limited", "ahead"):
        limited = redis["rows"][name]
        added, rate = limited[0] - plain[0], limited[2] / plain[2]
        out += [
            f"| added latency p50, c1 (ms), {name} | {limited[0]:.2f} vs {plain[0]:.2f} → {added:+.2f} | ≤ +0.3 ms "
            f"| {_verdict(added <= 0.3)} |",
            f"| calls/s, c16, {name} | {limited[2]:,.0f} vs {plain[2]:,.0f} → {rate:.2f}× | ≥ 0.95× (≤ 5% fewer) "
            f"| {_verdict(rate >= 0.95)} |",
        ]
    out += [
        "",
        *redis_overhead.table(redis),
        "",
    ]
    return out


def per_core_section(capacity, plan):
    """The capacity per core: one line per step, the floor beside the bridge, and the verdict."""
    limits = capacity["limits"]
    out = [
        "## Capacity per core",
        "",
        f"The bridge with one worker (`BRIDGE_WORKERS=1`) pinned to the proxy core; the bench client and the "
        f"fake upstream on the other. Paced streams of {plan.per_core_rate} events/s ({capacity['direction']}), "
        f"opened {plan.per_core_opens} a second, measured over the {plan.per_core_seconds:g} s after the last "
        "is open; the number raised step by step until the bridge's added delay p99 (its p99 minus the "
        f"floor's) passes {limits['added_p99']:g} ms or its /healthz p99 passes {limits['healthz_p99']:g} ms. "
        "Each step is first sent straight to the fake upstream (the floor, /healthz asked of the upstream): "
        f"a floor p99 above {limits['floor_p99']:g} ms means the load side, not the bridge, is the limit "
        "at that step. Goal: ≥ 600 streams per core.",
        "",
    ]
    if capacity.get("error"):
        return out + [f"Not measured: `{capacity['error']}`", ""]
    verdicts = {
        "within": "within the limits",
        "bridge": "**the bridge's limit passed**",
        "load": "**the load side is the limit** (floor above its limit)",
        "failed": "**failed**",
    }
    lines = [
        "| streams | added delay p50 / p99 (ms) | bridge delay p50 / p99 (ms) | /healthz p99 (ms) "
        "| floor p50 / p99 (ms) | events measured | verdict |",
        "|---:|---|---|---:|---|---:|---|",
    ]
    for step in capacity["steps"]:
        floor, bridge = step.get("floor"), step.get("bridge")
        if not (floor and bridge):
            lines.append(f"| {step['streams']:,} | failed: `{step.get('error', '')[:200]}` |" + " |" * 5)
            continue
        added = [bridge[k] - floor[k] for k in ("p50", "p99")]
        failed = f" ({bridge['healthz_failed']} failed)" if bridge["healthz_failed"] else ""
        lines.append(
            f"| {step['streams']:,} | {_fmt(added[0], 1)} / {_fmt(added[1], 1)} "
            f"| {_fmt(bridge['p50'], 1)} / {_fmt(bridge['p99'], 1)} | {_fmt(bridge['healthz_p99'], 1)}{failed} "
            f"| {_fmt(floor['p50'], 1)} / {_fmt(floor['p99'], 1)} | {bridge['events']:,} "
            f"| {verdicts[step['verdict']]} |"
        )
    met = capacity["capacity"]
    stopped = capacity["steps"][-1]["verdict"] if capacity["steps"] else "within"
    why = {"within": "the last step", "bridge": "the next step passed a limit", "load": "the load side"}
    out += [
        "\n".join(lines),
        "",
        f"**Capacity per core: {met:,} streams** (stopped by {why.get(stopped, 'a failure')}; goal ≥ 600: "
        f"{_verdict(None if stopped != 'bridge' and met < 600 else met >= 600)}).",
        "",
    ]
    return out


def render(
    plan, args, titles, results, translations, counted, commands, seconds, env, thousands, capacity=None, redis=None
):
    command = "make bench" + (" BENCH_ARGS=--quick" if args.quick else "")
    pins = env["pinning"]
    pin_text = (
        f"the proxy under test (relay or bridge: gunicorn master and workers) is pinned to core "
        f"{pins[0]} with `taskset`; the bench client, wrk and the fake upstream run on core {pins[1]}"
        if pins
        else "**not pinned**: this machine has one usable core"
    )
    g = env["gunicorn"]
    out = [
        "# Benchmark results",
        "",
        f"Generated by `{command}` (`.venv/bin/python -m bench{' --quick' if args.quick else ''}`) "
        f"on {env['date']} in {seconds / 60:.1f} minutes. Regenerate with the same command; "
        "see bench/README.md for what each number means and how it is measured.",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {env['cpu']}; memory {env['memory']}; Linux {env['kernel']}",
        f"- Python {env['python']}; {env['packages']}; {env['wrk']}",
        f"- bridge commit {env['commit']}",
        f"- gunicorn from deploy/gunicorn.conf.py: {g['worker_class']}, {g['workers']} workers × "
        f"{g['threads']} threads, keepalive {g['keepalive']} s (same settings for relay and bridge, the relay "
        "on gunicorn's gthread worker); "
        "the per-request and per-stream metrics run each proxy with one worker (`BRIDGE_WORKERS=1`) "
        "for the one core it is given, streams held and memory with the config as it is",
        f"- pinning: {pin_text}",
        f"- other work on the machine during the run: {env['other_cores']:.2f} cores on average (machine "
        "CPU time minus the bench's own processes)"
        + (
            "; **the machine was busy with other work: throughput and latency are unreliable, CPU per request less so**"
            if env["other_cores"] > 0.1
            else ""
        ),
        f"- plan: {plan.rounds} interleaved round(s) per metric; {plan.latency_requests} requests "
        f"and {plan.streams} streams per target per round at concurrency 1; wrk runs of "
        f"{plan.wrk_seconds} s; paced streams of {plan.paced_events} events {plan.paced_ms} ms apart",
        "",
        "## Exact commands",
        "",
    ]
    for name, command in commands.items():
        out.append(f"- {name}: `{shlex.join(checkout_relative(command))}`")
    out += [
        f"- throughput: `{shlex.join(wrk.command('<url>', '<c>', plan.wrk_seconds, 'post.lua'))}` "
        "(post.lua sets method POST, the JSON body and headers), "
        "run from the bench process, so on its core",
        "- latency, streams, paced delay, streams held: bench/client.py (raw sockets, one thread, keep-alive)",
        "",
    ]
    for name, title in titles.items():
        targets, data = results[name]
        table, summary = direction_table(targets, data)
        out += [f"## {title}", ""]
        for target in targets:
            if target.broken:
                out.append(f"- {target.name} was **not measured**: `{target.broken}`")
            for error in data[target.name].get("errors", []):
                out.append(f"- {target.name}: a measurement failed: `{error}`")
        checks = targets_table(summary, data, translations.get(name), counted.get(name), plan)
        main = name in plan.main_directions
        if not main:
            out += [
                "",
                f"Measured in {plan.other_rounds} round(s): latency at concurrency 1, requests/s at c16 and "
                "the instruction counts; every other row is taken for the main directions only.",
            ]
        out += ["", "### Targets", "", checks, "", "### Per request and per stream", "", table, ""]
        if main:
            out += ["### Streams held at once and memory", "", process_table(data, plan), ""]
        if name in translations:  # not for a cloud: its request is its Messages client's
            out += [
                "### Validate and translate one large request, in-process (median ms)",
                "",
                translation_table(translations[name]),
                "",
            ]
    if counted:
        out += [
            "## Instructions per request and per upstream event, every direction",
            "",
            "bench/instructions.py (callgrind, in-process, access log on, metrics in a multiprocess "
            "directory); the Bedrock and Vertex directions against bench/clouds.py, their relay to the "
            "same fake. The last column compares the bridge with bench/instructions.json, the counts "
            "tests/bench/test_instructions.py holds it to.",
            "",
            instructions.table(counted, instructions.load()),
            "",
        ]
    if capacity:
        out += per_core_section(capacity, plan)
    if redis:
        out += redis_section(redis, plan)
    if titles or thousands:
        out += thousands_section(thousands, env, plan)
    return "\n".join(out) + "\n"


def checkout_relative(command):
    """A command as run from the checkout: its own paths relative to it, so that a reader can run
    it in theirs, and the results name no path of the machine they were measured on."""
    root = str(ROOT) + os.sep
    return [arg.replace(root, "") for arg in command]
