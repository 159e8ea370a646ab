"""Load: many concurrent paced streams and non-streamed requests through gunicorn on loopback.

    python -m loadtest.run                                  # the full run: 200 streams, 1,000 requests
    python -m loadtest.run --streams 20 --requests 100       # what tests/test_load.py runs
    BRIDGE_WORKERS=4 BRIDGE_THREADS=64 python -m loadtest.run # gunicorn sized from the environment

The bridge runs as an operator runs it, gunicorn from deploy/gunicorn.conf.py, in front of the
benchmark's fast fake upstream (bench/upstream.py, its own process). Half the streams and
requests go through each direction. Each upstream stream sends --events text events --pace
seconds apart, each stamped with its emission time, so a client can check that every event
arrived, in order, and how late.

A warm-up round at full size comes first (thread pools, connection pools and the allocator reach
their working size); then the gunicorn tree's RSS is the baseline, the measured rounds run, and
RSS must come back near that baseline: a leak grows it by every request served. The report is
one JSON object; the exit status is 0 only when nothing failed, every stream was complete and
in order, and memory came back.

Bounded: loopback only, at most 2,000 streams, 20,000 requests and 50 rounds, --timeout seconds a round.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from bench import client, procstat
from bench.processes import ROOT, Gunicorn, free_port, wait_for
from bench.run import settle
from bench.servers import gunicorn_config
from bridge import sse

_STAMP = re.compile(r"^@(\d+\.\d+)@ $")
# RSS settles a little above the post-warm-up baseline (the thread pools grow to the busiest
# moment seen, allocator arenas). A leak of 6 KiB per request exceeds this within the default
# two rounds of 1,200; --rounds 20 shows smaller ones in rss_mib.after_each_round.
RSS_SLACK_MIB = 8.0
RSS_SLACK_FRACTION = 0.05


class Direction:
    """One front of the bridge: its path, a request in its client's protocol, how to read the answer."""

    def __init__(self, name, path, body, headers):
        self.name, self.path, self.body, self.headers = name, path, body, headers

    def request(self, model, stream):
        return json.dumps({**self.body, "model": model, "stream": stream}).encode()

    def stream_problem(self, raw, events):
        """Why a streamed answer is not the complete, ordered stream the upstream sent, or ''."""
        decoder = sse.Decoder()
        decoded = decoder.feed(raw) + decoder.close()
        texts, problem = self._texts(decoded)
        if problem:
            return problem
        if len(texts) != events:
            return f"{len(texts)} text events of {events}"
        stamps = []
        for text in texts:
            match = _STAMP.match(text)
            if not match:
                return f"text event {text!r} is not one the upstream sent"
            stamps.append(float(match.group(1)))
        if stamps != sorted(stamps) or len(set(stamps)) != len(stamps):
            return "text events out of order"
        return ""

    def _texts(self, decoded):
        errors = [e.data for e in decoded if e.event == "error" or e.data.startswith('{"error"')]
        if errors:
            return [], f"error event: {errors[0][:300]}"
        if self.name == "messages_to_chat":
            names = [e.event for e in decoded if e.event != "ping"]
            expected_end = ["content_block_stop", "message_delta", "message_stop"]
            if names[:2] != ["message_start", "content_block_start"] or names[-3:] != expected_end:
                return [], f"event sequence {names[:3]}...{names[-3:]}"
            if any(name not in ("content_block_delta",) for name in names[2:-3]):
                return [], f"unexpected events {sorted(set(names[2:-3]))}"
            return [json.loads(e.data)["delta"]["text"] for e in decoded if e.event == "content_block_delta"], ""
        if not decoded or decoded[-1].data != "[DONE]":
            return [], f"no [DONE] at the end: {[e.data[:200] for e in decoded[-2:]]}"
        chunks = [json.loads(e.data) for e in decoded[:-1]]
        finishes = [
            c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
        ]
        if finishes != ["stop"]:
            return [], f"finish reasons {finishes}"
        return [
            c["choices"][0]["delta"]["content"]
            for c in chunks
            if c["choices"] and c["choices"][0]["delta"].get("content")
        ], ""

    def body_problem(self, raw):
        try:
            body = json.loads(raw)
        except ValueError:
            return f"not JSON: {raw[:120]!r}"
        if self.name == "messages_to_chat":
            ok = body.get("type") == "message" and body["content"][0]["text"]
        else:
            ok = body.get("object") == "chat.completion" and body["choices"][0]["message"]["content"]
        return "" if ok else f"unexpected answer {raw[:160]!r}"


USER = [{"role": "user", "content": "Tell me about Galaxy Day."}]
DIRECTIONS = [
    Direction(
        "messages_to_chat",
        "/v1/messages",
        {"max_tokens": 512, "messages": USER},
        {"anthropic-version": "2023-06-01", "x-api-key": "sk-load"},
    ),
    Direction("chat_to_messages", "/v1/chat/completions", {"messages": USER}, {"authorization": "Bearer sk-load"}),
]


def split(total, parts):
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def one_round(bridge_url, args):
    """All streams and requests of one round at once; returns (streams, requests) results."""
    model = f"bench-n{args.events}-p{args.pace * 1000:g}"
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2 * len(DIRECTIONS)) as pool:
        for direction, streams, requests in zip(
            DIRECTIONS, split(args.streams, 2), split(args.requests, 2), strict=True
        ):
            if streams:
                jobs.append(
                    (
                        "stream",
                        direction,
                        pool.submit(
                            client.run,
                            bridge_url,
                            direction.path,
                            direction.request(model, True),
                            direction.headers,
                            total=streams,
                            concurrency=streams,
                            keep_body=True,
                            stamps=True,
                            timeout=args.timeout,
                        ),
                    )
                )
            if requests:
                jobs.append(
                    (
                        "request",
                        direction,
                        pool.submit(
                            client.run,
                            bridge_url,
                            direction.path,
                            direction.request(model, False),
                            direction.headers,
                            total=requests,
                            concurrency=max(1, args.concurrency // 2),
                            keep_body=True,
                            timeout=args.timeout,
                        ),
                    )
                )
        outcomes = {"stream": [], "request": []}
        for kind, direction, job in jobs:
            for result in job.result():
                if result.error or result.status != 200:
                    problem = f"HTTP {result.status} {result.error} {result.body[:160]!r}"
                elif kind == "stream":
                    problem = direction.stream_problem(result.body, args.events)
                else:
                    problem = direction.body_problem(result.body)
                outcomes[kind].append((direction.name, result, problem))
    return outcomes["stream"], outcomes["request"]


def summary(outcomes, *, stream):
    results = [result for _, result, _ in outcomes]
    problems = [f"{name}: {problem}" for name, _, problem in outcomes if problem]
    ms = lambda values, q: round(client.percentile(values, q) * 1000, 1) if values else None  # noqa: E731
    out = {"count": len(outcomes), "failed": len(problems), "problems": problems[:5]}
    if stream:
        ttfb = [r.ttfb for r in results if r.first_byte]
        delays = [d for r in results for d in r.delays]
        out.update(
            ttfb_ms={"p50": ms(ttfb, 0.5), "p99": ms(ttfb, 0.99), "max": ms(ttfb, 1.0)},
            event_delay_ms={"p50": ms(delays, 0.5), "p99": ms(delays, 0.99), "max": ms(delays, 1.0)},
            duration_ms={"p50": ms([r.latency for r in results], 0.5), "max": ms([r.latency for r in results], 1.0)},
        )
    else:
        latency = [r.latency for r in results]
        out["latency_ms"] = {"p50": ms(latency, 0.5), "p99": ms(latency, 0.99), "max": ms(latency, 1.0)}
    return out


class Sampler:
    """The gunicorn tree's RSS and thread count, sampled while a round runs."""

    def __init__(self, pid):
        self.pid, self.rss, self.threads = pid, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.1):
            self.rss.append(procstat.memory_mib(self.pid)[0])
            self.threads.append(procstat.threads(self.pid))

    def stop(self):
        self._stop.set()
        self._thread.join()


def start_upstream():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.upstream", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def listening():
        if process.poll() is not None:
            raise RuntimeError(f"bench.upstream exited with {process.returncode}")
        try:
            return (
                client.run(url, "/v1/chat/completions", b'{"model": "bench-n1"}', total=1, concurrency=1, timeout=2)[
                    0
                ].status
                == 200
            )
        except OSError:
            return False

    wait_for(listening, "the fake upstream")
    return process, url


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200, help="concurrent paced streams per round")
    parser.add_argument("--requests", type=int, default=1000, help="non-streamed requests per round")
    parser.add_argument("--concurrency", type=int, default=32, help="non-streamed requests at once")
    parser.add_argument("--events", type=int, default=40, help="text events per stream")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds between a stream's events")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds after the warm-up")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a round may take")
    args = parser.parse_args(argv)
    if not (0 <= args.streams <= 2000 and 0 <= args.requests <= 20000 and 1 <= args.rounds <= 50):
        parser.error("bounded: at most 2,000 streams, 20,000 requests and 50 rounds")

    upstream, upstream_url = start_upstream()
    workdir = tempfile.TemporaryDirectory(prefix="bridge-load-")
    try:
        bridge = Gunicorn(
            workdir.name,
            upstream_url,
            BRIDGE_LOG_LEVEL=os.environ.get("BRIDGE_LOG_LEVEL", "INFO"),
            BRIDGE_RETRIES=os.environ.get("BRIDGE_RETRIES", "2"),
        )
        try:
            report = measure(bridge, args)
        finally:
            bridge.stop()
    finally:
        upstream.terminate()
        upstream.wait()
        workdir.cleanup()
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


def measure(bridge, args):
    pid = bridge.process.pid
    idle = procstat.memory_mib(pid)[0]
    one_round(bridge.url, args)  # warm-up at full size
    settle(pid)
    baseline = procstat.memory_mib(pid)[0]
    sampler = Sampler(pid)
    streams, requests, elapsed, cpu, after_each = [], [], 0.0, 0.0, []
    for _ in range(args.rounds):
        started, cpu_before = time.monotonic(), procstat.cpu_seconds(pid)
        round_streams, round_requests = one_round(bridge.url, args)
        elapsed += time.monotonic() - started
        cpu += procstat.cpu_seconds(pid) - cpu_before
        streams += round_streams
        requests += round_requests
        settle(pid)
        after_each.append((round(procstat.memory_mib(pid)[0], 1), procstat.threads(pid)))
    sampler.stop()
    after = after_each[-1][0]
    config = {**gunicorn_config(), "processes": len(procstat.tree(pid))}
    stream_report, request_report = summary(streams, stream=True), summary(requests, stream=False)
    memory_back = after <= baseline * (1 + RSS_SLACK_FRACTION) + RSS_SLACK_MIB
    events = len(streams) * args.events
    return {
        "ok": not stream_report["failed"] and not request_report["failed"] and memory_back,
        "gunicorn": config,
        "load": {
            "streams_per_round": args.streams,
            "requests_per_round": args.requests,
            "request_concurrency": args.concurrency,
            "events_per_stream": args.events,
            "pace_s": args.pace,
            "rounds": args.rounds,
            "seconds": round(elapsed, 1),
        },
        "streams": stream_report,
        "requests": request_report,
        "rss_mib": {
            "idle": round(idle, 1),
            "baseline_after_warm_up": round(baseline, 1),
            "peak": round(max(sampler.rss, default=baseline), 1),
            "after_each_round": [rss for rss, _ in after_each],
            "back_near_baseline": memory_back,
        },
        "threads": {
            "peak": max(sampler.threads, default=None),
            "after_each_round": [threads for _, threads in after_each],
        },
        "cpu": {
            "seconds": round(cpu, 2),
            "cores_busy": round(cpu / elapsed, 2),
            "us_per_event_or_request": round(cpu / max(events + len(requests), 1) * 1e6, 1),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
