"""One bridge, two upstreams of different protocols: each SDK reaches both through model names.

The fake upstream (`fake`) plays Anthropic, `other_fake` an OpenAI-compatible server (and,
with a check of path, query and header, Azure OpenAI). A client on its route's own protocol
is passed through: what reaches the upstream is what the client sent but for the model name
and credential, and what reaches the client is what the upstream sent, byte for byte (a body)
or event for event (a stream). The other pairs translate as they always did.
"""

import json
import logging

import anthropic
import openai
import pytest
import requests

from bench.processes import wait_for
from bridge.translate.translator import DONE
from tests.fake_upstream import FIXTURES, fixture, json_reply
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error
from tests.helpers.recorded import decoded, recorded, recorded_events, replay
from tests.helpers.servers import access_lines, anthropic_client, openai_client

CLIENT_KEY = "sk-client-of-the-bridge"
HI = [{"role": "user", "content": "Say hi"}]
ANTHROPIC_BODIES = sorted(
    f"anthropic/{p.name}"
    for p in (FIXTURES / "anthropic").glob("*.json")
    if not p.name.startswith("error_") and not p.name.endswith(".meta.json")
)
OPENAI_BODIES = sorted(
    f"openai/{p.name}"
    for p in (FIXTURES / "openai").glob("*.json")
    if not p.name.startswith(("error_", "responses_")) and not p.name.endswith(".meta.json")
)
# Every recorded stream, the ones ending in an error event and the several-choice one too:
# pass-through relays what the translators refuse.
ANTHROPIC_SSE = sorted(f"anthropic/{p.name}" for p in (FIXTURES / "anthropic").glob("*.sse"))
OPENAI_SSE = sorted(
    f"openai/{p.name}" for p in (FIXTURES / "openai").glob("*.sse") if not p.name.startswith("responses_")
)
CLAUDE_CODE_2_1_332 = sorted((FIXTURES / "clients" / "claude-code-2.1.332").glob("claude_code_*.json"))


def routes(fake, other_fake, **extra):
    """claude-* to the Anthropic fake; gpt-4.1 (as gpt-41-prod) and qwen* to the Chat one."""
    return json.dumps(
        {
            "default_routes": False,
            "routes": [
                {
                    "models": ["claude-*"],
                    "deployments": [{"name": "claude", "protocol": "anthropic", "base_url": fake.url}],
                },
                {
                    "models": ["gpt-4.1"],
                    "deployments": [
                        {
                            "name": "gpt",
                            "protocol": "openai-chat",
                            "base_url": f"{other_fake.url}/v1",
                            "model": "gpt-41-prod",
                        }
                    ],
                },
                {
                    "models": ["qwen*"],
                    "deployments": [{"name": "local", "protocol": "openai-chat", "base_url": f"{other_fake.url}/v1"}],
                },
            ],
            **extra,
        }
    )


@pytest.fixture
def live(start_bridge, fake, other_fake):
    return start_bridge(BRIDGE_ROUTES=routes(fake, other_fake))


def healthy(live):
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


# -- each SDK reaches both upstreams ---------------------------------------------------------


def test_the_openai_sdk_reaches_claude_by_one_name_and_a_chat_model_by_another(live, fake, other_fake):
    fake.reply(fixture("anthropic/text.json"))
    other_fake.reply(fixture("openai/text.json"))
    client = openai_client(live.url, api_key=CLIENT_KEY)

    claude = client.chat.completions.create(model="claude-opus-5-5", messages=HI)
    assert fake.last.path == "/v1/messages" and fake.last.body["model"] == "claude-opus-5-5"
    assert claude.choices[0].message.content == recorded("anthropic/text.json")["content"][0]["text"]
    assert claude.model == "claude-opus-5-5"

    # logprobs: what the translator to Anthropic refuses goes through to an OpenAI upstream
    gpt = client.chat.completions.create(model="gpt-4.1", messages=HI, logprobs=True, top_logprobs=2)
    assert other_fake.last.path == "/v1/chat/completions"
    assert other_fake.last.body == {"model": "gpt-41-prod", "messages": HI, "logprobs": True, "top_logprobs": 2}
    assert gpt.choices[0].message.content == recorded("openai/text.json")["choices"][0]["message"]["content"]
    assert gpt.model == recorded("openai/text.json")["model"], "the upstream's answer, as it wrote it"
    assert len(fake.requests) == 1 and len(other_fake.requests) == 1


def test_the_anthropic_sdk_reaches_a_chat_model_by_one_name_and_claude_by_another(live, fake, other_fake):
    other_fake.reply(fixture("openai/text.json"))
    fake.reply(fixture("anthropic/text.json"))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)

    local = client.messages.create(model="qwen3-32b", max_tokens=256, messages=HI)
    assert other_fake.last.path == "/v1/chat/completions" and other_fake.last.body["model"] == "qwen3-32b"
    assert local.content[0].text == recorded("openai/text.json")["choices"][0]["message"]["content"]

    claude = client.messages.create(
        model="claude-opus-5-5",
        max_tokens=256,
        messages=HI,
        extra_body={"top_k": 5},
        extra_headers={"anthropic-beta": "context-1m-2025-08-07", "anthropic-version": "2023-01-01"},
    )
    sent = fake.last
    assert sent.path == "/v1/messages"
    assert sent.body == {"model": "claude-opus-5-5", "max_tokens": 256, "messages": HI, "top_k": 5}
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert sent.headers["anthropic-version"] == "2023-01-01", "the client's: the body is written for it"
    assert claude.content[0].text == recorded("anthropic/text.json")["content"][0]["text"]


def test_the_claude_code_captures_reach_both_upstreams(live, fake, other_fake):
    """The same Claude Code request, by model name: passed to Anthropic, translated for a Chat model."""
    capture = json.loads((CLAUDE_CODE_2_1_332[0].parent / "claude_code_p_say_hi.json").read_text())
    fake.reply(fixture("anthropic/text_sdk.sse"))
    response = replay(live.url, capture)
    assert response.status_code == 200
    assert [e.event for e in decoded(response.content)] == [e for e, _ in recorded_events("anthropic/text_sdk.sse")]
    assert fake.last.body == capture["body"], "passed through untouched: the model name is the route's own"

    capture["body"]["model"] = "qwen3-32b"
    other_fake.reply(fixture("openai/text.sse"))
    response = replay(live.url, capture)
    names = [e.event for e in decoded(response.content)]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert other_fake.last.path == "/v1/chat/completions" and other_fake.last.body["model"] == "qwen3-32b"


# -- pass-through is the upstream's answer -------------------------------------------------------


@pytest.mark.parametrize("name", ANTHROPIC_BODIES)
def test_a_passed_through_messages_body_is_the_upstreams_bytes(live, fake, name):
    fake.reply(fixture(name))
    response = requests.post(
        f"{live.url}/v1/messages",
        json={"model": "claude-opus-5-5", "max_tokens": 64, "messages": HI},
        headers=ANTHROPIC_HEADERS,
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.content == (FIXTURES / name).read_bytes()


@pytest.mark.parametrize("name", OPENAI_BODIES)
def test_a_passed_through_chat_body_is_the_upstreams_bytes(live, other_fake, name):
    other_fake.reply(fixture(name))
    response = requests.post(f"{live.url}/v1/chat/completions", json={"model": "qwen3", "messages": HI})
    assert response.status_code == 200
    assert response.content == (FIXTURES / name).read_bytes()


@pytest.mark.parametrize("name", ANTHROPIC_SSE)
def test_a_passed_through_messages_stream_is_the_upstreams_events(live, fake, name):
    fake.reply(fixture(name))
    response = requests.post(
        f"{live.url}/v1/messages",
        json={"model": "claude-opus-5-5", "max_tokens": 64, "messages": HI, "stream": True},
        headers=ANTHROPIC_HEADERS,
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    got = [(e.event, json.loads(e.data)) for e in decoded(response.content)]
    assert got == recorded_events(name)


@pytest.mark.parametrize("name", OPENAI_SSE)
@pytest.mark.parametrize("options", [{"include_usage": True}, None], ids=["usage asked", "usage not asked"])
def test_a_passed_through_chat_stream_is_the_upstreams_events(live, other_fake, name, options):
    """Chat streams are data-only: an `event:` name (Groq names its error event) is not kept. Bridge
    asks for usage: what the client did not ask for (usage-only chunks, usage fields) is not its."""
    other_fake.reply(fixture(name))
    body = {"model": "qwen3", "messages": HI, "stream": True, **({"stream_options": options} if options else {})}
    response = requests.post(f"{live.url}/v1/chat/completions", json=body)
    got = [DONE if e.data.strip() == DONE else json.loads(e.data) for e in decoded(response.content)]
    expected = [payload for _, payload in recorded_events(name)]
    if not options:
        expected = [
            {k: v for k, v in p.items() if k != "usage"} if isinstance(p, dict) else p
            for p in expected
            if not (isinstance(p, dict) and isinstance(p.get("usage"), dict) and not p.get("choices"))
        ]
    assert other_fake.last.body["stream_options"] == {"include_usage": True}
    assert got == expected


def test_a_passed_through_stream_is_metered_and_logged_with_its_deployment(start_bridge, fake, other_fake):
    live = start_bridge(BRIDGE_ROUTES=routes(fake, other_fake), BRIDGE_LOG_LEVEL="INFO")
    fake.reply(fixture("anthropic/text_sdk.sse"))
    with access_lines() as lines:
        with anthropic_client(live.url, api_key=CLIENT_KEY).messages.stream(
            model="claude-opus-5-5", max_tokens=64, messages=HI
        ) as stream:
            message = stream.get_final_message()
        wait_for(lambda: lines, "the access line")
    (line,) = lines
    assert line["direction"] == "messages_passthrough" and line["deployment"] == "claude"
    assert line["output_tokens"] == message.usage.output_tokens and line["input_tokens"] == message.usage.input_tokens


@pytest.mark.parametrize(
    "path, body, name",
    [
        ("/v1/chat/completions", {"model": "qwen3", "messages": HI}, "openai/text.sse"),
        ("/v1/messages", {"model": "claude-opus-5-5", "max_tokens": 9, "messages": HI}, "anthropic/text_sdk.sse"),
    ],
    ids=["chat", "messages"],
)
@pytest.mark.parametrize("cut", ["connection dropped", "body ended"])
def test_a_passed_through_stream_cut_short_ends_in_an_error_event(live, fake, other_fake, path, body, name, cut):
    reply = fixture(name, drop_after=3) if cut == "connection dropped" else fixture(name)
    if cut == "body ended":
        reply.events = reply.events[:3]  # a clean end of the body, before the protocol's last event
    (other_fake if name.startswith("openai") else fake).reply(reply)
    response = requests.post(f"{live.url}{path}", json={**body, "stream": True}, headers=ANTHROPIC_HEADERS)
    events = decoded(response.content)
    assert "error" in json.loads(events[-1].data) and "[DONE]" not in response.text
    assert "event: message_stop" not in response.text
    healthy(live)


def test_a_passed_through_upstream_error_reaches_the_sdk_in_its_own_shape(live, fake, other_fake):
    fake.reply(fixture("anthropic/error_400.json"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
            model="claude-opus-5-5", max_tokens=64, messages=HI
        )
    assert caught.value.body["error"]["message"] == recorded("anthropic/error_400.json")["error"]["message"]
    other_fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(openai.RateLimitError):
        openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(model="qwen3", messages=HI)
    healthy(live)


def test_count_tokens_of_an_anthropic_route_is_the_upstreams_own_count(live, fake, other_fake):
    fake.reply(json_reply({"input_tokens": 4242}))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    assert client.messages.count_tokens(model="claude-opus-5-5", messages=HI).input_tokens == 4242
    assert fake.last.path == "/v1/messages/count_tokens"
    assert fake.last.body == {"model": "claude-opus-5-5", "messages": HI}
    assert client.messages.count_tokens(model="qwen3", messages=HI).input_tokens > 0, "the bridge's estimate"
    assert len(fake.requests) == 1 and other_fake.requests == []


# -- what is refused, in the client's own protocol ------------------------------------------------


def test_a_model_without_a_route_is_a_404_in_each_fronts_protocol(live, fake, other_fake):
    with pytest.raises(openai.NotFoundError, match="'mistral-large' has no route"):
        openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(model="mistral-large", messages=HI)
    with pytest.raises(openai.NotFoundError, match="'mistral-large' has no route"):
        openai_client(live.url, api_key=CLIENT_KEY).responses.create(model="mistral-large", input="hi")
    response = requests.post(
        f"{live.url}/v1/messages",
        json={"model": "mistral-large", "max_tokens": 9, "messages": HI},
        headers=ANTHROPIC_HEADERS,
    )
    assert is_anthropic_error(response, 404, "not_found_error")
    assert fake.requests == [] and other_fake.requests == []
    healthy(live)


@pytest.mark.parametrize(
    "path, body, param",
    [
        ("/v1/chat/completions", {"model": "qwen3", "messages": HI, "stream": "yes"}, "stream"),
        ("/v1/chat/completions", {"model": "qwen3", "messages": HI, "max_tokens": "many"}, "max_tokens"),
        ("/v1/chat/completions", {"messages": HI}, "model"),
        ("/v1/messages", {"model": "claude-opus-5-5", "max_tokens": 0, "messages": HI}, "max_tokens"),
        ("/v1/messages", {"model": "claude-opus-5-5", "max_tokens": 9, "messages": HI, "stream": 1}, "stream"),
    ],
)
def test_a_passed_through_body_the_bridge_cannot_read_is_a_400_naming_the_field(
    live, fake, other_fake, path, body, param
):
    response = requests.post(
        f"{live.url}{path}", json=body, headers=ANTHROPIC_HEADERS if "messages" == path[4:] else {}
    )
    if path == "/v1/messages":
        assert is_anthropic_error(response, 400, "invalid_request_error")
    else:
        assert is_openai_error(response, 400) and response.json()["error"]["param"] == param
    assert param in response.json()["error"]["message"]
    assert fake.requests == [] and other_fake.requests == []
    healthy(live)


def test_the_responses_front_translates_for_a_route_to_a_chat_upstream(live, other_fake):
    other_fake.reply(fixture("openai/text.json"))
    response = openai_client(live.url, api_key=CLIENT_KEY).responses.create(model="gpt-4.1", input="hi")
    assert response.output_text == recorded("openai/text.json")["choices"][0]["message"]["content"]
    assert other_fake.last.path == "/v1/chat/completions" and other_fake.last.body["model"] == "gpt-41-prod"
    healthy(live)


# -- Azure OpenAI ---------------------------------------------------------------------------------

AZURE_KEY = "azure-key-of-the-bridge"


def azure(path, reply, model=None):
    """An Azure OpenAI resource: anything but its own path and query is a 404, anything without
    its `api-key` header (or with a bearer token) a 401, as Azure answers them."""

    def answer(request):
        if request.path != path or (model and request.body.get("model") != model):
            return json_reply({"error": {"code": "404", "message": "Resource not found"}}, 404)
        if request.headers.get("api-key") != AZURE_KEY or "authorization" in request.headers:
            return json_reply(
                {"error": {"code": "401", "message": "Access denied due to invalid subscription key"}}, 401
            )
        return reply

    return answer


@pytest.mark.parametrize(
    "deployment, path, model",
    [
        (
            {"base_url": "/openai/deployments/gpt-41", "query": {"api-version": "2024-10-21"}},
            "/openai/deployments/gpt-41/chat/completions?api-version=2024-10-21",
            None,
        ),
        ({"base_url": "/openai/v1", "model": "gpt-41"}, "/openai/v1/chat/completions", "gpt-41"),
    ],
    ids=["deployment-url", "v1-url"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_both_fronts_reach_azure_openai(start_bridge, other_fake, monkeypatch, deployment, path, model, stream):
    monkeypatch.setenv("AZURE_EAST_KEY", AZURE_KEY)
    route = {
        "models": ["gpt-4.1"],
        "deployments": [
            {
                "name": "azure-east",
                "protocol": "openai-chat",
                "auth": "api-key",
                "api_key_env": "AZURE_EAST_KEY",
                **deployment,
                "base_url": other_fake.url + deployment["base_url"],
            }
        ],
    }
    live = start_bridge(BRIDGE_ROUTES=json.dumps({"routes": [route]}), BRIDGE_CLIENT_KEYS=f"team:{CLIENT_KEY}")
    other_fake.default = azure(path, fixture("openai/text.sse" if stream else "openai/text.json"), model)
    text = recorded("openai/text.json")["choices"][0]["message"]["content"]

    chat = openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(
        model="gpt-4.1", messages=HI, stream=stream
    )
    if stream:
        chat = "".join(chunk.choices[0].delta.content or "" for chunk in chat if chunk.choices)
        assert chat
    else:
        assert chat.choices[0].message.content == text
    message = anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
        model="gpt-4.1", max_tokens=64, messages=HI, stream=stream
    )
    if stream:
        assert [event.type for event in message][-1] == "message_stop"
    else:
        assert message.content[0].text == text
    assert [r.path for r in other_fake.requests] == [path, path]
    assert all(CLIENT_KEY not in json.dumps(r.headers) for r in other_fake.requests), "the client's key stays here"


# -- per-route max_tokens caps --------------------------------------------------------------------


# count_tokens requests have no max_tokens to cap.
GENERATIONS_2_1_332 = [
    path for path in CLAUDE_CODE_2_1_332 if "count_tokens" not in json.loads(path.read_text())["path"]
]


@pytest.mark.parametrize("path", GENERATIONS_2_1_332, ids=lambda p: p.stem)
def test_each_routes_cap_applies_to_the_claude_code_captures(start_bridge, fake, other_fake, path):
    capture = json.loads(path.read_text())
    document = {
        "default_routes": False,
        "routes": [
            {
                "models": ["claude-haiku-*", "gpt-4o"],
                "deployments": [
                    {"name": "local", "protocol": "openai-chat", "base_url": f"{other_fake.url}/v1", "max_tokens": 8192}
                ],
            },
            {
                "models": ["claude-*"],
                "deployments": [{"name": "claude", "protocol": "anthropic", "base_url": fake.url, "max_tokens": 32000}],
            },
        ],
    }
    live = start_bridge(BRIDGE_ROUTES=json.dumps(document))
    streamed = bool(capture["body"].get("stream"))
    fake.reply(fixture("anthropic/text_sdk.sse" if streamed else "anthropic/text.json"))
    other_fake.reply(fixture("openai/text.sse" if streamed else "openai/text.json"))
    asked = capture["body"]["max_tokens"]
    assert replay(live.url, capture).status_code == 200
    if fake.requests:
        assert fake.last.body["max_tokens"] == min(asked, 32000)
        assert fake.last.body == {**capture["body"], "max_tokens": min(asked, 32000)}, "nothing else changes"
    else:
        assert other_fake.last.body["max_completion_tokens"] == min(asked, 8192)


# -- GET /v1/models -------------------------------------------------------------------------------


def test_models_lists_every_routes_names_in_each_protocols_shape(live, fake, other_fake):
    listed = openai_client(live.url, api_key=CLIENT_KEY).models.list()
    assert [m.id for m in listed.data] == ["gpt-4.1"]
    page = anthropic_client(live.url, api_key=CLIENT_KEY).models.list()
    assert [m.id for m in page.data] == ["gpt-4.1"]
    assert anthropic_client(live.url, api_key=CLIENT_KEY).models.retrieve("gpt-4.1").id == "gpt-4.1"
    assert fake.requests == [] and other_fake.requests == [], "without default routes no upstream is asked"


def test_models_lists_the_route_names_before_the_default_upstreams_own(start_bridge, fake, other_fake):
    live = start_bridge(BRIDGE_ROUTES=routes(fake, other_fake, default_routes=True))
    fake.reply(json_reply({"data": [{"id": "claude-opus-5-5", "type": "model"}], "has_more": False}))
    assert [m.id for m in openai_client(live.url, api_key=CLIENT_KEY).models.list().data] == [
        "gpt-4.1",
        "claude-opus-5-5",
    ]


def test_a_client_leaving_a_passed_through_stream_closes_the_upstream(live, fake):
    fake.reply(fixture("anthropic/text_sdk.sse", stall_after=3))
    response = requests.post(
        f"{live.url}/v1/messages",
        json={"model": "claude-opus-5-5", "max_tokens": 9, "messages": HI, "stream": True},
        headers=ANTHROPIC_HEADERS,
        stream=True,
    )
    assert b"message_start" in next(response.iter_content(None))
    response.close()
    wait_for(lambda: fake.closed_streams, "the bridge to hang up on the upstream")
    healthy(live)


def test_a_deployments_refused_key_is_a_502_and_the_log_names_the_deployment(
    start_bridge, other_fake, monkeypatch, caplog
):
    """A key the bridge holds is the operator's: its 401 is no client's business (nor its message,
    which may quote the key)."""
    monkeypatch.setenv("AZURE_EAST_KEY", AZURE_KEY)
    deployment = {
        "name": "azure-east",
        "protocol": "openai-chat",
        "base_url": f"{other_fake.url}/openai/v1",
        "auth": "api-key",
        "api_key_env": "AZURE_EAST_KEY",
        "query": {"api-version": "2024-10-21", "sig": "a-shared-access-signature"},  # the log shows ***
    }
    document = {"routes": [{"models": ["gpt-4.1"], "deployments": [deployment]}]}
    live = start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_CLIENT_KEYS=f"team:{CLIENT_KEY}")
    other_fake.reply(json_reply({"error": {"code": "401", "message": f"Access denied for key {AZURE_KEY}"}}, 401))
    caplog.set_level(logging.WARNING, logger="bridge.gateway.upstream")
    with pytest.raises(openai.InternalServerError) as caught:
        openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(model="gpt-4.1", messages=HI)
    assert caught.value.status_code == 502 and "upstream credentials were refused" in caught.value.message
    assert AZURE_KEY not in caught.value.response.text
    assert "deployment azure-east (api_key_env AZURE_EAST_KEY)" in caplog.text and AZURE_KEY not in caplog.text
    assert "?api-version=2024-10-21&sig=***" in caplog.text and "a-shared-access-signature" not in caplog.text
    healthy(live)


def test_a_401_for_the_clients_own_key_forwarded_to_a_deployment_stays_the_clients(live, other_fake):
    other_fake.reply(
        json_reply({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, 401)
    )
    with pytest.raises(openai.AuthenticationError):
        openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(model="qwen3", messages=HI)
    assert other_fake.last.headers["authorization"] == f"Bearer {CLIENT_KEY}", "no client keys: the client's own"


@pytest.mark.parametrize(
    "path, body, upstream, reply, status",
    [
        (
            "/v1/messages",
            {"model": "claude-opus-5-5", "max_tokens": 9, "messages": HI},
            "fake",
            json_reply({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            529,
        ),
        (
            "/v1/chat/completions",
            {"model": "qwen3", "messages": HI},
            "other_fake",
            json_reply({"error": {"message": "rate limited", "type": "rate_limit_error"}}),
            429,
        ),
        ("/v1/chat/completions", {"model": "qwen3", "messages": HI}, "other_fake", json_reply([1, 2]), 502),
    ],
    ids=["anthropic-error-in-a-200", "chat-error-in-a-200", "not-an-object"],
)
def test_a_passed_through_200_that_is_no_answer_is_an_error(live, request, path, body, upstream, reply, status):
    request.getfixturevalue(upstream).reply(reply)
    response = requests.post(f"{live.url}{path}", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == status and "error" in response.json()
    healthy(live)
