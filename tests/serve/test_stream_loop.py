"""The worker's stream loop (bridge/serve/stream_loop.py), through gunicorn from deploy/gunicorn.conf.py:
streams that hold no thread, each event written as it comes, a stalled client that stops only
its own stream, faults mid-stream, and a connection that serves on after its stream."""

import json
import selectors
import socket
import threading
import time

import pytest
import requests

from bridge.serve.stream_loop import StreamLoop
from bridge.serve.streaming import EVENTS_PER_TURN
from tests.fake_upstream import Flood, Reply, fixture, messages_stream
from tests.helpers.directions import ANTHROPIC_HEADERS, recorded_stream
from tests.helpers.directions import DIRECTIONS as EACH_DIRECTION
from tests.helpers.recorded import decoded
from tests.helpers.servers import (
    Gate,
    TextStream,
    gunicorn,
    next_text,
    open_text_streams,
    openai_client,
    settled,
    socket_buffers,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (setup.cfg)

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
_STREAM_BODY = json.dumps({**CHAT, "stream": True}).encode()
STREAM_REQUEST = (  # a Chat stream asked for on a raw socket
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_STREAM_BODY), _STREAM_BODY)
)
EACH = pytest.mark.parametrize("direction", EACH_DIRECTION, ids=lambda d: d.name)


@pytest.fixture
def one_thread(tmp_path, fake):
    """One worker of one request thread: any stream holding the thread would refuse the next request."""
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1")
    yield server
    server.stop()


def test_a_worker_of_one_thread_holds_many_streams_and_still_answers(one_thread, fake):
    opened = open_text_streams(one_thread.url, fake, 8)
    fake.reply(fixture("anthropic/text.json"))
    assert openai_client(one_thread.url).chat.completions.create(**CHAT).choices[0].message.content
    for upstream, chunks in reversed(opened):  # each stream's next event as it comes, the others quiet
        upstream.release_until_text(1)
        assert next_text(chunks) == upstream.texts[1][1]
    for upstream, chunks in opened:
        upstream.release_rest()
        rest = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert rest == [text for _, text in upstream.texts[2:]]
    ended = lambda: [line for line in one_thread.access_lines() if line["stream"]]  # noqa: E731
    one_thread.wait_for(lambda: len(ended()) == 8, "an access line for each stream")  # written as the loop closes it
    assert all(line["status"] == 200 and line["error"] is None for line in ended())
    assert "Traceback" not in one_thread.log()


def stalled_stream(server, fake, flood=None):
    """A socket that asks for a stream and reads nothing, its upstream a flood paced just enough
    (10 ms before each 64 KiB write) that the relay waits between writes, so it parks: returns
    (socket, flood) once the buffers between them are full and the flood cannot send more."""
    flood = flood or Flood()
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=flood, pace=0.01))
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", server.port))
    stalled.sendall(STREAM_REQUEST)
    settled(flood, socket_buffers() + 64 * 1024 * 1024)
    return stalled, flood


def test_a_client_that_stops_reading_stops_only_its_own_stream(tmp_path, fake):
    """The loop never blocks in a write: another stream on the worker goes on at once, well
    inside the 30 s a blocked write would wait; the stalled one holds until its client leaves."""
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1", BRIDGE_CLIENT_STALL_TIMEOUT="30")
    try:
        stalled, flood = stalled_stream(server, fake)
        with stalled:
            upstream = TextStream(fake)
            upstream.release_rest()
            started = time.monotonic()
            answer = openai_client(server.url).chat.completions.create(stream=True, **CHAT)
            texts = [c.choices[0].delta.content for c in answer if c.choices and c.choices[0].delta.content]
            assert texts == [text for _, text in upstream.texts]
            assert time.monotonic() - started < 10
            assert flood.sent == settled(flood, flood.sent)  # meanwhile the stalled stream read nothing more
        errors = lambda: sorted((line["error"] or "" for line in server.access_lines() if line["stream"]))  # noqa: E731
        server.wait_for(lambda: len(errors()) == 2, "the loop to see it gone")
        assert errors() == ["", "client_closed"]
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_a_client_that_stops_reading_is_reset_after_the_stall_timeout(tmp_path, fake):
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1", BRIDGE_CLIENT_STALL_TIMEOUT="1")
    try:
        stalled, _ = stalled_stream(server, fake)
        with stalled:
            server.wait_for(lambda: "BRIDGE_CLIENT_STALL_TIMEOUT" in server.log(), "the stalled client to be cut")
            stalled.setblocking(False)
            with pytest.raises(ConnectionResetError):  # reset, not a graceful close that waits for it
                while stalled.recv(65536):
                    pass
        streams = lambda: [(line["status"], line["error"]) for line in server.access_lines() if line["stream"]]  # noqa: E731
        server.wait_for(streams, "its access line")
        assert streams() == [(200, "client_stalled")]
        assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert "Traceback" not in server.log()
    finally:
        server.stop()


class _FloodThenSilence(Flood):
    """A Flood that, once past its limit, keeps the stream open and silent for up to 60 s."""

    def __iter__(self):
        yield from super().__iter__()
        threading.Event().wait(60)


def test_a_client_that_reads_again_after_a_stall_gets_keepalives_on_time(tmp_path, fake):
    """A write the client did not take set a stall deadline 30 s away; once the client has caught
    up and the upstream is silent, keep-alives come at the ping interval again, not at 30 s."""
    server = gunicorn(
        tmp_path,
        fake,
        BRIDGE_WORKERS="1",
        BRIDGE_THREADS="1",
        BRIDGE_CLIENT_STALL_TIMEOUT="30",
        BRIDGE_PING_INTERVAL="0.5",
    )
    try:
        stalled, flood = stalled_stream(server, fake, _FloodThenSilence())
        with stalled:
            flood.limit = flood.sent  # its next write is its last
            stalled.settimeout(5)  # far below the stall deadline, ten ping intervals
            tail = b""
            while not (flood.sent >= flood.limit and b": keep-alive" in tail):
                try:
                    chunk = stalled.recv(65536)
                except TimeoutError:
                    raise AssertionError("nothing for 5 s after the flood went silent") from None
                assert chunk, "the stream was closed"
                tail = (tail + chunk)[-256:]
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_a_connection_serves_its_next_request_after_a_parked_stream(one_thread, fake):
    """The loop gives the connection back kept alive: a second request on it is answered."""
    with socket.create_connection(("127.0.0.1", one_thread.port), timeout=10) as sock:
        for number in range(2):
            upstream = TextStream(fake)
            upstream.release_rest()
            sock.sendall(STREAM_REQUEST)
            answer = b""
            while not answer.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    raise AssertionError(f"stream {number}: {answer[-300:]!r}\n{one_thread.log()[-3000:]}") from None
                assert chunk, f"stream {number}: the connection closed after {answer[-200:]!r}"
                answer += chunk
            head, _, chunked = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and b"connection: close" not in head.lower()
            assert b"data: [DONE]" in chunked and upstream.texts[-1][1].encode() in chunked
    one_thread.wait_for(
        lambda: len([line for line in one_thread.access_lines() if line["stream"]]) == 2, "both access lines"
    )


@pytest.fixture(scope="module")
def impatient(fake, tmp_path_factory):
    """gunicorn whose streams the loop relays, with a 1 s read timeout and keep-alives every 0.2 s."""
    server = gunicorn(
        tmp_path_factory.mktemp("gunicorn"),
        fake,
        BRIDGE_WORKERS="1",
        BRIDGE_THREADS="1",
        BRIDGE_READ_TIMEOUT="1",
        BRIDGE_PING_INTERVAL="0.2",
        BRIDGE_LOG_LEVEL="WARNING",
    )
    yield server
    server.stop()


@EACH
@pytest.mark.parametrize("fault", ["stall", "drop"])
def test_a_stall_or_a_drop_mid_stream_ends_with_the_clients_error_event(impatient, fake, direction, fault):
    fake.reply(recorded_stream(direction, **{f"{fault}_after": 3}))
    started = time.monotonic()
    response = requests.post(
        impatient.url + direction.path,
        json={**direction.body, "stream": True},
        headers=ANTHROPIC_HEADERS,
        stream=True,
        timeout=30,
    )
    raw = b"".join(response.iter_content(None))
    events = decoded([raw])
    last = events[-1]
    error = json.loads(last.data)["error"]
    assert ("error" if direction.sdk.__name__ == "anthropic" else None) == last.event
    assert sum("error" in event.data for event in events) == 1
    if fault == "stall":
        assert "in time" in error["message"] and time.monotonic() - started >= 1
        keepalives = raw.count(b"event: ping") + raw.count(b": keep-alive")
        assert keepalives >= 2, raw  # the silent second is kept alive, from the loop
    else:
        assert "closed the connection" in error["message"]
    assert requests.get(f"{impatient.url}/healthz", timeout=10).status_code == 200


def test_a_stream_beyond_the_loop_keeps_its_thread(tmp_path, fake):
    """BRIDGE_STREAMS_PER_WORKER=1: the second stream waits in its thread, and the one thread
    then held, a third request is refused."""
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1", BRIDGE_STREAMS_PER_WORKER="1")
    try:
        opened = open_text_streams(server.url, fake, 2)
        refused = requests.post(f"{server.url}/v1/chat/completions", json=CHAT, timeout=10)
        assert refused.status_code == 503 and "BRIDGE_STREAMS_PER_WORKER" in refused.text
        for upstream, chunks in opened:
            upstream.release_rest()
            assert [c for c in chunks if c.choices and c.choices[0].finish_reason][0].choices[0].finish_reason == "stop"
    finally:
        server.stop()


def test_the_loops_places_are_taken_when_a_stream_may_park_and_given_back_once():
    """Streams about to park at the same moment (none started by the loop yet) cannot pass
    BRIDGE_STREAMS_PER_WORKER: a burst would open more upstream connections than the pool keeps."""
    loop = StreamLoop(worker=None, capacity=2, stall_timeout=1)
    first, second = loop.parking(None), loop.parking(None)
    assert first is not None and second is not None
    assert loop.parking(None) is None
    first.release()
    first.release()  # once, however often its end is seen
    assert loop.parking(None) is not None and loop.parking(None) is None


def test_a_streams_place_in_the_loop_comes_back_at_its_end(tmp_path, fake):
    """BRIDGE_STREAMS_PER_WORKER=1, one thread: stream after stream parks, so a request beside
    each is served; were a place kept, the next stream would hold the thread and it refused."""
    server = gunicorn(
        tmp_path,
        fake,
        BRIDGE_WORKERS="1",
        BRIDGE_THREADS="1",
        BRIDGE_STREAMS_PER_WORKER="1",
        BRIDGE_QUEUE_TIMEOUT="0",
    )
    try:
        for _ in range(3):
            ((upstream, chunks),) = open_text_streams(server.url, fake, 1)
            fake.reply(fixture("anthropic/text.json"))
            assert openai_client(server.url).chat.completions.create(**CHAT).choices[0].message.content
            upstream.release_rest()
            assert [c for c in chunks if c.choices and c.choices[0].finish_reason]
    finally:
        server.stop()


# -- a stream's turn: bounded -------------------------------------------------------------------


def numbered_stream(count):
    """A gated Anthropic text stream: its opening, then `count` tiny deltas "<0>", "<1>"... in one
    write (many events per read of the bridge's), then its end. Returns (gate, the texts)."""
    texts = [f"<{n}>" for n in range(count)]
    events = messages_stream(texts).events
    gate = Gate([*events[:2], b"".join(events[2 : 2 + count]), *events[2 + count :]])
    return gate, texts


def chunk_texts(chunk):
    """The texts of the Chat chunks in one HTTP chunk of a Chat stream."""
    chunks = [json.loads(event.data) for event in decoded(chunk) if event.data != "[DONE]"]
    return [
        c["choices"][0]["delta"]["content"] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")
    ]


class ChunkedReader:
    """A raw socket's chunked answer, read one HTTP chunk at a time (what one write of the bridge's made)."""

    def __init__(self, sock):
        self.sock = sock
        self._data = b""
        head = self._until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head

    def chunk(self):
        """The next chunk's payload; b"" for the last chunk."""
        size = int(self._until(b"\r\n"), 16)
        while len(self._data) < size + 2:
            self._recv()
        chunk, self._data = self._data[:size], self._data[size + 2 :]
        return chunk

    def _until(self, mark):
        while mark not in self._data:
            self._recv()
        line, _, self._data = self._data.partition(mark)
        return line

    def _recv(self):
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"nothing more for 10 s after {self._data[-200:]!r}") from None
        assert data, "the bridge closed the connection"
        self._data += data


def test_a_streams_turn_translates_a_bounded_number_of_events_in_order(one_thread, fake):
    """Two thousand events, many in each read: the loop translates and writes them EVENTS_PER_TURN
    at a time (one write each, then the other streams' turn), every text once and in order."""
    gate, texts = numbered_stream(2000)
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=gate))
    gate.release(len(gate.events))
    writes = []
    with socket.create_connection(("127.0.0.1", one_thread.port), timeout=10) as sock:
        sock.sendall(STREAM_REQUEST)
        reader = ChunkedReader(sock)
        while chunk := reader.chunk():
            writes.append(chunk)
    assert [text for chunk in writes for text in chunk_texts(chunk)] == texts
    assert max(len(chunk_texts(chunk)) for chunk in writes) <= EVENTS_PER_TURN
    assert decoded(writes)[-1].data == "[DONE]"


def test_events_held_after_a_turn_go_out_while_the_upstream_sends_nothing(one_thread, fake):
    """The events a turn leaves are the stream's, not its socket's: all of them reach the client
    while the upstream, its socket read empty, holds the rest of the stream back."""
    gate, texts = numbered_stream(2000)
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=gate))
    gate.release(3)  # the opening and the deltas; the end once the client has every text
    received = []
    with socket.create_connection(("127.0.0.1", one_thread.port), timeout=10) as sock:
        sock.sendall(STREAM_REQUEST)
        reader = ChunkedReader(sock)
        while len(received) < len(texts):
            received += chunk_texts(reader.chunk())
        assert gate.sent == 3
        gate.release(len(gate.events) - 3)
        rest = []
        while chunk := reader.chunk():
            rest.append(chunk)
    assert received == texts
    assert decoded(rest)[-1].data == "[DONE]"


def test_a_quiet_stream_is_relayed_between_the_turns_of_floods(one_thread, fake):
    """Forty streams get hundreds of events each in one read; once every one has had a turn, a
    quiet stream gets five. Those five go out while the floods' still do: a flood's turn takes
    EVENTS_PER_TURN of the events its read brought, not all of them."""
    floods, quiet = [numbered_stream(250)[0] for _ in range(40)], numbered_stream(5)[0]
    streams = [*floods, quiet]
    received = [b""] * len(streams)  # each stream's answer so far, from its socket
    order = []  # (stream, its texts so far) after each read, across the streams
    selector = selectors.DefaultSelector()
    try:
        for number, gate in enumerate(streams):
            gate.release(2)  # its opening: the client's first chunk, then the stream waits in the loop
            fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=gate))
            sock = socket.create_connection(("127.0.0.1", one_thread.port), timeout=10)
            selector.register(sock, selectors.EVENT_READ, number)
            sock.sendall(STREAM_REQUEST)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")  # the stream is open before the next

        def read_until(done):
            deadline = time.monotonic() + 30  # a hang guard
            while not done():
                assert time.monotonic() < deadline, [len(answer) for answer in received]
                for key, _ in selector.select(1):
                    received[key.data] += key.fileobj.recv(1 << 20)
                    order.append((key.data, received[key.data].count(b'"content":"<')))

        for gate in floods:
            gate.release(len(gate.events) - 2)  # the rest: its deltas in one write, then its end
        read_until(lambda: all(b'"content":"<' in answer for answer in received[:-1]))
        quiet.release(len(quiet.events) - 2)
        read_until(lambda: all(answer.endswith(b"0\r\n\r\n") for answer in received))
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()
    fifth = order.index((len(floods), 5))
    floods_done = max(order.index((number, 250)) for number in range(len(floods)))
    assert fifth < floods_done, order[fifth - 3 : fifth + 3]
