"""What calls cost (bridge/policy/prices.py), per client key, team and user: the upstream's usage
by kind times the shipped prices or a deployment's own, in the access line, in Prometheus and in
Redis per day; a model with no price marked, never $0."""

import copy
import json
import time

import pytest
import redis
import requests

from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.gateway import routes
from tests.fake_upstream import FIXTURES, Reply, fixture, json_reply
from tests.helpers.servers import TextStream, access_lines, anthropic_client, metric, next_text, openai_client

KEYS = "alice:sk-alice team=platform,ci:sk-ci team=platform trusted=true,solo:sk-solo"
RECORDED = json.loads((FIXTURES / "anthropic" / "cache_usage.json").read_text())
HI = [{"role": "user", "content": "hi"}]


def deployment(fake, **fields):
    return {"name": "main", "protocol": "anthropic", "base_url": fake.url, **fields}


@pytest.fixture
def priced(start_bridge, fake, redis_server):
    """A bridge whose `claude-*` names go to one Anthropic deployment on the fake upstream."""

    def start(**fields):
        document = {"routes": [{"models": ["claude-*"], "deployments": [deployment(fake, **fields)]}]}
        return start_bridge(
            BRIDGE_ROUTES=json.dumps(document),
            BRIDGE_CLIENT_KEYS=KEYS,
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_LOG_LEVEL="INFO",
        )

    return start


def spend(server):
    """Today's spend hash, as {client|team|user|model|kind: count}."""
    store = redis.Redis.from_url(server.url, decode_responses=True)
    return store.hgetall(f"bridge:spend:{time.strftime('%Y-%m-%d', time.gmtime())}")


# Claude Sonnet 4.5's list prices, per million tokens, from Anthropic's pricing page (prices.py).
SONNET = {"input": 3.00, "cache_read": 0.30, "cache_write_5m": 3.75, "cache_write_1h": 6.00, "output": 15.00}


@pytest.mark.parametrize("lifetime", ["5m", "1h"])
def test_a_recorded_anthropic_answer_costs_its_usage_by_kind_at_list_prices(priced, fake, redis_server, lifetime):
    """The recorded answer: 3 uncached input tokens, 1,111 read from the cache, 418 written to it
    (5-minute writes as recorded; the same as 1-hour writes, priced apart), 33 output tokens."""
    answer = copy.deepcopy(RECORDED)
    if lifetime == "1h":
        answer["usage"]["cache_creation"] = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 418}
    fake.default = lambda recorded: json_reply(answer)
    live = priced(model="claude-sonnet-4-5-20250929")
    by_hand = (
        3 * SONNET["input"]
        + 1111 * SONNET["cache_read"]
        + 418 * SONNET[f"cache_write_{lifetime}"]
        + 33 * SONNET["output"]
    ) / 1_000_000
    assert round(by_hand, 7) == {"5m": 0.0024048, "1h": 0.0033453}[lifetime]

    before = metric(live, "bridge_client_cost_total", client="alice", team="platform")
    with access_lines() as lines:
        anthropic_client(live.url, api_key="sk-alice").messages.create(model="claude-x", max_tokens=64, messages=HI)
        wait_for(lambda: lines, "the access line")
    assert lines[0]["cost_usd"] == pytest.approx(by_hand, abs=1e-6)
    assert (lines[0]["client"], lines[0]["team"], lines[0]["user"]) == ("alice", "platform", None)
    spent = metric(live, "bridge_client_cost_total", client="alice", team="platform") - before
    assert spent == pytest.approx(by_hand)
    wait_for(lambda: spend(redis_server), "the spend written")
    row = spend(redis_server)
    assert int(row["alice|platform|-|other|micros"]) == round(by_hand * 1_000_000)
    assert int(row[f"alice|platform|-|other|cache_write_{lifetime}"]) == 418
    assert int(row["alice|platform|-|other|cache_read"]) == 1111


def test_a_deployments_own_prices_win_and_openai_cached_tokens_are_priced_apart(start_bridge, fake, redis_server):
    """A Chat deployment priced in the routes file; its streamed usage's prompt tokens include
    the cached ones, priced as cache reads."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 600}}
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        },
        {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [], "usage": usage},
    ]
    events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]
    fake.default = lambda recorded: Reply(headers={"content-type": "text/event-stream"}, events=events)
    prices = {"input": 2.0, "cache_read": 0.5, "output": 8.0}
    document = {
        "routes": [
            {
                "models": ["house"],
                "deployments": [
                    {"name": "vllm", "protocol": "openai-chat", "base_url": fake.url, "model": "x", "prices": prices}
                ],
            }
        ]
    }
    live = start_bridge(
        BRIDGE_ROUTES=json.dumps(document),
        BRIDGE_CLIENT_KEYS=KEYS,
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_LOG_LEVEL="INFO",
    )
    before = metric(live, "bridge_client_cost_total", client="solo", team="solo", model="house")
    with access_lines() as lines:
        with anthropic_client(live.url, api_key="sk-solo").messages.stream(
            model="house", max_tokens=64, messages=HI
        ) as s:
            s.until_done()
        wait_for(lambda: lines, "the access line")
    by_hand = (400 * 2.0 + 600 * 0.5 + 100 * 8.0) / 1_000_000
    assert lines[0]["cost_usd"] == pytest.approx(by_hand, abs=1e-9)
    assert lines[0]["team"] == "solo"  # a key without a team is its own
    spent = metric(live, "bridge_client_cost_total", client="solo", team="solo", model="house") - before
    assert spent == pytest.approx(by_hand)


def test_a_model_with_no_price_has_no_cost_and_is_counted_never_zero(priced, fake, redis_server):
    fake.default = lambda recorded: json_reply(RECORDED)
    live = priced(model="our-finetune")
    before = (
        metric(live, "bridge_client_cost_total", client="alice"),
        metric(live, "bridge_unpriced_requests_total", deployment="main"),
    )
    with access_lines() as lines:
        openai_client(live.url, api_key="sk-alice").chat.completions.create(model="claude-x", messages=HI)
        wait_for(lambda: lines, "the access line")
    assert lines[0]["cost_usd"] is None and lines[0]["input_tokens"] == 1532
    assert metric(live, "bridge_unpriced_requests_total", deployment="main") == before[1] + 1
    assert metric(live, "bridge_client_cost_total", client="alice") == before[0]
    wait_for(lambda: spend(redis_server), "the spend written")
    assert spend(redis_server)["alice|platform|-|other|unpriced"] == "1"
    assert "alice|platform|-|other|micros" not in spend(redis_server)


def test_a_call_that_used_no_tokens_has_no_cost_and_is_not_counted_unpriced(priced, fake):
    live = priced(model="our-finetune")
    before = metric(live, "bridge_unpriced_requests_total")
    with access_lines() as lines:
        requests.get(f"{live.url}/healthz")
        wait_for(lambda: lines, "the access line")
    assert lines[0]["route"] == "/healthz" and lines[0]["cost_usd"] is None
    assert metric(live, "bridge_unpriced_requests_total") == before


def test_a_trusted_keys_client_names_its_user_and_another_keys_cannot(priced, fake, redis_server):
    fake.default = lambda recorded: json_reply(RECORDED)
    live = priced(model="claude-sonnet-4-5")
    before = metric(live, "bridge_client_cost_total", team="platform")
    with access_lines() as lines:
        for key in ("sk-ci", "sk-alice"):
            client = anthropic_client(live.url, api_key=key)
            client.messages.create(
                model="claude-x", max_tokens=64, messages=HI, extra_headers={"x-bridge-user": "bob@example.com"}
            )
        wait_for(lambda: len(lines) == 2, "the access lines")
    assert [(line["client"], line["user"]) for line in lines] == [("ci", "bob@example.com"), ("alice", None)]
    wait_for(lambda: len(spend(redis_server)) >= 2 * 6, "the spend written")
    assert "ci|platform|bob@example.com|other|micros" in spend(redis_server)
    spent = metric(live, "bridge_client_cost_total", team="platform") - before
    assert spent == pytest.approx(2 * 0.0024048, abs=1e-6)


def test_a_user_header_that_is_no_name_is_a_400_in_the_clients_protocol(priced, fake):
    live = priced(model="claude-sonnet-4-5")
    client = anthropic_client(live.url, api_key="sk-ci")
    with pytest.raises(Exception) as raised:
        client.messages.create(model="claude-x", max_tokens=64, messages=HI, extra_headers={"x-bridge-user": "a|b"})
    assert raised.value.status_code == 400 and "x-bridge-user" in raised.value.message
    assert fake.requests == []


@pytest.mark.parametrize(
    ("prices", "error"),
    [
        ({"input": 3}, "prices.output is required"),
        ({"input": 3, "output": -1}, "prices.output must be a number of dollars"),
        ({"input": 3, "output": 1, "cache_write": 1}, "unknown field 'cache_write'"),
        ([3, 15], "prices must be an object"),
    ],
)
def test_a_bad_prices_entry_is_refused_naming_the_deployment(fake, prices, error):
    document = {"routes": [{"models": ["m"], "deployments": [deployment(fake, prices=prices)]}]}
    settings = settings_module.load({"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_ALLOW_OPEN_RELAY": "true"})
    with pytest.raises(settings_module.SettingsError, match=r'deployments\[0\] \("main"\): ') as raised:
        routes.load(settings)
    assert error in str(raised.value)


def test_an_abandoned_stream_costs_what_it_counted_at_list_prices(priced, fake, redis_server):
    """The client leaves after the first text: Anthropic had reported 11 input tokens (and 1
    output); the output is bridge's estimate of the text streamed, "Hello", 5 / 3 up."""
    live = priced(model="claude-sonnet-4-5")
    upstream = TextStream(fake)
    upstream.release_until_text(0)
    before = metric(live, "bridge_client_cost_total", client="alice")
    with access_lines() as lines:
        stream = openai_client(live.url, api_key="sk-alice").chat.completions.create(
            model="claude-x", messages=HI, stream=True
        )
        assert next_text(iter(stream)) == "Hello"
        stream.close()
        wait_for(lambda: lines, "the access line")
    upstream.release_rest()
    (line,) = lines
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (11, 2, "estimated")
    by_hand = (11 * SONNET["input"] + 2 * SONNET["output"]) / 1_000_000
    assert line["cost_usd"] == pytest.approx(by_hand, abs=1e-9)
    assert metric(live, "bridge_client_cost_total", client="alice") - before == pytest.approx(by_hand)
    wait_for(lambda: "alice|platform|-|other|micros" in spend(redis_server), "the spend written")
    assert int(spend(redis_server)["alice|platform|-|other|micros"]) == round(by_hand * 1_000_000)


def test_a_passed_through_responses_call_prices_cached_input_as_cache_reads(start_bridge, other_fake, redis_server):
    """A recorded Responses answer (1,515 input tokens of which 1,390 cached, 8 output) passed
    through to gpt-5-codex, at the shipped table's gpt-5 prices."""
    other_fake.reply(fixture("openai/responses_text.json"))
    codex = {
        "name": "openai",
        "protocol": "openai-responses",
        "base_url": f"{other_fake.url}/v1",
        "model": "gpt-5-codex",
    }
    document = {"default_routes": False, "routes": [{"models": ["codex-mini"], "deployments": [codex]}]}
    live = start_bridge(
        BRIDGE_ROUTES=json.dumps(document),
        BRIDGE_CLIENT_KEYS=KEYS,
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_LOG_LEVEL="INFO",
    )
    before = metric(live, "bridge_client_cost_total", client="solo", model="codex-mini")
    with access_lines() as lines:
        openai_client(live.url, api_key="sk-solo").responses.create(model="codex-mini", input="hi")
        wait_for(lambda: lines, "the access line")
    (line,) = lines
    assert line["direction"] == "responses_passthrough" and line["upstream_model"] == "gpt-5-codex"
    by_hand = ((1515 - 1390) * 1.25 + 1390 * 0.125 + 8 * 10.0) / 1_000_000
    assert round(by_hand, 7) == 0.00041
    assert line["cost_usd"] == pytest.approx(by_hand, abs=1e-9)
    assert metric(live, "bridge_client_cost_total", client="solo", model="codex-mini") - before == pytest.approx(
        by_hand
    )
    wait_for(lambda: "solo|solo|-|codex-mini|micros" in spend(redis_server), "the spend written")
    assert int(spend(redis_server)["solo|solo|-|codex-mini|cache_read"]) == 1390
