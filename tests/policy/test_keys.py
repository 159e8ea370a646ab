"""Client keys held in Redis (bridge/policy/keys.py), managed live with `bridge keys` on two
gunicorn instances sharing one redis-server: a change on one is seen by the other within a
second, without a reload."""

import json
import subprocess
import sys
import time

import anthropic
import openai
import pytest
import redis

from bench.processes import wait_for
from tests.fake_upstream import json_reply, message
from tests.helpers.servers import anthropic_client, gunicorn, openai_client

BRIDGE = f"{sys.prefix}/bin/bridge"
HI = [{"role": "user", "content": "hi"}]
SECOND = 1.0  # the most a change may take to reach every worker


def keys(redis_server, *args):
    """`bridge keys ...` as an operator runs it; its output (a new key) or the error it printed."""
    run = subprocess.run(
        [BRIDGE, "keys", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "BRIDGE_REDIS_URL": redis_server.url, "BRIDGE_REDIS_KEYS": "true"},
        timeout=30,
    )
    return run.returncode, run.stdout.strip() or run.stderr.strip()


def status(live, key, model="claude-x"):
    try:
        anthropic_client(live.url, api_key=key).messages.create(model=model, max_tokens=16, messages=HI)
    except anthropic.APIStatusError as error:
        return error.status_code, error.body["error"]["message"]
    return 200, ""


def within_a_second(condition, what):
    """Wait for `condition`, and say how long it took: at most SECOND."""
    start = time.monotonic()
    wait_for(condition, what, timeout=5)
    took = time.monotonic() - start
    assert took <= SECOND + 0.5, f"{what} took {took:.2f}s"  # a poll's half second, and the calls' own
    return took


@pytest.fixture
def two(tmp_path, fake, redis_server):
    fake.default = lambda recorded: json_reply(message("hi", {"input_tokens": 3, "output_tokens": 2}))
    settings = {
        "BRIDGE_CLIENT_KEYS": "file-key:sk-file team=ops",
        "BRIDGE_REDIS_URL": redis_server.url,
        "BRIDGE_REDIS_KEYS": "true",
        "BRIDGE_ANTHROPIC_BASE_URL": fake.url,
        "BRIDGE_ROUTES": json.dumps(
            {
                "routes": [
                    {
                        "models": ["claude-*", "gpt-*"],
                        "deployments": [{"name": "a", "protocol": "anthropic", "base_url": fake.url}],
                    }
                ]
            }
        ),
        "BRIDGE_WORKERS": "2",
    }
    servers = [gunicorn(tmp_path / name, fake, **settings) for name in "ab"]
    yield servers
    for server in servers:
        server.stop()


def test_a_key_created_on_one_instance_works_on_the_other_within_a_second_and_revoked_likewise(two, redis_server):
    a, b = two
    code, key = keys(redis_server, "create", "alice", "--team", "platform")
    assert code == 0 and key.startswith("sk-bridge-")
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    assert key not in json.dumps(store.hgetall("bridge:keys"))  # only its digest is stored
    within_a_second(lambda: all(status(server, key)[0] == 200 for server in (a, b) for _ in range(4)), "the key works")
    assert status(a, "sk-file")[0] == 200  # the file's keys still work

    assert keys(redis_server, "revoke", "alice")[0] == 0
    within_a_second(lambda: all(status(server, key)[0] == 401 for server in (a, b) for _ in range(4)), "revoked")
    assert "this API key (alice) was revoked" in status(b, key)[1]


def test_rotation_keeps_the_old_key_for_its_grace_and_disable_stops_a_key_until_enabled(two, redis_server):
    a, b = two
    _, old = keys(redis_server, "create", "ci", "--team", "platform")
    code, new = keys(redis_server, "rotate", "ci", "--grace", "3")
    assert code == 0 and new != old
    within_a_second(lambda: status(b, new)[0] == 200, "the new key works")
    assert status(a, old)[0] == 200  # in its grace
    wait_for(lambda: status(a, old)[0] == 401, "the grace ended", timeout=10)
    assert "was rotated and its grace period ended" in status(b, old)[1]
    assert status(b, new)[0] == 200

    keys(redis_server, "disable", "ci")
    within_a_second(lambda: status(a, new)[0] == 401, "disabled")
    keys(redis_server, "enable", "ci")
    within_a_second(lambda: status(a, new)[0] == 200, "enabled")


def test_allow_and_deny_globs_are_a_403_naming_the_model_in_either_protocol(two, redis_server, fake):
    a, _ = two
    _, key = keys(redis_server, "create", "dev", "--models", "claude-*,gpt-5*", "--deny", "claude-opus*")
    wait_for(lambda: status(a, key)[0] == 200, "the key works")
    assert status(a, key, "claude-opus-5") == (403, "this API key (dev) may not use model 'claude-opus-5'")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        openai_client(a.url, api_key=key).chat.completions.create(model="gpt-4o", messages=HI)
    assert refused.value.body["type"] == "permission_error" and "'gpt-4o'" in refused.value.message
    assert status(a, key, "gpt-5.5")[0] == 200
    called = len(fake.requests)
    status(a, key, "claude-opus-5")
    assert len(fake.requests) == called  # refused before anything goes upstream


def test_an_expired_key_is_a_401_and_file_keys_import(two, redis_server):
    a, _ = two
    _, key = keys(redis_server, "create", "temp", "--expires", "2020-01-01")
    wait_for(lambda: status(a, key)[0] == 401, "refused")
    assert "this API key (temp) expired at 2020-01-01T00:00:00Z" in status(a, key)[1]
    assert keys(redis_server, "create", "temp")[0] == 2  # one name, one key
    run = subprocess.run(
        [BRIDGE, "keys", "import"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "BRIDGE_REDIS_URL": redis_server.url, "BRIDGE_CLIENT_KEYS": "imp:sk-imp team=x"},
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    code, shown = keys(redis_server, "show", "imp")
    assert code == 0 and json.loads(shown)["team"] == "x"
