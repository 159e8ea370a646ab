"""Load: many concurrent paced streams and non-streamed requests through gunicorn on loopback.

    python -m bench.load                                  # the full run: 200 streams, 1,000 requests
    python -m bench.load --streams 20 --requests 100       # what tests/deploy/test_load.py runs
    BRIDGE_WORKERS=4 BRIDGE_THREADS=64 python -m bench.load # gunicorn sized from the environment
    python -m bench.load --streams 2000 --requests 0 --events 1200 --rounds 1 --warm-up-events 20 --reference
                                                            # 2,000 streams held for 60 s

The bridge runs as an operator runs it, gunicorn from deploy/gunicorn.conf.py, in front of the
benchmark's fast fake upstream (bench/upstream.py, its own process). Half the streams and
requests go through each direction. Each upstream stream sends --events text events --pace
seconds apart, each stamped with its emission time, so a client can check that every event
arrived, in order, and how late. All of a round's streams start at once, the worst case (every
request is translated while the first events are due); --ramp spreads their starts over that
many seconds, as agents' streams start in a working day, which shows the steady state.
--large N has one more connection send Chat requests of N bytes one after another while the
round runs (counted with the requests): their parsing, validation and translation hold the
worker's GIL, and the streams' events wait meanwhile.

A warm-up round at full size comes first (with --ramp its streams last the ramp, so that all
are open at once): thread pools, connection pools and the allocator reach their working size.
Then the gunicorn tree's RSS is the baseline, the measured rounds run, and RSS must come back
near that baseline: a leak grows it by every request served. While a round
runs, a fresh connection asks /healthz every 0.1 s, as a load balancer would. A stream refused
with a 503 (over capacity) is counted apart from one that failed. --reference first sends the
same streams straight to the fake upstream: the delay the client and the upstream add on their
own on this machine, the floor under the bridge's figures. --relay then sends them through the
reference relay (bench/relay.py on gunicorn's gthread worker, with the same config and cores as
the bridge, and a thread for each stream, which it holds to the end): what a bare relay does
with the same round. The report is one JSON object; the
exit status is 0 only when nothing failed or was refused, every stream was complete and in
order, and memory came back.

Bounded: loopback only, at most 4,000 streams, 20,000 requests and 50 rounds, --timeout seconds a round.
"""

import argparse
import concurrent.futures
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

from bench import client, corpus, procstat
from bench.processes import ROOT, Gunicorn, free_port, wait_for
from bench.servers import gunicorn_config
from bridge.protocols import sse

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


def one_round(bridge_url, args, events=None):
    """All streams and requests of one round at once; returns (streams, requests) results."""
    events = events or args.events
    model = f"bench-n{events}-p{args.pace * 1000:g}"
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2 * len(DIRECTIONS) + 1) as pool:

        def submit(kind, direction, total, concurrency, ramp=0.0):
            stream = kind == "stream"
            body = direction.request(model, stream)
            job = pool.submit(
                client.run, bridge_url, direction.path, body, direction.headers,
                total=total, concurrency=concurrency, keep_body=True, stamps=stream, timeout=args.timeout, ramp=ramp,
            )  # fmt: skip
            jobs.append((kind, direction, job))

        for direction, streams, requests in zip(
            DIRECTIONS, split(args.streams, 2), split(args.requests, 2), strict=True
        ):
            if streams:
                submit("stream", direction, streams, streams, args.ramp)
            if requests:
                submit("request", direction, requests, max(1, args.concurrency // 2))
        if args.large:  # one connection sends large requests, one after another, while the rest runs
            stop, chat = threading.Event(), DIRECTIONS[1]
            large = json.dumps({**corpus.openai_large(args.large), "model": model, "stream": False}).encode()
            sender = pool.submit(
                _until, stop, client.run, bridge_url, chat.path, large, chat.headers, total=1, keep_body=True
            )
        done = [(kind, direction, job.result()) for kind, direction, job in jobs]
        if args.large:
            stop.set()
            done.append(("request", chat, sender.result()))
        outcomes = {"stream": [], "request": []}
        for kind, direction, results in done:
            for result in results:
                if result.error or result.status != 200:
                    problem = f"HTTP {result.status} {result.error} {result.body[:160]!r}"
                elif kind == "stream":
                    problem = direction.stream_problem(result.body, events)
                else:
                    problem = direction.body_problem(result.body)
                outcomes[kind].append((direction.name, result, problem))
    return outcomes["stream"], outcomes["request"]


def _until(stop, function, *args, **kwargs):
    """`function`'s results, called again and again until `stop` is set."""
    results = []
    while not stop.is_set():
        results += function(*args, **kwargs, concurrency=1)
    return results


def summary(outcomes, *, stream):
    refused = [1 for _, result, _ in outcomes if result.status == 503]
    results = [result for _, result, _ in outcomes if result.status != 503]
    problems = [f"{name}: {problem}" for name, result, problem in outcomes if problem and result.status != 503]
    out = {"count": len(outcomes), "refused": len(refused), "failed": len(problems), "problems": problems[:5]}
    if stream:
        ttfb = [r.ttfb for r in results if r.first_byte]
        delays = [d for r in results for d in r.delays]
        out.update(
            ttfb_ms=quantiles_ms(ttfb),
            event_delay_ms=quantiles_ms(delays),
            duration_ms={"p50": ms([r.latency for r in results], 0.5), "max": ms([r.latency for r in results], 1.0)},
        )
    else:
        out["latency_ms"] = quantiles_ms([r.latency for r in results])
    return out


def ms(values, fraction):
    return round(client.percentile(values, fraction) * 1000, 1) if values else None


def quantiles_ms(values):
    return {"p50": ms(values, 0.5), "p99": ms(values, 0.99), "max": ms(values, 1.0)}


class HealthProbe:
    """/healthz asked every `interval` seconds on a fresh connection, as a load balancer does;
    the latency of each answer (a failed one counts as the time it took to fail)."""

    def __init__(self, url, interval=0.1, timeout=60.0):
        host, port = url.split("//")[1].split(":")
        self._address, self._interval, self._timeout = (host, int(port)), interval, timeout
        self.latencies, self.failures = [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self._interval):
            started = time.monotonic()
            try:
                with socket.create_connection(self._address, timeout=self._timeout) as sock:
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: bridge\r\nconnection: close\r\n\r\n")
                    answer = b""
                    while chunk := sock.recv(4096):
                        answer += chunk
                ok = answer.startswith(b"HTTP/1.1 200")
            except OSError:
                ok = False
            self.latencies.append(time.monotonic() - started)
            self.failures += not ok

    def stop(self):
        self._stop.set()
        self._thread.join()
        return {"count": len(self.latencies), "failed": self.failures, **quantiles_ms(self.latencies)}


class Machine:
    """CPU seconds the whole machine spent (/proc/stat) and this process spent, to tell how much
    went to other work than the bridge, the fake upstream and this client."""

    def __init__(self):
        self.start = self._busy(), self._own()

    @staticmethod
    def _busy():
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
        return (sum(fields) - fields[3] - fields[4]) / procstat._TICK  # all but idle and iowait

    @staticmethod
    def _own():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def since(self):
        """(machine, this client) CPU seconds since start."""
        return self._busy() - self.start[0], self._own() - self.start[1]


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


def parse(argv=None):
    """The run's arguments, bounded; a caller's argv (bench/run.py) is checked as the command line's."""
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200, help="concurrent paced streams per round")
    parser.add_argument("--requests", type=int, default=1000, help="non-streamed requests per round")
    parser.add_argument("--concurrency", type=int, default=32, help="non-streamed requests at once")
    parser.add_argument("--events", type=int, default=40, help="text events per stream")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds between a stream's events")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds after the warm-up")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a round may take")
    parser.add_argument("--warm-up-events", type=int, help="text events per stream of the warm-up (--events)")
    parser.add_argument("--reference", action="store_true", help="first send the streams straight to the fake upstream")
    parser.add_argument(
        "--relay", action="store_true", help="then send them through the reference relay (bench/relay.py)"
    )
    parser.add_argument(
        "--large",
        type=int,
        default=0,
        help="bytes of the Chat requests one connection sends one after another meanwhile",
    )
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="seconds over which a round's streams start (default 0: all at once)"
    )
    args = parser.parse_args(argv)
    if not (0 <= args.streams <= 4000 and 0 <= args.requests <= 20000 and 1 <= args.rounds <= 50):
        parser.error("bounded: at most 4,000 streams, 20,000 requests and 50 rounds")
    return args


def run(args):
    """The report of one run: the fake upstream and the bridge started, measured and stopped."""
    upstream, upstream_url = start_upstream()
    args.upstream_pid = upstream.pid
    workdir = tempfile.TemporaryDirectory(prefix="bridge-load-")
    try:
        bridge = Gunicorn(
            workdir.name,
            upstream_url,
            BRIDGE_LOG_LEVEL=os.environ.get("BRIDGE_LOG_LEVEL", "INFO"),
            BRIDGE_RETRIES=os.environ.get("BRIDGE_RETRIES", "2"),
        )
        try:
            reference = direct(upstream_url, args) if args.reference else None
            report = measure(bridge, args)
            report["log"] = log_summary(bridge.log())
            if reference:
                report["reference_straight_to_upstream"] = reference
        finally:
            bridge.stop()
        if args.relay:
            report["through_the_relay"] = relayed(upstream_url, args, workdir.name)
    finally:
        upstream.terminate()
        upstream.wait()
        workdir.cleanup()
    return report


def main(argv=None):
    report = run(parse(argv))
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


def log_summary(text):
    """gunicorn's and the bridge's own log lines (not the access lines), counted by what they
    say with the numbers taken out: where an overloaded bridge breaks, and how."""
    counts = {}
    for line in text.splitlines():
        if line.startswith("{") or "[INFO] Booting worker" in line or "] Starting gunicorn" in line:
            continue
        message = re.sub(r"[\d.:]+", "#", line.split("] ", 2)[-1])[:160]
        counts[message] = counts.get(message, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1])[:12])


def direct(upstream_url, args):
    """The streams of one round straight to the fake upstream: what remains is the client's and
    the upstream's own delay on this machine."""
    streams, _ = one_round(upstream_url, argparse.Namespace(**{**vars(args), "requests": 0}))
    report = summary(streams, stream=True)
    return {key: report[key] for key in ("count", "refused", "failed", "problems", "ttfb_ms", "event_delay_ms")}


def relayed(upstream_url, args, workdir):
    """A warm-up and one round's streams through the reference relay, started as the bridge was
    but with a thread for each stream (it holds one for as long as the stream lasts)."""
    workers = gunicorn_config()["workers"]
    relay = Gunicorn(
        f"{workdir}/relay",
        upstream_url,
        "--worker-class",
        "gthread",
        "bench.relay:app",
        cwd=ROOT,
        healthz=False,
        BENCH_UPSTREAM=upstream_url,
        BRIDGE_THREADS=str(max(gunicorn_config()["threads"], -(-args.streams // workers))),
    )
    try:
        one_round(relay.url, args, args.warm_up_events or args.events)
        health = HealthProbe(relay.url)  # it has no /healthz: how soon its 404 comes is the measure
        try:
            report = direct(relay.url, args)
        finally:
            answered = health.stop()
        return {**report, "healthz_ms": answered}
    finally:
        relay.stop()


def measure(bridge, args):
    pid = bridge.process.pid
    idle = procstat.memory_mib(pid)[0]
    warm_up = args.warm_up_events or args.events
    if args.ramp and args.pace:  # its streams last the ramp too, so that all are open at once
        warm_up += round(args.ramp / args.pace)
    one_round(bridge.url, args, warm_up)  # warm-up at full size
    procstat.settle(pid)
    baseline = procstat.memory_mib(pid)[0]
    sampler, health, machine = Sampler(pid), HealthProbe(bridge.url), Machine()
    upstream_cpu = procstat.cpu_seconds(args.upstream_pid)
    streams, requests, elapsed, cpu, after_each = [], [], 0.0, 0.0, []
    for _ in range(args.rounds):
        started, cpu_before = time.monotonic(), procstat.cpu_seconds(pid)
        round_streams, round_requests = one_round(bridge.url, args)
        elapsed += time.monotonic() - started
        cpu += procstat.cpu_seconds(pid) - cpu_before
        streams += round_streams
        requests += round_requests
        procstat.settle(pid)
        after_each.append((round(procstat.memory_mib(pid)[0], 1), procstat.threads(pid)))
    sampler.stop()
    health_report = health.stop()
    machine_cpu, client_cpu = machine.since()
    upstream_cpu = procstat.cpu_seconds(args.upstream_pid) - upstream_cpu
    after = after_each[-1][0]
    config = {**gunicorn_config(), "processes": len(procstat.tree(pid))}
    stream_report, request_report = summary(streams, stream=True), summary(requests, stream=False)
    memory_back = after <= baseline * (1 + RSS_SLACK_FRACTION) + RSS_SLACK_MIB
    events = sum(len(result.delays) for _, result, _ in streams)  # delivered: none of a refused stream
    failed = sum(report[key] for report in (stream_report, request_report) for key in ("failed", "refused"))
    return {
        "ok": not failed and not health_report["failed"] and memory_back,
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
        "healthz_ms": health_report,
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
            # while the rounds ran (and settled): the fake upstream, this load client, and the
            # machine's other work (other processes than these three)
            "upstream_seconds": round(upstream_cpu, 2),
            "load_client_seconds": round(client_cpu, 2),
            "other_work_seconds": round(machine_cpu - cpu - upstream_cpu - client_cpu, 2),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
