"""Usage out (bridge/policy/spend.py): GET /v1/usage answers a key its own spend, and `bridge
usage --from --to --by` exports everyone's for chargeback, both from Redis, and both agreeing
with Prometheus and the access lines after streamed, non-streamed, abandoned and passed-through
calls."""

import csv
import io
import json
import time

import anthropic
import openai
import pytest
import redis
import requests

from bench.processes import wait_for
from bridge import cli
from bridge.policy import usage
from tests.fake_upstream import FIXTURES, ResponsesRules, fixture, json_reply, messages_stream
from tests.helpers.servers import (
    TextStream,
    access_lines,
    anthropic_client,
    bridge_env,
    gunicorn,
    metric,
    next_text,
    openai_client,
)

KEYS = "alice:sk-alice team=platform,ci:sk-ci team=platform trusted=true,solo:sk-solo"
HI = [{"role": "user", "content": "hi"}]
RECORDED = json.loads((FIXTURES / "anthropic" / "cache_usage.json").read_text())
BUDGETS = "key:alice day=1 month=20,team:platform month=100,user:* day=5 soft"


def routes(fake, other_fake):
    """claude-* on an Anthropic deployment, codex-mini passed through to a Responses one."""
    claude = {"name": "claude", "protocol": "anthropic", "base_url": fake.url, "model": "claude-sonnet-4-5"}
    codex = {
        "name": "openai",
        "protocol": "openai-responses",
        "base_url": f"{other_fake.url}/v1",
        "model": "gpt-5-codex",
    }
    return json.dumps(
        {
            "default_routes": False,
            "routes": [
                {"models": ["claude-*"], "deployments": [claude]},
                {"models": ["codex-mini"], "deployments": [codex]},
            ],
        }
    )


@pytest.fixture
def live(start_bridge, fake, other_fake, redis_server):
    other_fake.rules = ResponsesRules()

    def start(**extra):
        return start_bridge(
            BRIDGE_ROUTES=routes(fake, other_fake),
            BRIDGE_CLIENT_KEYS=KEYS,
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_LOG_LEVEL="INFO",
            BRIDGE_PING_INTERVAL="0.1",
            **extra,
        )

    return start


def own_usage(live, key="sk-alice", anthropic_style=True):
    """GET /v1/usage through an official SDK: the anthropic one sends `x-api-key`, the openai one
    `Authorization: Bearer`."""
    if anthropic_style:
        return anthropic_client(live.url, api_key=key).get("/v1/usage", cast_to=object)
    return openai_client(live.url, api_key=key).get("/usage", cast_to=object)


def counted(redis_server, client, requests):
    """Once the writer has counted `requests` of `client`'s today: its own day hash."""
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    key = usage.key_spend_keys(client, time.time())[0]
    total = lambda: sum(int(v) for f, v in store.hgetall(key).items() if f.endswith("|requests"))  # noqa: E731
    wait_for(lambda: total() >= requests, f"{requests} requests of {client} counted")


def export(monkeypatch, fake, redis_server, *args):
    """`bridge usage ARGS` as an operator runs it, its stdout."""
    for name, value in bridge_env(fake, BRIDGE_CLIENT_KEYS=KEYS, BRIDGE_REDIS_URL=redis_server.url).items():
        monkeypatch.setenv(name, value)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert cli.main(["usage", *args]) == 0
    return out.getvalue()


def test_usage_and_the_export_agree_with_prometheus_and_the_access_lines(
    live, fake, other_fake, redis_server, monkeypatch
):
    live = live()
    names = ("bridge_client_cost_total", "bridge_client_requests_total")
    before = [metric(live, name, client="alice") for name in names]
    output_before = metric(live, "bridge_client_tokens_total", client="alice", kind="output")
    alice, chat = anthropic_client(live.url, api_key="sk-alice"), openai_client(live.url, api_key="sk-alice")
    with access_lines() as lines:
        fake.reply(json_reply(RECORDED))
        alice.messages.create(model="claude-x", max_tokens=64, messages=HI)  # cache reads and writes
        fake.reply(messages_stream("hello"))
        "".join(
            c.choices[0].delta.content or ""
            for c in chat.chat.completions.create(model="claude-x", messages=HI, stream=True)
            if c.choices
        )
        upstream = TextStream(fake)
        upstream.release_until_text(0)
        abandoned = chat.chat.completions.create(model="claude-x", messages=HI, stream=True)
        assert next_text(iter(abandoned)) == "Hello"
        abandoned.close()  # the client leaves mid-stream
        wait_for(lambda: len(lines) == 3, "the abandoned stream's access line")
        upstream.release_rest()
        other_fake.reply(fixture("openai/responses_text.json"))
        chat.responses.create(model="codex-mini", input="hi")  # passed through, not streamed
        other_fake.reply(fixture("openai/responses_tool_call.sse"))
        with chat.responses.stream(model="codex-mini", input="hi") as stream:
            stream.get_final_response()
        fake.reply(json_reply(RECORDED))
        anthropic_client(live.url, api_key="sk-solo").messages.create(model="claude-x", max_tokens=64, messages=HI)
        wait_for(lambda: len(lines) == 6, "the access lines")
    mine = [line for line in lines if line["client"] == "alice"]
    assert [line["usage"] for line in mine] == ["reported", "reported", "estimated", "reported", "reported"]
    assert all(line["cost_usd"] for line in mine)
    cost = sum(line["cost_usd"] for line in mine)
    counted(redis_server, "alice", 5)
    spent, admitted = [metric(live, name, client="alice") - was for name, was in zip(names, before, strict=True)]
    output = metric(live, "bridge_client_tokens_total", client="alice", kind="output") - output_before

    answer = own_usage(live)
    assert spent == pytest.approx(cost, abs=5e-6) and admitted == 5  # the access line rounds to the micro-dollar
    assert (answer["key"], answer["team"], answer["user"]) == ("alice", "platform", None)
    for period in (answer["today"], answer["month"]):  # one day into the month, or the first
        assert period["cost_usd"] == pytest.approx(cost, abs=5e-6)  # a millionth a call, rounded
        assert (period["requests"], period["tokens"]["output"]) == (5, output)
        assert sorted(period["models"]) == ["codex-mini", "other"]
        passed = sum(line["cost_usd"] for line in mine if line["model"] == "codex-mini")
        assert period["models"]["codex-mini"]["cost_usd"] == pytest.approx(passed, abs=2e-6)
    assert answer["today"]["tokens"]["cache_read"] == 1111 + 1390  # Anthropic's recorded, and OpenAI's cached

    counted(redis_server, "alice", 6)  # and the usage call, a request of its own
    rows = list(csv.DictReader(io.StringIO(export(monkeypatch, fake, redis_server, "--by", "client,model"))))
    assert [(row["client"], row["model"]) for row in rows] == [
        ("alice", "codex-mini"),
        ("alice", "other"),
        ("solo", "other"),
    ]
    assert sum(float(row["cost_usd"]) for row in rows[:2]) == pytest.approx(cost, abs=5e-6)
    assert sum(int(row["requests"]) for row in rows[:2]) == metric(live, names[1], client="alice") - before[1] == 6
    assert sum(int(row["output"]) for row in rows[:2]) == output
    today = usage.day(time.time())
    listed = json.loads(
        export(monkeypatch, fake, redis_server, "--from", today, "--to", today, "--by", "team,day", "--format", "json")
    )
    assert [(row["team"], row["day"], row["requests"]) for row in listed] == [
        ("platform", today, 6),
        ("solo", today, 1),
    ]
    assert listed[0]["cost_usd"] == pytest.approx(answer["today"]["cost_usd"])


def test_usage_answers_a_key_in_either_protocols_style_its_own_and_its_budgets(live, fake, redis_server):
    live = live(BRIDGE_BUDGETS=BUDGETS)
    fake.default = lambda recorded: json_reply(RECORDED)
    anthropic_client(live.url, api_key="sk-solo").messages.create(model="claude-x", max_tokens=64, messages=HI)
    anthropic_client(live.url, api_key="sk-alice").messages.create(model="claude-x", max_tokens=64, messages=HI)
    counted(redis_server, "alice", 1)
    counted(redis_server, "solo", 1)
    one_call = 0.002405  # the recorded answer at Claude Sonnet 4.5's list prices, rounded to the micro-dollar
    for anthropic_style in (True, False):
        answer = own_usage(live, anthropic_style=anthropic_style)
        assert answer["key"] == "alice" and answer["today"]["cost_usd"] == one_call
        budgets = {(b["scope"], b["name"], b["window"]): b for b in answer["budgets"]}
        assert sorted(budgets) == [("key", "alice", "day"), ("key", "alice", "month"), ("team", "platform", "month")]
        assert budgets["key", "alice", "day"]["remaining_usd"] == pytest.approx(1 - one_call)
        assert budgets["team", "platform", "month"]["spent_usd"] == one_call
        midnight = time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(time.time() + 86400))
        assert budgets["key", "alice", "day"]["resets_at"] == midnight
    named = anthropic_client(live.url, api_key="sk-ci").get(
        "/v1/usage", cast_to=object, options={"headers": {"x-bridge-user": "bob"}}
    )
    assert named["user"] == "bob" and named["today"]["requests"] == 0
    assert [(b["scope"], b["name"], b["soft"]) for b in named["budgets"]] == [
        ("team", "platform", False),
        ("user", "bob", True),
    ]
    # Its own usage calls count as its requests, and cost nothing: no call of its is unpriced.
    counted(redis_server, "alice", 3)
    assert own_usage(live)["today"]["unpriced_requests"] == 0


@pytest.mark.parametrize("anthropic_style", [True, False])
def test_usage_without_a_key_is_a_401_and_redis_away_a_503_in_the_clients_protocol(live, redis_server, anthropic_style):
    live = live(BRIDGE_REDIS_TIMEOUT="0.2")
    with pytest.raises((anthropic.AuthenticationError, openai.AuthenticationError)):
        own_usage(live, key="sk-nobody", anthropic_style=anthropic_style)
    redis_server.stop()
    with pytest.raises((anthropic.APIStatusError, openai.APIStatusError)) as raised:
        own_usage(live, anthropic_style=anthropic_style)
    error = raised.value
    assert error.status_code == 503 and error.response.headers["retry-after"] == "5"
    assert "cannot read this key's usage: its Redis does not answer" in error.message
    body = error.response.json()
    assert body["error"]["type"] == ("overloaded_error" if anthropic_style else "server_error")
    assert (body.get("type") == "error") is anthropic_style
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


def test_usage_is_the_same_on_two_gunicorn_instances_and_is_their_prometheus_sum(tmp_path, fake, redis_server):
    """Two gunicorns of two workers each sharing one Redis, as two VMs: a key's calls on both,
    streamed and not, are in its usage on either, which both instances' Prometheus sum."""
    fake.default = lambda recorded: messages_stream("hi") if recorded.body.get("stream") else json_reply(RECORDED)
    settings = {"BRIDGE_CLIENT_KEYS": KEYS, "BRIDGE_REDIS_URL": redis_server.url, "BRIDGE_WORKERS": "2"}
    claude = {"name": "claude", "protocol": "anthropic", "base_url": fake.url, "model": "claude-sonnet-4-5"}
    settings["BRIDGE_ROUTES"] = json.dumps({"routes": [{"models": ["claude-*"], "deployments": [claude]}]})
    servers = [gunicorn(tmp_path / name, fake, **settings) for name in "ab"]
    try:
        for number in range(8):
            sdk = anthropic_client(servers[number % 2].url, api_key="sk-alice")
            if number % 4 < 2:
                sdk.messages.create(model="claude-x", max_tokens=64, messages=HI)
            else:
                with sdk.messages.stream(model="claude-x", max_tokens=64, messages=HI) as stream:
                    stream.until_done()
        counted(redis_server, "alice", 8)
        spent = sum(metric(server, "bridge_client_cost_total", client="alice") for server in servers)
        assert spent == pytest.approx(4 * 0.0024048 + 4 * (100 * 3 + 10 * 15) / 1_000_000)
        answers = [own_usage(servers[0]), own_usage(servers[1], anthropic_style=False)]
        assert [answer["today"]["cost_usd"] for answer in answers] == [pytest.approx(spent, abs=8e-6)] * 2
        assert answers[0]["today"]["requests"] == 8  # the next also counts the usage call, perhaps
    finally:
        for server in servers:
            server.stop()


def test_a_bridge_without_redis_says_where_usage_is_kept(start_bridge):
    live = start_bridge(BRIDGE_CLIENT_KEYS=KEYS)
    with pytest.raises(anthropic.NotFoundError) as raised:
        own_usage(live)
    assert "usage is kept in Redis, and this bridge has none (BRIDGE_REDIS_URL)" in raised.value.message


def test_a_bridge_without_keys_says_usage_is_per_key(start_bridge, redis_server):
    live = start_bridge(BRIDGE_ALLOW_OPEN_RELAY="true", BRIDGE_REDIS_URL=redis_server.url)
    with pytest.raises(anthropic.NotFoundError) as raised:
        own_usage(live)
    assert "usage is per client key, and this bridge checks none" in raised.value.message
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


def test_a_trusted_keys_users_past_the_cap_count_as_other(live, fake, redis_server, monkeypatch):
    live = live(BRIDGE_MAX_USERS_PER_KEY="2")
    fake.default = lambda recorded: json_reply(RECORDED)
    ci = anthropic_client(live.url, api_key="sk-ci")
    for number, user in enumerate(("ann", "bob", "cy", "dee", "ann"), 1):
        ci.messages.create(model="claude-x", max_tokens=64, messages=HI, extra_headers={"x-bridge-user": user})
        # Counted before the next is sent: a count is queued as the answer closes, after the client has it.
        counted(redis_server, "ci", number)
    rows = list(csv.DictReader(io.StringIO(export(monkeypatch, fake, redis_server, "--by", "user"))))
    assert [(row["user"], row["requests"]) for row in rows] == [("ann", "2"), ("bob", "1"), ("other", "2")]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--by", "team,colour"], "--by takes some of client,team,user,model,day, once each"),
        (["--from", "2026-13-01"], "does not match format"),
        (["--from", "2026-11-02", "--to", "2026-11-01"], "from 1 to 400 days, the first one first"),
    ],
)
def test_a_bad_export_is_refused_naming_what_is_wrong(fake, redis_server, monkeypatch, capsys, args, error):
    for name, value in bridge_env(fake, BRIDGE_CLIENT_KEYS=KEYS, BRIDGE_REDIS_URL=redis_server.url).items():
        monkeypatch.setenv(name, value)
    assert cli.main(["usage", *args]) == 2
    assert error in capsys.readouterr().err
