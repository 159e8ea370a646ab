"""Upstream faults, each one really done by a peer on loopback, seen through both directions.

Before the first byte a fault is an HTTP error in the client's protocol (status, body,
`retry-after`); after it, the protocol's error event and a clean end. Retries happen only
before the first byte, for connection failures and 429/5xx answers.
"""
import contextlib
import logging
import socket
import threading
import time

import pytest
import requests

from bridge import sse
from bridge.errors import ANTHROPIC
from bridge.streaming import relay
from tests.fake_upstream import Reply, fixture, json_reply
from tests.test_service import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error
from tests.test_streaming import Echo


def wait_for(condition, what, timeout=10.0):
    """Poll `condition` until it is true; a hang guard, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def full_backlog():
    """A port whose listen queue is full: the kernel drops new SYNs, so a connect just hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # the one place in the queue
            yield port


class SlammingDoor:
    """A server that accepts each connection and closes it at once, counting them."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self.listener.close()


@pytest.fixture
def slamming_door():
    door = SlammingDoor()
    yield door
    door.close()


# --- before the first byte: retries ---------------------------------------------------------

def test_connection_failures_are_retried_with_doubling_backoff_up_to_BRIDGE_RETRIES(
        start_bridge, slamming_door, caplog):
    live = start_bridge(BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{slamming_door.port}/v1",
                        BRIDGE_RETRIES=3, BRIDGE_RETRY_BACKOFF=0.01)
    caplog.set_level(logging.INFO, logger="bridge.upstream")
    reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 502, "api_error")
    assert slamming_door.accepted == 4
    waits = [r.args[-1] for r in caplog.records if r.name == "bridge.upstream"]
    assert waits == [0.01, 0.02, 0.04]


def test_backoff_longer_than_BRIDGE_RETRY_MAX_WAIT_is_capped_not_abandoned(start_bridge, fake):
    live = start_bridge(BRIDGE_RETRIES=3, BRIDGE_RETRY_BACKOFF=0.2, BRIDGE_RETRY_MAX_WAIT=0.3)
    fake.reply(*[fixture("openai/error_503.json")] * 3, json_reply({"data": [{"id": "gpt-x"}]}))
    reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert reply.status_code == 200 and len(fake.requests) == 4


def test_a_read_timeout_is_not_retried(start_bridge, fake):
    """The upstream took the request and may still be generating: asking again doubles the
    cost and the wait. Only a request that never got through is worth repeating."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01, BRIDGE_READ_TIMEOUT=1)
    fake.reply(Reply(body=b"{}", delay_headers=1.5), json_reply({"data": []}))
    assert is_anthropic_error(requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS),
                              504, "api_error")
    assert len(fake.requests) == 1


def test_a_connect_timeout_is_a_504_in_each_protocol(start_bridge):
    with full_backlog() as port:
        live = start_bridge(BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
                            BRIDGE_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
                            BRIDGE_CONNECT_TIMEOUT=0.2)
        anthropic_reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
        openai_reply = requests.get(f"{live.url}/v1/models")
    assert is_anthropic_error(anthropic_reply, 504, "api_error")
    assert is_openai_error(openai_reply, 504) and openai_reply.json()["error"]["type"] == "timeout"


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
    stream = relay(requests.get(f"{fake.url}/stream", stream=True), Echo(), ANTHROPIC, ping_interval=30)
    first, second = next(stream), next(stream)
    assert first == second and first.startswith(b":")
    assert not sse.Decoder().feed(first + second)  # invisible to any SSE client
    stream.close()
    wait_for(lambda: fake.closed_streams, "the fake upstream to see the bridge hang up")
