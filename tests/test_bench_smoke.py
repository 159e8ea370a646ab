"""The benchmark runs: every tool starts and every table gets its numbers, at toy scale.

Only that it works end to end is checked here; what the numbers are is for
bench/RESULTS.md, never for a test.
"""

import shutil
import subprocess
import sys

import pytest

from bench import report, servers
from bench.processes import ROOT


@pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk); the benchmark needs it"
)
def test_bench_runs_every_measurement_and_writes_results(tmp_path):
    out = tmp_path / "RESULTS.md"
    # One direction keeps it short; both share every piece of the bench but the request bodies.
    command = [
        sys.executable,
        "-m",
        "bench",
        "--smoke",
        "--direction",
        "chat_to_messages",
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
    # Per-request metrics on one worker for the proxy's one core, capacity on the config as it is.
    commands = [line for line in text.splitlines() if line.startswith(("- relay,", "- bridge,"))]
    assert [("BRIDGE_WORKERS=1 " in line, "default config" in line) for line in commands] == [(True, False)] * 2 + [
        (False, True)
    ] * 2, commands
    assert str(ROOT) not in text, "the commands name paths relative to the checkout"


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


@pytest.mark.parametrize("direction", ["messages_to_chat", "chat_to_messages"])
def test_the_instruction_count_child_serves_relay_and_bridge(tmp_path, monkeypatch, direction):
    """What bench.instructions runs under valgrind, run bare (valgrind is optional and slow)."""
    monkeypatch.setattr(servers, "LOGS", tmp_path)
    upstream = servers.upstream()
    try:
        for target, count, unit in (
            (target, count, unit) for target in ("relay", "bridge") for count, unit in ((1, "requests"), (10, "events"))
        ):
            run = subprocess.run(
                [sys.executable, "-m", "bench.instructions", upstream.url, target, direction, str(count), unit],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, run.stderr[-3000:]
    finally:
        upstream.stop()
