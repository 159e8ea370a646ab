"""GET /v1/models in both protocols, and every route served without /v1, through the
official SDKs and raw HTTP against the fake upstream."""
import json
import logging

import anthropic
import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from bridge.observability import access_log
from tests.deploy_processes import wait_for
from tests.fake_upstream import fixture, json_reply

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-client"}
OPENAI_MODEL_MAP = json.dumps({"gpt-4o": "claude-sonnet-4-5-20250929", "gpt-*": "claude-haiku-4-5-20251001"})
ANTHROPIC_MODEL_MAP = json.dumps({"claude-opus-4-8": "gpt-4o", "claude-*haiku*": "gpt-4o-mini"})
SONNET = {"type": "model", "id": "claude-sonnet-4-5-20250929", "display_name": "Claude Sonnet 4.5",
          "created_at": "2025-09-29T00:00:00Z"}
HAIKU = {"type": "model", "id": "claude-haiku-4-5-20251001", "display_name": "Claude Haiku 4.5",
         "created_at": "2025-10-01T00:00:00Z"}
GPT_4O = {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"}
GPT_4O_MINI = {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"}


def anthropic_list(*models):
    return json_reply({"data": list(models), "has_more": False, "first_id": models[0]["id"],
                       "last_id": models[-1]["id"]})


def openai_list(*models):
    return json_reply({"object": "list", "data": list(models)})


def openai_sdk(live, base="/v1"):
    return openai.OpenAI(base_url=live.url + base, api_key="sk-client", max_retries=0)


def anthropic_sdk(live):
    return anthropic.Anthropic(base_url=live.url, api_key="sk-client", max_retries=0)


# -- the list -------------------------------------------------------------------------------------

def test_models_without_anthropic_version_are_the_upstream_list_plus_aliases(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=OPENAI_MODEL_MAP)
    fake.reply(anthropic_list(SONNET, HAIKU))
    models = list(openai_sdk(live).models.list())
    assert [m.id for m in models] == ["gpt-4o", SONNET["id"], HAIKU["id"]]
    assert all(m.object == "model" for m in models)
    assert fake.last.path.startswith("/v1/models") and fake.last.headers["anthropic-version"]


def test_models_list_in_anthropic_shape_with_aliases(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=ANTHROPIC_MODEL_MAP)
    fake.reply(openai_list(GPT_4O, GPT_4O_MINI))
    models = list(anthropic_sdk(live).models.list())
    assert [m.id for m in models] == ["claude-opus-4-8", "gpt-4o", "gpt-4o-mini"]
    assert all(m.type == "model" for m in models)
    assert fake.last.path == "/v1/models"


# -- every route without /v1 ---------------------------------------------------------------------------

HI = [{"role": "user", "content": "Say hi"}]


def test_post_messages_without_v1_reaches_the_upstream(bridge, fake):
    """The Vercel AI SDK's Anthropic provider appends only /messages to its base URL."""
    fake.reply(fixture("openai/text.json"))
    reply = requests.post(f"{bridge.url}/messages", headers=ANTHROPIC_HEADERS,
                          json={"model": "gpt-4o", "max_tokens": 64, "messages": HI})
    assert reply.status_code == 200 and reply.json()["type"] == "message"
    assert fake.last.path == "/v1/chat/completions"


def test_count_tokens_without_v1(bridge, fake):
    reply = requests.post(f"{bridge.url}/messages/count_tokens", headers=ANTHROPIC_HEADERS,
                          json={"model": "gpt-4o", "messages": HI})
    assert reply.status_code == 200 and reply.json()["input_tokens"] > 0


def test_post_chat_completions_without_v1_reaches_the_upstream(bridge, fake):
    fake.reply(fixture("anthropic/text.json"))
    reply = requests.post(f"{bridge.url}/chat/completions", headers={"authorization": "Bearer sk-client"},
                          json={"model": "claude-sonnet-4-5", "messages": HI})
    assert reply.status_code == 200 and reply.json()["object"] == "chat.completion"
    assert fake.last.path == "/v1/messages"


def test_the_openai_sdk_with_a_base_url_without_v1(bridge, fake):
    client = openai_sdk(bridge, base="")
    fake.reply(fixture("anthropic/text.json"))
    completion = client.chat.completions.create(model="claude-sonnet-4-5", messages=HI)
    assert completion.choices[0].message.content and fake.last.path == "/v1/messages"
    fake.reply(anthropic_list(SONNET))
    assert [m.id for m in client.models.list()] == [SONNET["id"]]


@pytest.mark.parametrize("method, path, headers, anthropic_shape, status", [
    ("POST", "/messages", ANTHROPIC_HEADERS, True, 400),            # empty body
    ("GET", "/messages", {}, True, 405),
    ("POST", "/messages/batches", {}, True, 404),
    ("POST", "/chat/completions", {"x-api-key": "sk-client"}, False, 400),
    ("POST", "/chat/responses", {"x-api-key": "sk-client"}, False, 404),
])
def test_errors_without_v1_come_in_the_protocol_the_path_says(bridge, fake, method, path, headers,
                                                              anthropic_shape, status):
    reply = requests.request(method, bridge.url + path, headers={"content-type": "application/json", **headers})
    body = reply.json()
    assert reply.status_code == status
    if anthropic_shape:
        assert body["type"] == "error" and body["error"]["type"] in ("invalid_request_error", "not_found_error")
    else:
        assert set(body["error"]) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize("method, path, anthropic_shape", [
    ("POST", "/messages", True), ("POST", "/messages/count_tokens", True),
    ("POST", "/chat/completions", False), ("GET", "/models", False),
])
def test_routes_without_v1_need_the_client_key(start_bridge, fake, method, path, anthropic_shape):
    """A Bearer key, so that the path alone must make the 401 Anthropic's."""
    live = start_bridge(BRIDGE_CLIENT_KEYS="me:sk-local-1")
    reply = requests.request(method, live.url + path, json={}, headers={"authorization": "Bearer sk-wrong"})
    assert reply.status_code == 401 and fake.requests == []
    assert (reply.json().get("type") == "error") is anthropic_shape
    fake.default = openai_list(GPT_4O)
    reply = requests.request(method, live.url + path, json={}, headers={"authorization": "Bearer sk-local-1"})
    assert reply.status_code in (200, 400), "past the key check, to the route"


def requests_counted(live, direction):
    text = requests.get(f"{live.url}/metrics").text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "bridge_requests_total" and s.labels.get("direction") == direction)


def test_the_access_line_and_metrics_name_the_route_without_v1(start_bridge, fake):
    live = start_bridge(BRIDGE_LOG_LEVEL="INFO")
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(json.loads(record.getMessage()))
    access_log.addHandler(handler)
    try:
        before = requests_counted(live, "messages_to_chat")
        fake.reply(fixture("openai/text.json"))
        requests.post(f"{live.url}/messages", headers=ANTHROPIC_HEADERS,
                      json={"model": "gpt-4o", "max_tokens": 64, "messages": HI})
        wait_for(lambda: lines, "the access line")
    finally:
        access_log.removeHandler(handler)
    assert {k: lines[0][k] for k in ("route", "direction", "status", "model")} == {
        "route": "/messages", "direction": "messages_to_chat", "status": 200, "model": "gpt-4o"}
    assert requests_counted(live, "messages_to_chat") == before + 1
