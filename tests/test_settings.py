"""Settings: read once, validated, secrets never shown."""

import hashlib
import json

import pytest

from bridge.settings import SettingsError, load, masked_url


def test_defaults_need_no_environment():
    settings = load({})
    assert settings.openai_base_url == "https://api.openai.com/v1"
    assert settings.anthropic_base_url == "https://api.anthropic.com"
    assert settings.client_keys == ()


@pytest.mark.parametrize(
    "variable, value",
    [
        ("BRIDGE_OPENAI_BASE_URL", "ftp://x"),
        ("BRIDGE_ANTHROPIC_BASE_URL", "not a url"),
        ("BRIDGE_OPENAI_BASE_URL", "http://user:sk-secret@vllm.internal/v1"),
        ("BRIDGE_READ_TIMEOUT", "soon"),
        ("BRIDGE_RETRIES", "-1"),
        ("BRIDGE_OPENAI_STREAM_USAGE", "maybe"),
        ("BRIDGE_OPENAI_MAX_TOKENS_PARAM", "max_output_tokens"),
        ("BRIDGE_MODEL_MAP", "{not json"),
        ("BRIDGE_MODEL_MAP", '{"a": 1}'),
        ("BRIDGE_CLIENT_KEYS", "team:sha256:abc"),
        ("BRIDGE_OPENAI_BASEURL", "http://typo"),
        ("BRIDGE_MAX_JSON_VALUES", "999"),
        ("BRIDGE_MAX_JSON_VALUES", "1e6"),
        ("BRIDGE_MAX_MESSAGES", "0"),
        ("BRIDGE_MAX_CONTENT_BLOCKS", "many"),
        ("BRIDGE_MAX_TOOLS", "-1"),
        ("BRIDGE_LARGE_BODY_BYTES", "1023"),
        ("BRIDGE_LARGE_BODY_SLOTS", "0"),
        ("BRIDGE_LARGE_BODY_WAIT", "-1"),
        ("BRIDGE_CLIENT_HEADER_TIMEOUT", "0"),
        ("BRIDGE_CLIENT_BODY_TIMEOUT", "a minute"),
        ("BRIDGE_CLIENT_STALL_TIMEOUT", "0.5"),
        ("BRIDGE_MAX_REQUESTS_PER_CLIENT", "-1"),
        ("BRIDGE_QUEUE_TIMEOUT", "-1"),
        ("BRIDGE_QUEUE_TIMEOUT", "a moment"),
        ("BRIDGE_STREAMS_PER_WORKER", "-1"),
        ("BRIDGE_STREAMS_PER_WORKER", "many"),
        ("BRIDGE_ADMIT_AHEAD", "1"),
        ("BRIDGE_ADMIT_AHEAD", "nan"),
        ("BRIDGE_ADMIT_AHEAD", "half"),
        ("BRIDGE_ACCESS_LOG_FLUSH", "-0.1"),
        ("BRIDGE_ACCESS_LOG_FLUSH", "soon"),
        ("BRIDGE_ACCESS_LOG_FLUSH", "nan"),
        ("BRIDGE_ACCESS_LOG_FLUSH", "0.001"),
        ("BRIDGE_ACCESS_LOG_FLUSH", "3600"),
        ("BRIDGE_PROMPT_CACHE", "24h"),
        ("BRIDGE_MODEL_CAPABILITIES", "{not json"),
        ("BRIDGE_MODEL_CAPABILITIES", '{"claude-*": {"budget_tokens": "yes"}}'),
        ("BRIDGE_MODEL_CAPABILITIES", '{"claude-*": {"efforts": ["extreme"]}}'),
        ("BRIDGE_OPENAI_BASE_URL", "http://[::1:8000/v1"),
        ("BRIDGE_ANTHROPIC_BASE_URL", "http://localhost:port"),
        ("BRIDGE_REDIS_URL", "redis://[::1:6379"),
        ("BRIDGE_CLIENT_KEYS", "/etc/bridge/no-such-keys"),
        ("BRIDGE_CLIENT_KEYS", "/"),
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_variable(variable, value):
    with pytest.raises(SettingsError) as caught:
        load({variable: value})
    assert variable in str(caught.value)


def test_request_limits_are_read_and_have_their_documented_defaults():
    defaults = load({})
    assert (defaults.max_json_values, defaults.max_messages, defaults.max_content_blocks, defaults.max_tools) == (
        1_000_000,
        50_000,
        100_000,
        5_000,
    )
    assert (defaults.large_body_bytes, defaults.large_body_slots, defaults.large_body_wait) == (262144, 2, 10.0)
    assert load({"BRIDGE_MAX_TOOLS": "0", "BRIDGE_LARGE_BODY_WAIT": "0.5"}).max_tools == 0


def test_an_upstream_key_without_client_keys_is_refused_as_an_open_relay():
    with pytest.raises(SettingsError, match="BRIDGE_CLIENT_KEYS"):
        load({"BRIDGE_OPENAI_API_KEY": "sk-upstream"})
    assert load({"BRIDGE_OPENAI_API_KEY": "sk-upstream", "BRIDGE_ALLOW_OPEN_RELAY": "true"})
    assert load({"BRIDGE_OPENAI_API_KEY": "sk-upstream", "BRIDGE_CLIENT_KEYS": "ci:sk-client"})


def test_a_per_client_cap_without_client_keys_is_refused():
    """Without client keys every client is the same one: the cap would only be a smaller BRIDGE_THREADS."""
    with pytest.raises(SettingsError, match="BRIDGE_MAX_REQUESTS_PER_CLIENT.*BRIDGE_CLIENT_KEYS"):
        load({"BRIDGE_MAX_REQUESTS_PER_CLIENT": "8"})
    assert load({"BRIDGE_MAX_REQUESTS_PER_CLIENT": "8", "BRIDGE_CLIENT_KEYS": "ci:sk-client"})
    assert load({"BRIDGE_MAX_REQUESTS_PER_CLIENT": "0"}).max_requests_per_client == 0


def test_client_keys_are_kept_hashed_and_named():
    digest = hashlib.sha256(b"sk-two").hexdigest()
    settings = load({"BRIDGE_CLIENT_KEYS": f"sk-one, team:sha256:{digest}, bot:sk-three"})
    assert [k.name for k in settings.client_keys] == ["key1", "team", "bot"]
    assert settings.client_keys[1].digest == hashlib.sha256(b"sk-two").digest()
    assert "sk-one" not in repr(settings) and "sk-three" not in repr(settings)


def test_a_files_errors_name_it_and_its_entry(tmp_path):
    keys, mapping = tmp_path / "keys", tmp_path / "models.json"
    keys.write_text("# team keys\nteam-a:sk-1\n\nteam-b:sha256:abc\n")
    mapping.write_text('{"gpt-4o": "claude-x", "gpt-4.1": ""}')
    with pytest.raises(SettingsError, match=f"^BRIDGE_CLIENT_KEYS {keys} line 4 \\(team-b\\): sha256 must be"):
        load({"BRIDGE_CLIENT_KEYS": str(keys)})
    with pytest.raises(SettingsError, match=f"^BRIDGE_MODEL_MAP {mapping}: 'gpt-4.1' must map to a non-empty"):
        load({"BRIDGE_MODEL_MAP": str(mapping)})
    mapping.write_bytes(b'{"gpt-4o": "\xff"}')
    with pytest.raises(SettingsError, match=f"^BRIDGE_MODEL_MAP: {mapping} is not UTF-8 text"):
        load({"BRIDGE_MODEL_MAP": str(mapping)})


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://s3cret@10.0.0.5:6379/0", "redis://***@10.0.0.5:6379/0"),
        ("redis://:s3cret@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
        ("redis://10.0.0.5:6379/0?password=s3cret&db=1", "redis://10.0.0.5:6379/0?password=***&db=1"),
        ("https://x.blob.core.windows.net/c?sv=2024&sig=s3cret", "https://x.blob.core.windows.net/c?sv=2024&sig=***"),
        ("unix:///run/redis.sock?db=0&auth_token=s3cret", "unix:///run/redis.sock?db=0&auth_token=***"),
        ("redis://[::1:6379", "<not a URL>"),
    ],
)
def test_a_printed_url_masks_its_user_information_and_credential_parameters(url, shown):
    assert masked_url(url) == shown


def test_upstream_keys_never_appear_in_the_settings_repr():
    settings = load(
        {
            "BRIDGE_OPENAI_API_KEY": "sk-secret-1",
            "BRIDGE_ANTHROPIC_API_KEY": "sk-secret-2",
            "BRIDGE_ALLOW_OPEN_RELAY": "1",
            "BRIDGE_ROUTES": json.dumps({"routes": [{"headers": {"Ocp-Apim-Subscription-Key": "sk-secret-3"}}]}),
        }
    )
    assert "sk-secret" not in repr(settings) and "routes_file='<inline JSON>'" in repr(settings)
    assert "routes_file=''" in repr(load({}))


def test_model_map_from_a_file_and_the_settings_file(tmp_path):
    mapping = tmp_path / "models.json"
    mapping.write_text(json.dumps({"claude-*haiku*": "small"}))
    env_file = tmp_path / "bridge.env"
    env_file.write_text(f"# comment\nBRIDGE_MODEL_MAP={mapping}\nBRIDGE_RETRIES=5\n")
    settings = load({"BRIDGE_SETTINGS_FILE": str(env_file), "BRIDGE_RETRIES": "1"})
    assert settings.model_map == (("claude-*haiku*", "small"),)
    assert settings.retries == 1  # the environment wins over the file
