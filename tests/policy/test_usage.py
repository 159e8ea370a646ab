"""Per-client usage and limits (bridge/policy/usage.py) against a real redis-server: 429s in each
protocol before anything goes upstream, windows that reset, token counts as the upstream
reported them, and Redis going away and coming back."""

import base64
import calendar
import concurrent.futures
import json
import signal
import socket
import time

import anthropic
import pytest
import redis
import requests

from bench.limits import fresh_minute
from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.gateway import routes
from bridge.policy import usage
from bridge.protocols.errors import BridgeError
from bridge.serve import meters
from bridge.serve.observability import Record
from bridge.translate.tokens import IMAGE_TOKENS, count_tokens
from tests.fake_upstream import json_reply, message, messages_stream
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error
from tests.helpers.recorded import recorded
from tests.helpers.servers import TextStream, access_lines, metric, next_text
from tests.helpers.servers import openai_client as sdk_client

KEYS = "team-a:sk-team-a,team-b:sk-team-b"
MODELS = json.dumps({"claude-x": "gpt-4o"})  # a configured name: the model label keeps it
CHAT_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
}
MESSAGE_ANSWER = message(
    "hi", {"input_tokens": 30, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 10, "output_tokens": 7}
)
# One call in each protocol: path, body; the Messages front goes to the Chat upstream, the others to Anthropic.
HI = [{"role": "user", "content": "hi"}]
CALLS = {
    "anthropic": ("/v1/messages", {"model": "claude-x", "max_tokens": 64, "messages": HI}),
    "chat": ("/v1/chat/completions", {"model": "gpt-4o", "messages": HI}),
    "responses": ("/v1/responses", {"model": "gpt-5.5", "input": "hi"}),
}


def answers(recorded):
    """The fake upstream's answer to a non-streamed call, in its protocol."""
    return json_reply(MESSAGE_ANSWER if recorded.path == "/v1/messages" else CHAT_ANSWER)


@pytest.fixture
def limited(start_bridge, fake, redis_server):
    """A bridge with these limits (BRIDGE_CLIENT_LIMITS) sharing the test's Redis."""
    fake.default = answers

    def start(limits, **extra):
        fresh_minute(15)  # a test's calls inside one minute window
        settings = {"BRIDGE_CLIENT_KEYS": KEYS, "BRIDGE_REDIS_URL": redis_server.url, "BRIDGE_MODEL_MAP": MODELS}
        return start_bridge(BRIDGE_CLIENT_LIMITS=limits, **{**settings, **extra})

    return start


def call(live, protocol, key="sk-team-a"):
    path, body = CALLS[protocol]
    return requests.post(f"{live.url}{path}", json=body, headers={**ANTHROPIC_HEADERS, "x-api-key": key}, timeout=30)


def store(server):
    return redis.Redis.from_url(server.url, decode_responses=True)


def today(server, client):
    return store(server).hgetall(f"bridge:usage:{time.strftime('%Y-%m-%d', time.gmtime())}:{client}")


def counted(server, requests, client="team-a"):
    """Wait until the client's first `requests` answers are counted: that happens as each answer
    closes, which the client may outrun with its next request."""
    wait_for(lambda: int(today(server, client).get("requests", 0)) >= requests, f"{requests} answers counted")


# -- settings ---------------------------------------------------------------------------------------


def load(**env):
    return settings_module.load({"BRIDGE_CLIENT_KEYS": KEYS, **env})


def test_limits_without_redis_are_refused_at_start_saying_redis_is_needed():
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_CLIENT_LIMITS needs Redis: set BRIDGE_REDIS_URL"):
        load(BRIDGE_CLIENT_LIMITS="team-a rpm=5")


def test_limits_without_client_keys_are_refused():
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_CLIENT_KEYS is empty"):
        settings_module.load({"BRIDGE_CLIENT_LIMITS": "* rpm=5", "BRIDGE_REDIS_URL": "redis://127.0.0.1:1"})


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ("team-c rpm=5", "client 'team-c' is no client key name"),
        ("team-a rpm=five", "entry 1 (team-a) rpm: must be a int"),
        ("team-a rpm=0", "entry 1 (team-a) rpm: must be at least 1"),
        ("team-a rps=5", "'rps=5' is not rpm=N, tpm=N or tpd=N"),
        ("team-a", "entry 1 (team-a): no limit given"),
        ("team-a rpm=5, team-a tpd=9", "entry 2: client 'team-a' has two lines"),
    ],
)
def test_a_bad_limits_entry_is_refused_naming_it(limits, error):
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_CLIENT_LIMITS") as raised:
        load(BRIDGE_CLIENT_LIMITS=limits, BRIDGE_REDIS_URL="redis://127.0.0.1:1")
    assert error in str(raised.value)


def test_a_limits_file_is_read_with_comments(tmp_path):
    path = tmp_path / "limits"
    path.write_text("# team quotas\nteam-a rpm=60 tpm=100000 tpd=2000000  # the agents\n\n* rpm=10\n")
    settings = load(BRIDGE_CLIENT_LIMITS=str(path), BRIDGE_REDIS_URL="redis://127.0.0.1:1")
    assert dict(settings.client_limits) == {
        "team-a": settings_module.Limits(60, 100000, 2000000),
        "*": settings_module.Limits(requests_per_minute=10),
    }


def test_a_limits_file_that_cannot_be_read_is_refused(tmp_path):
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_CLIENT_LIMITS: cannot read .*missing"):
        load(BRIDGE_CLIENT_LIMITS=str(tmp_path / "missing"), BRIDGE_REDIS_URL="redis://127.0.0.1:1")


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://127.0.0.1:6379", "must be a redis://, rediss:// or unix:// URL, got scheme 'http'"),
        ("redis://:s3cret@127.0.0.1:port/0", "the port is not a number"),
        ("redis:///0", "names no host"),
    ],
)
def test_a_bad_redis_url_is_refused_without_echoing_it(url, error):
    with pytest.raises(settings_module.SettingsError, match="BRIDGE_REDIS_URL") as raised:
        load(BRIDGE_REDIS_URL=url)
    assert error in str(raised.value) and "s3cret" not in str(raised.value)


def test_the_redis_password_is_never_shown():
    settings = load(BRIDGE_REDIS_URL="redis://bridge:s3cret@10.0.0.5:6379/0")
    assert "s3cret" not in repr(settings) and "redis://bridge:***@10.0.0.5:6379/0" in repr(settings)


# -- limits -----------------------------------------------------------------------------------------


def test_over_the_request_limit_is_a_429_in_each_protocol_before_anything_goes_upstream(limited, fake):
    live = limited("team-a rpm=2")
    assert call(live, "anthropic").status_code == 200 and call(live, "chat").status_code == 200
    refused = {protocol: call(live, protocol) for protocol in CALLS}
    assert len(fake.requests) == 2
    assert is_anthropic_error(refused["anthropic"], 429, "rate_limit_error")
    headers = refused["anthropic"].headers
    assert headers["anthropic-ratelimit-requests-limit"] == "2"
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert headers["anthropic-ratelimit-requests-reset"].endswith("Z") and 1 <= int(headers["retry-after"]) <= 60
    for protocol in ("chat", "responses"):
        assert is_openai_error(refused[protocol], 429)
        headers = refused[protocol].headers
        assert headers["x-ratelimit-limit-requests"] == "2" and headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["x-ratelimit-reset-requests"] and 1 <= int(headers["retry-after"]) <= 60
    assert call(live, "chat", key="sk-team-b").status_code == 200  # another client's count is its own


def test_claude_code_sees_a_rate_limit_not_a_permission_problem(limited):
    live = limited("team-a rpm=1")
    client = anthropic.Anthropic(base_url=live.url, api_key="sk-team-a", max_retries=0)
    _, body = CALLS["anthropic"]
    client.messages.create(**body)
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(**body)


def test_a_minute_window_resets_when_its_key_expires(limited, redis_server):
    live = limited("* rpm=1")
    assert call(live, "chat").status_code == 200
    assert call(live, "chat").status_code == 429
    (key,) = store(redis_server).keys("bridge:rpm:team-a:*")
    assert 60 <= store(redis_server).ttl(key) <= 120  # the key goes on its own once its minute is over
    store(redis_server).pexpire(key, 1)  # that moment, sooner
    wait_for(lambda: not store(redis_server).exists(key), "the minute's key to expire")
    assert call(live, "chat").status_code == 200


def test_a_daily_token_budget_stops_one_client_and_not_another(limited, redis_server):
    live = limited("team-a tpd=100")
    assert call(live, "chat").status_code == 200  # 67 tokens: under 100
    counted(redis_server, 1)
    assert call(live, "chat").status_code == 200  # under at its start: admitted, 134 now
    counted(redis_server, 2)
    refused = call(live, "chat")
    assert is_openai_error(refused, 429) and "100 tokens per day" in refused.json()["error"]["message"]
    assert refused.headers["x-ratelimit-limit-tokens"] == "100"
    seconds_to_midnight = 86400 - int(time.time()) % 86400
    assert abs(int(refused.headers["retry-after"]) - seconds_to_midnight) <= 2
    assert call(live, "chat", key="sk-team-b").status_code == 200
    assert call(live, "anthropic", key="sk-team-b").status_code == 200


def test_a_minute_token_limit_counts_tokens_of_the_minute(limited, redis_server):
    live = limited("team-a tpm=50")
    assert call(live, "anthropic").status_code == 200  # 45 tokens
    counted(redis_server, 1)
    assert call(live, "anthropic").status_code == 200
    counted(redis_server, 2)
    refused = call(live, "anthropic")
    assert is_anthropic_error(refused, 429, "rate_limit_error")
    assert refused.headers["anthropic-ratelimit-tokens-limit"] == "50"


# -- what is counted --------------------------------------------------------------------------------


def test_tokens_count_what_the_upstream_reported_streamed_or_not(limited, fake, redis_server):
    live = limited("team-a tpd=1000000")
    counters = [
        ("bridge_client_tokens_total", {"model": "claude-x", "kind": "input"}),
        ("bridge_client_tokens_total", {"model": "other", "kind": "input"}),
        ("bridge_client_tokens_total", {"model": "other", "kind": "cache_write"}),
        ("bridge_client_requests_total", {"model": "other"}),
    ]
    before = [metric(live, name, client="team-a", **labels) for name, labels in counters]
    assert call(live, "anthropic").status_code == 200  # Chat upstream: 40 in, 5 out
    assert call(live, "chat").status_code == 200  # Anthropic upstream: 60 in (20 read, 10 written), 7 out
    fake.reply(messages_stream("hello"))  # 100 in, 10 out; the Chat client does not ask for usage
    chunks = sdk_client(live.url, api_key="sk-team-a").chat.completions.create(stream=True, **CALLS["chat"][1])
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello"
    wait_for(lambda: today(redis_server, "team-a").get("requests") == "3", "the stream to be counted")
    assert today(redis_server, "team-a") == {
        "requests": "3",
        "input": str(40 + 60 + 100),
        "output": str(5 + 7 + 10),
        "cache_read": "20",
        "cache_write": "10",
    }
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert store(redis_server).get(f"bridge:tpd:team-a:{day}") == str(45 + 67 + 110)
    after = [metric(live, name, client="team-a", **labels) for name, labels in counters]
    assert [a - b for a, b in zip(after, before, strict=True)] == [40, 160, 10, 2]


def test_an_abandoned_stream_counts_what_the_upstream_had_reported_and_the_output_streamed(limited, fake, redis_server):
    live = limited("team-a tpd=1000000", BRIDGE_PING_INTERVAL="0.1")
    upstream = TextStream(fake)  # message_start: 11 in, 1 out
    upstream.release_until_text(0)
    stream = sdk_client(live.url, api_key="sk-team-a").chat.completions.create(stream=True, **CALLS["chat"][1])
    assert next_text(iter(stream)) == upstream.texts[0][1] == "Hello"
    stream.close()  # the client leaves mid-stream
    wait_for(lambda: today(redis_server, "team-a").get("requests") == "1", "the abandoned stream to be counted")
    assert today(redis_server, "team-a") == {"requests": "1", "input": "11", "output": "2"}  # "Hello": 5 / 3, up
    upstream.release_rest()


# -- Redis away -------------------------------------------------------------------------------------


def test_fail_open_serves_while_redis_is_down_and_limits_resume_when_it_is_back(limited, redis_server):
    live = limited("team-a rpm=1", BRIDGE_REDIS_TIMEOUT="0.2")
    assert call(live, "chat").status_code == 200
    counted(redis_server, 1)
    redis_server.stop()
    failed = lambda: metric(live, "bridge_redis_errors_total", operation="admit")  # noqa: E731
    dropped = lambda: metric(live, "bridge_usage_dropped_total") - dropped_before  # noqa: E731
    before, dropped_before = failed(), metric(live, "bridge_usage_dropped_total")
    assert [call(live, protocol).status_code for protocol in CALLS] == [200, 200, 200]
    assert failed() == before + 3
    assert metric(live, "bridge_redis_errors_total", operation="count") >= 1
    redis_server.start()  # back, and empty
    assert call(live, "chat").status_code == 200
    assert call(live, "chat").status_code == 429
    # The three calls served meanwhile and the one admitted since: the count whose write failed
    # is dropped, the others waited for Redis.
    wait_for(lambda: int(today(redis_server, "team-a").get("requests", 0)) + dropped() == 4, "the counts written")
    assert 1 <= dropped() <= 3


def test_fail_closed_answers_503_in_each_protocol(limited, redis_server):
    live = limited("team-a rpm=100", BRIDGE_REDIS_FAILURE="closed")
    redis_server.stop()
    refused = {protocol: call(live, protocol) for protocol in CALLS}
    assert is_anthropic_error(refused["anthropic"], 503, "overloaded_error")
    assert is_openai_error(refused["chat"], 503) and is_openai_error(refused["responses"], 503)
    assert all("Redis does not answer" in r.text and r.headers["retry-after"] for r in refused.values())
    assert call(live, "chat", key="sk-team-b").status_code == 200  # no limits: nothing to check
    redis_server.start()
    assert call(live, "chat").status_code == 200


def test_a_redis_that_does_not_answer_is_given_up_on(limited):
    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        live = limited("team-a rpm=1", BRIDGE_REDIS_URL=f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        before = metric(live, "bridge_redis_errors_total", operation="admit")
        assert call(live, "chat").status_code == 200
        assert metric(live, "bridge_redis_errors_total", operation="admit") == before + 1
    finally:
        silent.close()


def test_a_kept_connection_to_a_redis_that_stops_answering_is_given_up_on(limited, redis_server):
    """A call on a connection made earlier is bounded by BRIDGE_REDIS_TIMEOUT too: its socket
    blocks, and the kernel ends a send or receive that waits longer (SO_SNDTIMEO, SO_RCVTIMEO)."""
    live = limited("team-a rpm=100", BRIDGE_REDIS_TIMEOUT="0.2")
    assert call(live, "chat").status_code == 200  # its connection made, and kept
    before = metric(live, "bridge_redis_errors_total", operation="admit")
    store(redis_server).execute_command("CLIENT", "PAUSE", "4000", "ALL")  # every command waits 4 s
    started = time.monotonic()
    assert call(live, "chat").status_code == 200  # failing open
    assert time.monotonic() - started < 3, "the admission waited for Redis past BRIDGE_REDIS_TIMEOUT"
    assert metric(live, "bridge_redis_errors_total", operation="admit") == before + 1


# -- tokens in flight -------------------------------------------------------------------------------

# A Messages call whose Chat upstream reports 500 tokens, asking for at most 480 of output: its
# reservation is the body's estimate (about 30 tokens) plus those 480, a little over 500.
FIVE_HUNDRED = ("/v1/messages", {"model": "claude-x", "max_tokens": 480, "messages": HI})
CHAT_500 = {**CHAT_ANSWER, "usage": {"prompt_tokens": 20, "completion_tokens": 480, "total_tokens": 500}}


def held(server, client="team-a"):
    """What the client's calls in flight hold, as admission sees it (0: nothing)."""
    return int(store(server).get(f"bridge:held:{client}:tokens") or 0)


def post(live, path, body, key="sk-team-a"):
    return requests.post(f"{live.url}{path}", json=body, headers={**ANTHROPIC_HEADERS, "x-api-key": key}, timeout=30)


def test_a_reservation_is_the_input_as_count_tokens_counts_it_plus_the_output_asked_for():
    body = recorded("clients/claude-code-2.1.332/claude_code_interactive_turn1.json")["body"]  # max_tokens 128,000
    raw = json.dumps(body).encode()
    input_tokens = usage.estimate(raw, body, 8192) - 8192  # the output asked for, capped
    assert count_tokens(body) <= input_tokens <= 1.1 * count_tokens(body)
    assert usage.estimate(raw, {**body, "max_tokens": 100}, 8192) == input_tokens + 100
    image = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(bytes(300_000)).decode()}
    with_image = {**body, "messages": [{"role": "user", "content": [{"type": "image", "source": image}]}]}
    without = {**body, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert usage.estimate(json.dumps(with_image).encode(), with_image, 0) - usage.estimate(
        json.dumps(without).encode(), without, 0
    ) == pytest.approx(IMAGE_TOKENS, abs=100)  # 400 KB of base64 as count_tokens counts an image


def test_concurrent_calls_cannot_multiply_a_token_limit(limited, fake, redis_server):
    """60 calls at once of 500 tokens against 1,000 a day: each admitted one reserves about 510
    until it ends, so the third finds the day's tokens in flight and is refused; once answered,
    the day counts what the upstream reported."""
    live = limited("team-a tpd=1000")
    fake.default = json_reply(CHAT_500)
    fake.default.delay_headers = 1.0  # every call is in flight before the first is answered
    with concurrent.futures.ThreadPoolExecutor(60) as pool:
        answers = list(pool.map(lambda _: post(live, *FIVE_HUNDRED), range(60)))
    statuses = [answer.status_code for answer in answers]
    assert statuses.count(200) == 2 and statuses.count(429) == 58
    assert len(fake.requests) == 2
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert is_anthropic_error(refused, 429, "rate_limit_error") and "in flight" in refused.json()["error"]["message"]
    assert refused.headers["retry-after"] == "5"  # a call in flight ends soon: not tomorrow
    wait_for(lambda: today(redis_server, "team-a").get("requests") == "2", "the two answers counted")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert store(redis_server).get(f"bridge:tpd:team-a:{day}") == "1000"  # as reported, not as reserved
    assert held(redis_server) == 0


def test_a_reservation_is_released_when_the_upstream_fails(limited, fake, redis_server):
    live = limited("team-a tpd=1000")
    fake.reply(json_reply({"error": {"message": "down", "type": "server_error"}}, 500))
    big = {**FIVE_HUNDRED[1], "max_tokens": 990}  # reserves more than the whole day
    assert post(live, "/v1/messages", big).status_code == 500
    wait_for(lambda: held(redis_server) == 0, "the failed call's reservation released")
    fake.default = json_reply(CHAT_500)
    assert post(live, *FIVE_HUNDRED).status_code == 200
    day = time.strftime("%Y-%m-%d", time.gmtime())
    wait_for(lambda: store(redis_server).get(f"bridge:tpd:team-a:{day}") == "500", "the answer counted")


def test_a_call_refused_as_invalid_after_admission_counts_as_redis_said_and_holds_nothing(limited, fake, redis_server):
    """Admission's verdict is read once the call is translated. A body found invalid before
    then is the client's 400 all the same; what Redis said is still what counts: admitted, it
    is the client's request (rpm and `bridge usage` count it) and its reservation is released;
    refused, it counts as limited and as no request."""
    live = limited("team-a rpm=1 tpd=100000", BRIDGE_LOG_LEVEL="INFO")
    requested = lambda: metric(live, "bridge_client_requests_total", client="team-a")  # noqa: E731
    limited_count = lambda: metric(live, "bridge_client_limited_total", client="team-a")  # noqa: E731
    before = requested(), limited_count()
    invalid = {**FIVE_HUNDRED[1], "messages": [{"role": "robot", "content": "hi"}]}
    answer = post(live, "/v1/messages", invalid)
    assert is_anthropic_error(answer, 400, "invalid_request_error")
    counted(redis_server, 1)
    assert held(redis_server) == 0
    assert (requested() - before[0], limited_count() - before[1]) == (1, 0)
    with access_lines() as lines:  # the invalid call took the minute's one
        assert is_anthropic_error(post(live, *FIVE_HUNDRED), 429, "rate_limit_error")
        wait_for(lambda: lines, "the refusal's access line")
    assert lines[0]["status"] == 429 and lines[0]["deployment"] is None  # refused before one was chosen
    assert is_anthropic_error(post(live, "/v1/messages", invalid), 400, "invalid_request_error")
    wait_for(lambda: limited_count() - before[1] == 2, "both refusals counted")
    assert requested() - before[0] == 1 and today(redis_server, "team-a")["requests"] == "1"
    assert held(redis_server) == 0 and not fake.requests


def test_a_reservation_redis_made_after_its_timeout_is_released_all_the_same(limited, fake, redis_server):
    """Redis stopped (SIGSTOP) while a call is admitted: served (fail-open), not knowing whether
    its reservation was made; Redis goes on and makes it, late. The call's end releases it."""
    live = limited("team-a tpd=100000", BRIDGE_REDIS_TIMEOUT="0.5")
    fake.default = json_reply(CHAT_500)
    assert post(live, *FIVE_HUNDRED).status_code == 200  # Redis has the admission's script now
    counted(redis_server, 1)
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        assert post(live, *FIVE_HUNDRED).status_code == 200
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    counted(redis_server, 2)
    # Redis usually runs the timed-out script once it goes on (the rpm count says so); whether
    # it did or not, nothing stays held.
    assert held(redis_server) == 0


def request_of(client):
    record = Record()
    record.client = client
    return record


def test_a_reservation_never_settled_lapses(redis_server):
    """A worker killed mid-call never settles its reservation: it goes after
    usage.RESERVATION_SECONDS, as if settled with nothing."""
    settings = load(BRIDGE_CLIENT_LIMITS="team-a tpd=1000", BRIDGE_REDIS_URL=redis_server.url)
    accounts = usage.Accounts(settings, routes.load(settings))
    long_ago = time.time() - usage.RESERVATION_SECONDS - 1
    call = (b"", {"max_tokens": 1000})  # reserves 1000 tokens
    accounts.admit(request_of("team-a"), call, now=long_ago)  # its worker died then
    accounts.admit(request_of("team-a"), call)  # that reservation is over: admitted
    with pytest.raises(BridgeError, match="in flight"):
        accounts.admit(request_of("team-a"), call)


# -- the writer: counts off the request's path ----------------------------------------------------


def counts_of(client, admitted=True):
    """One request's counts as Accounts.finished puts them on the writer's queue."""
    used = {"input": 30, "output": 7, "cache_read": 0, "cache_write": 0}
    spent = {"input": 30, "output": 7}
    return usage.Counted(client, client, None, "claude-x", used, spent, 10, time.time(), admitted, None)


def writer_of(redis_server):
    settings = load(BRIDGE_REDIS_URL=redis_server.url)
    return usage.Accounts(settings, routes.load(settings)).writer


def test_a_lone_count_is_written_within_the_gather_not_when_more_come_or_at_exit(redis_server):
    """The writer waits usage.GATHER_SECONDS for counts to send with the first, then writes
    them: a count with none after it is in Redis in that time (within a second on a loaded
    VM: the rule is every 100 ms), not when the batch is full nor when the worker stops."""
    writer = writer_of(redis_server)
    put = time.monotonic()
    writer.put(counts_of("team-a"))
    wait_for(lambda: today(redis_server, "team-a").get("requests") == "1", "the count written", timeout=5)
    assert time.monotonic() - put < 1.0
    writer.close()


def test_a_full_queue_drops_and_counts_what_it_drops_and_nothing_twice(redis_server, monkeypatch):
    """Counts put faster than the writer takes them (its queue of usage.QUEUED, here 4) are
    dropped and counted in bridge_usage_dropped_total; every other one is written, once."""
    monkeypatch.setattr(usage, "QUEUED", 4)
    dropped = lambda: usage.DROPPED.labels("queue_full")._value.get()  # noqa: E731
    before = dropped()
    writer = writer_of(redis_server)
    for _ in range(100):
        writer.put(counts_of("team-b"))
    writer.close()
    written = int(today(redis_server, "team-b").get("requests", 0))
    assert dropped() - before > 0
    assert written + dropped() - before == 100


def test_a_count_that_cannot_be_written_is_dropped_counted_and_the_writer_goes_on(redis_server):
    """A batch the writer cannot write for another reason than Redis (here a count that is not
    a number) is dropped, counted as an error and logged; the counts after it are written."""
    dropped = lambda: usage.DROPPED.labels("error")._value.get()  # noqa: E731
    before = dropped()
    writer = writer_of(redis_server)
    bad = counts_of("team-d")
    writer.put(bad._replace(used={**bad.used, "input": "thirty"}))
    wait_for(lambda: dropped() - before == 1, "the bad batch dropped and counted", timeout=5)
    writer.put(counts_of("team-d"))
    wait_for(lambda: today(redis_server, "team-d").get("requests") == "1", "the next count written", timeout=5)
    writer.close()


def test_a_batch_counts_as_each_of_its_requests_would_alone(redis_server):
    """Counts summed by key in one script call (usage._Tally) write what each request's own
    call would: the same usage hash, token windows, spend by user and key, and budgets."""
    settings = load(BRIDGE_REDIS_URL=redis_server.url, BRIDGE_MAX_USERS_PER_KEY="1")
    accounts = usage.Accounts(settings, routes.load(settings))
    first, second = counts_of("team-a"), counts_of("team-a")
    other_user = second._replace(user="bob", micros=None)  # a second user past the cap of 1: `other`
    batch = [first._replace(user="ann"), second._replace(user="ann"), other_user, counts_of("team-b", admitted=False)]
    accounts.store(batch)
    for counted in batch[:3]:
        accounts.store([counted._replace(client="team-c", team="team-c")])
    spend = store(redis_server).hgetall(usage.spend_key(time.time()))
    for client in ("team-a", "team-c"):
        assert today(redis_server, client) == {"requests": "3", "input": "90", "output": "21"}
        own_day = store(redis_server).hgetall(usage.key_spend_keys(client, time.time())[0])
        assert own_day == {
            "claude-x|requests": "3",
            "claude-x|input": "90",
            "claude-x|output": "21",
            "claude-x|micros": "20",
            "claude-x|unpriced": "1",
        }
        mine = {field.split("|", 2)[2]: value for field, value in spend.items() if field.startswith(client + "|")}
        assert mine == {
            "ann|claude-x|requests": "2",
            "ann|claude-x|input": "60",
            "ann|claude-x|output": "14",
            "ann|claude-x|micros": "20",
            "other|claude-x|requests": "1",
            "other|claude-x|input": "30",
            "other|claude-x|output": "7",
            "other|claude-x|unpriced": "1",
        }
        minute = f"bridge:tpm:{client}:{int(time.time() // 60)}"
        assert store(redis_server).get(minute) == "111"
        ann = usage.budget_keys("user", "ann", time.time())[2]  # a user budget: both keys' ann
        assert store(redis_server).get(ann) == "40"
    assert today(redis_server, "team-b") == {}


def test_a_batch_after_redis_lost_its_scripts_gives_them_again_and_is_written_once(redis_server):
    settings = load(BRIDGE_REDIS_URL=redis_server.url)
    accounts = usage.Accounts(settings, routes.load(settings))
    accounts.store([counts_of("team-e")])
    store(redis_server).script_flush()
    accounts.store([counts_of("team-e")])
    assert today(redis_server, "team-e")["requests"] == "2"


def test_a_batch_across_midnight_counts_each_request_in_its_own_minute_day_and_month(redis_server):
    """A batch's counts on both sides of a minute, a day and a month go to the windows of each
    request's own time, though usage._Tally names a client's keys once a batch for each minute."""
    settings = load(BRIDGE_REDIS_URL=redis_server.url)
    accounts = usage.Accounts(settings, routes.load(settings))
    midnight = calendar.timegm((2026, 12, 1, 0, 0, 0))  # a month starts
    before, after = midnight - 0.5, midnight + 0.5
    counts = counts_of("team-a")
    accounts.store([counts._replace(when=when) for when in (before, after, after + 1, before)])
    redis_store = store(redis_server)
    for when in (before, after):  # two requests each side
        assert redis_store.get(f"bridge:tpm:team-a:{int(when // 60)}") == "74"
        assert redis_store.get(f"bridge:tpd:team-a:{usage.day(when)}") == "74"
        assert redis_store.hget(usage.usage_key("team-a", when), "requests") == "2"
        for own in usage.key_spend_keys("team-a", when):
            assert redis_store.hget(own, "claude-x|micros") == "20"
        assert redis_store.hget(usage.spend_key(when), "team-a|team-a|-|claude-x|requests") == "2"
        _, _, spent_today, spent_this_month = usage.budget_keys("key", "team-a", when)
        assert redis_store.get(spent_today) == redis_store.get(spent_this_month) == "20"


# -- what counts as a request -----------------------------------------------------------------------


def test_only_admitted_requests_count_as_requests(limited, redis_server):
    """A request refused by a client limit counts in bridge_client_limited_total only: not in
    `bridge usage`'s requests nor in bridge_client_requests_total, as rpm does not count it."""
    live = limited("team-a rpm=1")
    requested = lambda: metric(live, "bridge_client_requests_total", client="team-a")  # noqa: E731
    limited_count = lambda: metric(live, "bridge_client_limited_total", client="team-a")  # noqa: E731
    before = requested(), limited_count()
    assert call(live, "chat").status_code == 200
    assert call(live, "chat").status_code == 429
    counted(redis_server, 1)
    assert call(live, "anthropic").status_code == 429
    assert (requested() - before[0], limited_count() - before[1]) == (1, 2)
    assert today(redis_server, "team-a")["requests"] == "1"


def admits(accounts):
    """A function telling whether `accounts` admits one more of team-a's requests (fail-open
    admits one Redis did not check)."""

    def admitted():
        record = Record()
        record.client, record.model = "team-a", "claude-x"
        try:
            accounts.admit(record)
        except BridgeError:
            return False
        return record.admitted

    return admitted


def test_an_admission_that_timed_out_leaves_no_late_answer_for_the_next(redis_server):
    """After an admission timed out (Redis busy), Redis still runs it and answers late; the next
    admission on that connection must read its own answer, not that one (a refusal would pass as
    admitted)."""
    loaded = load(BRIDGE_REDIS_URL=redis_server.url, BRIDGE_CLIENT_LIMITS="team-a rpm=3", BRIDGE_REDIS_TIMEOUT="0.2")
    admitted = admits(usage.Accounts(loaded, routes.load(loaded)))
    assert admitted()
    busy = (
        "local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1e6 + n[2] - s[2] > 6e5"
    )
    other = redis.Redis.from_url(redis_server.url)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(other.eval, busy, 0)
        time.sleep(0.1)
        assert admitted()  # timed out: served (fail-open); Redis counts it late, the second
        running.result()
    assert [admitted() for _ in range(3)] == [True, False, False]


def test_an_admission_after_redis_restarted_connects_again_and_is_checked(redis_server):
    """Redis restarted between two admissions, closing the connection the first used: the next
    connects again before it sends, and is counted and checked, not failed and served unchecked."""
    loaded = load(BRIDGE_REDIS_URL=redis_server.url, BRIDGE_CLIENT_LIMITS="team-a rpm=1")
    admitted = admits(usage.Accounts(loaded, routes.load(loaded)))
    errors = lambda: usage.REDIS_ERRORS.labels("admit")._value.get()  # noqa: E731
    before = errors()
    assert admitted()
    redis_server.stop()
    redis_server.start()  # empty: the minute counts from 0 again
    assert [admitted(), admitted()] == [True, False]
    assert errors() == before


def test_an_admission_after_redis_lost_its_scripts_gives_it_again_and_is_checked(redis_server):
    """Redis forgets the admission script (SCRIPT FLUSH; a restart too): the next admission gives
    it again and is counted and checked, not served unchecked as when Redis is away."""
    loaded = load(BRIDGE_REDIS_URL=redis_server.url, BRIDGE_CLIENT_LIMITS="team-a rpm=2")
    admitted = admits(usage.Accounts(loaded, routes.load(loaded)))
    errors = lambda: usage.REDIS_ERRORS.labels("admit")._value.get()  # noqa: E731
    before = errors()
    assert admitted()
    store(redis_server).script_flush()
    assert [admitted(), admitted()] == [True, False]
    assert errors() == before


# -- admitted ahead of Redis's verdict (BRIDGE_ADMIT_AHEAD) -----------------------------------------


def ahead_accounts(redis_server, limits, ahead="0.5"):
    loaded = load(
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_CLIENT_LIMITS=limits,
        BRIDGE_ADMIT_AHEAD=ahead,
        BRIDGE_REDIS_FAILURE="closed",  # a call that waits for a Redis that does not answer is refused
        BRIDGE_REDIS_TIMEOUT="5",
    )
    return usage.Accounts(loaded, routes.load(loaded))


def requests_counted(redis_server, client="team-a"):
    return int(store(redis_server).get(f"bridge:rpm:{client}:{int(time.time() // 60)}") or 0)


def ahead_verdicts(verdict, client="team-a"):
    return usage.ADMITTED_AHEAD.labels(client, verdict)._value.get()


def test_a_client_far_from_its_limits_is_admitted_without_waiting_and_counted_all_the_same(redis_server):
    """Redis said the client used little of its limit: its next calls are admitted at once, even
    while Redis does not answer, up to usage.AHEAD_MOST in flight; their admissions reach Redis
    from the writer, each counted once, and the call past the bound waits for them and for its
    own verdict."""
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a rpm=1000")
    admitted = admits(accounts)
    before = ahead_verdicts("admitted")
    assert admitted()  # the first waits: Redis has said nothing of the client yet
    store(redis_server).execute_command("CLIENT", "PAUSE", "2000", "ALL")
    started = time.monotonic()
    assert all(admitted() for _ in range(usage.AHEAD_MOST))
    assert time.monotonic() - started < 1, "a call far from its limits waited for Redis"
    assert admitted()  # past AHEAD_MOST in flight: judged by Redis once it answers again
    assert time.monotonic() - started > 1, "the call past AHEAD_MOST did not wait for Redis"
    wait_for(lambda: ahead_verdicts("admitted") - before == usage.AHEAD_MOST, "the calls gone ahead judged")
    assert requests_counted(redis_server) == 1 + usage.AHEAD_MOST + 1
    accounts.writer.close()


def test_a_client_near_its_limit_waits_for_redis_and_gets_exactly_its_limit(redis_server):
    """Calls go ahead only while the client and its calls in flight stay under half of every
    limit; the calls after wait for those to be judged, then for their own verdict: a worker
    admits exactly the limit."""
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a rpm=10")
    admitted = admits(accounts)
    before = ahead_verdicts("admitted")
    assert [admitted() for _ in range(12)] == [True] * 10 + [False] * 2
    assert ahead_verdicts("admitted") - before > 0  # some went ahead
    assert requests_counted(redis_server) == 10
    accounts.writer.close()


def test_calls_still_waiting_for_their_verdicts_leave_no_room_to_go_ahead(redis_server):
    """A call's verdict is read after its translation: of eight sent at once against rpm=10, the
    one read first says 1 of 10, but the seven still waiting count too, so no call goes ahead of
    Redis past the limit and the worker admits exactly 10."""
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a rpm=10")
    store(redis_server).script_load(usage._ADMIT)  # each runs as it is sent (none answered NOSCRIPT)
    before = ahead_verdicts("requests_per_minute")
    waiting = [request_of("team-a") for _ in range(8)]
    for record in waiting:
        record.model = "claude-x"
        accounts.ask(record)
    accounts.decide(waiting[0])
    admitted = admits(accounts)
    assert [admitted() for _ in range(3)] == [True, True, False]
    for record in waiting[1:]:
        accounts.decide(record)
    assert all(record.admitted for record in waiting)
    assert requests_counted(redis_server) == 10
    accounts.writer.close()
    assert ahead_verdicts("requests_per_minute") == before


def test_a_call_gone_ahead_that_redis_finds_over_the_limit_is_counted_and_the_next_waits(redis_server, monkeypatch):
    """Another worker took the rest of the limit before this worker's call gone ahead was judged:
    Redis refuses that admission (the call was served: one past the limit, the bound), it counts in
    bridge_client_admitted_ahead_total under the limit, and this worker's next call waits for its
    verdict, a refusal."""
    fresh_minute(10)
    monkeypatch.setattr(usage, "AHEAD_GATHER_SECONDS", 1.0)  # a call gone ahead is judged a second later
    this = ahead_accounts(redis_server, "team-a rpm=50")
    other = ahead_accounts(redis_server, "team-a rpm=50", ahead="0")  # waits for every verdict
    before = ahead_verdicts("requests_per_minute")
    assert admits(this)()  # 1 of 50: this worker may let calls go ahead
    assert admits(this)()  # gone ahead, not judged yet
    assert all(admits(other)() for _ in range(49))  # 50 of 50 as Redis counts
    wait_for(lambda: ahead_verdicts("requests_per_minute") - before == 1, "the call gone ahead refused late")
    assert not admits(this)()
    assert requests_counted(redis_server) == 50
    this.writer.close()


def test_calls_gone_ahead_are_counted_and_hold_nothing_once_answered(limited, redis_server):
    """Served calls admitted before their verdict count in the minute's requests and tokens as
    any other, and release what they reserved once answered: each one's admission reaches Redis
    before its count settles it (a reservation left would hold the client's tokens for
    usage.RESERVATION_SECONDS)."""
    live = limited("team-a rpm=1000 tpm=10000000", BRIDGE_ADMIT_AHEAD="0.5")
    before = metric(live, "bridge_client_admitted_ahead_total", client="team-a", verdict="admitted")
    assert all(post(live, *FIVE_HUNDRED).status_code == 200 for _ in range(10))
    counted(redis_server, 10)
    assert metric(live, "bridge_client_admitted_ahead_total", client="team-a", verdict="admitted") - before > 0
    assert held(redis_server) == 0
    assert requests_counted(redis_server) == 10
    minute = int(time.time() // 60)
    assert int(store(redis_server).get(f"bridge:tpm:team-a:{minute}")) == 10 * CHAT_ANSWER["usage"]["total_tokens"]


def test_a_batch_that_cannot_be_written_leaves_no_call_gone_ahead_waiting(redis_server):
    """A call gone ahead whose admission is in a batch dropped for a bad count is no longer
    counted as waiting for its verdict: left so, it would hold the client's room to go ahead,
    and make its calls near a limit wait, for ever."""
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a rpm=1000")
    admitted = admits(accounts)
    assert admitted()  # Redis has said what the client used: the next may go ahead
    bad = counts_of("team-a")
    accounts.writer.put(bad._replace(used={**bad.used, "input": "thirty"}))
    assert admitted()  # gone ahead: its admission in the bad count's batch
    standing = accounts._standings["team-a"]
    wait_for(lambda: standing.calls == 0 and standing.waiting < 1e-9, "nothing left waiting")
    accounts.writer.close()


def test_a_call_that_used_more_than_it_reserved_lets_no_call_go_ahead_on_what_redis_said_before(redis_server):
    """A call's reservation is its estimate; one that used far more (output past
    BRIDGE_RESERVE_OUTPUT_TOKENS) makes what Redis said before it of no use to go ahead on: the
    next call waits for a verdict that counts it, and is refused as before."""
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a tpm=100000")
    first = request_of("team-a")
    first.model = "claude-x"
    accounts.admit(first, (b"{}", {"max_tokens": 8000}))  # reserves about 8,000 of 100,000
    first.tokens = (10, 120000)  # and used 120,010
    first.written = meters.Batch()  # Record.finish's, for the request's metric writes
    accounts.finished(first)
    wait_for(lambda: held(redis_server) == 0, "its count written, its reservation settled")
    with pytest.raises(BridgeError, match="tokens"):
        accounts.admit(request_of("team-a"), (b"{}", {"max_tokens": 8000}))
    accounts.writer.close()


def test_without_admit_ahead_every_call_waits_for_its_verdict(redis_server):
    fresh_minute(10)
    accounts = ahead_accounts(redis_server, "team-a rpm=1000", ahead="0")
    before = ahead_verdicts("admitted")
    admitted = admits(accounts)
    assert all(admitted() for _ in range(20))
    assert ahead_verdicts("admitted") == before
    assert requests_counted(redis_server) == 20
