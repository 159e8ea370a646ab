"""Client limits across processes, and the `bridge` commands that show Redis and usage: two
gunicorn servers (as on two VMs) sharing one redis-server, the installed console script."""

import os
import signal
import subprocess
import time

import pytest
import redis
import requests

from bench.limits import fresh_minute
from bench.processes import RedisServer
from bridge.policy import usage
from tests.fake_upstream import json_reply, message
from tests.helpers.programs import program
from tests.helpers.servers import bridge_env, gunicorn, metric, openai_client

PASSWORD = "redis-pass-never-printed"
KEYS = "team-a:sk-team-a,team-b:sk-team-b"
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = message("hi", {"input_tokens": 30, "output_tokens": 7})


@pytest.fixture
def guarded_redis(tmp_path):
    program("redis-server")
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    yield server
    server.stop()


def chat(url, key="sk-team-a"):
    return requests.post(
        f"{url}/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}, timeout=30
    )


def test_limits_hold_across_two_gunicorn_servers_sharing_redis(tmp_path, fake, installed_bridge, guarded_redis):
    fake.default = json_reply(ANSWER)
    env = {"BRIDGE_CLIENT_KEYS": KEYS, "BRIDGE_REDIS_URL": guarded_redis.url, "BRIDGE_CLIENT_LIMITS": "team-a rpm=5"}
    servers = [gunicorn(tmp_path / name, fake, site=installed_bridge, BRIDGE_WORKERS="2", **env) for name in "ab"]
    try:
        fresh_minute(15)  # the ten calls inside one minute window
        statuses = [chat(servers[n % 2].url).status_code for n in range(10)]
        assert sorted(statuses) == [200] * 5 + [429] * 5
        assert len(fake.requests) == 5
        assert chat(servers[0].url, "sk-team-b").status_code == 200
    finally:
        for server in servers:
            server.stop()
    assert PASSWORD not in servers[0].log() + servers[1].log()  # every line written, the access lines too


@pytest.fixture
def bridge_command(installed_bridge, fake):
    """The installed `bridge` console script with only these settings."""

    def run(*args, **env):
        result = subprocess.run(
            [str(installed_bridge / "bin" / "bridge"), *args],
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(installed_bridge), **bridge_env(fake, **env)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.returncode, result.stdout, result.stderr

    return run


def test_check_reports_redis_with_its_password_masked(bridge_command, fake, guarded_redis):
    fake.default = json_reply({"object": "list", "data": []})
    status, out, err = bridge_command("check", BRIDGE_REDIS_URL=guarded_redis.url)
    assert status == 0, out + err
    assert f"redis://:***@127.0.0.1:{guarded_redis.port}/0 -> reachable" in out
    guarded_redis.stop()
    status, out, err = bridge_command("check", BRIDGE_REDIS_URL=guarded_redis.url)
    assert status == 1 and "-> unreachable (" in out and "failing: redis" in out
    assert PASSWORD not in out + err


def test_check_reports_a_refused_password(bridge_command, fake, guarded_redis):
    fake.default = json_reply({"object": "list", "data": []})
    wrong = guarded_redis.url.replace(PASSWORD, "wrong-password")
    status, out, err = bridge_command("check", BRIDGE_REDIS_URL=wrong)
    assert status == 1 and "-> unreachable (" in out and "wrong-password" not in out + err


def test_usage_prints_todays_counts_per_client(tmp_path, fake, installed_bridge, guarded_redis, bridge_command):
    fake.default = json_reply(ANSWER)
    server = gunicorn(
        tmp_path / "g", fake, site=installed_bridge, BRIDGE_CLIENT_KEYS=KEYS, BRIDGE_REDIS_URL=guarded_redis.url
    )
    try:
        assert [
            chat(server.url).status_code,
            chat(server.url).status_code,
            chat(server.url, "sk-team-b").status_code,
        ] == [200] * 3
    finally:
        server.stop()  # a request's counts are written when its answer has ended
    status, out, err = bridge_command("usage", BRIDGE_REDIS_URL=guarded_redis.url)
    assert status == 0, err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows == {"team-a": ["2", "60", "14", "0", "0"], "team-b": ["1", "30", "7", "0", "0"]}
    status, out, _ = bridge_command("usage", "--client", "team-b", BRIDGE_REDIS_URL=guarded_redis.url)
    assert status == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["team-b"]


def test_usage_needs_redis(bridge_command):
    status, _, err = bridge_command("usage")
    assert status == 2 and "set BRIDGE_REDIS_URL" in err


# -- counting off the request's path ---------------------------------------------------------------


@pytest.fixture
def counting(tmp_path, fake, installed_bridge, redis_server):
    """One gunicorn worker with a client limit and usage in the test's Redis."""
    fake.default = json_reply(ANSWER)
    fresh_minute(30)
    servers = []

    def start(**env):
        settings = {"BRIDGE_CLIENT_KEYS": KEYS, "BRIDGE_REDIS_URL": redis_server.url, "BRIDGE_WORKERS": "1", **env}
        servers.append(gunicorn(tmp_path / str(len(servers)), fake, site=installed_bridge, **settings))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def requests_counted(server):
    """Today's requests of team-a in Redis."""
    counts = redis.Redis.from_url(server.url, decode_responses=True).hgetall(usage.usage_key("team-a", time.time()))
    return int(counts.get("requests", 0))


def test_a_hung_redis_costs_a_call_one_timeout_not_two(counting, redis_server):
    """Redis stopped (SIGSTOP): a call waits BRIDGE_REDIS_TIMEOUT for its admission and is served
    (fail-open). The previous answer's count must not add a second wait before gunicorn reads the
    next request on the same kept-alive connection. The counts queued meanwhile reach Redis once
    it is back, or count as dropped; none twice."""
    timeout = 0.5
    server = counting(BRIDGE_CLIENT_LIMITS="team-a rpm=1000", BRIDGE_REDIS_TIMEOUT=str(timeout))
    client = openai_client(server.url, api_key="sk-team-a")  # one httpx client: one kept-alive connection

    def timed_calls():
        took = []
        for _ in range(20):
            start = time.monotonic()
            client.chat.completions.create(**CHAT)
            took.append(time.monotonic() - start)
        return sorted(took)

    baseline = timed_calls()
    server.wait_for(lambda: requests_counted(redis_server) == 20, "the first 20 counted")
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        hung = timed_calls()
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    assert hung[10] < baseline[10] + 1.5 * timeout, (baseline, hung)  # two waits: 2 x timeout
    assert hung[-1] < baseline[-1] + 2 * timeout, (baseline, hung)
    dropped = lambda: metric(server, "bridge_usage_dropped_total")  # noqa: E731
    server.wait_for(lambda: requests_counted(redis_server) + dropped() >= 40, "every count stored or dropped")
    assert requests_counted(redis_server) <= 40


def test_counts_queued_when_the_worker_stops_are_written(counting, redis_server):
    """While Redis is away, counts wait in the worker's queue (the writer asks Redis every
    usage.AWAY_RETRY_SECONDS whether it is back); a worker told to stop (SIGTERM) writes them
    before it exits, not only at the writer's next try."""
    server = counting()
    redis_server.stop()
    assert chat(server.url).status_code == 200  # its count's write fails: dropped, and Redis is away
    server.wait_for(lambda: metric(server, "bridge_usage_dropped_total") == 1, "the first count dropped")
    assert [chat(server.url).status_code, chat(server.url).status_code] == [200, 200]  # these wait
    redis_server.start()
    server.stop()
    assert requests_counted(redis_server) == 2
