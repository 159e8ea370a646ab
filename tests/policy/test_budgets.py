"""Budgets in money (BRIDGE_BUDGETS) per key, team and user, per UTC day and calendar month,
checked at admission in the limits' Redis script with what calls in flight may still cost."""

import concurrent.futures
import json
import time

import anthropic
import pytest
import redis

from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.policy import usage
from tests.fake_upstream import json_reply, message
from tests.helpers.servers import anthropic_client, gunicorn, metric, openai_client

KEYS = "alice:sk-alice team=platform,ci:sk-ci team=platform trusted=true,solo:sk-solo"
HI = [{"role": "user", "content": "hi"}]
# At Claude Sonnet 4.5's $3 / $15 per million: 10 * 3 + 50 * 15 = 780 micro-dollars a call, less
# than admission reserves for it (its small body's input, and the 64 output tokens it asks for).
USAGE = {"input_tokens": 10, "output_tokens": 50}
CALL = 780


def routes(fake):
    deployment = {"name": "main", "protocol": "anthropic", "base_url": fake.url, "model": "claude-sonnet-4-5"}
    return json.dumps({"routes": [{"models": ["claude-*"], "deployments": [deployment]}]})


def slow(reply):
    """An answer that takes a moment, so that calls overlap."""
    reply.delay_headers = 0.1
    return reply


def spent(server, scope, name):
    store = redis.Redis.from_url(server.url, decode_responses=True)
    return int(store.get(f"bridge:spent:{scope}:{name}:{usage.day(time.time())}") or 0)


def test_a_team_budget_shared_by_two_instances_holds_within_one_call_under_30_concurrent(tmp_path, fake, redis_server):
    """Two gunicorns, one key of the team on each, 30 clients calling until refused: the team's
    spend stops within one call of its budget, and the next call is a 429 naming the budget."""
    fake.default = lambda recorded: slow(json_reply(message("hi", USAGE)))
    budget = 10 * CALL
    settings = {
        "BRIDGE_CLIENT_KEYS": KEYS,
        "BRIDGE_REDIS_URL": redis_server.url,
        "BRIDGE_ROUTES": routes(fake),
        "BRIDGE_BUDGETS": f"team:platform day={budget / 1_000_000}",
        "BRIDGE_WORKERS": "2",
    }
    servers = [gunicorn(tmp_path / name, fake, **settings) for name in "ab"]
    try:
        refusals = []

        def client(number):
            server, key = (servers[0], "sk-alice") if number % 2 else (servers[1], "sk-ci")
            sdk = anthropic_client(server.url, api_key=key)
            for _ in range(50):
                try:
                    sdk.messages.create(model="claude-x", max_tokens=64, messages=HI)
                except anthropic.RateLimitError as error:
                    if "calls in flight" not in error.message:
                        refusals.append(error)
                        return
                    time.sleep(0.05)  # its retry-after, shortened
            raise AssertionError("never refused")

        with concurrent.futures.ThreadPoolExecutor(30) as pool:
            list(pool.map(client, range(30)))
        wait_for(lambda: spent(redis_server, "team", "platform") >= budget, "the spend written")
        total = spent(redis_server, "team", "platform")
        assert budget <= total < budget + CALL, (total, budget)
        assert spent(redis_server, "key", "alice") + spent(redis_server, "key", "ci") == total
        error = refusals[0]
        assert error.status_code == 429
        assert "team platform has spent $0.01, reaching its daily budget of $0.01 (BRIDGE_BUDGETS)" in error.message
        midnight = time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(time.time() + 86400))
        assert f"it resets at {midnight}" in error.message
        assert 0 < int(error.response.headers["retry-after"]) <= 86400
    finally:
        for server in servers:
            server.stop()


def test_a_key_over_its_monthly_budget_gets_a_429_in_openai_terms_and_a_soft_one_only_counts(
    start_bridge, fake, redis_server
):
    fake.default = lambda recorded: json_reply(message("hi", USAGE))
    live = start_bridge(
        BRIDGE_CLIENT_KEYS=KEYS,
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_ROUTES=routes(fake),
        BRIDGE_BUDGETS=f"key:solo month={CALL / 1_000_000},user:* day={CALL / 1_000_000} soft",
    )
    sdk = openai_client(live.url, api_key="sk-solo")
    sdk.chat.completions.create(model="claude-x", messages=HI, max_tokens=64)
    wait_for(lambda: spent(redis_server, "key", "solo") == CALL, "the spend written")
    with pytest.raises(Exception) as refused:
        sdk.chat.completions.create(model="claude-x", messages=HI, max_tokens=64)
    assert refused.value.status_code == 429
    assert refused.value.body["type"] == "rate_limit_error"
    assert "key solo has spent $0.00, reaching its monthly budget" in refused.value.message
    assert len(fake.requests) == 1

    trusted = anthropic_client(live.url, api_key="sk-ci")
    before = metric(live, "bridge_soft_budget_exceeded_total", scope="user", window="day")
    for _ in range(3):
        trusted.messages.create(model="claude-x", max_tokens=64, messages=HI, extra_headers={"x-bridge-user": "bob"})
        wait_for(lambda: spent(redis_server, "user", "bob") > 0, "the spend written")
    assert metric(live, "bridge_soft_budget_exceeded_total", scope="user", window="day") >= before + 1


@pytest.mark.parametrize(
    ("budgets", "error"),
    [
        ("team:platform", "no budget given"),
        ("group:platform day=5", "must start with key:NAME, team:NAME or user:NAME"),
        ("team:platform day=five", "day: must be a float"),
        ("team:a day=1,team:a month=2", "team:a has two lines"),
    ],
)
def test_a_bad_budget_line_is_refused_naming_it(budgets, error):
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_BUDGETS") as raised:
        settings_module.load({"BRIDGE_BUDGETS": budgets, "BRIDGE_REDIS_URL": "redis://127.0.0.1:1"})
    assert error in str(raised.value)
