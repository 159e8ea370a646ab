"""Abuse: what one key holder, a careless client or a broken upstream can do to bridge, at scale.

    python -m bench.abuse                      # every case at full size, a few minutes
    python -m bench.abuse --scale 0.1          # what tests/deploy/test_load.py runs
    python -m bench.abuse --case stalled_readers --case burst

The bridge runs as deployed: gunicorn from deploy/gunicorn.conf.py with its defaults (the
environment may size it, as for bench.load), in front of a misbehaving upstream that this
process serves on loopback, where the model name picks the misbehaviour. The cases are the ones
earlier abuse rounds found, each bounded in time:

- huge_bodies: 30 MB request bodies of tiny messages, several at once, on every front;
- stalled_readers: streaming clients that never read, against an upstream that streams as fast
  as it may;
- burst: more streams at once than gunicorn has threads;
- slow_headers: connections that send their request head a byte a second;
- broken_answers: upstream answers that break mid-body, streamed and not;
- huge_answers: a 200 MB answer, a gzip bomb, a 20 MB error message, 5,000 headers;
- reasoning_bombs: 32 MB Responses bodies whose one reasoning item decodes to 8 million empty
  objects, eight at once;
- departed_clients: one key's slow non-streamed calls whose clients all leave, and other keys' calls;
- head_of_line: paced streams next to streams of 10 MB events, and next to floods of tiny events,
  in the same workers' stream loops;
- broken_reload: a reload (SIGHUP) after a typo in the model map, while streams and calls run.

Throughout, a prober asks /healthz every 100 ms. Per case the report gives each worker's peak
RSS (VmHWM, reset before the case), the health check's latency percentiles and failures, what
the attacking clients got, and the upstream calls per client call. The exit status is 0 only
when every health check was answered, no worker died, no upstream call was repeated or left
open for a client that had left, every worker's peak RSS stayed under --rss-limit MiB, and the
broken reload was refused with no call failed.
"""

import argparse
import asyncio
import base64
import collections
import concurrent.futures
import gzip
import http.client
import json
import multiprocessing
import pathlib
import signal
import socket
import tempfile
import threading
import time

from bench import client, procstat
from bench.processes import Gunicorn, free_port
from bench.servers import gunicorn_config
from bench.upstream import PROTOCOLS, chunked, response_head, text_event

FRONTS = {
    "chat": ("/v1/chat/completions", {"authorization": "Bearer sk-abuse"}),
    "messages": ("/v1/messages", {"anthropic-version": "2023-06-01", "x-api-key": "sk-abuse"}),
    "responses": ("/v1/responses", {"authorization": "Bearer sk-abuse"}),
}
# The bridge's client keys: the abusing one every case uses, and another team's.
CLIENT_KEYS = "abuser:sk-abuse,other:sk-other"
OTHER_KEY = {"authorization": "Bearer sk-other"}
USER = [{"role": "user", "content": "hi"}]
ENDLESS_LIMIT = 2 * 1024**3  # an endless stream still ends here, whatever the bridge does
PROBE_EVERY = 0.1
GIANT_EVENT = 10 * 1024**2  # bytes of text in each event of a `giant` stream
TICK = 0.05  # seconds between the events of a `ticking` stream
MODEL_MAP = "model_map.json"  # BRIDGE_MODEL_MAP, in the run's directory: a file a reload reads again


# -- the misbehaving upstream ---------------------------------------------------------------------


class Upstream:
    """An upstream on loopback whose model name picks how it misbehaves; it counts its calls.

    `endless` streams text events as fast as the bridge takes them; `flood` too, for --hold
    seconds; `giant` streams events of 10 MB of text as fast, for --hold seconds; `paced` streams
    one every second and `ticking` one every TICK seconds, stamped with the time it left (bench
    client's delays), for --hold seconds; `huge` answers 200 MB; `bomb` a gzip body that inflates to 1 GB;
    `error` a 500 with a 20 MB message; `headers` 5,000 header lines; `break` a 200 whose body
    breaks after its first event; `slow` answers a non-streamed call after --hold seconds, or
    never when the bridge closes it first, as an upstream generating.
    """

    def __init__(self, hold):
        self.hold = hold
        self.calls = collections.Counter()
        self.working = 0  # `slow` calls the upstream is working on now
        self.sent = collections.Counter()  # body bytes written, per model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._bomb = _gzip_bomb()
        self._giant = {}  # protocol's stream -> the chunk of its 10 MB event, made once
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        started.wait()

    def _run(self, started):
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port, backlog=4096))
        self.server = server
        started.set()
        self._loop.run_forever()

    async def _serve(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    (
                        int(v)
                        for n, _, v in (line.partition(":") for line in lines[1:])
                        if n.lower() == "content-length"
                    ),
                    0,
                )
                request = json.loads(await reader.readexactly(length)) if length else {}
                protocol = "openai" if "/chat/completions" in lines[0] else "anthropic"
                model = str(request.get("model", ""))
                self.calls[model] += 1
                if model == "slow" and await self._closed_while_working(reader):
                    break
                if not await self._answer(writer, protocol, model, bool(request.get("stream"))):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _closed_while_working(self, reader):
        """Work on a call for --hold seconds; True when the bridge closes the connection first."""
        self.working += 1
        try:
            return await asyncio.wait_for(reader.read(1), self.hold) == b""
        except asyncio.TimeoutError:
            return False
        finally:
            self.working -= 1

    async def _answer(self, writer, protocol, model, stream):
        """Write one answer; False when the connection must close after it."""
        events, body = PROTOCOLS[protocol]
        if model in ("endless", "flood", "giant", "paced", "ticking"):
            writer.write(response_head("200 OK", "text/event-stream") + chunked(events.head.encode()))
            until, sent = time.monotonic() + self.hold, 0
            while sent < ENDLESS_LIMIT and (model == "endless" or time.monotonic() < until):
                event = self._write(events, model)
                writer.write(event)
                sent += len(event)
                self.sent[model] += len(event)
                await (asyncio.sleep(PACES[model]) if model in PACES else writer.drain())
            writer.write(chunked(events.tail.encode()) + b"0\r\n\r\n")
            return True
        if model == "huge":
            size = 200 * 1024**2
            writer.write(response_head("200 OK", "application/json", size + 8) + b'{"x": "')
            block = b" " * 65536
            for _ in range(size // len(block)):
                writer.write(block)
                self.sent[model] += len(block)
                await writer.drain()
            writer.write(b'"}')
            return True
        if model == "bomb":
            writer.write(
                response_head("200 OK", "application/json", len(self._bomb)).replace(
                    b"\r\n\r\n", b"\r\ncontent-encoding: gzip\r\n\r\n"
                )
                + self._bomb
            )
            return True
        if model == "error":
            message = json.dumps({"error": {"type": "api_error", "message": "e" * 20 * 1024**2}}).encode()
            writer.write(response_head("500 Internal Server Error", "application/json", len(message)) + message)
            return True
        if model == "headers":
            many = b"".join(b"x-filler-%d: %d\r\n" % (i, i) for i in range(5000))
            writer.write(
                response_head("200 OK", "application/json", len(body)).replace(b"\r\n\r\n", b"\r\n" + many + b"\r\n")
                + body
            )
            return False
        if model == "break":
            if stream:
                writer.write(response_head("200 OK", "text/event-stream") + chunked(events.head.encode()) + b"zz\r\n")
            else:
                writer.write(response_head("200 OK", "application/json", len(body) * 2) + body)
            return False
        writer.write(response_head("200 OK", "application/json", len(body)) + body)
        return True

    def _write(self, events, model):
        """The next chunk of a streamed answer: 64 text events, a 10 MB one (made once), or one stamped."""
        if model == "giant":
            if events not in self._giant:
                before, after = events.text
                self._giant[events] = chunked((before + "x" * GIANT_EVENT + after).encode())
            return self._giant[events]
        return chunked(text_event(events, stamp=model == "ticking") * (64 if model in ("endless", "flood") else 1))


PACES = {"paced": 1.0, "ticking": TICK}  # seconds between writes; other streams write as fast as taken


def _gzip_bomb():
    """A JSON string of 1 GB of spaces, gzipped to about 1 MB: gzip members, concatenated, inflate
    to their contents concatenated, so one member of a MiB of spaces is compressed once."""
    spaces = gzip.compress(b" " * 1024**2, compresslevel=9)
    return gzip.compress(b'{"x": "') + spaces * 1024 + gzip.compress(b'"}')


# -- measuring the bridge -------------------------------------------------------------------------


class Workers:
    """gunicorn's workers: their peak RSS since the last reset, and whether any was replaced."""

    def __init__(self, master):
        self.master = master
        self.started = set(self.pids())

    def pids(self):
        return [pid for pid in procstat.tree(self.master) if pid != self.master]

    def reset_peaks(self):
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as fh:
                    fh.write("5")  # resets VmHWM to the current RSS
            except OSError:
                pass

    def peaks_mib(self):
        peaks = {}
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            peaks[pid] = round(int(line.split()[1]) / 1024, 1)
            except OSError:
                pass
        return peaks

    def replaced(self):
        return sorted(self.started - set(self.pids()))


class Prober:
    """GET /healthz every PROBE_EVERY seconds on a fresh connection, each with its latency."""

    def __init__(self, port):
        self.port = port
        self.samples = []  # (started, seconds, status or error)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(PROBE_EVERY):
            started = time.monotonic()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("GET", "/healthz")
                outcome = conn.getresponse().status
                conn.close()
            except OSError as exc:
                outcome = type(exc).__name__
            self.samples.append((started, time.monotonic() - started, outcome))

    def between(self, start, end):
        seconds = [s for t, s, _ in self.samples if start <= t <= end]
        failed = [o for t, _, o in self.samples if start <= t <= end and o != 200]
        return {"probes": len(seconds), "failed": len(failed), **milliseconds(seconds)}

    def stop(self):
        self._stop.set()
        self._thread.join()


def milliseconds(seconds):
    """p50, p99 and max of durations in seconds, in milliseconds."""
    ms = lambda q: round(client.percentile(seconds, q) * 1000, 1) if seconds else None  # noqa: E731
    return {"p50_ms": ms(0.5), "p99_ms": ms(0.99), "max_ms": ms(1.0)}


def statuses(results):
    return dict(collections.Counter(str(r.status or r.error or "no answer") for r in results))


def request_body(front, model, stream, **extra):
    if front == "responses":
        return json.dumps({"model": model, "input": "hi", "stream": stream, **extra}).encode()
    return json.dumps({"model": model, "max_tokens": 64, "messages": USER, "stream": stream, **extra}).encode()


def send(bridge, front, model, stream, *, total, concurrency, timeout=120, key=None, **options):
    """`total` calls of one front over `concurrency` connections, with the abusing key or `key`'s header."""
    path, headers = FRONTS[front]
    return client.run(
        bridge.url,
        path,
        request_body(front, model, stream),
        key or headers,
        total=total,
        concurrency=concurrency,
        timeout=timeout,
        **options,
    )


def _fronts(count):
    """`count` fronts, each in turn."""
    return [list(FRONTS)[number % len(FRONTS)] for number in range(count)]


def ask(port, front, model, stream=True, receive_buffer=None):
    """A socket that has asked the bridge on `port` for a call (a stream unless `stream` is false)
    and read nothing yet (`receive_buffer`: its SO_RCVBUF)."""
    path, headers = FRONTS[front]
    sock = socket.socket()
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    body = request_body(front, model, stream)
    head = [
        f"POST {path} HTTP/1.1",
        "host: bridge",
        "content-type: application/json",
        f"content-length: {len(body)}",
    ]
    sock.sendall(("\r\n".join(head + [f"{k}: {v}" for k, v in headers.items()]) + "\r\n\r\n").encode() + body)
    return sock


# -- the cases ------------------------------------------------------------------------------------


def huge_bodies(bridge, upstream, args):
    """Six 30 MB bodies of a million tiny messages at once per front, twice."""
    tiny = b'{"role":"user","content":"x"},' * 1_000_000
    at_once = max(1, round(6 * args.scale))
    report = {}
    for front in FRONTS:
        path, headers = FRONTS[front]
        key = "input" if front == "responses" else "messages"
        body = b'{"model":"plain","max_tokens":64,"' + key.encode() + b'":[' + tiny[:-1] + b"]}"
        results = client.run(bridge.url, path, body, headers, total=2 * at_once, concurrency=at_once, timeout=300)
        report[front] = statuses(results)
    return {"bodies_mb": round(len(tiny) / 1e6), "at_once": at_once, "answers": report}


def stalled_readers(bridge, upstream, args):
    """Streams whose clients never read, held --hold seconds, against an upstream as fast as it may be."""
    count = max(1, round(40 * args.scale))
    sockets = [ask(bridge.port, front, "endless", receive_buffer=4096) for front in _fronts(count)]
    time.sleep(args.hold)
    sent = upstream.sent["endless"]
    for sock in sockets:
        sock.close()
    return {"clients": count, "held_s": args.hold, "upstream_mib_sent": round(sent / 1024**2, 1)}


def burst(bridge, upstream, args):
    """More streams at once than every worker has threads, each held --hold seconds."""
    config = gunicorn_config()
    capacity = config["workers"] * config["threads"]
    count = capacity + max(1, round(200 * args.scale))
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(len(FRONTS)) as pool:
        for front, share in zip(FRONTS, (count // 3, count // 3, count - 2 * (count // 3)), strict=True):
            jobs.append(
                pool.submit(send, bridge, front, "paced", True, total=share, concurrency=share, timeout=args.hold + 60)
            )
        results = [r for job in jobs for r in job.result()]
    refused = [r.latency for r in results if r.status in (429, 503)]
    return {
        "capacity": capacity,
        "streams": count,
        "answers": statuses(results),
        "refused_answer_ms": {
            "p50": round(client.percentile(refused, 0.5) * 1000, 1) if refused else None,
            "max": round(max(refused) * 1000, 1) if refused else None,
        },
    }


def slow_headers(bridge, upstream, args):
    """Connections that send their request head one byte a second for --hold seconds."""
    count = max(1, round(300 * args.scale))
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: bridge\r\nx-slow: " + b"a" * 10_000
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", bridge.port))
        sock.setblocking(False)
        sockets.append(sock)
    started, closed = time.monotonic(), {}
    for offset in range(int(args.hold)):
        for number, sock in enumerate(sockets):
            if number in closed:
                continue
            try:
                sock.send(head[offset : offset + 1])
                if sock.recv(4096) == b"":
                    closed[number] = time.monotonic() - started
            except BlockingIOError:
                pass
            except OSError:
                closed[number] = time.monotonic() - started
        time.sleep(1)
    for sock in sockets:
        sock.close()
    seconds = sorted(closed.values())
    return {
        "connections": count,
        "held_s": args.hold,
        "closed_by_bridge": len(closed),
        "closed_after_s": {"min": round(seconds[0], 1), "max": round(seconds[-1], 1)} if seconds else None,
    }


def broken_answers(bridge, upstream, args):
    """Answers that break mid-body: each must reach the upstream exactly once."""
    count = max(3, round(60 * args.scale))
    results = []
    for front in FRONTS:
        for stream in (False, True):
            results += send(bridge, front, "break", stream, total=count // 3, concurrency=8)
    return {"client_calls": len(results), "answers": statuses(results)}


def huge_answers(bridge, upstream, args):
    """A 200 MB answer, a gzip bomb, a 20 MB error message and 5,000 headers, four of each at once."""
    at_once = max(1, round(4 * args.scale))
    return {
        model: statuses(
            send(bridge, "messages" if model == "headers" else "chat", model, False, total=at_once, concurrency=at_once)
        )
        for model in ("huge", "bomb", "error", "headers")
    }


def reasoning_bomb(size, model="plain"):
    """A Responses body of about `size` bytes, nearly all one reasoning item's encrypted_content in
    bridge's own form (responses_to_messages/reasoning.py): base64 of millions of empty objects."""
    objects = (size * 3 // 4) // 3
    payload = base64.urlsafe_b64encode(b"[" + b"{}," * objects + b"{}]").decode().rstrip("=")
    item = {"type": "reasoning", "summary": [], "encrypted_content": "bridge.v1." + payload}
    return json.dumps({"model": model, "input": [{"role": "user", "content": "hi"}, item]}).encode()


def reasoning_bombs(bridge, upstream, args):
    """32 MB encrypted-reasoning bombs, eight at once, twice."""
    at_once = max(1, round(8 * args.scale))
    body = reasoning_bomb(32 * 1024**2 - 1024)
    path, headers = FRONTS["responses"]
    results = client.run(bridge.url, path, body, headers, total=2 * at_once, concurrency=at_once, timeout=300)
    return {"body_mb": round(len(body) / 1e6), "at_once": at_once, "answers": statuses(results)}


def departed_clients(bridge, upstream, args):
    """One key's slow non-streamed calls, whose clients all leave while the upstream works on
    them: the upstream calls still open a second later, and other keys' calls meanwhile and after."""
    count = max(1, round(140 * args.scale))
    sockets = [ask(bridge.port, front, "slow", stream=False) for front in _fronts(count)]
    deadline = time.monotonic() + 10
    while upstream.working + len(answered(sockets)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    working, refused = upstream.working, answered(sockets)
    others = {"while_held": statuses(send(bridge, "chat", "plain", False, total=10, concurrency=10, key=OTHER_KEY))}
    for sock in sockets:
        sock.close()
    time.sleep(1)
    left_open = upstream.working
    others["after_they_left"] = statuses(send(bridge, "chat", "plain", False, total=10, concurrency=10, key=OTHER_KEY))
    return {
        "calls": count,
        "upstream_working_on": working,
        "answered_before_leaving": dict(collections.Counter(refused)),
        "upstream_calls_open_1s_after_leaving": left_open,
        "other_clients": others,
    }


def answered(sockets):
    """The status of each call answered so far (the others' sockets have nothing to read)."""
    statuses = []
    for sock in sockets:
        try:
            head = sock.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        statuses.append(head[9:12].decode() or "closed")
    return statuses


def head_of_line(bridge, upstream, args):
    """Streams of an event every TICK seconds, each event's delay from upstream to client: alone,
    then next to one and to three streams of 10 MB events, and to four floods of tiny events,
    each phase --hold seconds, the hogs read as fast as they come (on the Chat front)."""
    per_front = max(1, round(40 * args.scale / len(FRONTS)))
    phases = {"alone": ("", 0), "1 giant": ("giant", 1), "3 giant": ("giant", 3), "4 floods": ("flood", 4)}
    report = {}
    for phase, (model, hogs) in phases.items():
        streams = [_Hog(bridge, "chat", model) for _ in range(hogs)]
        with concurrent.futures.ThreadPoolExecutor(len(FRONTS)) as pool:
            shares = [pool.submit(_ticking, bridge, front, per_front, args) for front in FRONTS]
            results = [result for share in shares for result in share.result()]
        for hog in streams:
            hog.close()
        delays = [delay for result in results for delay in result.delays]
        report[phase] = {
            "paced_streams": len(results),
            "answers": statuses(results),
            "events": len(delays),
            "delay": milliseconds(delays),
            "hog_streams": hogs,
            "hog_mib_received": round(sum(hog.received for hog in streams) / 1024**2, 1),
        }
    return {"tick_s": TICK, "giant_event_mib": GIANT_EVENT / 1024**2, "phases": report}


def _ticking(bridge, front, count, args):
    return send(bridge, front, "ticking", True, total=count, concurrency=count, timeout=args.hold + 60, stamps=True)


class _Hog:
    """A stream read as fast as it comes, in a process of its own (not this one's GIL, which the
    paced streams' client needs on time), until it is closed."""

    def __init__(self, bridge, front, model):
        context = multiprocessing.get_context("spawn")
        self._received = context.Value("q", 0)
        self._process = context.Process(target=_read_all, args=(bridge.port, front, model, self._received))
        self._process.start()

    @property
    def received(self):
        return self._received.value

    def close(self):
        self._process.terminate()
        self._process.join()


def _read_all(port, front, model, received):
    sock = ask(port, front, model)
    while data := sock.recv(1024**2):
        received.value += len(data)


def broken_reload(bridge, upstream, args):
    """A reload after a typo in the model map, while paced streams and calls run: the master
    refuses it and keeps its workers, so no call fails (before, the master stopped)."""
    model_map = bridge.log_path.parent / MODEL_MAP
    streams, calls = max(1, round(40 * args.scale)), max(3, round(300 * args.scale))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        streaming = pool.submit(
            send, bridge, "chat", "paced", True, total=streams, concurrency=streams, timeout=args.hold + 60
        )
        time.sleep(1)  # under way
        model_map.write_text('{"gpt-4o": }')
        bridge.signal(signal.SIGHUP)
        calling = pool.submit(send, bridge, "messages", "plain", False, total=calls, concurrency=8)
        deadline = time.monotonic() + 30
        while "reload refused" not in bridge.log() and time.monotonic() < deadline:
            time.sleep(0.1)
        model_map.write_text("{}")
        results = streaming.result() + calling.result()
    return {
        "streams": streams,
        "calls": calls,
        "reload_refused": "reload refused" in bridge.log(),
        "answers": statuses(results),
        "failed_calls": sum(1 for r in results if r.status != 200 or r.error),
    }


CASES = {
    case.__name__: case
    for case in (
        huge_bodies,
        stalled_readers,
        burst,
        slow_headers,
        broken_answers,
        huge_answers,
        reasoning_bombs,
        departed_clients,
        head_of_line,
        broken_reload,
    )
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="run only these cases")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each case's size, (0, 1]")
    parser.add_argument("--hold", type=float, default=15.0, help="seconds a stalled or slow connection is held")
    parser.add_argument("--rss-limit", type=float, default=400.0, help="MiB a worker's peak RSS may reach")
    args = parser.parse_args(argv)
    if not (0 < args.scale <= 1 and 1 <= args.hold <= 120):
        parser.error("bounded: --scale in (0, 1], --hold between 1 and 120 seconds")

    upstream = Upstream(args.hold)
    workdir = tempfile.TemporaryDirectory(prefix="bridge-abuse-")
    model_map = pathlib.Path(workdir.name) / MODEL_MAP
    model_map.write_text("{}")
    bridge = Gunicorn(
        workdir.name,
        upstream.url,
        BRIDGE_LOG_LEVEL="WARNING",
        BRIDGE_CLIENT_KEYS=CLIENT_KEYS,
        BRIDGE_MODEL_MAP=str(model_map),
    )
    try:
        report = measure(bridge, upstream, args)
    finally:
        bridge.stop()
        workdir.cleanup()
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


def measure(bridge, upstream, args):
    workers = Workers(bridge.process.pid)
    prober = Prober(bridge.port)
    cases, ok = {}, True
    try:
        for name in args.case or CASES:
            workers.reset_peaks()
            started = time.monotonic()
            calls_before = sum(upstream.calls.values())
            outcome = CASES[name](bridge, upstream, args)
            health = prober.between(started, time.monotonic())
            peaks = workers.peaks_mib()
            calls = sum(upstream.calls.values()) - calls_before
            cases[name] = {
                **outcome,
                "seconds": round(time.monotonic() - started, 1),
                "peak_rss_mib_per_worker": sorted(peaks.values()),
                "healthz": health,
                "upstream_calls": calls,
            }
            repeated = "client_calls" in outcome and calls != outcome["client_calls"]
            left_open = outcome.get("upstream_calls_open_1s_after_leaving", 0)
            ok = (
                ok
                and not health["failed"]
                and max(peaks.values(), default=0) <= args.rss_limit
                and not repeated
                and not left_open
                and not outcome.get("failed_calls")
                and outcome.get("reload_refused", True)
            )
    finally:
        prober.stop()
    replaced = workers.replaced()
    return {
        "ok": ok and not replaced,
        "gunicorn": gunicorn_config(),
        "scale": args.scale,
        "workers_replaced": replaced,
        "healthz_overall": prober.between(0, time.monotonic()),
        "cases": cases,
    }


if __name__ == "__main__":
    raise SystemExit(main())
