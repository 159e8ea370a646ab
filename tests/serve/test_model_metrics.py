"""Metrics a dashboard can draw: by model asked for, upstream model, deployment, client and status
class; time to first token apart from a request's duration; failovers and cool-downs; and every
counter whose labels are known there at zero from the start, so that an alert tells none from absent."""

import json

import anthropic
import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import wait_for
from tests.fake_upstream import FakeUpstream, fixture, json_reply
from tests.helpers.servers import access_lines, metric

CLIENT_KEY = "sk-client-key-for-model-metrics"
MODEL_MAP = '{"claude-watch": "gpt-watch"}'
HI = [{"role": "user", "content": "Say hi"}]


def series(live, name):
    """Every sample of `name` as {label tuple: value}."""
    text = requests.get(f"{live.url}/metrics").text
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@pytest.fixture
def live(start_bridge):
    return start_bridge(
        BRIDGE_CLIENT_KEYS=f"team-w:{CLIENT_KEY} team=platform", BRIDGE_MODEL_MAP=MODEL_MAP, BRIDGE_LOG_LEVEL="INFO"
    )


def by_model(model, upstream_model, status_class, deployment="openai"):
    return {
        "model": model,
        "upstream_model": upstream_model,
        "deployment": deployment,
        "client": "team-w",
        "team": "platform",
        "status_class": status_class,
    }


def gen_ai(model, upstream_model, deployment="openai", provider="openai"):
    return {
        "gen_ai_operation_name": "chat",
        "gen_ai_provider_name": provider,
        "gen_ai_request_model": model,
        "gen_ai_response_model": upstream_model,
        "deployment": deployment,
    }


def measured(live, *names, **labels):
    return {name: metric(live, name, **labels) for name in names}


TIMINGS = (
    "gen_ai_server_request_duration_seconds_count",
    "gen_ai_server_time_to_first_token_seconds_count",
    "gen_ai_server_time_per_output_token_seconds_count",
)


def test_a_stream_is_measured_by_model_upstream_model_deployment_client_and_status_class(live, fake):
    requests_before = metric(live, "bridge_model_requests_total", **by_model("claude-watch", "gpt-watch", "2xx"))
    labels = gen_ai("claude-watch", "gpt-watch")
    before = measured(live, *TIMINGS, **labels)
    output_before = metric(live, "gen_ai_client_token_usage_sum", gen_ai_token_type="output", **labels)
    fake.reply(fixture("openai/text.sse"))
    client = anthropic.Anthropic(base_url=live.url, api_key=CLIENT_KEY, max_retries=0)
    with access_lines() as lines:
        with client.messages.stream(model="claude-watch", max_tokens=64, messages=HI) as stream:
            stream.get_final_text()
        wait_for(lambda: lines, "the access line")
    assert lines[0]["output_tokens"] > 1
    after = metric(live, "bridge_model_requests_total", **by_model("claude-watch", "gpt-watch", "2xx"))
    assert after - requests_before == 1
    assert {name: value - before[name] for name, value in measured(live, *TIMINGS, **labels).items()} == dict.fromkeys(
        TIMINGS, 1
    )
    output = metric(live, "gen_ai_client_token_usage_sum", gen_ai_token_type="output", **labels)
    assert output - output_before == lines[0]["output_tokens"]


def test_an_answer_not_streamed_has_a_duration_but_no_first_token_and_a_model_no_map_names_is_other(live, fake):
    labels = gen_ai("other", "other")
    before = measured(live, *TIMINGS, **labels)
    errors_before = metric(live, "bridge_model_requests_total", **by_model("other", "other", "4xx"))
    fake.reply(fixture("openai/text.json"), json_reply({"error": {"message": "no", "type": "invalid_request"}}, 400))
    client = anthropic.Anthropic(base_url=live.url, api_key=CLIENT_KEY, max_retries=0)
    client.messages.create(model="made-up-model-1234", max_tokens=64, messages=HI)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="made-up-model-5678", max_tokens=64, messages=HI)
    wait_for(
        lambda: metric(live, "bridge_model_requests_total", **by_model("other", "other", "4xx")) == errors_before + 1,
        "the refused call counted as a 4xx of model other",
    )
    changed = {name: value - before[name] for name, value in measured(live, *TIMINGS, **labels).items()}
    assert changed == {TIMINGS[0]: 2, TIMINGS[1]: 0, TIMINGS[2]: 0}
    assert not any("made-up" in line for line in requests.get(f"{live.url}/metrics").text.splitlines())


@pytest.fixture
def refusing():
    server = FakeUpstream(listening=False)
    yield server
    server.close()


def test_a_failover_counts_its_reason_and_the_deployment_left_cools_down_until_its_time_is_up(
    start_bridge, refusing, fake
):
    deployments = [
        {"name": "watch-down", "protocol": "anthropic", "base_url": refusing.url},
        {"name": "watch-up", "protocol": "anthropic", "base_url": fake.url},
    ]
    document = {"cooldown_seconds": 2, "routes": [{"models": ["claude"], "deployments": deployments}]}
    live = start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_RETRIES=1)
    assert metric(live, "bridge_deployment_cooling", deployment="watch-down") == 0
    before = metric(live, "bridge_failovers_total", deployment="watch-down", reason="connection")
    fake.default = fixture("anthropic/text.json")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    assert client.chat.completions.create(model="claude", messages=HI).choices[0].message.content
    assert metric(live, "bridge_failovers_total", deployment="watch-down", reason="connection") - before == 1
    assert metric(live, "bridge_deployment_cooling", deployment="watch-down") == 1
    assert metric(live, "bridge_deployment_cooling", deployment="watch-up") == 0
    # the cool-down's end: nothing happens in the bridge, the scrape reads it
    wait_for(lambda: metric(live, "bridge_deployment_cooling", deployment="watch-down") == 0, "the cool-down's end")


def test_counters_whose_labels_are_known_exist_at_zero_from_the_start(start_bridge, redis_server):
    deployments = [{"name": "watch-zero", "protocol": "anthropic", "base_url": "http://127.0.0.1:9"}]
    live = start_bridge(
        BRIDGE_ROUTES=json.dumps({"routes": [{"models": ["claude"], "deployments": deployments}]}),
        BRIDGE_CLIENT_KEYS=f"team-zero:{CLIENT_KEY}",
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_CLIENT_LIMITS="team-zero rpm=10",
    )
    expected = [
        ("bridge_redis_errors_total", {"operation": "admit"}),
        ("bridge_redis_errors_total", {"operation": "count"}),
        ("bridge_client_limited_total", {"client": "team-zero", "limit": "tokens_per_day"}),
        ("bridge_upstream_errors_total", {"direction": "messages_to_chat", "type": "connection"}),
        ("bridge_failovers_total", {"deployment": "watch-zero", "reason": "rate_limit"}),
        ("bridge_deployment_cooling", {"deployment": "watch-zero"}),
    ]
    for name, labels in expected:
        found = series(live, name)
        assert any(set(labels.items()) <= set(key) for key in found), f"{name} {labels}: not there before a count"
