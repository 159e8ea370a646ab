"""Upstream faults, each one really done by a peer on loopback, seen through both directions.

Before the first byte a fault is an HTTP error in the client's protocol (status, body, the
upstream's retry and rate-limit headers); after it, the protocol's error event and a clean
end. The bridge retries only what cannot have reached the upstream: a refused connection, a
connect timeout, a connection closed before any byte of an answer. Anything the upstream
answered goes back at once: the client's SDK owns the one retry budget of a user call.
"""

import gzip
import json
import logging
import socket
import threading
import time
from urllib.parse import urlsplit

import anthropic
import openai
import pytest
import requests

from bench.processes import wait_for
from bridge.protocols import sse
from bridge.protocols.errors import ANTHROPIC, OPENAI
from bridge.serve.streaming import relay
from bridge.translate import translator
from tests.fake_upstream import Reply, fixture, json_reply
from tests.helpers.directions import (
    ANTHROPIC_HEADERS,
    CHAT_TO_MESSAGES,
    EACH,
    FRAMING,
    MESSAGES_TO_CHAT,
    STREAMED_OR_NOT,
    Echo,
    SlammingDoor,
    drain,
    full_backlog,
    is_anthropic_error,
    is_openai_error,
    recorded_stream,
    recorded_text,
)
from tests.helpers.recorded import decoded
from tests.helpers.servers import gunicorn


@pytest.fixture
def slamming_door():
    door = SlammingDoor()
    yield door
    door.close()


# --- before the first byte: retries ---------------------------------------------------------


def test_connections_closed_before_any_answer_are_retried_with_doubling_backoff_up_to_BRIDGE_RETRIES(
    start_bridge, slamming_door, caplog
):
    live = start_bridge(
        BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{slamming_door.port}/v1", BRIDGE_RETRIES=3, BRIDGE_RETRY_BACKOFF=0.01
    )
    caplog.set_level(logging.INFO, logger="bridge.gateway.upstream")
    reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 502, "api_error")
    assert slamming_door.accepted == 4
    waits = [r.args[-1] for r in caplog.records if r.name == "bridge.gateway.upstream"]
    assert waits == [0.01, 0.02, 0.04]


def test_backoff_longer_than_BRIDGE_RETRY_MAX_WAIT_is_capped_not_abandoned(start_bridge, slamming_door, caplog):
    live = start_bridge(
        BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{slamming_door.port}/v1",
        BRIDGE_RETRIES=3,
        BRIDGE_RETRY_BACKOFF=0.02,
        BRIDGE_RETRY_MAX_WAIT=0.03,
    )
    caplog.set_level(logging.INFO, logger="bridge.gateway.upstream")
    requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert slamming_door.accepted == 4
    assert [r.args[-1] for r in caplog.records if r.name == "bridge.gateway.upstream"] == [0.02, 0.03, 0.03]


def test_a_read_timeout_is_not_retried(start_bridge, fake):
    """The upstream took the request and may still be generating: asking again doubles the
    cost and the wait. Only a request that never got through is worth repeating."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01, BRIDGE_READ_TIMEOUT=1)
    fake.reply(Reply(body=b"{}", delay_headers=1.5), json_reply({"data": []}))
    assert is_anthropic_error(requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS), 504, "api_error")
    assert len(fake.requests) == 1


def test_a_connect_timeout_is_a_504_in_each_protocol(start_bridge):
    with full_backlog() as port:
        live = start_bridge(
            BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            BRIDGE_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
            BRIDGE_CONNECT_TIMEOUT=0.2,
            BRIDGE_READ_TIMEOUT=1,
        )
        anthropic_reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
        openai_reply = requests.get(f"{live.url}/v1/models")
    assert is_anthropic_error(anthropic_reply, 504, "api_error")
    assert is_openai_error(openai_reply, 504) and openai_reply.json()["error"]["type"] == "timeout"
    assert "ConnectTimeout" in anthropic_reply.text, "the connect itself timed out, not a read"


def test_a_200_whose_body_is_not_json_is_a_502_not_a_crash(bridge, fake):
    page = fixture("common/html_502.html").body
    fake.reply(Reply(body=page, headers={"content-type": "text/html"}))
    reply = requests.get(f"{bridge.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 502, "api_error") and "text/html" in reply.text


# --- client disconnects -----------------------------------------------------------------------


def test_a_silent_upstream_gets_a_probe_between_keepalives_so_a_gone_client_is_noticed(fake):
    """Only a failed write tells a server that its client left; while the upstream is silent
    the relay writes a bare SSE comment every PROBE_INTERVAL, not only a ping per ping_interval."""
    fake.reply(Reply(events=[sse.encode('{"type": "late"}', event="late")], stall_after=0))
    stream = relay(
        requests.get(f"{fake.url}/stream", stream=True), Echo(ANTHROPIC), FRAMING[ANTHROPIC], ping_interval=30
    )
    first, second = next(stream), next(stream)
    assert first == second and first.startswith(b":")
    assert not sse.Decoder().feed(first + second)  # invisible to any SSE client
    stream.close()
    wait_for(lambda: fake.closed_streams, "the fake upstream to see the bridge hang up")


# --- end to end, through both directions with the official SDKs --------------------------------


def raw_events(url, direction):
    """The client's stream as decoded SSE events (comments are not events), read to the end."""
    response = requests.post(
        url + direction.path, json={**direction.body, "stream": True}, headers=ANTHROPIC_HEADERS, stream=True
    )
    return decoded(response.iter_content(None))


def status_error(direction):
    return direction.sdk.APIStatusError


# before the first byte: an HTTP error in the client's protocol


@EACH
@STREAMED_OR_NOT
def test_connection_refused_is_a_502(start_bridge, direction, stream):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    live = start_bridge(**{direction.base_url_setting: direction.upstream_base(port)})
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(live.url, stream)
    assert direction.is_error(caught.value.response, 502, "api_error")
    assert "connection refused" in caught.value.message


@EACH
def test_a_connect_timeout_is_a_504(start_bridge, direction):
    with full_backlog() as port:
        live = start_bridge(
            BRIDGE_CONNECT_TIMEOUT=0.2,
            BRIDGE_READ_TIMEOUT=1,
            **{direction.base_url_setting: direction.upstream_base(port)},
        )
        with pytest.raises(direction.sdk.InternalServerError) as caught:
            direction.ask(live.url, stream=True)
    assert direction.is_error(caught.value.response, 504, "api_error")
    assert "ConnectTimeout" in caught.value.message


@EACH
@STREAMED_OR_NOT
def test_no_response_headers_within_the_read_timeout_is_a_504(start_bridge, fake, direction, stream):
    live = start_bridge(BRIDGE_READ_TIMEOUT=1)
    fake.reply(recorded_stream(direction, delay_headers=1.5))
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(live.url, stream)
    assert direction.is_error(caught.value.response, 504, "api_error")


@EACH
@STREAMED_OR_NOT
def test_an_html_502_from_a_load_balancer_is_a_json_502(bridge, fake, direction, stream):
    fake.reply(Reply(status=502, body=fixture("common/html_502.html").body, headers={"content-type": "text/html"}))
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(bridge.url, stream)
    assert direction.is_error(caught.value.response, 502, "api_error")
    assert "<html" not in caught.value.response.text


@EACH
@STREAMED_OR_NOT
def test_a_429_keeps_its_status_message_and_retry_after(bridge, fake, direction, stream):
    upstream = fixture(f"{direction.upstream}/error_429.json")
    fake.reply(upstream)
    with pytest.raises(direction.sdk.RateLimitError) as caught:
        direction.ask(bridge.url, stream)
    assert direction.is_error(caught.value.response, 429, "rate_limit_error")
    assert caught.value.response.headers["retry-after"] == upstream.headers["retry-after"]
    assert json.loads(upstream.body)["error"]["message"] in caught.value.message


@EACH
def test_an_overloaded_upstream_keeps_its_retry_after(bridge, fake, direction):
    fake.reply(fixture(direction.overloaded, headers={"content-type": "application/json", "retry-after": "7"}))
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(bridge.url, stream=True)
    assert direction.is_error(caught.value.response, direction.overloaded_status, "overloaded_error")
    assert caught.value.response.headers["retry-after"] == "7"


@EACH
def test_an_overload_goes_back_at_once_and_the_sdk_retrying_it_gets_the_answer(start_bridge, fake, direction):
    """What the bridge used to hide by retrying, the SDK now retries, by the upstream's own
    retry-after-ms: the same three upstream calls, and the SDK's budget, not one per layer."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    quick = {"content-type": "application/json", "retry-after-ms": "1"}
    fake.reply(fixture(direction.overloaded, headers=quick))
    with pytest.raises(direction.sdk.APIStatusError):
        direction.ask(live.url, stream=True)  # max_retries=0: the answer as the upstream gave it
    assert len(fake.requests) == 1
    fake.reset()
    fake.reply(
        fixture(direction.overloaded, headers=quick),
        fixture(f"{direction.upstream}/error_500.json", headers=quick),
        recorded_stream(direction),
    )
    items, error = drain(direction.create(direction.client(live.url, sdk_retries=True), stream=True))
    assert error is None and direction.text_of(items) == recorded_text(direction)
    assert len(fake.requests) == 3


# after the first byte: the protocol's error event, then a clean end


def assert_ends_with_one_error_event(events, direction):
    """The error is the last event, nothing follows it, and it is the client protocol's own."""
    last = events[-1]
    if direction.sdk is anthropic:
        assert last.event == "error" and json.loads(last.data)["type"] == "error"
        assert [e.event for e in events].count("error") == 1
    else:
        assert last.event is None and "error" in json.loads(last.data)
        assert all(e.data != "[DONE]" for e in events)
    return json.loads(last.data)["error"]


@EACH
def test_a_stall_mid_stream_ends_with_a_timeout_error_event(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_READ_TIMEOUT=1)
    fake.reply(recorded_stream(direction, stall_after=3))
    items, error = drain(direction.ask(live.url, stream=True))
    assert items and isinstance(error, direction.sdk.APIError)
    fake.reply(recorded_stream(direction, stall_after=3))
    error_body = assert_ends_with_one_error_event(raw_events(live.url, direction), direction)
    assert "in time" in error_body["message"]
    if direction.sdk is openai:
        assert error_body["type"] == "timeout"
    wait_for(lambda: len(fake.closed_streams) == 2, "the bridge to hang up on both stalled upstreams")


@EACH
def test_a_connection_dropped_mid_stream_ends_with_an_error_event_and_is_not_retried(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    fake.reply(recorded_stream(direction, drop_after=3))
    items, error = drain(direction.ask(live.url, stream=True))
    assert items and isinstance(error, direction.sdk.APIError)
    assert len(fake.requests) == 1
    fake.reply(recorded_stream(direction, drop_after=3))
    error_body = assert_ends_with_one_error_event(raw_events(live.url, direction), direction)
    assert "closed the connection" in error_body["message"]


@EACH
def test_an_endless_event_ends_the_stream_with_an_error_event_and_closes_the_upstream(start_bridge, fake, direction):
    """An event that never ends would hold memory and keep the client waiting for nothing."""
    live = start_bridge(BRIDGE_MAX_EVENT_BYTES=4096)
    start = recorded_stream(direction).events[:2]
    fake.reply(
        Reply(
            headers={"content-type": "text/event-stream"},
            events=[*start, b"data: " + b"x" * 3000] + [b"x" * 3000] * 200,
            pace=0.01,  # still writing when the bridge closes it
        )
    )
    error_body = assert_ends_with_one_error_event(raw_events(live.url, direction), direction)
    assert "BRIDGE_MAX_EVENT_BYTES" in error_body["message"]
    wait_for(lambda: fake.closed_streams, "the upstream to be closed")


MALFORMED_LINES = [
    b": a comment\n\n",
    b"id: 7\nretry: 1000\n\n",
    b"a line that is no field at all\n\n",
    b"unknown-field: value\n\n",
    b"event: ping\n\n",  # a name but no data: not an event (WHATWG: empty data buffer)
    b"data:\n\n",  # empty data: not an event either
    b"\r\n\r\n\n",
]


@EACH
def test_malformed_sse_lines_between_events_are_skipped(bridge, fake, direction):
    events = recorded_stream(direction).events
    garbled = [junk for event in events for junk in (*MALFORMED_LINES, event)]
    fake.reply(recorded_stream(direction, events=garbled))
    items, error = drain(direction.ask(bridge.url, stream=True))
    assert error is None and direction.text_of(items) == recorded_text(direction)


@EACH
def test_data_that_is_not_json_ends_the_stream_with_an_error_event(bridge, fake, direction):
    events = recorded_stream(direction).events
    broken = [*events[:2], b'data: {"truncated\n\n', *events[2:]]
    fake.reply(recorded_stream(direction, events=broken))
    items, error = drain(direction.ask(bridge.url, stream=True))
    assert isinstance(error, direction.sdk.APIError) and "not JSON" in error.message
    fake.reply(recorded_stream(direction, events=broken))
    assert_ends_with_one_error_event(raw_events(bridge.url, direction), direction)


# --- client disconnects, through werkzeug and through gunicorn ---------------------------------


def start_and_hang_up(url, direction):
    """Start a stream as a client would, read until its first event arrives, then leave.

    Returns the moment the client left."""
    address = urlsplit(url)
    body = json.dumps({**direction.body, "stream": True}).encode()
    head = (
        f"POST {direction.path} HTTP/1.1\r\nHost: {address.netloc}\r\n"
        f"Content-Type: application/json\r\nanthropic-version: 2023-06-01\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port)) as client:
        client.sendall(head + body)
        received = b""
        while b"data:" not in received:
            chunk = client.recv(65536)
            assert chunk, f"the bridge closed the stream first: {received!r}"
            received += chunk
    return time.monotonic()


def lengthened(direction, **reply):
    """The recorded stream with its first text delta repeated: a long answer, still well formed."""
    events = recorded_stream(direction).events
    at = next(i for i, event in enumerate(events) if direction.upstream_text(event))
    return recorded_stream(direction, events=events[:at] + events[at : at + 1] * 30 + events[at:], **reply)


UPSTREAM_BEHAVIOUR = pytest.mark.parametrize(
    "behaviour",
    [
        pytest.param({"stall_after": 3}, id="silent-upstream"),  # a reasoning model thinking
        pytest.param({"pace": 0.1}, id="talking-upstream"),
    ],
)


def assert_upstream_closed_within_a_second(fake, left_at):
    wait_for(lambda: fake.closed_streams, "the fake upstream to see the bridge hang up")
    assert time.monotonic() - left_at < 1.0, "the issue's bound: closed within a second"


@pytest.fixture(scope="module")
def one_thread_gunicorn(fake, tmp_path_factory):
    """gunicorn from deploy/gunicorn.conf.py with one worker of one thread: a thread still
    held by a departed client would have every later request refused (503)."""
    server = gunicorn(
        tmp_path_factory.mktemp("gunicorn"), fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1", BRIDGE_LOG_LEVEL="WARNING"
    )
    yield server
    server.stop()


@EACH
@UPSTREAM_BEHAVIOUR
def test_gunicorn_closes_the_upstream_within_a_second_of_a_client_leaving_and_frees_the_thread(
    one_thread_gunicorn, fake, direction, behaviour
):
    # The previous case's last stream may still hold the one thread for a moment after its end.
    free = lambda: requests.get(f"{one_thread_gunicorn.url}/v1/no-such-path", timeout=5).status_code != 503  # noqa: E731
    wait_for(free, "the thread to be free")
    fake.reply(lengthened(direction, **behaviour), recorded_stream(direction))
    left_at = start_and_hang_up(one_thread_gunicorn.url, direction)
    assert_upstream_closed_within_a_second(fake, left_at)
    items, error = drain(direction.ask(one_thread_gunicorn.url, stream=True))
    assert error is None and direction.text_of(items) == recorded_text(direction)


@EACH
@UPSTREAM_BEHAVIOUR
def test_werkzeug_closes_the_upstream_within_a_second_of_a_client_leaving_and_ends_its_threads(
    bridge, fake, direction, behaviour
):
    before = set(threading.enumerate())
    fake.reply(lengthened(direction, **behaviour))
    left_at = start_and_hang_up(bridge.url, direction)
    assert_upstream_closed_within_a_second(fake, left_at)
    wait_for(lambda: not set(threading.enumerate()) - before, "the request and fake upstream threads to end")


@EACH
@pytest.mark.parametrize("answer", ["json", "empty", "only-done"])
def test_a_stream_request_answered_with_no_stream_ends_with_an_error_event(bridge, fake, direction, answer):
    """An upstream that ignores stream:true (a JSON body), or sends nothing: never a made-up end."""
    reply = {
        "json": fixture(f"{direction.upstream}/text.json"),
        "empty": Reply(events=[]),
        "only-done": Reply(events=[b"data: [DONE]\n\n"]),
    }[answer]
    fake.reply(reply)
    assert_ends_with_one_error_event(raw_events(bridge.url, direction), direction)


@pytest.mark.parametrize(
    "direction",
    [pytest.param(MESSAGES_TO_CHAT, id="messages_to_chat"), pytest.param(CHAT_TO_MESSAGES, id="chat_to_messages")],
)
def test_a_lone_surrogate_from_the_upstream_passes_through_as_the_escape_it_came_as(bridge, fake, direction):
    """Half an emoji in an upstream event ("\\ud83d") is what the upstream said: it reaches the
    client the same way instead of failing to encode (a 500 page before the first byte)."""
    events = recorded_stream(direction).events
    at = next(i for i, event in enumerate(events) if direction.upstream_text(event))
    cut = events[at].replace(direction.upstream_text(events[at]).encode(), b"cut \\ud83d")
    fake.reply(recorded_stream(direction, events=[*events[:at], cut, *events[at + 1 :]]))
    items, error = drain(direction.ask(bridge.url, stream=True))
    assert error is None and "cut \ud83d" in direction.text_of(items)


@EACH
def test_invalid_utf8_in_an_upstream_answer_becomes_a_replacement_character_as_in_its_stream(bridge, fake, direction):
    """A local server cutting a character at a token boundary (b"\\xe2\\x82"): the answer is
    still the upstream's, with U+FFFD for the broken bytes, as the streamed one is; not a 502."""
    raw = fixture(f"{direction.upstream}/text.json").body
    body = json.loads(raw)
    text = body["choices"][0]["message"]["content"] if direction.upstream == "openai" else body["content"][0]["text"]
    key = raw.index(b'"content":' if direction.upstream == "openai" else b'"text":')
    start = raw.index(b'"', raw.index(b":", key)) + 1
    cut = raw[:start] + b"\xe2\x82 " + raw[start:]
    fake.reply(Reply(body=cut, headers={"content-type": "application/json"}))
    reply = direction.ask(bridge.url)
    answer = reply.content[0].text if direction.sdk is anthropic else reply.choices[0].message.content
    assert answer == "\ufffd " + text


class Crashing(translator.StreamTranslator):
    """A translator with a bug: it raises something that is not a BridgeError."""

    def __init__(self, protocol):
        self.protocol = protocol

    def feed(self, name, payload):
        raise KeyError("a translator bug")

    def finish(self):
        return []


@pytest.mark.parametrize("protocol", [ANTHROPIC, OPENAI])
def test_a_translator_bug_ends_the_stream_with_an_error_event_and_closes_the_upstream(fake, protocol, caplog):
    """Not an HTML 500 page before the first byte, nor a cut connection after it: the
    protocol's error event, the upstream closed, the bug in the log."""
    fake.reply(Reply(events=[sse.encode('{"type": "a"}', event="a")] * 3, stall_after=1))
    chunks = list(relay(requests.get(f"{fake.url}/stream", stream=True), Crashing(protocol), FRAMING[protocol], 5))
    events = decoded(chunks)
    body = json.loads(events[-1].data)
    assert len(events) == 1 and body["error"]["type"] in ("api_error", "server_error")
    assert (events[-1].event == "error") == (protocol == ANTHROPIC)
    wait_for(lambda: fake.closed_streams, "the upstream to be closed")
    assert "a translator bug" in caplog.text


def test_a_reset_long_after_the_request_went_is_not_retried(start_bridge):
    """The upstream had the request long enough to generate (and bill) an answer: never ask twice."""
    door = SlammingDoor(after=0.5)
    try:
        live = start_bridge(
            BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{door.port}/v1",
            BRIDGE_RETRIES=3,
            BRIDGE_RETRY_BACKOFF=0.01,
            BRIDGE_CONNECT_TIMEOUT=0.2,
        )
        reply = requests.post(
            f"{live.url}/v1/messages",
            headers=ANTHROPIC_HEADERS,
            json={"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        )
    finally:
        door.close()
    assert is_anthropic_error(reply, 502, "api_error") and door.accepted == 1


@EACH
@STREAMED_OR_NOT
def test_a_content_encoding_the_bridge_did_not_ask_for_is_a_502_not_inflated(bridge, fake, direction, stream):
    """The bridge asks for identity: a gzip answer (a bomb, or a misconfigured proxy) is refused unread."""
    body = gzip.compress(b"0" * 10_000_000)  # ten megabytes in about ten kilobytes
    fake.reply(Reply(body=body, headers={"content-type": "application/json", "content-encoding": "gzip"}))
    reply = requests.post(
        bridge.url + direction.path, json={**direction.body, "stream": stream}, headers=ANTHROPIC_HEADERS
    )
    assert direction.is_error(reply, 502, "api_error") and "content-encoding 'gzip'" in reply.text
    assert len(fake.requests) == 1
