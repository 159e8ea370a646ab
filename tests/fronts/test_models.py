"""GET /v1/models and /v1/models/{id} in both protocols, Anthropic's paging, and every route
served without /v1, through the official SDKs and raw HTTP against the fake upstream."""

import json
import logging

import anthropic
import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import wait_for
from bridge.serve.observability import access_log
from tests.fake_upstream import fixture, json_reply
from tests.helpers.servers import anthropic_client, openai_client

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-client"}
OPENAI_MODEL_MAP = json.dumps({"gpt-4o": "claude-sonnet-4-5-20250929", "gpt-*": "claude-haiku-4-5-20251001"})
ANTHROPIC_MODEL_MAP = json.dumps({"claude-opus-4-8": "gpt-4o", "claude-*haiku*": "gpt-4o-mini"})
SONNET = {
    "type": "model",
    "id": "claude-sonnet-4-5-20250929",
    "display_name": "Claude Sonnet 4.5",
    "created_at": "2025-09-29T00:00:00Z",
}
HAIKU = {
    "type": "model",
    "id": "claude-haiku-4-5-20251001",
    "display_name": "Claude Haiku 4.5",
    "created_at": "2025-10-01T00:00:00Z",
}
GPT_4O = {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"}
GPT_4O_MINI = {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"}
LLAMA = {"id": "meta-llama/Llama-3-8B", "object": "model", "created": 1700000000, "owned_by": "vllm"}


def anthropic_list(*models):
    return json_reply(
        {"data": list(models), "has_more": False, "first_id": models[0]["id"], "last_id": models[-1]["id"]}
    )


def openai_list(*models):
    return json_reply({"object": "list", "data": list(models)})


# -- the list -------------------------------------------------------------------------------------


def test_models_without_anthropic_version_are_the_upstream_list_plus_aliases(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=OPENAI_MODEL_MAP)
    fake.reply(anthropic_list(SONNET, HAIKU))
    models = list(openai_client(live.url).models.list())
    assert [m.id for m in models] == ["gpt-4o", SONNET["id"], HAIKU["id"]]
    assert all(m.object == "model" for m in models)
    assert fake.last.path.startswith("/v1/models") and fake.last.headers["anthropic-version"]


def test_models_list_in_anthropic_shape_with_aliases(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=ANTHROPIC_MODEL_MAP)
    fake.reply(openai_list(GPT_4O, GPT_4O_MINI))
    models = list(anthropic_client(live.url, api_key="sk-client").models.list())
    assert [m.id for m in models] == ["claude-opus-4-8", "gpt-4o", "gpt-4o-mini"]
    assert all(m.type == "model" for m in models)
    assert fake.last.path == "/v1/models"


# -- retrieve, OpenAI clients (Anthropic upstream) ------------------------------------------------


def test_openai_retrieve_of_an_alias_is_answered_without_the_upstream(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=OPENAI_MODEL_MAP)
    model = openai_client(live.url).models.retrieve("gpt-4o")
    assert (model.id, model.object, model.created, model.owned_by) == ("gpt-4o", "model", 0, "anthropic")
    assert fake.requests == []


def test_openai_retrieve_of_an_upstream_id_asks_the_upstreams_retrieve(start_bridge, fake):
    """Anthropic resolves its own aliases: the answer names the model it resolved to."""
    live = start_bridge(BRIDGE_MODEL_MAP=OPENAI_MODEL_MAP)
    fake.reply(json_reply(SONNET))
    model = openai_client(live.url).models.retrieve("claude-sonnet-4-5")
    assert (model.id, model.object, model.created, model.owned_by) == (SONNET["id"], "model", 1759104000, "anthropic")
    assert [r.path for r in fake.requests] == ["/v1/models/claude-sonnet-4-5"]
    assert fake.last.headers["anthropic-version"] and fake.last.headers["x-api-key"] == "sk-client"


def test_openai_retrieve_of_an_unknown_id_is_a_not_found_error(bridge, fake):
    fake.reply(fixture("anthropic/error_404.json"), anthropic_list(SONNET))
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client(bridge.url).models.retrieve("claude-sonet-4-5")
    assert caught.value.body["type"] == "not_found_error" and "claude-sonet-4-5" in caught.value.message
    assert [r.path for r in fake.requests] == ["/v1/models/claude-sonet-4-5", "/v1/models?limit=1000"]


# -- retrieve, Anthropic clients (OpenAI-compatible upstream) --------------------------------------


def test_anthropic_retrieve_of_an_alias_is_answered_without_the_upstream(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=ANTHROPIC_MODEL_MAP)
    model = anthropic_client(live.url, api_key="sk-client").models.retrieve("claude-opus-4-8")
    assert (model.type, model.id, model.display_name) == ("model", "claude-opus-4-8", "claude-opus-4-8")
    assert model.created_at.timestamp() == 0
    assert fake.requests == []


def test_anthropic_retrieve_of_an_upstream_id_asks_the_upstreams_retrieve(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=ANTHROPIC_MODEL_MAP)
    fake.reply(json_reply(GPT_4O))
    model = anthropic_client(live.url, api_key="sk-client").models.retrieve("gpt-4o")
    assert (model.type, model.id, model.display_name) == ("model", "gpt-4o", "gpt-4o")
    assert model.created_at.timestamp() == GPT_4O["created"]
    assert [r.path for r in fake.requests] == ["/v1/models/gpt-4o"]
    assert fake.last.headers["authorization"] == "Bearer sk-client"


def test_an_upstream_without_a_retrieve_endpoint_is_answered_from_its_list(bridge, fake):
    """llama.cpp and vLLM serve only the list: their 404 sends the bridge to it."""
    fake.reply(json_reply({"detail": "Not Found"}, 404), openai_list(GPT_4O, GPT_4O_MINI))
    model = anthropic_client(bridge.url, api_key="sk-client").models.retrieve("gpt-4o-mini")
    assert model.id == "gpt-4o-mini" and model.created_at.timestamp() == GPT_4O_MINI["created"]
    assert [r.path for r in fake.requests] == ["/v1/models/gpt-4o-mini", "/v1/models"]


def test_an_id_with_a_slash_is_found_in_the_upstream_list(bridge, fake):
    """The SDKs send the `/` as %2F; in the upstream's URL it would be a path separator."""
    fake.reply(openai_list(GPT_4O, LLAMA))
    model = anthropic_client(bridge.url, api_key="sk-client").models.retrieve("meta-llama/Llama-3-8B")
    assert model.id == "meta-llama/Llama-3-8B" and model.created_at.timestamp() == LLAMA["created"]
    assert [r.path for r in fake.requests] == ["/v1/models"]


def test_anthropic_retrieve_of_an_unknown_id_is_a_not_found_error(bridge, fake):
    fake.reply(fixture("openai/error_404.json"), openai_list(GPT_4O))
    with pytest.raises(anthropic.NotFoundError) as caught:
        anthropic_client(bridge.url, api_key="sk-client").models.retrieve("gpt-5.2-proo")
    assert caught.value.body["error"]["type"] == "not_found_error" and "gpt-5.2-proo" in caught.value.message
    assert [r.path for r in fake.requests] == ["/v1/models/gpt-5.2-proo", "/v1/models"]


@pytest.mark.parametrize("path", ["/v1/models/%2E%2E", "/v1/models/x%2F..%2F..%2Ffiles", "/v1/models/..%2Ffiles"])
def test_an_id_cannot_walk_the_upstream_path_to_another_endpoint(bridge, fake, path):
    """With a held key, GET <upstream>/v1/models/../files would list the operator's files."""
    fake.default = openai_list(GPT_4O)
    reply = requests.get(bridge.url + path, headers=ANTHROPIC_HEADERS)
    assert reply.status_code == 404 and reply.json()["error"]["type"] == "not_found_error"
    assert [r.path for r in fake.requests] == ["/v1/models"], "only the list is asked"


def test_an_id_is_percent_encoded_into_the_upstreams_retrieve_path(bridge, fake):
    fake.reply(json_reply({**GPT_4O, "id": "odd?id#x"}))
    model = anthropic_client(bridge.url, api_key="sk-client").models.retrieve("odd?id#x")
    assert model.id == "odd?id#x" and fake.last.path == "/v1/models/odd%3Fid%23x"


def test_an_upstream_retrieve_answer_that_is_no_model_is_a_502(bridge, fake):
    fake.reply(openai_list(GPT_4O))
    with pytest.raises(anthropic.APIStatusError) as caught:
        anthropic_client(bridge.url, api_key="sk-client").models.retrieve("gpt-4o")
    assert caught.value.status_code == 502 and "not a model object" in caught.value.message


def test_an_upstream_retrieve_error_other_than_404_reaches_the_client(bridge, fake):
    fake.reply(fixture("openai/error_401.json"))
    with pytest.raises(anthropic.AuthenticationError):
        anthropic_client(bridge.url, api_key="sk-client").models.retrieve("gpt-4o")
    assert len(fake.requests) == 1


# -- Anthropic paging ---------------------------------------------------------------------------------

MANY = [{"id": f"m{i:02}", "object": "model", "created": i} for i in range(1, 26)]


def test_the_sdk_auto_pager_walks_the_whole_list_forward(start_bridge, fake):
    live = start_bridge(BRIDGE_MODEL_MAP=ANTHROPIC_MODEL_MAP)
    fake.default = openai_list(GPT_4O, GPT_4O_MINI, LLAMA)
    page = anthropic_client(live.url, api_key="sk-client").models.list(limit=2)
    assert [m.id for m in page.data] == ["claude-opus-4-8", "gpt-4o"] and page.has_more
    assert [m.id for m in page] == ["claude-opus-4-8", "gpt-4o", "gpt-4o-mini", LLAMA["id"]]
    assert len(fake.requests) == 2, "two pages of two; the second says has_more: false"


def test_the_sdk_auto_pager_walks_backward_from_before_id(bridge, fake):
    fake.default = openai_list(*MANY[:5])
    pages = anthropic_client(bridge.url, api_key="sk-client").models.list(limit=2, before_id="m05")
    assert [m.id for m in pages] == ["m03", "m04", "m01", "m02"]


def test_the_default_page_is_20_models_with_cursors(bridge, fake):
    fake.reply(openai_list(*MANY))
    page = requests.get(f"{bridge.url}/v1/models", headers=ANTHROPIC_HEADERS).json()
    assert [m["id"] for m in page["data"]] == [m["id"] for m in MANY[:20]]
    assert (page["has_more"], page["first_id"], page["last_id"]) == (True, "m01", "m20")


@pytest.mark.parametrize(
    "query, ids, has_more",
    [
        ("limit=1000", [m["id"] for m in MANY], False),
        ("after_id=m20", ["m21", "m22", "m23", "m24", "m25"], False),
        ("after_id=m20&limit=4", ["m21", "m22", "m23", "m24"], True),
        ("after_id=m25", [], False),
        ("before_id=m04&limit=2", ["m02", "m03"], True),
        ("before_id=m03&limit=2", ["m01", "m02"], False),
        ("before_id=m01", [], False),
    ],
)
def test_a_page_is_the_models_right_after_or_before_the_cursor(bridge, fake, query, ids, has_more):
    fake.reply(openai_list(*MANY))
    page = requests.get(f"{bridge.url}/v1/models?{query}", headers=ANTHROPIC_HEADERS).json()
    assert [m["id"] for m in page["data"]] == ids and page["has_more"] is has_more
    assert (page["first_id"], page["last_id"]) == ((ids[0], ids[-1]) if ids else (None, None))


@pytest.mark.parametrize(
    "query, param",
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("limit=2.5", "limit"),
        ("limit=", "limit"),
        ("after_id=m01&before_id=m03", "before_id"),
    ],
)
def test_a_bad_paging_parameter_is_a_400_naming_it_before_the_upstream_is_asked(bridge, fake, query, param):
    reply = requests.get(f"{bridge.url}/v1/models?{query}", headers=ANTHROPIC_HEADERS)
    assert reply.status_code == 400 and reply.json()["type"] == "error"
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert reply.json()["error"]["message"].startswith(f"{param}: ")
    assert fake.requests == []


@pytest.mark.parametrize("param", ["after_id", "before_id"])
def test_a_cursor_that_names_no_listed_model_is_a_400_naming_it(bridge, fake, param):
    fake.reply(openai_list(*MANY))
    reply = requests.get(f"{bridge.url}/v1/models?{param}=m99", headers=ANTHROPIC_HEADERS)
    assert reply.status_code == 400 and reply.json()["error"]["message"] == f"{param}: no model 'm99' in the list"


def test_the_openai_list_takes_no_paging(bridge, fake):
    """OpenAI's list has no pages: Anthropic's parameters mean nothing to an OpenAI client."""
    fake.reply(anthropic_list(SONNET, HAIKU))
    reply = requests.get(f"{bridge.url}/v1/models?limit=0")
    assert reply.status_code == 200 and len(reply.json()["data"]) == 2


# -- every route without /v1 ---------------------------------------------------------------------------

HI = [{"role": "user", "content": "Say hi"}]


def test_post_messages_without_v1_reaches_the_upstream(bridge, fake):
    """The Vercel AI SDK's Anthropic provider appends only /messages to its base URL."""
    fake.reply(fixture("openai/text.json"))
    reply = requests.post(
        f"{bridge.url}/messages", headers=ANTHROPIC_HEADERS, json={"model": "gpt-4o", "max_tokens": 64, "messages": HI}
    )
    assert reply.status_code == 200 and reply.json()["type"] == "message"
    assert fake.last.path == "/v1/chat/completions"


def test_count_tokens_without_v1(bridge, fake):
    reply = requests.post(
        f"{bridge.url}/messages/count_tokens", headers=ANTHROPIC_HEADERS, json={"model": "gpt-4o", "messages": HI}
    )
    assert reply.status_code == 200 and reply.json()["input_tokens"] > 0


def test_post_chat_completions_without_v1_reaches_the_upstream(bridge, fake):
    fake.reply(fixture("anthropic/text.json"))
    reply = requests.post(
        f"{bridge.url}/chat/completions",
        headers={"authorization": "Bearer sk-client"},
        json={"model": "claude-sonnet-4-5", "messages": HI},
    )
    assert reply.status_code == 200 and reply.json()["object"] == "chat.completion"
    assert fake.last.path == "/v1/messages"


def test_the_openai_sdk_with_a_base_url_without_v1(bridge, fake):
    client = openai.OpenAI(base_url=bridge.url, api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/text.json"))
    completion = client.chat.completions.create(model="claude-sonnet-4-5", messages=HI)
    assert completion.choices[0].message.content and fake.last.path == "/v1/messages"
    fake.reply(anthropic_list(SONNET))
    assert [m.id for m in client.models.list()] == [SONNET["id"]]
    fake.reply(json_reply(HAIKU))
    assert client.models.retrieve("claude-haiku-4-5").id == HAIKU["id"]


@pytest.mark.parametrize(
    "method, path, headers, anthropic_shape, status",
    [
        ("POST", "/messages", ANTHROPIC_HEADERS, True, 400),  # empty body
        ("GET", "/messages", {}, True, 405),
        ("POST", "/messages/batches", {}, True, 404),
        ("POST", "/chat/completions", {"x-api-key": "sk-client"}, False, 400),
        ("POST", "/chat/responses", {"x-api-key": "sk-client"}, False, 404),
        ("GET", "/models/", ANTHROPIC_HEADERS, True, 404),
        ("GET", "/models/", {"x-api-key": "sk-client"}, False, 404),
        ("GET", "/v1/models/", {"x-api-key": "sk-client"}, False, 404),
    ],
)
def test_errors_without_v1_come_in_the_protocol_the_path_says(
    bridge, fake, method, path, headers, anthropic_shape, status
):
    reply = requests.request(method, bridge.url + path, headers={"content-type": "application/json", **headers})
    body = reply.json()
    assert reply.status_code == status
    if anthropic_shape:
        assert body["type"] == "error" and body["error"]["type"] in ("invalid_request_error", "not_found_error")
    else:
        assert set(body["error"]) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    "method, path, anthropic_shape",
    [
        ("POST", "/messages", True),
        ("POST", "/messages/count_tokens", True),
        ("POST", "/chat/completions", False),
        ("GET", "/models", False),
        ("GET", "/models/gpt-4o", False),
    ],
)
def test_routes_without_v1_need_the_client_key(start_bridge, fake, method, path, anthropic_shape):
    """A Bearer key, so that the path alone must make the 401 Anthropic's."""
    live = start_bridge(BRIDGE_CLIENT_KEYS="me:sk-local-1")
    reply = requests.request(method, live.url + path, json={}, headers={"authorization": "Bearer sk-wrong"})
    assert reply.status_code == 401 and fake.requests == []
    assert (reply.json().get("type") == "error") is anthropic_shape
    fake.default = json_reply(GPT_4O)
    reply = requests.request(method, live.url + path, json={}, headers={"authorization": "Bearer sk-local-1"})
    assert reply.status_code in (200, 400), "past the key check, to the route"


def requests_counted(live, direction):
    text = requests.get(f"{live.url}/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "bridge_requests_total" and s.labels.get("direction") == direction
    )


def test_the_access_line_and_metrics_name_the_route_without_v1(start_bridge, fake):
    live = start_bridge(BRIDGE_LOG_LEVEL="INFO")
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(json.loads(record.getMessage()))
    access_log.addHandler(handler)
    try:
        before = requests_counted(live, "messages_to_chat")
        fake.reply(fixture("openai/text.json"))
        requests.post(
            f"{live.url}/messages",
            headers=ANTHROPIC_HEADERS,
            json={"model": "gpt-4o", "max_tokens": 64, "messages": HI},
        )
        wait_for(lambda: lines, "the access line")
    finally:
        access_log.removeHandler(handler)
    assert {k: lines[0][k] for k in ("route", "direction", "status", "model")} == {
        "route": "/messages",
        "direction": "messages_to_chat",
        "status": 200,
        "model": "gpt-4o",
    }
    assert requests_counted(live, "messages_to_chat") == before + 1


@pytest.mark.parametrize("listed", [["gpt-4o"], {"data": "gpt-4o"}])
@pytest.mark.parametrize("anthropic_client_asks", [True, False], ids=["anthropic", "openai"])
def test_an_upstream_list_that_is_not_an_object_with_a_data_array_is_a_502(bridge, fake, listed, anthropic_client_asks):
    fake.reply(json_reply(listed))
    headers = {"anthropic-version": "2023-06-01"} if anthropic_client_asks else {}
    reply = requests.get(f"{bridge.url}/v1/models", headers=headers)
    assert reply.status_code == 502 and "model list" in reply.text
    assert ("type" in reply.json()) == anthropic_client_asks  # the Anthropic shape has a top-level type
