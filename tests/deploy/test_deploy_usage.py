"""Client limits across processes, and the `bridge` commands that show Redis and usage: two
gunicorn servers (as on two VMs) sharing one redis-server, the installed console script."""

import os
import subprocess

import pytest
import requests

from bench.limits import fresh_minute
from bench.processes import RedisServer
from tests.fake_upstream import json_reply, message
from tests.helpers.programs import program
from tests.helpers.servers import bridge_env, gunicorn

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
        assert PASSWORD not in servers[0].log() + servers[1].log()
    finally:
        for server in servers:
            server.stop()


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
