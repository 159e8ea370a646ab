"""The stream relay: events forwarded as they arrive, keep-alives in silence, errors in-band, prompt close."""

import json
import socket
import ssl
import threading
import time

import pytest
import requests

from bench.processes import wait_for
from bridge.protocols import json_codec, sse
from bridge.protocols.errors import ANTHROPIC, OPENAI, BridgeError
from bridge.serve import observability, streaming
from bridge.serve.streaming import CHAT_SSE, relay
from bridge.translate import translator
from bridge.translate.chat_to_messages.stream import StreamTranslator
from bridge.translate.translator import DONE
from tests.fake_upstream import FakeUpstream, Flood, Reply, fixture, messages_stream
from tests.helpers.accumulators import openai_fold
from tests.helpers.contexts import chat_to_messages_context
from tests.helpers.directions import FRAMING, Echo
from tests.helpers.recorded import decoded
from tests.helpers.servers import access_lines, openai_client, self_signed_certificate, settled, socket_buffers


def open_stream(fake, *events, **reply):
    fake.reply(Reply(events=[sse.encode(e, event="x") for e in events], **reply))
    return requests.get(f"{fake.url}/stream", stream=True)


def test_each_event_is_translated_and_framed_in_order(fake):
    translator = Echo()
    response = open_stream(fake, '{"type":"a","n":1}', '{"type":"b","n":2}')
    events = decoded(relay(response, translator, FRAMING[ANTHROPIC], ping_interval=5))
    assert [(e.event, e.data) for e in events] == [("a", '{"type":"a","n":1}'), ("b", '{"type":"b","n":2}')]
    assert translator.finished


def test_openai_framing_is_data_only_and_done_is_passed_as_is(fake):
    response = open_stream(fake, '{"type":"a"}', "[DONE]")
    events = decoded(relay(response, Echo(OPENAI), FRAMING[OPENAI], ping_interval=5))
    assert [e.event for e in events] == [None, None] and events[-1].data == "[DONE]"


@pytest.mark.parametrize(
    "framing, named", [(streaming.ANTHROPIC_SSE, True), (streaming.RESPONSES_SSE, True), (streaming.CHAT_SSE, False)]
)
def test_each_framing_writes_an_event_byte_for_byte_as_sse_encode_does(framing, named):
    """The framings write sse.encode's frames themselves (a call fewer per event): the same bytes."""
    for item in ({"type": "content_block_delta", "index": 0}, {"type": "a", "text": "é \u2028 \ud83d and\nmore"}):
        data = json_codec.dumps(item)
        assert framing.frame(item) == (sse.encode(data, event=item["type"]) if named else sse.encode(data))


def test_a_silent_upstream_gets_keepalives_in_the_clients_protocol(fake):
    response = open_stream(fake, '{"type":"late"}', pace=0.5)
    chunks = list(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=0.1))
    assert chunks[0].startswith(b"event: ping")
    assert decoded(chunks)[-1].event == "late"
    response = open_stream(fake, '{"type":"late"}', pace=0.5)
    assert list(relay(response, Echo(OPENAI), FRAMING[OPENAI], ping_interval=0.1))[0].startswith(b": ")


@pytest.mark.parametrize(
    "protocol, check",
    [
        (ANTHROPIC, lambda e: e.event == "error" and '"api_error"' in e.data),
        (OPENAI, lambda e: e.event is None and e.data.startswith('{"error"')),
    ],
)
def test_an_upstream_dropped_mid_stream_ends_with_an_error_event(fake, protocol, check):
    response = open_stream(fake, '{"type":"a"}', '{"type":"b"}', drop_after=1)
    translator = Echo(protocol)
    events = decoded(relay(response, translator, FRAMING[protocol], ping_interval=5))
    assert events[0].data == '{"type":"a"}' and check(events[-1])
    assert not translator.finished


def test_a_translator_error_ends_the_stream_with_that_error(fake):
    response = open_stream(fake, '{"type":"boom"}', '{"type":"never"}')
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert len(events) == 1 and "translator gave up" in events[0].data


def test_non_json_data_is_an_error_event_not_a_crash(fake):
    response = open_stream(fake, "<html>oops</html>")
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert events[-1].event == "error" and "not JSON" in events[-1].data


def test_an_event_nested_past_the_parsers_limit_is_an_upstream_error_event_not_a_crash(fake):
    response = open_stream(fake, '{"type":"a","x":' + "[" * 5000 + "]" * 5000 + "}")
    events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert events[-1].event == "error" and "nested too deeply" in events[-1].data


def test_usage_before_an_error_in_the_same_read_is_still_counted(fake):
    """The record hears a read's events in one call, after they are translated: usage an event
    reported before the one that broke the stream is counted all the same (client limits)."""
    body = sse.encode('{"type":"a","usage":{"output_tokens":7}}', event="a") + sse.encode('{"type":"boom"}', event="b")
    fake.reply(Reply(body=body, headers={"content-type": "text/event-stream"}))  # one write: one read
    record = observability.Record()
    token = observability._current.set(record)
    try:
        response = requests.get(f"{fake.url}/stream", stream=True)
        events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    finally:
        observability._current.reset(token)
    assert [e.event for e in events] == ["a", "error"]
    assert record.upstream_usage == record.usage == {"output_tokens": 7}


def test_closing_the_client_side_closes_the_upstream_at_once(fake):
    response = open_stream(fake, *['{"type":"a"}'] * 50, pace=0.05)
    stream = relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5)
    next(stream)
    stream.close()
    deadline = time.monotonic() + 2
    while not fake.closed_streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.closed_streams and fake.closed_streams[0][1] < 50


def test_a_stream_read_to_its_end_gives_its_connection_back_for_the_next_call(fake):
    """The relay reads the socket itself; at the body's end the connection must be as urllib3
    left it (blocking, with its timeout), or the next call on it breaks."""
    session = requests.Session()
    fake.reply(Reply(events=[sse.encode('{"type":"a"}', event="a")]))
    response = session.get(f"{fake.url}/stream", stream=True)
    port = response.raw._connection.sock.getsockname()[1]
    assert [e.event for e in decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))] == ["a"]
    fake.reply(Reply(body=b'{"ok": true}', headers={"content-type": "application/json"}, delay_headers=0.3))
    again = session.get(f"{fake.url}/json", stream=True)
    assert again.raw._connection.sock.getsockname()[1] == port, "the connection was not reused"
    assert again.json() == {"ok": True}


def test_a_body_that_ends_after_its_last_event_still_gives_its_connection_back(start_bridge, fake):
    """Upstreams write a chunked body's end apart from the last event: the client's stream is
    over at message_stop, and the connection is kept by reading that end too."""
    live = start_bridge(BRIDGE_LOG_LEVEL="INFO")
    client = openai_client(live.url)
    with access_lines() as lines:
        for done in range(1, 4):
            fake.reply(fixture("anthropic/text.sse", end_delay=0.02))
            chunks = client.chat.completions.create(
                model="claude-x", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            wait_for(lambda done=done: len(lines) == done, "the stream's end")  # its connection is back, or closed
    assert len({recorded.peer for recorded in fake.requests}) == 1, "a new upstream connection per stream"


def test_a_tls_upstream_is_relayed_as_it_comes_with_keepalives_in_its_silences(tmp_path):
    """Real upstreams speak TLS: the relay reads the TLS socket itself, and what TLS has already
    decrypted must not wait behind a poll that cannot see it (a long fast stream arrives in
    records of 16 KiB, read one at a time)."""
    cert, key = self_signed_certificate(tmp_path)
    upstream = FakeUpstream(tls=(cert, key))
    try:
        paced = ['{"type":"a","n":%d}' % n for n in range(4)]
        upstream.reply(Reply(events=[sse.encode(p, event="a") for p in paced], pace=0.3))
        response = requests.get(f"{upstream.url}/stream", stream=True, verify=str(cert))
        events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=0.1))
        assert [e.data for e in events if e.event == "a"] == paced and "ping" in {e.event for e in events}
        fast = ['{"type":"b","n":%d,"text":"%s"}' % (n, "." * 200) for n in range(2000)]
        upstream.reply(Reply(events=[sse.encode(p, event="b") for p in fast]))
        response = requests.get(f"{upstream.url}/stream", stream=True, verify=str(cert))
        events = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
        assert [e.data for e in events] == fast
    finally:
        upstream.close()


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_every_cut_of_the_upstream_body_gives_the_same_events(fake, framing):
    """Each event written as its own chunk, split at odd places by the fake's pacing; and the
    chunked framing undone whatever bytes each read brings."""
    payloads = ['{"type":"a","n":%d}' % n for n in range(20)]
    events = [sse.encode(p, event="a") for p in payloads]
    reply = {"length": sum(map(len, events))} if framing == "content-length" else {}
    response = open_stream(fake, *payloads, pace=0.01, **reply)
    got = decoded(relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5))
    assert [e.data for e in got] == payloads
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    for size in (1, 2, 3, 7, 64):
        dechunker = streaming._Dechunker()
        out = b"".join(dechunker.feed(body[i : i + size]) for i in range(0, len(body), size))
        assert out == b"".join(events) and dechunker.done, size


def chunked_body(*chunks, end=b"0\r\n\r\n"):
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + end


@pytest.mark.parametrize(
    "body, payload",
    [
        (chunked_body(b"data: a\n\n", b"data: bb\n\n", b"data: ccc\n\n"), b"data: a\n\ndata: bb\n\ndata: ccc\n\n"),
        (b"A;x=y\r\n0123456789\r\n3\r\nabc\r\n0\r\n\r\n", b"0123456789abc"),  # an extension, uppercase hex
        (b"3\r\nabc\r\n003\r\ndef\r\n3; n=v\r\nghi\r\n0\r\n\r\n", b"abcdefghi"),
        (chunked_body(b"data: a\r\n\r\n", b"data: b\r\n\r\n"), b"data: a\r\n\r\ndata: b\r\n\r\n"),  # CRLF in the data
        (chunked_body(b"x\r\n0\r\n", b"y"), b"x\r\n0\r\ny"),  # a last chunk's look-alike in the data
        (chunked_body(b"abc", end=b"00\r\nX-Trailer: 1\r\n\r\n"), b"abc"),  # a last chunk of zeros, a trailer
    ],
)
def test_chunked_framing_is_undone_whatever_a_read_brings(body, payload):
    """Several whole chunks in one read (the usual case, taken at once) and every cut of them
    across two reads, in every form of chunk a server may write."""
    for cut in range(len(body) + 1):
        dechunker = streaming._Dechunker()
        assert dechunker.feed(body[:cut]) + dechunker.feed(body[cut:]) == payload and dechunker.done, cut


@pytest.mark.parametrize(
    "body, problem",
    [
        (b"zz\r\n", "a chunk size"),
        (b"-5\r\nabc\r\n", "a chunk size"),
        (b"3\r\nabcdef\r\n", "chunk data longer than its size"),
        (b"1" * 2000, "a chunk-size line longer than 1 KiB"),
        # The same after whole chunks in one read.
        (chunked_body(b"abc", end=b"zz\r\nab\r\n"), "a chunk size"),
        (chunked_body(b"abc", end=b"+2\r\nab\r\n"), "a chunk size"),
        (chunked_body(b"abc", b"def", end=b"3\r\nabcdef\r\n"), "chunk data longer than its size"),
        (chunked_body(b"abc", end=b"1" * 2000), "a chunk-size line longer than 1 KiB"),
    ],
)
def test_broken_chunked_framing_is_a_malformed_answer(body, problem):
    with pytest.raises(BridgeError, match=problem):
        streaming._Dechunker().feed(body)


def test_an_upstream_that_only_pings_still_gets_the_client_keepalives(fake):
    """A ping keeps the upstream's side alive; the client's side, which sees none, needs its own."""
    start = '{"type":"message_start","message":{"id":"msg_1","usage":{}}}'
    fake.reply(
        Reply(
            events=[sse.encode(start, event="message_start")] + [sse.encode('{"type":"ping"}', event="ping")] * 6,
            pace=0.1,
        )
    )
    response = requests.get(f"{fake.url}/stream", stream=True)
    translator = StreamTranslator(chat_to_messages_context(stream=True))
    chunks = list(relay(response, translator, CHAT_SSE, ping_interval=0.25))
    assert chunks[0].startswith(b"data: {")  # the role chunk
    assert CHAT_SSE.keepalive in chunks[1:], chunks


class Silent(translator.StreamTranslator):
    """A translator for which the upstream's events hold nothing for the client (unshown thinking)."""

    protocol = ANTHROPIC

    def feed(self, name, payload):
        return []

    def finish(self):
        return []


def test_a_client_is_probed_while_upstream_events_bring_it_nothing(fake):
    """Events that arrive but produce no write must not stop the probes that notice a client gone."""
    response = open_stream(fake, *['{"type":"thinking"}'] * 8, pace=0.1)
    chunks = list(relay(response, Silent(), FRAMING[ANTHROPIC], ping_interval=30))
    assert streaming._PROBE in chunks, chunks


def test_closing_the_client_side_while_the_upstream_floods_closes_the_upstream(fake):
    """The client gone mid-write (the upstream had filled every buffer meanwhile): closed at once."""
    upstream = Flood()
    fake.reply(Reply(events=upstream))
    response = requests.get(f"{fake.url}/stream", stream=True)
    stream = relay(response, Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=5, client_stall_timeout=60)
    next(stream)
    settled(upstream, socket_buffers())  # nothing is read while the client takes nothing
    stream.close()
    wait_for(lambda: fake.closed_streams, "the upstream to be closed")


def test_a_slow_client_gets_every_event_in_order(fake):
    """The relay reads only as fast as the client takes (half a MiB of events, the upstream's
    socket full many times over): the SDK's accumulator still gets each piece of text once, in order."""
    pieces = [f"<{n}>" + "." * 1000 for n in range(500)]
    fake.reply(messages_stream(pieces))
    response = requests.get(f"{fake.url}/stream", stream=True)
    chunks = []
    for chunk in relay(response, StreamTranslator(chat_to_messages_context(stream=True)), CHAT_SSE, ping_interval=5):
        chunks.append(chunk)
        time.sleep(0.02)  # slower than the upstream: its writes wait for the socket meanwhile
    completion = openai_fold(json.loads(event.data) for event in decoded(chunks) if event.data != DONE)
    assert completion["choices"][0]["message"]["content"] == "".join(pieces)


def test_a_whole_answer_in_the_tls_record_of_its_head_is_relayed_without_a_wait(tmp_path):
    """http.client reads the head through an 8 KiB buffer; the rest of a larger TLS record is
    decrypted into OpenSSL's buffer, where poll() cannot see it. An upstream that writes its
    whole answer with its head in one record (a small answer, one write) must not wait for
    bytes that never come: it was a read timeout, and the answer was lost."""
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    big, last = (
        sse.encode('{"type": "a", "text": "%s"}' % ("x" * 12000), event="a"),
        sse.encode('{"type": "b"}', event="b"),
    )
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(big), big, len(last), last)
    )

    def serve():
        connection, _ = listener.accept()
        with context.wrap_socket(connection, server_side=True) as upstream:
            while b"\r\n\r\n" not in upstream.recv(65536):
                pass
            upstream.sendall(answer)  # under 16 KiB: one TLS record
            upstream.recv(1)  # hold the connection open until the bridge closes it

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    with listener:
        response = requests.get(
            f"https://127.0.0.1:{listener.getsockname()[1]}/", stream=True, verify=str(cert), timeout=(5, 2)
        )
        events = decoded(relay(response, Echo(), FRAMING[ANTHROPIC], ping_interval=5))
    assert [e.event for e in events] == ["a", "b"]
    server.join(timeout=10)
