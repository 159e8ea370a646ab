"""A Responses client on an `openai-responses` route, over real HTTP: passed through.

What reaches the upstream is what the client sent but for the model name and the credential;
what reaches the client is what the upstream sent, a body byte for byte and a stream event for
event, metered and logged; a stream cut short ends in an error event; the upstream's errors
reach the openai SDK in their own shape.
"""

import json

import openai
import pytest
import requests

from bench.processes import wait_for
from tests.fake_upstream import FIXTURES, ResponsesRules, fixture, responses_stream
from tests.helpers.directions import is_openai_error
from tests.helpers.recorded import RESPONSES_STREAMS, decoded, recorded, recorded_events
from tests.helpers.servers import access_lines, openai_client

CLIENT_KEY = "sk-client-of-the-bridge"
UPSTREAM_KEY = "sk-upstream-of-the-bridge"
RESPONSES_BODIES = sorted(
    f"openai/{p.name}"
    for p in (FIXTURES / "openai").glob("responses_*.json")
    if "_error_" not in p.name and not p.name.endswith(".meta.json")
)


@pytest.fixture
def live(start_bridge, other_fake, monkeypatch):
    """codex-mini routed to a Responses deployment on `other_fake` as gpt-5-codex, with its own key."""
    monkeypatch.setenv("OPENAI_KEY", UPSTREAM_KEY)
    other_fake.rules = ResponsesRules()
    document = {
        "default_routes": False,
        "routes": [
            {
                "models": ["codex-mini"],
                "deployments": [
                    {
                        "name": "openai",
                        "protocol": "openai-responses",
                        "base_url": f"{other_fake.url}/v1",
                        "api_key_env": "OPENAI_KEY",
                        "model": "gpt-5-codex",
                        "max_tokens": 4096,
                    }
                ],
            }
        ],
    }
    return start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_CLIENT_KEYS=CLIENT_KEY, BRIDGE_LOG_LEVEL="INFO")


def client(live):
    return openai_client(live.url, api_key=CLIENT_KEY)


def healthy(live):
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


def test_the_request_goes_on_as_the_client_wrote_it_but_for_model_key_and_cap(live, other_fake):
    other_fake.reply(fixture("openai/responses_text.json"))
    answer = client(live).responses.create(
        model="codex-mini",
        input=[{"role": "user", "content": "Say hi"}],
        instructions="Be brief.",
        store=False,
        include=["reasoning.encrypted_content"],
        max_output_tokens=100000,
        reasoning={"effort": "high", "summary": "auto"},
    )
    sent = other_fake.last
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.body == {
        "model": "gpt-5-codex",
        "input": [{"role": "user", "content": "Say hi"}],
        "instructions": "Be brief.",
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": 4096,  # the deployment's cap
        "reasoning": {"effort": "high", "summary": "auto"},
    }
    assert answer.output_text == recorded("openai/responses_text.json")["output"][0]["content"][0]["text"]


@pytest.mark.parametrize("name", RESPONSES_BODIES)
def test_a_passed_through_body_is_the_upstreams_bytes(live, other_fake, name):
    other_fake.reply(fixture(name))
    response = requests.post(
        f"{live.url}/v1/responses",
        json={"model": "codex-mini", "input": "Say hi"},
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.content == (FIXTURES / name).read_bytes()


@pytest.mark.parametrize("name", RESPONSES_STREAMS)
def test_a_passed_through_stream_is_the_upstreams_events(live, other_fake, name):
    other_fake.reply(fixture(name))
    response = requests.post(
        f"{live.url}/v1/responses",
        json={"model": "codex-mini", "input": "Say hi", "stream": True},
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    got = [(e.event, json.loads(e.data)) for e in decoded(response.content)]
    assert got == recorded_events(name)
    healthy(live)


def test_the_sdks_accumulator_gets_the_answer_and_the_access_line_its_usage(live, other_fake):
    other_fake.reply(fixture("openai/responses_tool_call.sse"))
    with access_lines() as lines:
        with client(live).responses.stream(model="codex-mini", input="What is the weather?") as stream:
            final = stream.get_final_response()
        wait_for(lambda: lines, "the access line")
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert call.name and json.loads(call.arguments) is not None
    (line,) = lines
    assert line["direction"] == "responses_passthrough" and line["deployment"] == "openai"
    assert line["upstream_model"] == "gpt-5-codex" and line["usage"] == "reported"
    assert (line["input_tokens"], line["output_tokens"]) == (final.usage.input_tokens, final.usage.output_tokens)


@pytest.mark.parametrize("cut", ["connection dropped", "body ended"])
def test_a_stream_cut_short_ends_in_an_error_event_and_is_counted_as_estimated(live, other_fake, cut):
    reply = responses_stream(text="Hello there, " * 40)
    if cut == "connection dropped":
        reply.drop_after = 5
    else:
        reply.events = reply.events[:5]  # a clean end of the body, before response.completed
    other_fake.reply(reply)
    with access_lines() as lines:
        response = requests.post(
            f"{live.url}/v1/responses",
            json={"model": "codex-mini", "input": "Say hi", "stream": True},
            headers={"authorization": f"Bearer {CLIENT_KEY}"},
        )
        wait_for(lambda: lines, "the access line")
    events = decoded(response.content)
    message = json.loads(events[-1].data)["error"]["message"]
    assert events[-1].event == "error" and ("incomplete" in message or "mid-response" in message)
    assert [e.event for e in events][-2] == "response.output_text.delta", "the text so far, then the error"
    assert lines[0]["usage"] == "estimated" and lines[0]["input_tokens"] > 0 and lines[0]["output_tokens"] > 0
    healthy(live)


def test_an_upstream_error_event_is_relayed_as_it_came(live, other_fake):
    other_fake.reply(fixture("openai/responses_failed.sse"))
    with pytest.raises(openai.APIError) as caught:
        with client(live).responses.stream(model="codex-mini", input="Say hi") as stream:
            stream.get_final_response()
    assert caught.value.message == recorded_events("openai/responses_failed.sse")[-2][1]["error"]["message"]
    healthy(live)


@pytest.mark.parametrize(
    "name, error_class",
    [
        ("openai/error_429.json", openai.RateLimitError),
        ("openai/error_500.json", openai.InternalServerError),
        ("openai/responses_error_400_temperature.json", openai.BadRequestError),
    ],
)
def test_an_upstream_error_reaches_the_sdk_in_its_own_shape(live, other_fake, name, error_class):
    other_fake.reply(fixture(name))
    with pytest.raises(error_class) as caught:
        openai_client(live.url, api_key=CLIENT_KEY).with_options(max_retries=0).responses.create(
            model="codex-mini", input="Say hi"
        )
    assert recorded(name)["error"]["message"] in caught.value.message
    healthy(live)


def test_what_the_upstream_refuses_reaches_the_client_in_its_words(live, other_fake):
    """The fake keeps OpenAI's rules: an echoed message's id under store:false is a 404 of its own."""
    echoed = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}
    with pytest.raises(openai.NotFoundError, match="Items are not persisted when `store` is set to false"):
        client(live).responses.create(model="codex-mini", input=[echoed], store=False)
    healthy(live)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": "codex-mini", "input": "hi", "stream": "yes"}, "stream"),
        ({"model": "codex-mini", "input": "hi", "max_output_tokens": "many"}, "max_output_tokens"),
        ({"model": "codex-mini", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_a_body_the_bridge_cannot_read_is_a_400_naming_the_field(live, other_fake, body, param):
    response = requests.post(f"{live.url}/v1/responses", json=body, headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert is_openai_error(response, 400) and response.json()["error"]["param"] == param
    assert other_fake.requests == []
    healthy(live)
