"""`bridge check`: the settings as the service will see them, no secret printed, each upstream tried."""

import json
import os
import subprocess

import pytest

from bench.processes import free_port
from tests.fake_upstream import json_reply
from tests.helpers.servers import bridge_env

UPSTREAM_KEY = "sk-upstream-key-never-printed"
CLIENT_KEY = "sk-client-key-never-printed"


@pytest.fixture
def check(installed_bridge):
    """`bridge check` as installed (the console script setup.cfg declares), with only `env` set."""

    def run(offline=False, **env):
        result = subprocess.run(
            [str(installed_bridge / "bin" / "bridge"), "check", *(["--offline"] if offline else [])],
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(installed_bridge), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.returncode, result.stdout, result.stderr

    return run


def test_a_bad_setting_exits_2_naming_it(check):
    status, out, err = check(BRIDGE_READ_TIMEOUT="soon")
    assert status == 2 and "BRIDGE_READ_TIMEOUT" in err and out == ""


def test_settings_are_printed_with_keys_only_as_set_or_unset(check, fake):
    fake.reply(json_reply({"object": "list", "data": []}), json_reply({"data": [], "has_more": False}))
    status, out, _ = check(
        **bridge_env(fake, BRIDGE_OPENAI_API_KEY=UPSTREAM_KEY, BRIDGE_CLIENT_KEYS=f"team-a:{CLIENT_KEY}")
    )
    assert status == 0
    assert "openai_api_key = set" in out and "anthropic_api_key = unset" in out
    assert "client_keys = team-a" in out
    assert UPSTREAM_KEY not in out and CLIENT_KEY not in out


def test_each_upstream_is_asked_for_its_models_with_the_key_the_bridge_holds(check, fake):
    fake.reply(json_reply({"object": "list", "data": []}), json_reply({"data": [], "has_more": False}))
    status, out, _ = check(
        **bridge_env(fake, BRIDGE_ANTHROPIC_API_KEY=UPSTREAM_KEY, BRIDGE_CLIENT_KEYS=f"team-a:{CLIENT_KEY}")
    )
    assert [r.path for r in fake.requests] == ["/v1/models", "/v1/models"]
    assert fake.requests[1].headers["x-api-key"] == UPSTREAM_KEY
    assert status == 0 and out.count("reachable, HTTP 200") == 2


def test_an_unreachable_upstream_fails_the_check(check, fake):
    fake.reply(json_reply({"data": [], "has_more": False}))
    status, out, _ = check(**bridge_env(fake, BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1"))
    assert status == 1 and "unreachable (could not connect to the upstream: connection refused)" in out


@pytest.mark.parametrize("holds_key, expected_status", [(True, 1), (False, 0)])
def test_a_refused_key_fails_only_when_the_bridge_holds_it(check, fake, holds_key, expected_status):
    refused = json_reply({"error": {"message": "invalid key", "type": "authentication_error"}}, 401)
    fake.reply(refused, json_reply({"data": [], "has_more": False}))
    env = {"BRIDGE_OPENAI_API_KEY": UPSTREAM_KEY, "BRIDGE_ALLOW_OPEN_RELAY": "true"} if holds_key else {}
    status, out, _ = check(**bridge_env(fake, **env))
    assert status == expected_status and "HTTP 401" in out
    assert ("the key was refused" in out) == holds_key


def test_every_deployment_of_the_routes_is_probed_and_the_failing_ones_named(check, fake, tmp_path):
    fake.default = json_reply({"object": "list", "data": []})
    down = f"http://127.0.0.1:{free_port()}"
    document = {
        "routes": [
            {
                "models": ["gpt-4.1"],
                "deployments": [
                    {
                        "name": "azure-east",
                        "protocol": "openai-chat",
                        "base_url": f"{fake.url}/openai/deployments/gpt-41",
                        "query": {"api-version": "2024-10-21"},
                        "auth": "api-key",
                        "api_key_env": "AZURE_EAST_KEY",
                    },
                    {"name": "azure-west", "protocol": "openai-chat", "base_url": f"{down}/openai/v1"},
                ],
            }
        ]
    }
    routes_file = tmp_path / "routes.json"
    routes_file.write_text(json.dumps(document))
    status, out, _ = check(
        **bridge_env(
            fake,
            BRIDGE_ROUTES=str(routes_file),
            BRIDGE_CLIENT_KEYS=f"team-a:{CLIENT_KEY}",
            AZURE_EAST_KEY=UPSTREAM_KEY,
        )
    )
    assert status == 1 and out.splitlines()[-1] == "failing: azure-west"
    assert (
        f"azure-east (openai-chat, key set): GET {fake.url}/openai/deployments/gpt-41/models?api-version=***"
        " -> reachable, HTTP 200"
    ) in out
    assert "azure-west (openai-chat, key unset): GET" in out and "unreachable" in out
    assert "gpt-4.1 -> azure-east, azure-west" in out
    assert UPSTREAM_KEY not in out and CLIENT_KEY not in out
    (probe,) = [r for r in fake.requests if r.path.startswith("/openai/")]
    assert probe.headers["api-key"] == UPSTREAM_KEY and "authorization" not in probe.headers


def test_a_bad_routes_file_exits_2_naming_the_entry(check, fake):
    bad = json.dumps({"routes": [{"models": ["x"], "deployments": [{"name": "d", "protocol": "grpc"}]}]})
    status, out, err = check(**bridge_env(fake, BRIDGE_ROUTES=bad))
    assert status == 2 and 'routes[0] ("x").deployments[0] ("d"): protocol must be' in err and out == ""


SECRET = "s3cret-never-printed"


@pytest.mark.parametrize(
    "mistake",
    [
        {"BRIDGE_REDIS_URL": "redis://{secret}@127.0.0.1:{port}/0"},
        {"BRIDGE_REDIS_URL": "redis://:{secret}@127.0.0.1:{port}/0"},
        {"BRIDGE_REDIS_URL": "redis://127.0.0.1:{port}/0?password={secret}"},
        {"BRIDGE_REDIS_URL": "rediss://bridge:{secret}@127.0.0.1:{port}/0?ssl_cert_reqs=none"},
        {"BRIDGE_ROUTES": {"headers": {"Ocp-Apim-Subscription-Key": "{secret}"}}},
        {"BRIDGE_ROUTES": {"query": {"api-version": "2024-10-21", "sig": "{secret}"}}},
    ],
    ids=["user", "password", "redis-py query", "user and password", "route header", "route query"],
)
def test_no_secret_is_printed_whatever_an_operator_puts_where(check, fake, mistake):
    """A password in a Redis URL's user name or query, a key in an inline routes file's header or
    query: all printed masked (header and query values as ***), never as they are."""
    fake.default = json_reply({"object": "list", "data": []})
    (setting, value), port = next(iter(mistake.items())), str(free_port())
    if setting == "BRIDGE_ROUTES":
        deployment = {"name": "apim", "protocol": "openai-chat", "base_url": f"{fake.url}/openai", **value}
        value = json.dumps({"routes": [{"models": ["gpt-4.1"], "deployments": [deployment]}]})
    status, out, err = check(**bridge_env(fake, **{setting: value.replace("{secret}", SECRET).replace("{port}", port)}))
    assert status == (0 if setting == "BRIDGE_ROUTES" else 1)  # the Redis is unreachable
    assert SECRET not in out + err and "Traceback" not in err
    if setting == "BRIDGE_ROUTES":
        assert "routes_file = inline JSON" in out
        assert "apim (openai-chat, key unset" in out and "-> reachable" in out
    else:
        assert "redis_url = redis" in out and "***" in out


@pytest.mark.parametrize("url", ["redis://[::1:6379/0", "redis://[::1]:port/0", "redis://127.0.0.1:99999/0"])
def test_a_malformed_redis_url_is_one_line_not_a_traceback(check, fake, url):
    status, out, err = check(**bridge_env(fake, BRIDGE_REDIS_URL=url))
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.startswith("bridge: invalid setting: BRIDGE_REDIS_URL: ") and err.count("\n") == 1


def test_offline_only_validates_and_says_so_in_one_line(check, fake, tmp_path):
    status, out, err = check(
        **bridge_env(fake, BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1"), offline=True
    )
    assert (status, out, err) == (
        0,
        "bridge: configuration valid (0 routes, 2 deployments)\n",
        "",
    ) and not fake.requests
    status, out, err = check(**bridge_env(fake, BRIDGE_ROUTES=str(tmp_path / "none.json")), offline=True)
    assert status == 2 and out == "" and f"BRIDGE_ROUTES: cannot read {tmp_path / 'none.json'}" in err
