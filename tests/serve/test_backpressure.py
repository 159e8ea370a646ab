"""Back-pressure under gunicorn: a client that stops reading holds a few buffers, then loses the upstream.

The upstream is a Flood, an endless stream written as fast as the bridge reads it; the client
asks for a stream and reads nothing (a raw socket with a small receive buffer), or reads its
first chunk and then nothing for a while (the openai SDK).
"""

import json
import socket
import time

import openai
import pytest
import requests

from bench import procstat
from bench.processes import wait_for
from tests.fake_upstream import Flood, Reply, messages_stream
from tests.helpers.refused import USER
from tests.helpers.servers import gunicorn, openai_client, settled, socket_buffers

pytestmark = pytest.mark.slow  # gunicorn, and seconds of watching a stalled stream

STREAM = {"model": "claude-sonnet-4-5", "messages": [USER], "stream": True}
MIB = 1024 * 1024


def flood(fake):
    upstream = Flood()
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=upstream))
    return upstream


def stalled_client(server):
    """A socket that asks for a stream and never reads, with as small a receive buffer as the kernel allows."""
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: it sets the window
    client.connect(("127.0.0.1", server.port))
    body = json.dumps(STREAM).encode()
    client.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer sk-client\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    return client


def rss(pid):
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))


def test_a_client_that_stops_reading_holds_a_few_buffers_not_the_stream(tmp_path, fake):
    """The relay stops reading the upstream while its write waits for the client.

    What the bridge itself holds for the stream is the last read (64 KiB at most) and the
    translated chunk stuck in gunicorn's write: under 1 MiB of bytes, a few MiB as Python
    objects at most. 16 MiB leaves room for
    allocator noise; without the bound the worker grows by the upstream's full speed, hundreds
    of MiB in these seconds.
    """
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS=1)
    try:
        (worker,) = set(procstat.tree(server.process.pid)) - {server.process.pid}
        fake.reply(messages_stream("warm-up"))  # a stream's first-time allocations are not the stall's
        warm_up = requests.post(
            f"{server.url}/v1/chat/completions", json=STREAM, headers={"authorization": "Bearer sk-client"}
        )
        assert warm_up.status_code == 200 and "warm-up" in warm_up.text
        before = rss(worker)
        upstream = flood(fake)
        with stalled_client(server):
            bound = socket_buffers() + 4 * MIB
            sent = settled(upstream, bound)
            growth = []
            for _ in range(6):
                growth.append(rss(worker) - before)
                time.sleep(0.5)
            assert upstream.sent == sent, "the upstream sent more while the client still read nothing"
        assert max(growth) < 16 * MIB, [f"{g / MIB:.1f} MiB" for g in growth]
        # The client gone, its stream is closed and its upstream with it: the bridge serves on.
        wait_for(lambda: fake.closed_streams, "the bridge to close the upstream of the departed client")
        fake.reply(messages_stream("still here"))
        answer = requests.post(
            f"{server.url}/v1/chat/completions", json=STREAM, headers={"authorization": "Bearer sk-client"}
        )
        assert "still here" in answer.text
    finally:
        server.stop()


def test_a_client_that_reads_nothing_for_the_stall_timeout_loses_its_upstream(tmp_path, fake):
    """The worker's send timeout cuts the write: the upstream is closed, the log and the access line
    say which request, and the client, reading again, gets what was already on its way and then a
    reset its SDK raises: not a stream cut short that would pass for a whole answer."""
    server = gunicorn(tmp_path, fake, BRIDGE_CLIENT_STALL_TIMEOUT="1")
    try:
        flood(fake)
        client = openai_client(server.url)
        stream = client.chat.completions.create(model="claude-sonnet-4-5", messages=[USER], stream=True)
        chunks = iter(stream)
        assert next(chunks).choices[0].delta.role == "assistant"
        wait_for(lambda: fake.closed_streams, "the bridge to close the upstream of a stalled client", timeout=15)
        request_id = stream.response.headers["x-request-id"]
        server.wait_for(
            lambda: f"request {request_id}: the client stopped reading" in server.log(), "the stall in the log"
        )
        with pytest.raises(openai.APIConnectionError):
            for _ in chunks:
                pass
        stalled = lambda: [line for line in server.access_lines() if line["request_id"] == request_id]  # noqa: E731
        server.wait_for(stalled, "the access line")
        (line,) = stalled()
        assert line["error"] == "client_stalled" and line["status"] == 200
        fake.reply(messages_stream("still here"))
        again = client.chat.completions.create(model="claude-sonnet-4-5", messages=[USER], stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in again if c.choices) == "still here"
    finally:
        server.stop()


def test_an_open_stream_holds_one_thread_of_the_worker(tmp_path, fake):
    """Thousands of streams at once need a thread each at most: the request's own thread reads
    the upstream, and while the upstream is silent (a model thinking) it still holds only that."""
    streams = 10
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS=1)
    clients = []
    try:
        (worker,) = set(procstat.tree(server.process.pid)) - {server.process.pid}
        fake.reply(messages_stream("warm-up"))
        warm_up = requests.post(
            f"{server.url}/v1/chat/completions", json=STREAM, headers={"authorization": "Bearer sk-client"}
        )
        assert "warm-up" in warm_up.text
        before = procstat.threads(worker)
        held = messages_stream("held")
        held.stall_after = 2  # message_start and the text's first delta, then silence
        fake.reply(*[held] * streams)
        clients = [stalled_client(server) for _ in range(streams)]
        wait_for(lambda: len(fake.requests) == streams + 1, "every stream to reach the upstream")
        assert procstat.threads(worker) - before <= streams + 1  # + a spare thread the pool may start
    finally:
        for client in clients:
            client.close()
        server.stop()
