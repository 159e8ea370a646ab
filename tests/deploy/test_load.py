"""Load and abuse, at small scale: bench.load and bench.abuse through gunicorn, and what load found.

The full runs are `python -m bench.load` (200 concurrent paced streams, 1,000 requests),
`python -m bench.abuse` (the abuse cases) and `python -m bench.limits` (client
limits); their numbers are in the README under "Capacity and sizing", "Reliability" and
"Usage and limits per client". Here the same scripts run at a fraction of that, and
the load run's own checks are shown to catch a stream that lost or reordered an event.
"""

import json
import subprocess
import sys

from bench.load import DIRECTIONS
from bench.processes import ROOT
from bridge import settings as settings_module
from bridge.gateway.upstream import Upstream
from bridge.protocols import sse
from bridge.protocols.errors import ANTHROPIC
from bridge.serve.streaming import ANTHROPIC_SSE, relay
from bridge.translate import translator
from tests.fake_upstream import fixture
from tests.helpers.recorded import decoded, recorded_events
from tests.helpers.servers import bridge_env


def test_twenty_streams_and_a_hundred_requests_through_gunicorn():
    """The streams start one by one over a second (--ramp)."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--streams",
            "20",
            "--requests",
            "100",
            "--events",
            "20",
            "--rounds",
            "1",
            "--ramp",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(run.stdout)
    assert report["streams"] == {**report["streams"], "count": 20, "failed": 0}
    assert report["requests"] == {**report["requests"], "count": 100, "failed": 0}
    assert report["rss_mib"]["back_near_baseline"], report["rss_mib"]
    assert run.returncode == 0 and report["ok"], run.stderr[-2000:]


def test_the_abuse_run_at_a_small_scale_holds():
    """bench/abuse.py at a twentieth of its size: every health check answered, no worker
    lost, every worker's peak RSS under the run's limit, one upstream call per client call."""
    run = subprocess.run(
        [sys.executable, "-m", "bench.abuse", "--scale", "0.05", "--hold", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(run.stdout)
    assert report["workers_replaced"] == [], report
    assert report["healthz_overall"]["failed"] == 0, report["healthz_overall"]
    broken = report["cases"]["broken_answers"]
    assert broken["upstream_calls"] == broken["client_calls"] > 0, broken
    assert run.returncode == 0 and report["ok"], run.stdout[-3000:] + run.stderr[-2000:]


def test_sixteen_clients_against_a_limit_get_exactly_the_limit_admitted():
    """bench/limits.py, smaller: one client key's rpm admits exactly its limit across
    gunicorn's workers (one Lua script in Redis), tpm at most one call over (each reserves
    what it may cost), 60 streams at once two calls' worth of tpd, and a hung Redis one
    timeout a call."""
    run = subprocess.run(
        [sys.executable, "-m", "bench.limits", "--clients", "16", "--limit", "40", "--calls", "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(run.stdout)
    rpm = report["requests_per_minute"]
    assert (rpm["admitted"], rpm["statuses"]) == (40, {"200": 40, "429": 80}), rpm
    tpm = report["tokens_per_minute"]
    assert 0 < tpm["admitted"] <= tpm["most"] == 21, tpm  # 2,120 tokens: 20 calls of 106, and one over
    in_flight = report["tokens_in_flight"]
    assert (in_flight["admitted"], in_flight["tokens_counted"]) == (2, in_flight["limit"]), in_flight
    assert report["redis_hung"]["ok"], report["redis_hung"]
    assert run.returncode == 0 and report["ok"], run.stderr[-2000:]


def stamped_stream(direction, stamps):
    """A client-side stream as the bridge would send it, carrying these upstream stamps."""
    texts = [f"@{stamp:.6f}@ " for stamp in stamps]
    if direction.name == "messages_to_chat":
        events = [("message_start", {}), ("content_block_start", {})]
        events += [("content_block_delta", {"delta": {"type": "text_delta", "text": t}}) for t in texts]
        events += [("content_block_stop", {}), ("message_delta", {}), ("message_stop", {})]
        return b"".join(sse.encode(json.dumps({"type": name, **data}), event=name) for name, data in events)
    chunks = [{"choices": [{"delta": {"content": t}, "finish_reason": None}]} for t in texts]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    return b"".join(sse.encode(json.dumps(c)) for c in chunks) + sse.encode("[DONE]")


def test_the_load_checks_catch_a_lost_or_reordered_event():
    for direction in DIRECTIONS:
        assert direction.stream_problem(stamped_stream(direction, [1.0, 2.0, 3.0]), 3) == ""
        assert "2 text events of 3" in direction.stream_problem(stamped_stream(direction, [1.0, 3.0]), 3)
        assert "out of order" in direction.stream_problem(stamped_stream(direction, [1.0, 3.0, 2.0]), 3)
        cut = stamped_stream(direction, [1.0, 2.0, 3.0]).rsplit(b"\n\n", 2)[0] + b"\n\n"
        assert direction.stream_problem(cut, 3)


class DoneAtMessageStop(translator.StreamTranslator):
    """A translator that is done at message_stop, before the upstream body's last bytes, and
    whose finish() runs a step of the test: the moment between "done" and the relay's close."""

    protocol = ANTHROPIC

    def __init__(self, at_finish):
        self.at_finish = at_finish

    def feed(self, name, payload):
        self.done = payload["type"] == "message_stop"
        return [payload]

    def finish(self):
        self.at_finish()
        return []


def test_a_stream_ended_early_never_closes_a_connection_the_pool_gave_to_another(fake):
    """Found under load: 'upstream request failed: AttributeError' in streams of both directions.

    A reader thread gave a connection back to the pool as the body ended, while the relay,
    its translator done at message_stop, closed the same response: the connection the pool
    had meanwhile handed to the next stream. The relay now reads on the request's own thread,
    gives a connection back only once it has read the body to its end, and closes it
    otherwise. Here the first stream is done before its body's last bytes and starts the next
    stream while it has not closed yet; then a third one follows on the same pool: all whole.
    """
    upstream = Upstream(settings_module.load(bridge_env(fake)))
    sent = [name for name, _ in recorded_events("anthropic/text.sse")]
    first = fixture("anthropic/text.sse", pace=0.05)
    first.events = first.events + [b'event: ping\ndata: {"type": "ping"}\n\n']  # after message_stop
    fake.reply(first, *[fixture("anthropic/text.sse")] * 2)
    streams = [upstream.request("POST", f"{fake.url}/v1/messages", {}, {}, stream=True)]

    def start_the_next_stream():
        streams.append(upstream.request("POST", f"{fake.url}/v1/messages", {}, {}, stream=True))

    list(relay(streams[0], DoneAtMessageStop(start_the_next_stream), ANTHROPIC_SSE, ping_interval=5))
    start_the_next_stream()
    for stream in streams[1:]:
        events = decoded(relay(stream, DoneAtMessageStop(lambda: None), ANTHROPIC_SSE, 5))
        assert [e.event for e in events] == sent, "the next streams arrive whole"
    assert len(fake.requests) == 3
