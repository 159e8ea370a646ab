"""The benchmark runs: every tool starts and every table gets its numbers, at toy scale.

Only that it works end to end is checked here; what the numbers are is for
bench/RESULTS.md, never for a test.
"""

import os
import re
import subprocess
import sys

import pytest

from bench import report, servers
from bench import run as bench
from bench.directions import DIRECTIONS, bridge_routes
from bench.processes import ROOT
from bridge import settings as settings_module
from bridge.gateway import routes
from bridge.protocols import UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES
from bridge.protocols.errors import ANTHROPIC, OPENAI
from tests.helpers.programs import program
from tests.helpers.servers import openai_client


@pytest.fixture
def bench_upstream(tmp_path, monkeypatch):
    """bench/upstream.py in its own process, as the bench starts it."""
    monkeypatch.setattr(servers, "LOGS", tmp_path)
    upstream = servers.upstream()
    yield upstream
    upstream.stop()


def test_bench_runs_every_measurement_and_writes_results(tmp_path):
    program("wrk")  # the benchmark's load generator
    program("redis-server")  # what limits in Redis cost
    out = tmp_path / "RESULTS.md"
    # One direction keeps it short; both share every piece of the bench but the request bodies.
    command = [
        sys.executable,
        "-m",
        "bench",
        "--smoke",
        "--direction",
        "chat_to_messages",
        "--direction",
        "messages_to_bedrock",  # a cloud's: its own fake, relay and bridge
        "--out",
        str(out),
        "--logs",
        str(tmp_path),
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    assert "## chat → messages" in text
    assert "not measured" not in text and "a measurement failed" not in text, text
    for label in (
        "latency p50, concurrency 1",
        "requests/s, concurrency 16",
        "streams/s, concurrency 32",
        "paced: emission → receipt p50",
        "RSS with those streams open",
        "server CPU per upstream event",
        "500 KB session",
    ):
        row = next(line for line in text.splitlines() if label in line)
        assert "—" not in row, row  # every cell has a number
    held = next(line for line in text.splitlines() if "of which served at once" in line)
    assert all(int(cell) > 0 for cell in held.strip("|").split("|")[1:]), held  # relay and bridge hold streams
    # Per-request metrics on one worker for the proxy's one core, capacity on the config as it is.
    commands = [line for line in text.splitlines() if line.startswith(("- relay,", "- bridge,"))]
    assert [("BRIDGE_WORKERS=1 " in line, "default config" in line) for line in commands] == [(True, False)] * 4 + [
        (False, True)
    ] * 2, commands
    _assert_cloud_section(text)
    assert str(ROOT) not in text, "the commands name paths relative to the checkout"
    _assert_per_core_section(text)
    _assert_redis_section(text)
    _assert_thousands_section(text)


def _assert_cloud_section(text):
    """A cloud's direction: latency and requests/s at c16 through the relay and the bridge."""
    section = text.split("## messages → bedrock", 1)[1].split("\n## ", 1)[0]
    for label in ("latency p50, concurrency 1", "requests/s, concurrency 16", "server CPU per request (ms, c16"):
        (row,) = [line.split("|")[2:-1] for line in section.splitlines() if line.startswith(f"| {label}")]
        assert len(_numbers(row)) == 4, row  # direct, relay, bridge, the ratio


def _assert_redis_section(text):
    """Limits in Redis: both targets judged for both limited bridges, and each bridge's row measured."""
    section = text.split("## Limits in Redis", 1)[1].split("\n## ", 1)[0]
    assert "Not measured" not in section, section
    lines = section.splitlines()
    verdicts = [line.split("|")[-2].strip() for line in lines if line.startswith(("| added latency", "| calls/s"))]
    assert len(verdicts) == 4 and set(verdicts) <= {"yes", "**no**"}, section
    for target in ("plain", "limited", "ahead", "budgeted"):
        (row,) = [line.split("|")[2:-1] for line in lines if line.startswith(f"| {target} |")]
        assert len(_numbers(row)) == 5 and _numbers(row)[2] > 0, row  # calls/s measured


def _assert_per_core_section(text):
    """The capacity per core: its step measured through the bridge and straight to the upstream."""
    section = text.split("## Capacity per core", 1)[1].split("\n## ", 1)[0]
    (step,) = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| 5 |")]
    assert len(_numbers(step[1:6])) == 8, step  # added, bridge, /healthz, floor, events: all measured
    assert "**Capacity per core: " in section


def _numbers(cells):
    """The numbers in table cells like '12.3 / 45.6'; an empty list for any cell without one."""
    found = [re.findall(r"\d[\d,]*(?:\.\d+)?", cell) for cell in cells]
    return [float(n.replace(",", "")) for numbers in found for n in numbers] if all(found) else []


def _assert_thousands_section(text):
    """The thousands-of-streams section, from the smoke run's own bench.load: every cell measured."""
    section = text.split("## Thousands of streams", 1)[1]
    lines = section.splitlines()
    (command,) = [line for line in lines if line.startswith("- `python -m bench.load ")]
    streams = int(command.split("--streams ")[1].split()[0])
    (row,) = [line.split("|")[1:-1] for line in lines if line.startswith(f"| {streams}, at once |")]
    (reference,) = [line.split("|")[1:-1] for line in lines if "straight to the fake upstream (reference)" in line]
    numbers = _numbers(row[1:])
    assert len(numbers) == 17 and sum(numbers[:3]) == streams, row  # held + refused + failed: every stream
    assert numbers[3] > 0 and numbers[8] > 0, row  # a first byte took time; the RSS is the tree's
    assert len(_numbers(reference[1:4])) == 8 and reference[4:] == [" — "] * 5, reference
    targets = section.split("### Targets, ", 1)[1].split("###")[0]
    verdicts = [line.split("|")[-2].strip() for line in targets.splitlines() if line.startswith("| ")][1:]
    assert len(verdicts) == 4 and set(verdicts) <= {"yes", "**no**"}, targets
    (relay,) = [line.split("|")[1:-1] for line in lines if "through the reference relay" in line]
    assert len(_numbers(relay[1:5])) == 10 and sum(_numbers(relay[1:2])) == streams, relay  # with /healthz
    burst = section.split("(a burst)", 1)[1].split("###")[0]
    verdicts = [line.split("|")[-2].strip() for line in burst.splitlines() if line.startswith("| ")][1:]
    assert len(verdicts) == 3 and set(verdicts) <= {"yes", "**no**"}, burst
    assert "### Where it breaks: the log of the" in section
    # Not the bench's own pinning: the bridge, the load client and the fake upstream on every core.
    assert f"share cores {', '.join(map(str, sorted(os.sched_getaffinity(0))))} of" in section


def test_commands_name_the_checkouts_paths_relative_to_it():
    command = [str(ROOT / ".venv" / "bin" / "gunicorn"), "--config", "deploy/gunicorn.conf.py", "bench.relay:app"]
    assert report.checkout_relative(command) == [
        ".venv/bin/gunicorn",
        "--config",
        "deploy/gunicorn.conf.py",
        "bench.relay:app",
    ]


def test_targets_give_the_spread_of_single_rounds_ratios():
    bridge = {"rps16": [900.0, 1000.0, 800.0], "rps16_cpu": [(1.2, 1000), (1.1, 1000), (1.5, 1000)]}
    relay = {"rps16": [1000.0, 1000.0, 1000.0], "rps16_cpu": [(1.0, 1000), (1.0, 1000), (1.0, 1000)]}
    data = {"bridge": bridge, "relay": relay}
    assert report._spread(data, "rps16") == " (rounds 0.80–1.00)"
    assert report._spread(data, "rps16_cpu") == " (rounds 1.10–1.50)"
    assert report._spread({"bridge": {"rps16": [900.0]}, "relay": {"rps16": [1000.0]}}, "rps16") == ""
    unpaired = {"bridge": {"rps16": [900.0, 1000.0]}, "relay": {"rps16": [1000.0, 1000.0, 1000.0]}}
    assert report._spread(unpaired, "rps16") == ""  # a round failed: which ratio is which is unknown


def test_thousands_targets_take_the_added_delay_over_the_reference_and_say_when_missed():
    delays = {"p50": 1.0, "p99": 30.0, "max": 90.0}
    result = {
        "streams": {"count": 2000, "refused": 3, "failed": 0, "event_delay_ms": delays},
        "reference_straight_to_upstream": {"event_delay_ms": {**delays, "p99": 14.5}},
        "healthz_ms": {"p99": 12.0},
        "rss_mib": {"peak": 200.0},
    }
    rows = report.thousands_targets(bench.Thousands(2000, 10, reference=True), result).splitlines()[2:]
    assert rows == [
        "| 2,000 streams held | 1,997 of 2,000, 3 errors | all, zero errors | **no** |",
        "| paced-event added delay p99 (ms; p99 minus the reference's) | 15.5 | < 10 ms | **no** |",
        "| /healthz p99 (ms) | 12.0 | < 50 ms | yes |",
        "| RSS peak, whole gunicorn tree (MiB) | 200 | < 1 GiB | yes |",
    ]


def test_a_thousands_run_that_failed_is_reported_not_measured():
    table = report.thousands_table([(bench.Thousands(4000, 10), [], "TimeoutError: gave up waiting")])
    assert "| 4,000, over 10 s | not measured: `TimeoutError: gave up waiting` |" in table
    assert "Not run (`--no-thousands`)." in report.thousands_section(None, {}, bench.SMOKE)


def _step(floor_p99, bridge_p99, healthz_p99):
    return {
        "streams": 600,
        "floor": {"p50": 0.5, "p99": floor_p99, "events": 1, "healthz_p99": 1.0, "healthz_failed": 0},
        "bridge": {"p50": 1.0, "p99": bridge_p99, "events": 1, "healthz_p99": healthz_p99, "healthz_failed": 0},
    }


def test_a_per_core_step_names_the_limit_it_passed():
    assert bench.step_verdict(_step(1.0, 10.9, 49.0)) == "within"  # added delay 9.9 ms
    assert bench.step_verdict(_step(1.0, 11.1, 49.0)) == "bridge"  # added delay 10.1 ms
    assert bench.step_verdict(_step(1.0, 2.0, 51.0)) == "bridge"  # /healthz
    assert bench.step_verdict(_step(5.1, 6.0, 10.0)) == "load"  # the floor: the load side is the limit
    assert bench.step_verdict({"streams": 600, "error": "timeout"}) == "failed"
    capacity = {"direction": "messages_to_chat", "limits": bench.PER_CORE_LIMITS, "capacity": 0}
    capacity["steps"] = [{**_step(5.1, 6.0, 10.0), "verdict": "load"}]
    text = "\n".join(report.per_core_section(capacity, bench.Plan()))
    assert "| 600 | 0.5 / 0.9 | 1.0 / 6.0 | 10.0 | 0.5 / 5.1 | 1 | **the load side is the limit**" in text
    assert "stopped by the load side" in text


def test_bench_without_wrk_says_how_to_install_it(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path / "r.md")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert run.returncode == 2
    assert "apt-get install -y wrk" in run.stderr


_PROTOCOL_AT = {
    "/v1/messages": UPSTREAM_MESSAGES,
    "/v1/chat/completions": UPSTREAM_CHAT,
    "/v1/responses": UPSTREAM_RESPONSES,
}


@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_the_bench_bridge_routes_each_direction_to_its_upstream_protocol(direction):
    """The model a direction's client sends reaches a deployment of the direction's upstream protocol."""
    d = DIRECTIONS[direction]
    url = "http://127.0.0.1:9"
    table = routes.load(
        settings_module.load(
            {
                "BRIDGE_OPENAI_BASE_URL": f"{url}/v1",
                "BRIDGE_ANTHROPIC_BASE_URL": url,
                "BRIDGE_ROUTES": bridge_routes(url),
            }
        )
    )
    client = ANTHROPIC if d.client_path == "/v1/messages" else OPENAI
    route = table.route_for(client, d.client_body("bench-n50", False)["model"])
    assert route.protocol == _PROTOCOL_AT[d.upstream_path]


def test_the_bench_upstream_answers_responses_as_the_openai_sdk_reads_them(bench_upstream):
    """A Responses stream, unpaced and paced, folds in the SDK's accumulator into its deltas, its
    events numbered in order; the answers have the text and the event count of the Chat ones."""
    client = openai_client(bench_upstream.url)
    for model, events in (("bench-n7", 7), ("bench-n3-p5", 3)):
        with client.responses.stream(model=model, input="hi") as stream:
            received = list(stream)
            final = stream.get_final_response()
        deltas = [event.delta for event in received if event.type == "response.output_text.delta"]
        assert len(deltas) == events and final.output_text == "".join(deltas), model
        assert [event.sequence_number for event in received] == list(range(events + 8)), model
        assert [received[0].type, received[-1].type] == ["response.created", "response.completed"]
        assert final.usage.output_tokens == events
        chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], stream=True)
        assert sum(1 for chunk in chat if chunk.choices and chunk.choices[0].delta.content) == events
    answer = client.responses.create(model="bench-n7", input="hi")
    chat = client.chat.completions.create(model="bench-n7", messages=[{"role": "user", "content": "hi"}])
    assert answer.output_text == chat.choices[0].message.content
    assert answer.usage.total_tokens == chat.usage.total_tokens
