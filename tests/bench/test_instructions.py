"""The bridge's instructions per request and per upstream event stay within 3% of the counts
kept in bench/instructions.json (callgrind: a count does not move with the machine's load).

A rise fails, naming the direction, both counts and their ratio: make the change cheaper, or
re-record (`python -m bench.instructions --record`) and explain the rise in the commit body.
A fall passes with a warning asking for the file to be re-recorded, so the next rise is
measured from the new floor.
"""

import os
import platform
import subprocess
import sys
import warnings

import pytest

from bench import clouds, instructions, servers
from bench.directions import CLOUD_DIRECTIONS
from bench.processes import ROOT
from tests.helpers.programs import program

pytestmark = pytest.mark.slow  # about a minute of callgrind on two quiet cores


@pytest.fixture
def logs(tmp_path, monkeypatch):
    monkeypatch.setattr(servers, "LOGS", tmp_path)


def test_the_bridge_costs_at_most_3_percent_more_instructions_than_recorded(logs):
    program("valgrind")
    recorded = instructions.load()
    python, here = recorded["recorded"]["python"], platform.python_version()
    if python.split(".")[:2] != here.split(".")[:2]:
        pytest.skip(f"bench/instructions.json was recorded on Python {python}, this is {here}: re-record it here")
    missing = sorted(set(instructions.directions()) - set(recorded["counts"]))
    assert not missing, f"no recorded count for {missing}: python -m bench.instructions --record"
    measured = instructions.measure_all(list(instructions.directions()), targets=("bridge",))
    rises, falls = instructions.compare(recorded, measured)
    if falls:
        warnings.warn(
            "instructions fell more than 3%, re-record bench/instructions.json (python -m bench.instructions "
            "--record):\n" + "\n".join(falls),
            stacklevel=1,
        )
        print("\n".join(falls))
    assert not rises, "instructions rose more than 3% above bench/instructions.json:\n" + "\n".join(rises)


def test_a_rise_or_fall_beyond_the_tolerance_names_the_direction_both_counts_and_the_ratio():
    recorded = {
        "recorded": {"commit": "abc1234"},
        "counts": {
            "messages_to_chat": {"bridge": {"request": 2_000_000, "event": 40_000}},
            "chat_to_messages": {"bridge": {"request": 3_000_000, "event": 40_000}},
        },
    }
    measured = {
        "messages_to_chat": {"bridge": {"request": 2_061_000.4, "event": 40_000}},  # +3.05%
        "chat_to_messages": {"bridge": {"request": 3_089_000, "event": 38_000}},  # +2.97%, -5%
    }
    rises, falls = instructions.compare(recorded, measured)
    assert rises == [
        "messages_to_chat: bridge instructions per request 2,061,000, recorded 2,000,000 (abc1234): 1.031×"
    ]
    assert falls == ["chat_to_messages: bridge instructions per event 38,000, recorded 40,000 (abc1234): 0.950×"]


@pytest.mark.parametrize("direction", sorted(instructions.directions()))
def test_the_instruction_count_child_serves_relay_and_bridge(direction, logs):
    """What bench.instructions runs under callgrind, run bare (its getppid markers are no-ops)."""
    cloud = direction in CLOUD_DIRECTIONS
    upstream = clouds.start() if cloud else servers.upstream()
    try:
        for target in instructions.TARGETS:
            run = subprocess.run(
                [sys.executable, "-m", "bench.instructions", "--serve", upstream.url, target, direction],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, **upstream.env} if cloud else None,
            )
            assert run.returncode == 0, run.stderr[-3000:]
    finally:
        upstream.stop()
