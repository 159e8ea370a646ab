"""Several deployments per route, over real HTTP: a call moves to the next deployment on what
cannot have started an answer (a refused connection, a 429, a 5xx), the failed one cools down
and comes back after it, and nothing is sent twice once an answer began."""

import json

import openai
import pytest
import requests

from bench.processes import wait_for
from tests.fake_upstream import FakeUpstream, fixture
from tests.helpers.recorded import decoded
from tests.helpers.servers import access_lines, metric

HI = [{"role": "user", "content": "Say hi"}]
TEXT = "anthropic/text.json"


@pytest.fixture
def refusing():
    """An upstream whose port refuses every connection until it listen()s: a host that is down."""
    server = FakeUpstream(listening=False)
    yield server
    server.close()


def routed(start_bridge, *upstreams, cooldown=600, retries=2, tiers=(), **settings):
    """A bridge whose model `claude` is served by one Anthropic deployment per upstream, named
    a, b, c in order (the order a first call tries them in), in `tiers` (1 for each by default)."""
    deployments = [
        {"name": name, "protocol": "anthropic", "base_url": upstream.url, "tier": tier}
        for name, upstream, tier in zip("abc", upstreams, (*tiers, 1, 1, 1), strict=False)
    ]
    document = {"cooldown_seconds": cooldown, "routes": [{"models": ["claude"], "deployments": deployments}]}
    return start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_RETRIES=retries, **settings)


def ask(live, stream=False):
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    return client.chat.completions.create(model="claude", messages=HI, stream=stream)


def test_a_call_passes_a_refused_connection_and_a_429_and_succeeds_on_the_third(
    start_bridge, refusing, other_fake, fake
):
    live = routed(start_bridge, refusing, other_fake, fake, BRIDGE_LOG_LEVEL="INFO")
    other_fake.default = fixture("anthropic/error_429.json")
    fake.default = fixture(TEXT)
    series = {
        ("bridge_deployment_calls_total", "a", "connection"),
        ("bridge_deployment_calls_total", "b", "429"),
        ("bridge_deployment_calls_total", "c", "200"),
    }
    before = {key: metric(live, key[0], deployment=key[1], outcome=key[2]) for key in series}
    errors_before = metric(live, "bridge_upstream_errors_total")
    with access_lines() as lines:
        assert ask(live).choices[0].message.content
        wait_for(lambda: lines, "the access line")
    assert len(other_fake.requests) == 1 and len(fake.requests) == 1
    assert lines[0]["deployment"] == "c" and lines[0]["status"] == 200
    assert {
        key: metric(live, key[0], deployment=key[1], outcome=key[2]) - before[key] for key in series
    } == dict.fromkeys(series, 1)
    assert metric(live, "bridge_upstream_errors_total") == errors_before, "the call did not fail: its deployments did"

    # a and b cool down: the next calls go straight to c
    for _ in range(3):
        assert ask(live).choices[0].message.content
    assert len(other_fake.requests) == 1 and len(fake.requests) == 4


def test_a_backup_deployment_serves_only_while_the_one_before_it_is_throttled(start_bridge, other_fake, fake):
    """Anthropic's API first, the company's second account when it throttles: no call reaches the
    backup while the primary answers, every call does while it cools down, then none again."""
    live = routed(start_bridge, fake, other_fake, tiers=(1, 2), cooldown=2)
    fake.default = other_fake.default = fixture(TEXT)
    for _ in range(4):
        assert ask(live).choices[0].message.content
    assert len(fake.requests) == 4 and other_fake.requests == []

    fake.reply(fixture("anthropic/error_429.json"))
    for _ in range(3):
        assert ask(live).choices[0].message.content
    assert len(fake.requests) == 5 and len(other_fake.requests) == 3, "the 429'd call and the two after it"

    wait_for(lambda: ask(live) and len(fake.requests) == 6, "the primary back after its cool-down", timeout=10)
    served = len(other_fake.requests)
    assert ask(live).choices[0].message.content and len(other_fake.requests) == served


def test_a_stream_moves_on_too_before_its_first_byte(start_bridge, other_fake, fake):
    live = routed(start_bridge, other_fake, fake)
    other_fake.default = fixture("anthropic/error_529.json")
    fake.default = fixture("anthropic/text_sdk.sse")
    text = "".join(chunk.choices[0].delta.content or "" for chunk in ask(live, stream=True) if chunk.choices)
    assert text and len(other_fake.requests) == 1


def test_a_deployment_that_recovers_is_used_again_after_its_cool_down(start_bridge, refusing, fake):
    live = routed(start_bridge, refusing, fake, cooldown=0.5)
    fake.default = refusing.default = fixture(TEXT)
    assert ask(live).choices[0].message.content  # a refused, b answered
    refusing.listen()
    wait_for(lambda: ask(live) and refusing.requests, "a call to the recovered deployment")


def test_when_every_deployment_fails_the_client_gets_the_last_answer(start_bridge, other_fake, fake):
    live = routed(start_bridge, other_fake, fake)
    other_fake.default = fixture("anthropic/error_529.json")
    fake.default = fixture("anthropic/error_429.json")
    with pytest.raises(openai.RateLimitError) as caught:
        ask(live)
    assert caught.value.response.headers.get("retry-after")
    assert len(other_fake.requests) == 1 and len(fake.requests) == 1


def test_the_retry_budget_bounds_the_deployments_tried(start_bridge, other_fake, fake):
    live = routed(start_bridge, other_fake, fake, retries=0)
    other_fake.default = fixture("anthropic/error_429.json")
    with pytest.raises(openai.RateLimitError):
        ask(live)
    assert fake.requests == []


@pytest.mark.parametrize(
    "reply, stream, status",
    [
        (fixture("anthropic/text_sdk.sse", drop_after=4), True, 200),
        (fixture(TEXT, cut_after=40), False, 502),
        (fixture(TEXT, delay_headers=3), False, 504),
        (fixture("anthropic/error_400.json"), False, 400),
    ],
    ids=["stream-cut-after-first-events", "body-cut", "read-timeout", "client-error"],
)
def test_nothing_goes_to_another_deployment_once_an_answer_may_have_begun(
    start_bridge, other_fake, fake, reply, stream, status
):
    """A 2xx status line, a read timeout (the upstream may have generated and billed), and a
    4xx that any deployment would give alike."""
    live = routed(start_bridge, fake, other_fake, BRIDGE_READ_TIMEOUT=1)
    fake.reply(reply)
    response = requests.post(
        f"{live.url}/v1/chat/completions", json={"model": "claude", "messages": HI, "stream": stream}
    )
    assert response.status_code == status
    if stream:
        assert "error" in json.loads(decoded(response.content)[-1].data)
    assert len(fake.requests) == 1 and other_fake.requests == []
    assert requests.get(f"{live.url}/healthz").status_code == 200
