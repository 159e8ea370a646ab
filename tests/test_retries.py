"""One retry budget per user call, and the client's SDK owns it; through both directions.

The bridge retries only what never reached the upstream (a refused connection, one closed
before any byte of an answer). Whatever the upstream answered goes back at once, for the
SDK to retry. The counts are taken at the fake upstream.
"""
import json
import logging

import pytest
import requests

from tests.fake_upstream import FakeUpstream, Reply, fixture
from tests.test_faults import EACH, STREAMED_OR_NOT, full_backlog, recorded_text
from tests.test_service import ANTHROPIC_HEADERS, is_anthropic_error

QUICK = {"content-type": "application/json", "retry-after-ms": "1"}  # the SDKs wait 1 ms, not their backoff


def error_reply(direction, answer, **headers):
    name = f"{direction.upstream}/error_429.json" if answer == "rate_limited" else direction.overloaded
    return fixture(name, headers={**QUICK, **headers})


@EACH
@STREAMED_OR_NOT
@pytest.mark.parametrize("answer", ["rate_limited", "overloaded"])
def test_a_storm_of_429s_or_overloads_costs_the_upstream_only_the_sdks_own_retries(
        start_bridge, fake, direction, stream, answer):
    """Each SDK repeats a 429/5xx twice by default: three upstream calls for the user's one, not
    nine (three per SDK attempt), with the bridge's retries at their default."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    fake.default = error_reply(direction, answer)
    with pytest.raises(direction.sdk.APIStatusError):
        direction.create(direction.client(live.url, sdk_retries=True), stream)
    assert len(fake.requests) == direction.sdk.DEFAULT_MAX_RETRIES + 1 == 3


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
    logger = logging.getLogger("bridge.upstream")
    caplog.set_level(logging.INFO, logger="bridge.upstream")
    logger.addHandler(opener)
    try:
        late.reply(fixture(f"{direction.upstream}/text.sse"))
        live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.05, **{
            direction.base_url_setting: direction.upstream_base(late.server.server_address[1])})
        items = list(direction.ask(live.url, stream=True))
    finally:
        logger.removeHandler(opener)
        late.close()
    assert direction.text_of(items) == recorded_text(direction)
    assert len(opener.retries) == 1 and "connection refused" in opener.retries[0]
    assert len(late.requests) == 1


def test_a_connect_timeout_is_retried(start_bridge, caplog):
    caplog.set_level(logging.INFO, logger="bridge.upstream")
    with full_backlog() as port:
        live = start_bridge(BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", BRIDGE_CONNECT_TIMEOUT=0.2,
                            BRIDGE_RETRIES=1, BRIDGE_RETRY_BACKOFF=0.01)
        reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 504, "api_error")
    retries = [r.getMessage() for r in caplog.records if r.name == "bridge.upstream"]
    assert len(retries) == 1 and "ConnectTimeout" in retries[0]


def cut(direction, how):
    """The upstream's recorded 200 body, broken mid-read the way `how` says."""
    body = fixture(f"{direction.upstream}/text.json").body
    if how == "short-chunk":
        return Reply(body=body, headers={"content-type": "application/json"}, cut_after=len(body) // 2)
    return Reply(events=[body[:40], body[40:]], headers={"content-type": "application/json"}, drop_after=1)


@EACH
@pytest.mark.parametrize("how", ["short-chunk", "closed-between-chunks"])
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
    fake.reply(Reply(events=[body[:40], body[40:]], headers={"content-type": "application/json"}, stall_after=1,
                     stall_for=3), fixture(f"{direction.upstream}/text.json"))
    with pytest.raises(direction.sdk.InternalServerError) as caught:
        direction.ask(live.url)
    assert direction.is_error(caught.value.response, 504, "api_error")
    assert len(fake.requests) == 1
    assert json.loads(caught.value.response.text)["error"]["message"].startswith("upstream did not answer in time")
