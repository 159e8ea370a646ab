"""Model capabilities (bridge/translate/capabilities.py) over real HTTP: the openai SDK's reasoning_effort
reaches each upstream model in the form that model takes."""

import json

import openai

from tests.fake_upstream import fixture

USER = {"role": "user", "content": "Think about pelicans."}


def client_for(start_bridge, fake, **deployment):
    routes = {
        "routes": [
            {
                "models": ["reasoner"],
                "deployments": [{"name": "claude", "protocol": "anthropic", "base_url": fake.url, **deployment}],
            }
        ]
    }
    live = start_bridge(BRIDGE_ROUTES=json.dumps(routes))
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)


def test_an_adaptive_only_model_gets_adaptive_thinking_and_an_effort_never_a_budget(start_bridge, fake):
    client = client_for(start_bridge, fake, model="claude-opus-4-7")
    fake.reply(fixture("anthropic/thinking.json"))
    completion = client.chat.completions.create(model="reasoner", messages=[USER], reasoning_effort="high")
    assert completion.choices[0].message.content
    sent = fake.last.body
    assert sent["thinking"] == {"type": "adaptive"} and sent["output_config"] == {"effort": "high"}


def test_a_deployment_s_capabilities_override_the_defaults(start_bridge, fake):
    client = client_for(
        start_bridge, fake, model="claude-opus-4-7", capabilities={"efforts": [], "budget_tokens": True}
    )
    fake.reply(fixture("anthropic/thinking.json"))
    client.chat.completions.create(model="reasoner", messages=[USER], reasoning_effort="low")
    assert fake.last.body["thinking"]["type"] == "enabled" and "output_config" not in fake.last.body


def test_bridge_model_capabilities_adds_a_model(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_CAPABILITIES=json.dumps({"claude-next-*": {"efforts": ["low", "high"]}}))
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/thinking.json"))
    client.responses.create(model="claude-next-1", input="Think.", reasoning={"effort": "low"})
    assert fake.last.body["thinking"] == {"type": "adaptive"} and fake.last.body["output_config"] == {"effort": "low"}
