"""Claude through Google Vertex AI: a route's `"cloud": "vertex"` deployment, over real HTTP to a
fake aiplatform endpoint that takes only live tokens of a fake OAuth token endpoint, which
google-auth reaches with a service account's signed JWT (tests/fake_clouds.py). The SDKs are the
clients, AnthropicVertex the reference for the bodies."""

import concurrent.futures
import json
import pickle
import time

import anthropic
import pytest
import requests
from google.auth.credentials import Credentials

from bench.clouds import service_account
from tests.fake_clouds import FakeTokenEndpoint, FakeVertex, vertex_error
from tests.fake_upstream import fixture, json_reply, messages_stream
from tests.helpers.recorded import recorded
from tests.helpers.servers import anthropic_client, openai_client

CLIENT_KEY = "sk-client-of-the-bridge"
PROJECT, REGION, MODEL = "bridge-test", "us-east5", "claude-sonnet-4-5@20250929"
MODELS = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models"
HI = [{"role": "user", "content": "Say hi"}]


@pytest.fixture(scope="module")
def google(tmp_path_factory):
    """(token endpoint, Vertex fake, service-account file)."""
    key_file = tmp_path_factory.mktemp("google") / "service-account.json"
    tokens = FakeTokenEndpoint(None)
    tokens.public_key = service_account(key_file, tokens.url)
    vertex = FakeVertex(tokens)
    yield tokens, vertex, key_file
    vertex.close()
    tokens.close()


@pytest.fixture
def vertex(google):
    tokens, server, _ = google
    tokens.lifetime = 3600
    server.reset()
    return server


def deployment(google, name="vertex-east5", **fields):
    _, server, key_file = google
    return {
        "name": name,
        "cloud": "vertex",
        "project": PROJECT,
        "region": REGION,
        "endpoint_url": server.url,
        "credentials_file": str(key_file),
        "model": MODEL,
        **fields,
    }


def started(start_bridge, *deployments, **settings):
    document = {"routes": [{"models": ["claude-*"], "deployments": list(deployments)}], "cooldown_seconds": 600}
    return start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_CLIENT_KEYS=f"team:{CLIENT_KEY}", **settings)


@pytest.fixture
def live(start_bridge, google, vertex):
    return started(start_bridge, deployment(google))


class FakeCredentials(Credentials):
    """AnthropicVertex's credentials: a token the fake takes, without a second JWT flow."""

    def __init__(self, token):
        super().__init__()
        self.token = token

    def refresh(self, request):
        pass


def reference(google, **call):
    """What AnthropicVertex sends for the same call (path, body), to the same fake."""
    tokens, server, _ = google
    token = next(t for t, until in tokens.issued.items() if until > time.time())
    client = anthropic.AnthropicVertex(
        region=REGION,
        project_id=PROJECT,
        base_url=f"{server.url}/v1",
        credentials=FakeCredentials(token),
        max_retries=0,
    )
    if call.get("stream"):
        with client.messages.create(**call) as stream:
            list(stream)
    else:
        client.messages.create(**call)
    return server.requests[-1]


def without_version(body):
    """AnthropicVertex's installed version writes its own API version where Vertex's is due."""
    return {k: v for k, v in body.items() if k != "anthropic_version"}


def test_a_passed_through_call_carries_a_token_of_the_jwt_flow_and_anthropic_vertex_s_body(live, google, vertex):
    vertex.reply(fixture("anthropic/text.json"))
    message = anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
        model="claude-opus-5", max_tokens=256, messages=HI, extra_headers={"anthropic-beta": "context-1m-2025-08-07"}
    )
    assert message.content[0].text == recorded("anthropic/text.json")["content"][0]["text"]
    sent = vertex.requests[-1]
    assert sent.path == f"{MODELS}/{MODEL}:rawPredict"
    assert sent.body == {"max_tokens": 256, "messages": HI, "anthropic_version": "vertex-2023-10-16"}
    assert sent.headers["authorization"].startswith("Bearer ya29.fake-")
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"

    vertex.reply(fixture("anthropic/text.json"))
    theirs = reference(google, model=MODEL, max_tokens=256, messages=HI)
    assert (theirs.path, without_version(theirs.body)) == (sent.path, without_version(sent.body))


def test_a_passed_through_stream_with_thinking_and_a_tool(live, google, vertex):
    vertex.reply(fixture("anthropic/thinking_tool_use.sse"))
    tool = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    call = {"max_tokens": 2048, "messages": HI, "tools": [tool], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    with anthropic_client(live.url, api_key=CLIENT_KEY).messages.stream(model="claude-opus-5", **call) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "tool_use"]
    sent = vertex.requests[-1]
    assert sent.path == f"{MODELS}/{MODEL}:streamRawPredict" and sent.body["stream"] is True

    vertex.reply(fixture("anthropic/thinking_tool_use.sse"))
    theirs = reference(google, model=MODEL, stream=True, **call)
    assert (theirs.path, without_version(theirs.body)) == (sent.path, without_version(sent.body))


def test_count_tokens_goes_to_vertex_count_tokens(live, google, vertex):
    vertex.reply(json_reply({"input_tokens": 17}))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    assert client.messages.count_tokens(model="claude-opus-5", messages=HI).input_tokens == 17
    sent = vertex.requests[-1]
    assert sent.path == f"{MODELS}/count-tokens:rawPredict"
    assert sent.body == {"model": MODEL, "messages": HI, "anthropic_version": "vertex-2023-10-16"}


def test_the_openai_sdk_chats_and_streams_responses_through_vertex(live, vertex):
    client = openai_client(live.url, api_key=CLIENT_KEY)
    vertex.reply(messages_stream(["Hel", "lo"]))
    stream = client.chat.completions.create(model="claude-opus-5", messages=HI, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello"
    assert vertex.requests[-1].path.endswith(":streamRawPredict")

    vertex.reply(fixture("anthropic/thinking.sse"))
    events = list(
        client.responses.create(model="claude-opus-5", input="Think", reasoning={"effort": "low"}, stream=True)
    )
    assert [item.type for item in events[-1].response.output] == ["reasoning", "message"]
    assert "model" not in vertex.requests[-1].body


def test_the_token_is_refreshed_when_it_nears_its_end_during_a_run(start_bridge, google, vertex):
    """google-auth counts a token as expired a few minutes (225 s) before it is: one of 227 s
    serves for about two seconds, then the next call gets a new one from the JWT flow."""
    tokens, _, _ = google
    tokens.lifetime = 227
    live = started(start_bridge, deployment(google))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    used = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        vertex.reply(fixture("anthropic/text.json"))
        client.messages.create(model="claude-opus-5", max_tokens=8, messages=HI)
        used.append(vertex.requests[-1].headers["authorization"])
        time.sleep(0.2)
    assert len(set(used)) >= 2, "a second token, fetched before the first expired"
    assert used == sorted(used, key=used.index), "each token used in one stretch"


def test_a_key_the_token_endpoint_refuses_is_the_operators_problem(start_bridge, google, vertex, tmp_path):
    other = tmp_path / "other.json"
    service_account(other, google[0].url)  # a key the token endpoint does not know
    live = started(start_bridge, deployment(google, credentials_file=str(other)))
    response = requests.post(
        f"{live.url}/v1/messages",
        headers={"x-api-key": CLIENT_KEY},
        json={"model": "claude-opus-5", "max_tokens": 8, "messages": HI},
    )
    assert response.status_code == 502
    assert "could not refresh its Google credentials (RefreshError)" in response.json()["error"]["message"]
    assert not vertex.requests, "nothing sent without a token"
    assert "PRIVATE KEY" not in response.text


@pytest.mark.parametrize("listed", [False, True])
@pytest.mark.parametrize(
    "status, name, sdk_error",
    [
        (429, "RESOURCE_EXHAUSTED", anthropic.RateLimitError),
        (400, "INVALID_ARGUMENT", anthropic.BadRequestError),
        (404, "NOT_FOUND", anthropic.NotFoundError),
        (503, "UNAVAILABLE", anthropic.InternalServerError),
    ],
)
def test_vertex_errors_reach_the_client_in_its_protocol(live, vertex, status, name, sdk_error, listed):
    vertex.reply(vertex_error(status, name, f"{name} from Vertex", listed=listed))
    with pytest.raises(sdk_error, match=f"{name} from Vertex"):
        anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(model="claude-opus-5", max_tokens=8, messages=HI)
    vertex.reply(vertex_error(status, name, f"{name} from Vertex", listed=listed))
    response = requests.post(
        f"{live.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
        json={"model": "claude-opus-5", "messages": HI},
    )
    assert response.status_code == status and response.json()["error"]["message"] == f"{name} from Vertex"


def test_a_rate_limited_vertex_deployment_fails_over_to_anthropics_api(start_bridge, google, vertex, fake):
    """Routes of mixed kinds: Vertex first, Anthropic's API as the backup tier."""
    backup = {"name": "anthropic-api", "protocol": "anthropic", "base_url": fake.url, "tier": 2}
    live = started(start_bridge, deployment(google), backup, BRIDGE_RETRIES=1)
    vertex.reply(vertex_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", listed=True))
    fake.reply(fixture("anthropic/text.sse"))
    with anthropic_client(live.url, api_key=CLIENT_KEY).messages.stream(
        model="claude-opus-5", max_tokens=8, messages=HI
    ) as stream:
        assert [e.type for e in stream if e.type == "message_stop"] == ["message_stop"]
    assert len(vertex.requests) == 1 and fake.last.body["model"] == "claude-opus-5"


def test_bridge_check_probes_the_vertex_deployment(google, vertex, fake):
    import os
    import subprocess
    import sys

    from tests.helpers.servers import bridge_env

    document = {"default_routes": False, "routes": [{"models": ["c*"], "deployments": [deployment(google)]}]}
    env = {**os.environ, **bridge_env(fake), "BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "k"}
    vertex.reply(json_reply({"input_tokens": 3}))
    ok = subprocess.run([sys.executable, "-m", "bridge.cli", "check"], env=env, capture_output=True, text=True)
    assert f"vertex-east5 (vertex): POST {vertex.url}{MODELS}/count-tokens:rawPredict -> reachable, HTTP 200" in (
        ok.stdout
    ), ok.stdout + ok.stderr
    assert ok.returncode == 0
    vertex.reply(vertex_error(403, "PERMISSION_DENIED", "aiplatform.endpoints.predict denied"))
    denied = subprocess.run([sys.executable, "-m", "bridge.cli", "check"], env=env, capture_output=True, text=True)
    assert denied.returncode == 1 and "failing: vertex-east5" in denied.stdout
    assert "ya29." not in ok.stdout + denied.stdout and "PRIVATE KEY" not in ok.stdout + denied.stdout


def test_application_default_credentials_serve_when_no_file_is_named(start_bridge, google, vertex, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(google[2]))
    entry = {k: v for k, v in deployment(google).items() if k != "credentials_file"}
    live = started(start_bridge, entry)
    vertex.reply(fixture("anthropic/text.json"))
    assert (
        anthropic_client(live.url, api_key=CLIENT_KEY)
        .messages.create(model="claude-opus-5", max_tokens=8, messages=HI)
        .content
    )


def test_many_calls_at_once_on_an_expired_token_refresh_it_once(start_bridge, google, vertex):
    tokens, _, _ = google
    tokens.lifetime = 226  # valid for about a second (google-auth refreshes 225 s early)
    live = started(start_bridge, deployment(google))
    vertex.reply(fixture("anthropic/text.json"))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    client.messages.create(model="claude-opus-5", max_tokens=8, messages=HI)
    time.sleep(1.5)
    before = len(tokens.server.requests)
    vertex.reply(*[fixture("anthropic/text.json") for _ in range(8)])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda _: client.messages.create(model="claude-opus-5", max_tokens=8, messages=HI), range(8))
        )
    assert all(answer.content for answer in answers)
    assert len(tokens.server.requests) - before == 1, "one token request for the eight calls"


@pytest.mark.parametrize(
    "region, host",
    [
        ("global", "https://aiplatform.googleapis.com"),
        ("us", "https://aiplatform.us.rep.googleapis.com"),
        ("europe-west1", "https://europe-west1-aiplatform.googleapis.com"),
    ],
)
def test_each_region_has_its_endpoint(region, host):
    from bridge.gateway.vertex import Vertex

    url, body, _ = Vertex("acme", region).request("/v1/messages", {"model": MODEL, "stream": True}, {}, True)
    assert url == f"{host}/v1/projects/acme/locations/{region}/publishers/anthropic/models/{MODEL}:streamRawPredict"
    assert body == {"stream": True, "anthropic_version": "vertex-2023-10-16"}


def test_the_configuration_a_reload_pickles_gets_tokens_in_the_worker_that_unpickles_it(google, vertex):
    from bridge.gateway import routes

    document = {"routes": [{"models": ["c"], "deployments": [deployment(google)]}]}
    environ = {"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "k"}
    _, table = pickle.loads(pickle.dumps(routes.configuration(environ)))
    headers = table.routes[0].deployments[0].cloud.sign("POST", vertex.url, {}, b"{}")
    assert headers["authorization"].split()[1] in google[0].issued
