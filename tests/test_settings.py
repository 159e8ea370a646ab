"""Settings: read once, validated, secrets never shown."""

import hashlib
import json

import pytest

from bridge.settings import SettingsError, load


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
        ("BRIDGE_CLIENT_STALL_TIMEOUT", "0.5"),
        ("BRIDGE_OPENAI_STREAM_USAGE", "maybe"),
        ("BRIDGE_OPENAI_MAX_TOKENS_PARAM", "max_output_tokens"),
        ("BRIDGE_MODEL_MAP", "{not json"),
        ("BRIDGE_MODEL_MAP", '{"a": 1}'),
        ("BRIDGE_CLIENT_KEYS", "team:sha256:abc"),
        ("BRIDGE_OPENAI_BASEURL", "http://typo"),
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_variable(variable, value):
    with pytest.raises(SettingsError) as caught:
        load({variable: value})
    assert variable in str(caught.value)


def test_an_upstream_key_without_client_keys_is_refused_as_an_open_relay():
    with pytest.raises(SettingsError, match="BRIDGE_CLIENT_KEYS"):
        load({"BRIDGE_OPENAI_API_KEY": "sk-upstream"})
    assert load({"BRIDGE_OPENAI_API_KEY": "sk-upstream", "BRIDGE_ALLOW_OPEN_RELAY": "true"})
    assert load({"BRIDGE_OPENAI_API_KEY": "sk-upstream", "BRIDGE_CLIENT_KEYS": "ci:sk-client"})


def test_client_keys_are_kept_hashed_and_named():
    digest = hashlib.sha256(b"sk-two").hexdigest()
    settings = load({"BRIDGE_CLIENT_KEYS": f"sk-one, team:sha256:{digest}, bot:sk-three"})
    assert [k.name for k in settings.client_keys] == ["key1", "team", "bot"]
    assert settings.client_keys[1].digest == hashlib.sha256(b"sk-two").digest()
    assert "sk-one" not in repr(settings) and "sk-three" not in repr(settings)


def test_upstream_keys_never_appear_in_the_settings_repr():
    settings = load(
        {
            "BRIDGE_OPENAI_API_KEY": "sk-secret-1",
            "BRIDGE_ANTHROPIC_API_KEY": "sk-secret-2",
            "BRIDGE_ALLOW_OPEN_RELAY": "1",
        }
    )
    assert "sk-secret" not in repr(settings)


def test_model_map_from_a_file_and_the_settings_file(tmp_path):
    mapping = tmp_path / "models.json"
    mapping.write_text(json.dumps({"claude-*haiku*": "small"}))
    env_file = tmp_path / "bridge.env"
    env_file.write_text(f"# comment\nBRIDGE_MODEL_MAP={mapping}\nBRIDGE_RETRIES=5\n")
    settings = load({"BRIDGE_SETTINGS_FILE": str(env_file), "BRIDGE_RETRIES": "1"})
    assert settings.model_map == (("claude-*haiku*", "small"),)
    assert settings.retries == 1  # the environment wins over the file
