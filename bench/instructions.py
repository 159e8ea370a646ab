"""CPU work per request and per upstream event counted in instructions (valgrind's callgrind):
the ratio noise cannot move.

CPU seconds on a shared VM move by 10-30% between runs, and the bridge, touching more code,
moves more than the relay. The instructions a request executes do not move. Relay and bridge
run in-process as in bench.profile, but as deployed: access log on, metrics in a
PROMETHEUS_MULTIPROC_DIR. One process under callgrind per target serves each direction in
turn: a warm-up, then REQUESTS non-streamed requests, one unpaced stream of FEW_EVENTS upstream
events and one of MANY_EVENTS. Callgrind dumps its counts at each os.getppid() (the marker
around each of those three phases, after a garbage collection), so a phase's instructions are
its own, start-up excluded: one request is the first phase over REQUESTS, one upstream event
the difference of the two streams over MANY_EVENTS - FEW_EVENTS (read, decode, translate, frame;
the relay reads and forwards). gunicorn is left out; it does the same work for both, so the
server's ratio lies between this one and 1. Kernel time (the sockets) is not counted either.

bench/instructions.json keeps the counts of one run; tests/bench/ fails when the bridge's rise
more than TOLERANCE above them. `python -m bench.instructions` prints a run's counts beside the
recorded ones, `--record` writes them (bench/README.md says when).
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

from .directions import CLOUD_DIRECTIONS, DIRECTIONS
from .processes import ROOT

REQUESTS, WARM_UP = 150, 20
FEW_EVENTS, MANY_EVENTS = 500, 3000
TARGETS = ("relay", "bridge")
RECORDED = ROOT / "bench" / "instructions.json"
TOLERANCE = 0.03  # a rise above it fails tests/bench/; a fall below it asks for a new record
_PHASES = ("request", "few events", "many events")
# The directions are split over this many processes per target whatever the cores: a count
# moves a little (0.1-0.5%) with which directions ran before it in its process.
GROUPS = 2


def available():
    return shutil.which("valgrind") is not None


def per_request(upstream_url, direction):
    """{"relay": instructions, "bridge": instructions} for one non-streamed request of `direction`."""
    return {target: kinds["request"] for target, kinds in _counted(upstream_url, direction).items()}


def per_event(upstream_url, direction):
    """{"relay": instructions, "bridge": instructions} for one upstream event of a long stream."""
    return {target: kinds["event"] for target, kinds in _counted(upstream_url, direction).items()}


_cache = {}


def _counted(upstream_url, direction):
    """One measurement gives both counts: per_request and per_event of a direction share it."""
    if (upstream_url, direction) not in _cache:
        _cache[upstream_url, direction] = measure(upstream_url, [direction])[direction]
    return _cache[upstream_url, direction]


def measure(upstream_url, names, targets=TARGETS, env=None):
    """{direction: {target: {"request": instructions, "event": instructions}}} for the directions
    `names` against the upstream at `upstream_url` (bench.upstream for the three protocols,
    bench.clouds for Bedrock's and Vertex's), `env` added to the children's environment."""
    return _execute(_jobs(upstream_url, names, targets, env))


def _jobs(upstream_url, names, targets, env=None, processes=GROUPS):
    """The callgrind runs that count `names`: the directions split over `processes` runs per
    target, each paying the start-up once for its share."""
    processes = min(processes, len(names))
    return [
        (upstream_url, target, tuple(names[start::processes]), env or {})
        for target in targets
        for start in range(processes)
    ]


def _cores():
    return len(os.sched_getaffinity(0))


def _execute(jobs):
    """Run the jobs, as many at once as there are cores; their counts by direction and target."""
    with concurrent.futures.ThreadPoolExecutor(_cores()) as pool:
        runs = [(job, pool.submit(_run, *job)) for job in jobs]
    counts = {}
    for (_, target, group, _), run in runs:
        phases = run.result()
        for index, name in enumerate(group):
            request, few, many = phases[index * len(_PHASES) : (index + 1) * len(_PHASES)]
            counts.setdefault(name, {})[target] = {
                "request": request / REQUESTS,
                "event": (many - few) / (MANY_EVENTS - FEW_EVENTS),
            }
    return counts


def _run(upstream_url, target, names, env):
    """The instructions of each measured phase, in order, of one callgrind run."""
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as scratch:
        out = os.path.join(scratch, "callgrind.out")
        argv = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--dump-before=getppid",
            f"--log-file={os.path.join(scratch, 'valgrind.log')}",
            sys.executable,
            "-m",
            "bench.instructions",
            "--serve",
            upstream_url,
            target,
            *names,
        ]
        run = subprocess.run(
            argv,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # One hash seed: dicts and sets of strings lay out, and cost, the same every run.
            env={**os.environ, **env, "PROMETHEUS_MULTIPROC_DIR": scratch, "PYTHONHASHSEED": "0"},
        )
        if run.returncode:
            raise RuntimeError(f"the {target} of {', '.join(names)} under callgrind failed: {run.stderr[-2000:]}")
        parts = [name for name in os.listdir(scratch) if re.fullmatch(r"callgrind\.out\.\d+", name)]
        dumps = sorted(parts, key=lambda name: int(name.rsplit(".", 1)[1]))
        # Two markers around each phase: the dumps alternate, what came before, then the phase.
        if len(dumps) != 2 * len(_PHASES) * len(names):
            raise RuntimeError(f"callgrind dumped {len(dumps)} parts for {target} {names}: another getppid call")
        totals = []
        for name in dumps[1::2]:
            with open(os.path.join(scratch, name)) as fh:
                found = re.search(r"^summary: (\d+)$", fh.read(), re.MULTILINE)
            if not found:
                raise RuntimeError(f"callgrind reported no instruction count in {name}")
            totals.append(int(found.group(1)))
        return totals


def _serve(upstream_url, target, names):
    """The child under callgrind: for each direction, a warm-up, then the three phases."""
    import gc

    from . import profile

    relay_app, bridge_app = profile.apps(upstream_url, log_level="INFO")
    for name in names:
        request, short, few, many = (
            _caller(profile, relay_app if target == "relay" else bridge_app, target, directions()[name], model, stream)
            for model, stream in (
                ("bench-n50", False),
                ("bench-n50", True),
                (f"bench-n{FEW_EVENTS}", True),
                (f"bench-n{MANY_EVENTS}", True),
            )
        )
        for _ in range(WARM_UP):
            request()
            short()
        for phase, times in ((request, REQUESTS), (few, 1), (many, 1)):
            gc.collect()  # each phase starts from the same collector state
            os.getppid()  # callgrind dumps: what came before
            for _ in range(times):
                phase()
            os.getppid()  # callgrind dumps: the phase


def _caller(profile, app, target, d, model, stream):
    """A call of `app` with the body of `model`, `stream` in the target's protocol, encoded
    now: building and encoding a body is the client's work."""
    if target == "relay":
        path, body, headers = d.upstream_at(model, stream), d.upstream_body(model, stream), d.upstream_headers
    else:
        path, body, headers = d.client_path, d.client_body(model, stream), d.client_headers
    body = profile.encode(body)
    return lambda: profile.call(app, path, body, headers)


def directions():
    """Every direction counted: the bench upstream's and the clouds'."""
    return {**DIRECTIONS, **CLOUD_DIRECTIONS}


def record(counts, path=RECORDED):
    """Write `counts` with what they were measured on: the commit and Python version."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    document = {
        "recorded": {
            "commit": commit + (" (+ uncommitted changes)" if dirty.stdout.strip() else ""),
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
            "command": "python -m bench.instructions --record",
        },
        "requests": REQUESTS,
        "events": f"{FEW_EVENTS} and {MANY_EVENTS}",
        "counts": {
            name: {target: {kind: round(value) for kind, value in kinds.items()} for target, kinds in targets.items()}
            for name, targets in counts.items()
        },
    }
    path.write_text(_dumps(document))


def _dumps(document):
    """The document with a line per direction: a re-record's diff shows which counts moved."""
    head = {key: value for key, value in document.items() if key != "counts"}
    counts = ",\n".join(
        f"    {json.dumps(name)}: {json.dumps(targets)}" for name, targets in document["counts"].items()
    )
    return json.dumps(head, indent=2)[:-2] + ',\n  "counts": {\n' + counts + "\n  }\n}\n"


def load(path=RECORDED):
    return json.loads(path.read_text())


def compare(recorded, measured, target="bridge", tolerance=TOLERANCE):
    """(rises, falls): lines naming each direction and kind whose count of `target` rose or fell
    by more than `tolerance` from the recorded one, with both counts and their ratio."""
    rises, falls = [], []
    for name, targets in measured.items():
        for kind, value in targets[target].items():
            stored = recorded["counts"][name][target][kind]
            ratio = value / stored
            line = (
                f"{name}: {target} instructions per {kind} {value:,.0f}, recorded {stored:,} "
                f"({recorded['recorded']['commit']}): {ratio:.3f}×"
            )
            if ratio > 1 + tolerance:
                rises.append(line)
            elif ratio < 1 - tolerance:
                falls.append(line)
    return rises, falls


def table(counts, recorded=None):
    """A Markdown table of the counts, bridge ÷ relay, and the bridge ÷ its recorded count."""
    lines = [
        "| direction | per request: relay | bridge | bridge ÷ relay | per event: relay | bridge | bridge ÷ relay |"
        + (" bridge ÷ recorded (request, event) |" if recorded else ""),
        "|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if recorded else ""),
    ]
    for name, targets in counts.items():
        cells = []
        for kind in ("request", "event"):
            relay, bridge = (targets.get(target, {}).get(kind) for target in TARGETS)
            cells += [_number(relay), _number(bridge), f"{bridge / relay:.3f}×" if relay and bridge else "—"]
        if recorded:
            stored = recorded["counts"].get(name, {}).get("bridge")
            bridge = targets.get("bridge")
            cells.append(
                ", ".join(f"{bridge[kind] / stored[kind]:.4f}" for kind in ("request", "event"))
                if stored and bridge
                else "—"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value):
    return "—" if value is None else f"{value:,.0f}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help=f"write the counts to {RECORDED.relative_to(ROOT)}")
    parser.add_argument(
        "--direction", choices=sorted(directions()), action="append", help="count only this direction (repeatable)"
    )
    args = parser.parse_args(argv)
    if not available():
        print("valgrind is not installed: apt-get install -y valgrind", file=sys.stderr)
        return 2
    if args.record and args.direction:
        parser.error("--record counts every direction")
    names = args.direction or list(directions())
    counts = measure_all(names)
    print(table(counts, load() if RECORDED.exists() else None))
    if args.record:
        record(counts)
        print(f"wrote {RECORDED.relative_to(ROOT)}")
    return 0


def measure_all(names, targets=TARGETS):
    """measure() with its own upstreams: bench.upstream for the bench's directions, bench.clouds
    for the clouds'. One bridge serves both (BENCH_CLOUDS adds the clouds' routes), so its
    directions share GROUPS processes; the relay has one upstream, so the clouds' directions
    take a process of their own. All the callgrind runs share the cores."""
    from . import servers

    servers.LOGS.mkdir(parents=True, exist_ok=True)
    ours = [name for name in names if name in DIRECTIONS]
    theirs = [name for name in names if name in CLOUD_DIRECTIONS]
    upstream = servers.upstream()
    fake = None
    if theirs:
        from . import clouds

        fake = clouds.start()
    try:
        jobs = []
        if "bridge" in targets:
            jobs += _jobs(upstream.url, names, ["bridge"], fake.env if fake else None)
        if "relay" in targets and ours:
            jobs += _jobs(upstream.url, ours, ["relay"])
        if "relay" in targets and fake:
            jobs += _jobs(fake.url, theirs, ["relay"], fake.env, processes=1)
        counts = _execute(jobs)
    finally:
        upstream.stop()
        if fake:
            fake.stop()
    return {name: counts[name] for name in names}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(main())
