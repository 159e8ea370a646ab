"""The routes file (bridge/gateway/routes.py): what it accepts, what it refuses and how, and which
route a model name finds; the balancer (bridge/gateway/failover.py) on a clock the test turns."""

import json

import pytest

from bench.processes import ROOT
from bridge import settings as settings_module
from bridge.gateway import routes
from bridge.gateway.failover import Balancer
from bridge.gateway.routes import GENERATE
from bridge.protocols.errors import ANTHROPIC, OPENAI, BridgeError
from bridge.translate.model_map import map_model

AZURE = {
    "name": "azure-east",
    "protocol": "openai-chat",
    "base_url": "https://east.openai.azure.com/openai/deployments/gpt-41",
    "auth": "api-key",
    "api_key_env": "AZURE_EAST_KEY",
    "query": {"api-version": "2024-10-21"},
    "max_tokens": 32768,
}
CLAUDE = {"name": "claude", "protocol": "anthropic", "base_url": "https://api.anthropic.com"}
ENVIRON = {"AZURE_EAST_KEY": "azure-secret-1"}


def table(document, environ=ENVIRON, **settings):
    loaded = settings_module.load(
        {"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_ALLOW_OPEN_RELAY": "true", **settings}
    )
    return routes.load(loaded, environ)


def refused(document, environ=ENVIRON, **settings):
    with pytest.raises(settings_module.SettingsError) as caught:
        table(document, environ, **settings)
    return str(caught.value)


def test_a_route_names_its_deployments_with_key_query_and_cap():
    loaded = table({"routes": [{"models": ["gpt-4.1", "gpt-4.1-*"], "deployments": [AZURE]}]})
    route = loaded.route_for(ANTHROPIC, "gpt-4.1-mini")
    (deployment,) = route.deployments
    assert route.protocol == "openai-chat" and deployment.key == "azure-secret-1"
    assert deployment.url("/chat/completions") == (
        "https://east.openai.azure.com/openai/deployments/gpt-41/chat/completions?api-version=2024-10-21"
    )
    assert deployment.max_tokens == 32768
    assert "azure-secret-1" not in repr(loaded), "a key never reaches a repr"


def test_exact_names_win_over_patterns_and_patterns_go_in_file_order():
    loaded = table(
        {
            "routes": [
                {"models": ["claude-*"], "deployments": [CLAUDE]},
                {"models": ["claude-haiku-*", "claude-opus-5-5"], "deployments": [{**AZURE, "name": "local"}]},
            ]
        }
    )
    assert loaded.route_for(OPENAI, "claude-opus-5-5").deployments[0].name == "local"
    assert loaded.route_for(OPENAI, "claude-haiku-5-5").deployments[0].name == "claude"


def test_a_name_no_route_matches_goes_to_its_fronts_default_route():
    loaded = table({"routes": [{"models": ["gpt-4.1"], "deployments": [AZURE]}]})
    assert loaded.route_for(ANTHROPIC, "qwen3").deployments[0].name == "openai"
    assert loaded.route_for(OPENAI, "claude-sonnet-4-5").deployments[0].name == "anthropic"


def test_without_default_routes_an_unrouted_name_is_a_404_naming_it():
    loaded = table({"default_routes": False, "routes": [{"models": ["gpt-4.1"], "deployments": [AZURE]}]})
    with pytest.raises(BridgeError) as caught:
        loaded.route_for(OPENAI, "claude-sonnet-4-5")
    assert caught.value.status == 404 and "'claude-sonnet-4-5' has no route" in caught.value.message


def test_without_a_routes_file_the_old_settings_are_the_only_routes():
    loaded = routes.load(
        settings_module.load({"BRIDGE_OPENAI_BASE_URL": "http://vllm:8000/v1", "BRIDGE_OPENAI_MAX_TOKENS_CAP": "4096"})
    )
    deployment = loaded.route_for(ANTHROPIC, "anything").deployments[0]
    assert deployment.url("/chat/completions") == "http://vllm:8000/v1/chat/completions"
    assert deployment.max_tokens == 4096 and loaded.routes == ()


def test_a_deployment_without_a_model_sends_the_clients_name_and_one_with_a_model_sends_its_own():
    loaded = table({"routes": [{"models": ["a-*"], "deployments": [CLAUDE, {**CLAUDE, "name": "b", "model": "up"}]}]})
    first, second = loaded.route_for(OPENAI, "a-1").deployments
    assert map_model(first.settings.model_map, "a-1") == "a-1"
    assert map_model(second.settings.model_map, "a-1") == "up"


def test_the_per_upstream_switches_are_the_deployments_own():
    chat = {**AZURE, "max_tokens_param": "max_tokens", "stream_usage": False, "reasoning_effort": True}
    deployment = table({"routes": [{"models": ["x"], "deployments": [chat]}]}).routes[0].deployments[0]
    assert deployment.settings.openai_max_tokens_param == "max_tokens"
    assert deployment.settings.openai_stream_usage is False and deployment.settings.openai_reasoning_effort is True


def test_a_responses_deployment_authenticates_and_posts_as_openai_does():
    """OpenAI's Responses API shares its base URL with Chat (Azure's too, in either URL style)."""
    responses = {"name": "codex", "protocol": "openai-responses", "base_url": "https://api.openai.com/v1"}
    deployment = table({"routes": [{"models": ["x"], "deployments": [responses]}]}).routes[0].deployments[0]
    assert deployment.auth == "bearer"
    assert deployment.url(GENERATE[deployment.protocol]) == "https://api.openai.com/v1/responses"
    azure = {
        **responses,
        "base_url": "https://r.openai.azure.com/openai",
        "query": {"api-version": "2025-04-01-preview"},
    }
    deployment = table({"routes": [{"models": ["x"], "deployments": [azure]}]}).routes[0].deployments[0]
    assert deployment.url(GENERATE[deployment.protocol]) == (
        "https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview"
    )


def test_a_key_can_come_from_a_file(tmp_path):
    path = tmp_path / "key"
    path.write_text("file-secret\n")
    document = {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "api_key_file": str(path)}]}]}
    assert table(document).routes[0].deployments[0].key == "file-secret"


BAD = {
    "routes not an array": ({"routes": {}}, "BRIDGE_ROUTES: routes must be an array"),
    "unknown top-level field": ({"route": []}, "unknown field 'route'"),
    "route without models": ({"routes": [{"deployments": [CLAUDE]}]}, "routes[0]: models must be"),
    "route without deployments": ({"routes": [{"models": ["x"]}]}, 'routes[0] ("x"): deployments must be'),
    "deployment without a name": (
        {"routes": [{"models": ["x"], "deployments": [{"protocol": "anthropic"}]}]},
        'routes[0] ("x").deployments[0]: name is required',
    ),
    "unknown protocol": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "protocol": "grpc"}]}]},
        'routes[0] ("x").deployments[0] ("claude"): protocol must be one of openai-chat, anthropic, '
        "openai-responses, got 'grpc'",
    ),
    "a Chat switch on a Responses deployment": (
        {
            "routes": [
                {"models": ["x"], "deployments": [{**AZURE, "protocol": "openai-responses", "stream_usage": False}]}
            ]
        },
        '("azure-east"): stream_usage applies to openai-chat deployments only',
    ),
    "base URL with a key in it": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "base_url": "https://u:k@h"}]}]},
        '("claude"): base_url: must not carry credentials',
    ),
    "base URL with a query": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "base_url": "https://h/?api-version=1"}]}]},
        '("claude"): base_url: must not carry a query',
    ),
    "key in a header": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "headers": {"Authorization": "Bearer k"}}]}]},
        '("claude"): headers must not carry Authorization',
    ),
    "key in the query": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "query": {"api_key": "k"}}]}]},
        '("claude"): query must not carry a key',
    ),
    "key variable unset": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "api_key_env": "NOT_SET_HERE"}]}]},
        '("claude"): api_key_env names NOT_SET_HERE, which is not set',
    ),
    "key file missing": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "api_key_file": "/nonexistent/key"}]}]},
        '("claude"): api_key_file: cannot read /nonexistent/key:',
    ),
    "unknown auth style": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "auth": "basic"}]}]},
        '("claude"): auth must be one of bearer, api-key, x-api-key, none',
    ),
    "negative cap": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "max_tokens": -1}]}]},
        '("claude"): max_tokens must be a whole number',
    ),
    "switch on an Anthropic deployment": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "stream_usage": False}]}]},
        '("claude"): stream_usage applies to openai-chat deployments only',
    ),
    "prompt_cache on an OpenAI deployment": (
        {"routes": [{"models": ["x"], "deployments": [{**AZURE, "prompt_cache": "5m"}]}]},
        "prompt_cache applies to anthropic deployments only",
    ),
    "unknown prompt cache lifetime": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "prompt_cache": "24h"}]}]},
        '("claude"): prompt_cache must be one of off, 5m, 1h',
    ),
    "unknown capability": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "capabilities": {"vision": True}}]}]},
        "(\"claude\"): capabilities: unknown capability 'vision'",
    ),
    "unknown effort level": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "capabilities": {"efforts": ["extreme"]}}]}]},
        '("claude"): capabilities: efforts must be a list of low, medium, high, xhigh, max',
    ),
    "unknown deployment field": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "api_key": "sk-in-the-file"}]}]},
        "(\"claude\"): unknown field 'api_key'",
    ),
    "mixed protocols": (
        {"routes": [{"models": ["x"], "deployments": [CLAUDE, AZURE]}]},
        'routes[0] ("x"): all deployments of a route must speak one protocol',
    ),
    "a name used twice": (
        {"routes": [{"models": ["x"], "deployments": [CLAUDE]}, {"models": ["y"], "deployments": [CLAUDE]}]},
        "routes[1] (\"y\"): deployment name 'claude' is used twice",
    ),
    "a default route's name": (
        {"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "name": "openai"}]}]},
        "deployment name 'openai' is used twice",
    ),
    "negative cool-down": ({"cooldown_seconds": -1, "routes": []}, "cooldown_seconds: must be a number"),
}


@pytest.mark.parametrize("document, message", BAD.values(), ids=BAD.keys())
def test_a_bad_entry_stops_start_up_with_an_error_naming_it(document, message):
    assert message in refused(document)


def test_a_routes_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "routes.json"
    path.write_text("routes: []\n")
    assert f"BRIDGE_ROUTES {path}: invalid JSON" in refused({}, BRIDGE_ROUTES=str(path))
    missing = tmp_path / "none.json"
    assert f"BRIDGE_ROUTES: cannot read {missing}: No such file" in refused({}, BRIDGE_ROUTES=str(missing))


def test_a_deployment_holding_a_key_without_client_keys_is_an_open_relay():
    document = {"routes": [{"models": ["x"], "deployments": [AZURE]}]}
    loaded = settings_module.load({"BRIDGE_ROUTES": json.dumps(document)})
    with pytest.raises(settings_module.SettingsError, match="deployment azure-east holds an upstream key"):
        routes.load(loaded, ENVIRON)
    keyed = settings_module.load({"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "team:sk-1"})
    assert routes.load(keyed, ENVIRON).routes[0].deployments[0].key


# -- the balancer -----------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def route_of(*weights, tiers=None):
    deployments = tuple(
        routes.Deployment(name, "anthropic", "http://h", weight=weight, tier=tier)
        for name, weight, tier in zip("abc"[: len(weights)], weights, tiers or [1] * len(weights), strict=True)
    )
    return routes.Route("r", ("m",), "anthropic", deployments)


def test_weighted_round_robin_spreads_the_heavier_deployment():
    balancer, route = Balancer(30), route_of(5, 1, 1)
    firsts = "".join(balancer.order(route)[0].name for _ in range(7))
    assert firsts == "aabacaa"
    assert [d.name for d in balancer.order(route)] == ["a", "b", "c"], "the rest follow, in file order"


def test_a_deployment_cooling_down_is_tried_last_until_its_time_is_up():
    clock = Clock()
    balancer, route = Balancer(30, clock), route_of(1, 1)
    first = balancer.order(route)[0]
    balancer.cool_down(first)
    for _ in range(4):
        assert [d.name for d in balancer.order(route)][-1] == first.name
    clock.now += 30
    assert first.name in {balancer.order(route)[0].name for _ in range(2)}, "back in the rotation"


def test_when_every_deployment_cools_down_the_one_back_soonest_comes_first():
    clock = Clock()
    balancer, route = Balancer(30, clock), route_of(1, 1)
    a, b = route.deployments
    balancer.cool_down(b)
    clock.now += 1
    balancer.cool_down(a)
    assert [d.name for d in balancer.order(route)] == ["b", "a"]


def test_a_backup_tier_takes_no_call_while_a_deployment_before_it_is_ready():
    clock = Clock()
    balancer, route = Balancer(30, clock), route_of(1, 1, 1000, tiers=[1, 1, 2])
    a, b, c = route.deployments
    assert {balancer.order(route)[0].name for _ in range(50)} == {"a", "b"}, "its weight counts only in its tier"
    assert [d.name for d in balancer.order(route)][-1] == "c", "within a call, tried after its tier above"
    balancer.cool_down(a)
    assert {balancer.order(route)[0].name for _ in range(10)} == {"b"}
    balancer.cool_down(b)
    assert [d.name for d in balancer.order(route)] == ["c", "a", "b"], "the backup, then the soonest back"
    clock.now += 30
    assert {balancer.order(route)[0].name for _ in range(10)} == {"a", "b"}, "the tier above is back"


def test_a_tier_is_a_whole_number_from_one():
    deployment = table({"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "tier": 2}]}]}).routes[0].deployments[0]
    assert deployment.tier == 2
    with pytest.raises(settings_module.SettingsError, match=r'\("claude"\): tier must be a whole number of at least 1'):
        table({"routes": [{"models": ["x"], "deployments": [{**CLAUDE, "tier": 0}]}]})


def documented_routes(path, tmp_path):
    """The routes file example in a doc, loaded with the keys it names."""
    text = (ROOT / path).read_text()
    start = text.index('```json\n{\n  "cooldown_seconds"') + len("```json\n")
    key = tmp_path / "azure-west.key"
    key.write_text("k")
    document = json.loads(text[start : text.index("```", start)].replace("/etc/bridge/azure-west.key", str(key)))
    return table(
        document, {"ANTHROPIC_KEY": "a", "ANTHROPIC_BACKUP_KEY": "b", "OPENAI_KEY": "o", "AZURE_EAST_KEY": "e"}
    )


def test_the_operator_guides_routes_example_loads_as_documented(tmp_path):
    loaded = documented_routes("docs/operator.md", tmp_path)
    assert loaded.route_for(ANTHROPIC, "claude-haiku-5-5").deployments[0].name == "vllm"
    claude = loaded.route_for(OPENAI, "claude-opus-5-5").deployments
    assert [(d.name, d.tier) for d in claude] == [("anthropic", 1), ("anthropic-backup", 2)]
    assert loaded.route_for(OPENAI, "gpt-5-codex").deployments[0].protocol == "openai-responses"
    assert [d.name for d in loaded.route_for(OPENAI, "gpt-4.1").deployments] == ["azure-east", "azure-west"]


def test_the_readmes_routes_example_loads_as_documented(tmp_path):
    loaded = documented_routes("README.md", tmp_path)
    assert loaded.route_for(OPENAI, "claude-opus-5-5").deployments[0].name == "anthropic"
    assert [d.name for d in loaded.route_for(OPENAI, "gpt-4.1-mini").deployments] == ["azure-east", "azure-west"]
    assert loaded.route_for(ANTHROPIC, "qwen3-32b").deployments[0].name == "vllm"


def test_a_key_variable_may_be_a_line_of_the_settings_file(tmp_path, monkeypatch):
    """The file systemd reads as EnvironmentFile serves `bridge check` as BRIDGE_SETTINGS_FILE."""
    document = {"routes": [{"models": ["x"], "deployments": [AZURE]}]}
    settings_file = tmp_path / "bridge.env"
    settings_file.write_text(
        f"BRIDGE_ROUTES={json.dumps(document)}\nBRIDGE_CLIENT_KEYS=sk-1\nAZURE_EAST_KEY=from-file\n"
    )
    monkeypatch.setenv("BRIDGE_SETTINGS_FILE", str(settings_file))
    assert routes.load(settings_module.load()).routes[0].deployments[0].key == "from-file"
