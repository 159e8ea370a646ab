"""A deployment's max_tokens cap on the upstream body (bridge/gateway/caps.py), for either protocol."""

import anthropic

from bridge.gateway.caps import cap_max_tokens
from tests.fake_upstream import fixture


def test_a_chat_body_is_capped_in_whichever_field_it_uses():
    assert cap_max_tokens({"max_completion_tokens": 64000}, "openai-chat", 16384) == {"max_completion_tokens": 16384}
    assert cap_max_tokens({"max_tokens": 64000}, "openai-chat", 16384) == {"max_tokens": 16384}


def test_a_body_within_the_cap_or_without_a_cap_is_left_alone():
    body = {"max_tokens": 1000}
    assert cap_max_tokens(body, "anthropic", 16384) is body
    assert cap_max_tokens({"max_tokens": 64000}, "anthropic", 0) == {"max_tokens": 64000}
    assert cap_max_tokens({"messages": []}, "openai-chat", 100) == {"messages": []}, "no limit asked, none added"


def test_a_capped_anthropic_body_keeps_its_thinking_budget_below_max_tokens():
    body = {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 40000}}
    assert cap_max_tokens(body, "anthropic", 32000) == {
        "max_tokens": 32000,
        "thinking": {"type": "enabled", "budget_tokens": 16000},
    }
    assert body["max_tokens"] == 64000, "the client's body is not changed in place"
    small = {"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 2000}}
    assert cap_max_tokens(small, "anthropic", 32000)["thinking"]["budget_tokens"] == 2000
    adaptive = {"max_tokens": 128000, "thinking": {"type": "adaptive"}}
    assert cap_max_tokens(adaptive, "anthropic", 32000) == {"max_tokens": 32000, "thinking": {"type": "adaptive"}}


def test_the_old_global_cap_is_the_default_chat_routes_cap(start_bridge, fake):
    """BRIDGE_OPENAI_MAX_TOKENS_CAP keeps working: it is the default route's deployment cap."""
    live = start_bridge(BRIDGE_OPENAI_MAX_TOKENS_CAP=16000)
    fake.reply(fixture("openai/text.json"))
    client = anthropic.Anthropic(base_url=live.url, api_key="sk", max_retries=0)
    client.messages.create(model="qwen3", max_tokens=20000, messages=[{"role": "user", "content": "hi"}])
    assert fake.last.body["max_completion_tokens"] == 16000
