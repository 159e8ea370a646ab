"""A small HTTP/1.1 client for what wrk cannot tell: latency percentiles,
stream time to first and last byte, upstream-to-client delay, streams held.

One thread and a selector drive any number of keep-alive connections over
raw sockets, so the client adds microseconds, not milliseconds, and the
same code measures one request at a time or hundreds of streams at once.
Times are CLOCK_MONOTONIC seconds, the clock the bench upstream stamps its
events with (`@<seconds>@`), so emission-to-receipt delay is a subtraction.
"""

import bisect
import dataclasses
import re
import selectors
import socket
import time

_STAMP = re.compile(rb"@(\d+\.\d+)@")


@dataclasses.dataclass
class Result:
    status: int = 0
    start: float = 0.0
    first_byte: float = 0.0  # first byte of the body
    end: float = 0.0
    body: bytes = b""
    delays: list = dataclasses.field(default_factory=list)  # seconds, one per stamped event
    emitted: list = dataclasses.field(default_factory=list)  # the upstream's stamp of each of those events
    error: str = ""

    @property
    def latency(self):
        return self.end - self.start

    @property
    def ttfb(self):
        return self.first_byte - self.start


class _Parser:
    """Incremental response parser: content-length or chunked bodies."""

    def __init__(self, keep_body):
        self.buffer = b""
        self.head_done = False
        self.status = 0
        self.length = None
        self.chunked = False
        self.chunk_left = None  # bytes of the current chunk still to read (incl. CRLF)
        self.body = bytearray() if keep_body else None
        self.body_size = 0
        self.arrivals = []  # (decoded body size after a recv, time of that recv)
        self.done = False

    def feed(self, data, now):
        self.buffer += data
        if not self.head_done:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buffer = self.buffer[:end].decode("latin-1"), self.buffer[end + 4 :]
            lines = head.split("\r\n")
            self.status = int(lines[0].split(" ")[1])
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name, value = name.strip().lower(), value.strip()
                if name == "content-length":
                    self.length = int(value)
                elif name == "transfer-encoding" and "chunked" in value.lower():
                    self.chunked = True
            self.head_done = True
        before = self.body_size
        self._chunks() if self.chunked else self._plain()
        if self.body_size > before:
            self.arrivals.append((self.body_size, now))

    def _take(self, data):
        if self.body is not None:
            self.body += data
        self.body_size += len(data)

    def _plain(self):
        self._take(self.buffer)
        self.buffer = b""
        if self.length is not None and self.body_size >= self.length:
            self.done = True

    def _chunks(self):
        while True:
            if self.chunk_left is None:
                line_end = self.buffer.find(b"\r\n")
                if line_end < 0:
                    return
                size = int(self.buffer[:line_end].split(b";")[0], 16)
                self.buffer = self.buffer[line_end + 2 :]
                if size == 0:
                    self.done = True  # no trailers from any server under test
                    return
                self.chunk_left = size + 2
            take = self.buffer[: self.chunk_left]
            self.buffer = self.buffer[len(take) :]
            payload = take[: max(0, self.chunk_left - 2)]
            self._take(payload)
            self.chunk_left -= len(take)
            if self.chunk_left:
                return
            self.chunk_left = None


def _request_bytes(host, port, path, body, headers):
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: {host}:{port}",
        "content-type: application/json",
        f"content-length: {len(body)}",
    ] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Conn:
    def __init__(self, addr):
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.parser = None
        self.result = None


def run(
    url,
    path,
    body,
    headers=None,
    *,
    total,
    concurrency,
    keep_body=False,
    stamps=False,
    timeout=60.0,
    on_tick=None,
    ramp=0.0,
):
    """Send `total` identical POSTs over `concurrency` keep-alive connections; return Results.

    `stamps` scans each body for upstream emission stamps and records the
    delay to the recv that delivered them. `on_tick(now)` is called about
    every 50 ms so a caller can sample the server while requests are open.
    `ramp` opens the connections evenly over that many seconds instead of at once.
    """
    host, port = url.split("//")[1].split(":")
    addr = (host, int(port))
    payload = _request_bytes(host, port, path, body, headers or {})
    selector = selectors.DefaultSelector()
    results, sent = [], 0
    deadline = time.monotonic() + timeout

    def start(conn):
        nonlocal sent
        sent += 1
        conn.parser = _Parser(keep_body or stamps)
        conn.result = Result(start=time.monotonic())
        conn.sock.setblocking(True)  # a large body may not fit the socket buffer at once
        conn.sock.sendall(payload)
        conn.sock.setblocking(False)

    opening, conns = min(concurrency, total), []
    began = next_tick = time.monotonic()
    while len(results) < total:
        now = time.monotonic()
        # sent < total: a connection whose answer came early may have taken the last requests
        while len(conns) < opening and sent < total and now >= began + len(conns) * ramp / opening:
            conn = _Conn(addr)
            conns.append(conn)
            selector.register(conn.sock, selectors.EVENT_READ, conn)
            start(conn)
        if now > deadline:
            for conn in conns:
                if conn.result is not None:
                    conn.result.error = "timeout"
                    conn.result.status = conn.parser.status  # its head's, if it came: a stream held or a 503
                    results.append(conn.result)
            break
        if on_tick and now >= next_tick:
            on_tick(now)
            next_tick = now + 0.05
        more = len(conns) < opening and sent < total
        wait = min(0.05, max(0.0, began + len(conns) * ramp / opening - now)) if more else 0.05
        for key, _ in selector.select(timeout=wait):
            conn = key.data
            if conn.result is None:  # done with its last request: the server closing it is no news
                selector.unregister(conn.sock)
                conn.sock.close()
                continue
            try:
                data = conn.sock.recv(262144)
            except ConnectionError as exc:
                data, conn.result.error = b"", type(exc).__name__
            now = time.monotonic()
            if not data:
                conn.result.error = conn.result.error or "connection closed"
                conn.result.end = now
                results.append(conn.result)
                selector.unregister(conn.sock)
                conn.sock.close()
                conn.result = None
                continue
            parser = conn.parser
            parser.feed(data, now)
            if parser.body_size and not conn.result.first_byte:
                conn.result.first_byte = now
            if parser.done:
                _finish(conn.result, parser, now, stamps)
                results.append(conn.result)
                conn.result = None
                if sent < total:
                    start(conn)
    for conn in conns:
        try:
            selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
    return results


def _finish(result, parser, now, stamps):
    result.end = now
    result.status = parser.status
    if parser.body is not None:
        result.body = bytes(parser.body)
    if stamps:
        sizes = [size for size, _ in parser.arrivals]
        seen = set()  # a stamp's first arrival only: a Responses answer repeats its text in its last events
        for match in _STAMP.finditer(result.body):
            if match.group(1) in seen:
                continue
            seen.add(match.group(1))
            arrival = parser.arrivals[bisect.bisect_left(sizes, match.end())][1]
            emitted = float(match.group(1))
            result.delays.append(arrival - emitted)
            result.emitted.append(emitted)


def percentile(values, fraction):
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]
