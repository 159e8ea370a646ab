"""One retry budget per user call, and the client's SDK owns it; through both directions.

The bridge retries only what never reached the upstream (a refused connection, one closed
before any byte of an answer). Whatever the upstream answered goes back at once, with the
headers the SDK retries by: `retry-after(-ms)`, `x-should-retry`, rate limits in the client's
protocol. The counts are taken at the fake upstream.
"""

import json
import logging
import time

import pytest
import requests

from bridge.protocols.ratelimit import duration_seconds, rfc3339, rfc3339_seconds
from tests.fake_upstream import FakeUpstream, Reply, fixture, json_reply
from tests.helpers.directions import (
    ANTHROPIC_HEADERS,
    EACH,
    MESSAGES_TO_CHAT,
    STREAMED_OR_NOT,
    deaf_upstream,
    full_backlog,
    is_anthropic_error,
    recorded_text,
)

QUICK = {"content-type": "application/json", "retry-after-ms": "1"}  # the SDKs wait 1 ms, not their backoff


def error_reply(direction, answer, **headers):
    name = f"{direction.upstream}/error_429.json" if answer == "rate_limited" else direction.overloaded
    return fixture(name, headers={**QUICK, **headers})


@EACH
@STREAMED_OR_NOT
@pytest.mark.parametrize("answer", ["rate_limited", "overloaded"])
def test_a_storm_of_429s_or_overloads_costs_the_upstream_only_the_sdks_own_retries(
    start_bridge, fake, direction, stream, answer
):
    """Each SDK repeats a 429/5xx twice by default: three upstream calls for the user's one, not
    nine (three per SDK attempt), with the bridge's retries at their default."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    fake.default = error_reply(direction, answer)
    with pytest.raises(direction.sdk.APIStatusError):
        direction.create(direction.client(live.url, sdk_retries=True), stream)
    assert len(fake.requests) == direction.sdk.DEFAULT_MAX_RETRIES + 1 == 3


@EACH
@pytest.mark.parametrize("should_retry, calls", [("false", 1), ("true", 3)])
def test_x_should_retry_reaches_the_sdk_as_the_upstream_sent_it(start_bridge, fake, direction, should_retry, calls):
    """`false` stops the SDK on a 429 it would retry; `true` makes it retry even a 400."""
    live = start_bridge()
    status_error = json_reply({"error": {"type": "invalid_request_error", "message": "try again"}}, 400)
    fake.default = (
        error_reply(direction, "rate_limited", **{"x-should-retry": "false"})
        if should_retry == "false"
        else Reply(status=400, body=status_error.body, headers={**QUICK, "x-should-retry": "true"})
    )
    with pytest.raises(direction.sdk.APIStatusError) as caught:
        direction.create(direction.client(live.url, sdk_retries=True))
    assert caught.value.response.headers["x-should-retry"] == should_retry
    assert len(fake.requests) == calls


OPENAI_LIMITS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-reset-requests": "120ms",
    "x-ratelimit-limit-tokens": "30000",
    "x-ratelimit-remaining-tokens": "29000",
    "x-ratelimit-reset-tokens": "6m0s",
}


def anthropic_limits(reset):
    return {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": reset,
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "39000",
        "anthropic-ratelimit-tokens-reset": reset,
        "anthropic-ratelimit-input-tokens-limit": "30000",
        "anthropic-ratelimit-input-tokens-reset": reset,
    }


@EACH
@pytest.mark.parametrize("answer", ["rate_limited", "success"])
def test_rate_limit_headers_reach_the_client_in_its_protocol(bridge, fake, direction, answer):
    reset_at = int(time.time()) + 3600
    limits = OPENAI_LIMITS if direction.upstream == "openai" else anthropic_limits(rfc3339(reset_at))
    reply = fixture(
        f"{direction.upstream}/error_429.json" if answer == "rate_limited" else f"{direction.upstream}/text.json"
    )
    reply.headers = {**reply.headers, **limits}
    fake.reply(reply)
    client = direction.client(bridge.url)
    before = time.time()
    if answer == "success":
        headers = direction.create(client, raw=True).headers
    else:
        with pytest.raises(direction.sdk.RateLimitError) as caught:
            direction.create(client)
        headers = caught.value.response.headers
    after = time.time()
    if direction is MESSAGES_TO_CHAT:
        assert not [name for name in headers if name.startswith("x-ratelimit-")]
        assert (
            headers["anthropic-ratelimit-requests-limit"],
            headers["anthropic-ratelimit-requests-remaining"],
            headers["anthropic-ratelimit-tokens-limit"],
            headers["anthropic-ratelimit-tokens-remaining"],
        ) == ("500", "499", "30000", "29000")
        reset = rfc3339_seconds(headers["anthropic-ratelimit-tokens-reset"])  # 6m0s from the moment it passed
        assert rfc3339_seconds(rfc3339(before + 360)) <= reset <= rfc3339_seconds(rfc3339(after + 360))
    else:
        assert not [name for name in headers if name.startswith("anthropic-ratelimit-")]
        assert (
            headers["x-ratelimit-limit-requests"],
            headers["x-ratelimit-remaining-requests"],
            headers["x-ratelimit-limit-tokens"],
            headers["x-ratelimit-remaining-tokens"],
        ) == ("50", "49", "40000", "39000")
        left = duration_seconds(headers["x-ratelimit-reset-tokens"])
        assert reset_at - after <= left <= reset_at - before + 0.001


class _ListenOnFirstRetry(logging.Handler):
    """Opens the late upstream the moment the bridge, refused, logs that it will try again."""

    def __init__(self, late):
        super().__init__()
        self.late, self.retries = late, []

    def emit(self, record):
        self.retries.append(record.getMessage())
        if len(self.retries) == 1:
            self.late.listen()


@EACH
def test_a_refused_connection_is_retried_until_the_upstream_listens(start_bridge, direction, caplog):
    late = FakeUpstream(listening=False)
    opener = _ListenOnFirstRetry(late)
    logger = logging.getLogger("bridge.gateway.upstream")
    caplog.set_level(logging.INFO, logger="bridge.gateway.upstream")
    logger.addHandler(opener)
    try:
        late.reply(fixture(f"{direction.upstream}/text.sse"))
        live = start_bridge(
            BRIDGE_RETRIES=2,
            BRIDGE_RETRY_BACKOFF=0.05,
            **{direction.base_url_setting: direction.upstream_base(late.server.server_address[1])},
        )
        items = list(direction.ask(live.url, stream=True))
    finally:
        logger.removeHandler(opener)
        late.close()
    assert direction.text_of(items) == recorded_text(direction)
    assert len(opener.retries) == 1 and "connection refused" in opener.retries[0]
    assert len(late.requests) == 1


def test_a_connect_timeout_is_retried(start_bridge, caplog):
    caplog.set_level(logging.INFO, logger="bridge.gateway.upstream")
    with full_backlog() as port:
        live = start_bridge(
            BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            BRIDGE_CONNECT_TIMEOUT=0.2,
            BRIDGE_RETRIES=1,
            BRIDGE_RETRY_BACKOFF=0.01,
        )
        reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 504, "api_error")
    retries = [r.getMessage() for r in caplog.records if r.name == "bridge.gateway.upstream"]
    assert len(retries) == 1 and "ConnectTimeout" in retries[0]


def test_an_upstream_that_stops_reading_the_request_is_given_up_on(start_bridge):
    """A request's send is bounded like a read: by BRIDGE_CONNECT_TIMEOUT, urllib3's while it sends."""
    with deaf_upstream() as (port, connections):
        live = start_bridge(BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", BRIDGE_CONNECT_TIMEOUT=0.5)
        prompt = "x" * (12 * 1024 * 1024)  # more than loopback's buffers hold
        body = {"model": "claude-x", "max_tokens": 16, "messages": [{"role": "user", "content": prompt}]}
        reply = requests.post(f"{live.url}/v1/messages", headers=ANTHROPIC_HEADERS, json=body, timeout=60)
        assert len(connections) == 1  # not sent again (BRIDGE_RETRIES is 2)
    assert is_anthropic_error(reply, 504, "api_error")
    assert "did not take the request in time" in reply.json()["error"]["message"]
    assert requests.get(f"{live.url}/healthz", timeout=10).status_code == 200


def cut(direction, how):
    """The upstream's recorded 200 body, broken mid-read the way `how` says."""
    body = fixture(f"{direction.upstream}/text.json").body
    if how == "short-chunk":
        return Reply(body=body, headers={"content-type": "application/json"}, cut_after=len(body) // 2)
    if how == "short-of-its-length":  # the whole JSON, closed before the content-length it promised
        return Reply(
            events=[body, b""], headers={"content-type": "application/json"}, length=2 * len(body), drop_after=1
        )
    return Reply(events=[body[:40], body[40:]], headers={"content-type": "application/json"}, drop_after=1)


@EACH
@pytest.mark.parametrize("how", ["short-chunk", "closed-between-chunks", "short-of-its-length"])
def test_a_200_whose_body_breaks_mid_read_is_a_502_and_never_sent_again(start_bridge, fake, direction, how):
    """The upstream has generated, and billed, the answer: asking again would pay for it twice."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    fake.reply(cut(direction, how), fixture(f"{direction.upstream}/text.json"))
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(live.url)
    assert direction.is_error(caught.value.response, 502, "api_error")
    assert "closed the connection mid-response" in caught.value.message
    assert len(fake.requests) == 1


@EACH
def test_a_200_whose_body_stalls_mid_read_is_a_504_and_never_sent_again(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01, BRIDGE_READ_TIMEOUT=1)
    body = fixture(f"{direction.upstream}/text.json").body
    fake.reply(
        Reply(events=[body[:40], body[40:]], headers={"content-type": "application/json"}, stall_after=1, stall_for=3),
        fixture(f"{direction.upstream}/text.json"),
    )
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(live.url)
    assert direction.is_error(caught.value.response, 504, "api_error")
    assert len(fake.requests) == 1
    assert json.loads(caught.value.response.text)["error"]["message"].startswith("upstream did not answer in time")
