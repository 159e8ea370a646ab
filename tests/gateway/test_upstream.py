"""The upstream client's shortcuts give what requests itself would, less what the bridge must not keep."""

import pytest
import requests
import urllib3
from requests.adapters import HTTPAdapter

from bridge import settings as settings_module
from bridge.gateway.upstream import Upstream, _Adapter, _HTTPConnection, _prepare
from bridge.serve.handover import JOINED_BODY
from tests.fake_upstream import FakeUpstream, json_reply
from tests.helpers.servers import bridge_env


@pytest.mark.parametrize(
    "url",
    [
        "http://upstream.internal/v1/chat/completions",
        "http://upstream.internal:8080/v1/models?limit=1000",
        "https://bücher.example/v1/messages?beta=true",
        "http://upstream.internal/a path/with%20escapes",
        "http://upstream.internal//v1/messages",
        "http://upstream.internal",
    ],
)
def test_the_path_sent_is_the_one_requests_sends_without_a_proxy(url):
    prepared = _prepare("POST", url, {}, b"{}")
    assert _Adapter().request_url(prepared, {}) == HTTPAdapter().request_url(prepared, {})


def test_the_response_is_requests_own_less_the_upstreams_cookies(fake):
    headers = {"set-cookie": "session=upstream-marker; Path=/", "x-upstream": "kept"}
    fake.reply(
        json_reply({"ok": True}, status=201, headers=headers), json_reply({"ok": True}, status=201, headers=headers)
    )
    url = f"{fake.url}/v1/messages"
    ours = Upstream(settings_module.load(bridge_env(fake))).request("POST", url, {"x-a": "1"}, {"a": 1})
    theirs = HTTPAdapter().send(_prepare("POST", url, {"x-a": "1"}, b'{"a":1}'))

    assert theirs.cookies.get("session") == "upstream-marker"  # what is left out below
    assert ours.cookies.get("session") is None
    assert (ours.status_code, ours.reason, ours.url, ours.content) == (
        theirs.status_code,
        theirs.reason,
        theirs.url,
        theirs.content,
    )
    # Two answers a moment apart: their Date headers may fall in different seconds.
    assert {**ours.headers, "Date": None} == {**theirs.headers, "Date": None}
    assert ours.headers["X-UPSTREAM"] == "kept"  # still case-insensitive
    assert isinstance(ours, requests.Response) and ours.request.url == url


def test_a_hosts_keep_alive_connection_outlives_calls_to_other_hosts(fake):
    """The adapter keeps the pool of each host it called, found once: requests' pool manager
    keeps only pool_connections (4) of them and makes a new one, with new connections, for a
    host it dropped. A bridge whose routes name more hosts than that keeps its connections."""
    others = [FakeUpstream() for _ in range(4)]
    try:
        upstream = Upstream(settings_module.load(bridge_env(fake)))
        fake.reply(json_reply({"ok": True}), json_reply({"ok": True}))
        upstream.request("POST", f"{fake.url}/v1/messages", {}, {"a": 1})
        for other in others:
            other.reply(json_reply({"ok": True}))
            upstream.request("POST", f"{other.url}/v1/messages", {}, {"a": 1})
        upstream.request("POST", f"{fake.url}/v1/messages", {}, {"a": 1})
    finally:
        for other in others:
            other.close()
    first, again = (seen.peer for seen in fake.requests[-2:])
    assert first == again


class _Writes:
    """A connected socket's stand-in that keeps each write: what a connection sends, and how."""

    def __init__(self):
        self.writes = []

    def settimeout(self, timeout):
        pass

    def sendall(self, data):
        self.writes.append(bytes(data))


def _sent(connection_class, body):
    connection = connection_class("upstream.internal", 80)
    connection.sock = _Writes()
    connection.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
    return connection.sock.writes


@pytest.mark.parametrize(
    ("body", "writes"),
    [
        (b'{"model":"m","messages":[]}', 1),
        (b"", 1),
        (None, 1),
        (b"x" * JOINED_BODY, 1),
        (b"x" * (JOINED_BODY + 1), 2),  # not copied to be joined
    ],
)
def test_a_small_body_goes_upstream_in_the_write_that_carries_its_head(body, writes):
    """One system call and one segment a request instead of two; the bytes are urllib3's own."""
    ours = _sent(_HTTPConnection, body)
    theirs = _sent(urllib3.connection.HTTPConnection, body)
    assert len(ours) == writes
    assert b"".join(ours) == b"".join(theirs)
    assert len(theirs) == (2 if body else 1)  # what the join saves
