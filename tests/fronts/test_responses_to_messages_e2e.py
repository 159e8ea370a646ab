"""End to end: the official openai SDK (and Codex's own requests) -> bridge's /v1/responses over
HTTP -> a fake Anthropic upstream replaying tests/fixtures/anthropic.

Expectations are read from the recordings; what the translators make of each piece is
tested in test_responses_to_messages_{request,response,stream}.py, here only that it
reaches a real client whole.
"""

import json

import openai
import pydantic
import pytest
import requests

from bridge.protocols import sse
from bridge.protocols.schemas.anthropic import validate_messages
from tests.fake_upstream import FIXTURES, Reply, fixture, json_reply
from tests.helpers.accumulators import anthropic_stream_message, comparable
from tests.helpers.directions import is_openai_error
from tests.helpers.recorded import OPENAI_CLIENT_ERRORS, recorded

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a place",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
}
PELICAN = {"type": "function", "name": "pelican_name_generator", "parameters": {"type": "object"}}
FIXED_VERSION = {"type": "function", "name": "fixed_version", "parameters": {"type": "object"}}
QUESTION = "What's the weather in Paris?"
CAPTURES = sorted((FIXTURES / "clients/codex-0.171.0/captures").glob("*.json"))


def blocks(name, kind):
    """The blocks of one type in a recorded answer (.json body or .sse stream)."""
    message = anthropic_stream_message(name) if name.endswith(".sse") else recorded(name)
    return [block for block in message["content"] if block["type"] == kind]


# -- responses.create ---------------------------------------------------------------------


def test_plain_create(openai_sdk, fake):
    message = recorded("anthropic/text.json")
    fake.reply(fixture("anthropic/text.json"))
    response = openai_sdk.responses.create(model="claude-sonnet-4-5", instructions="Be kind.", input=QUESTION)
    assert response.status == "completed" and response.model == "claude-sonnet-4-5"
    assert response.output_text == message["content"][0]["text"]
    assert response.usage.input_tokens == message["usage"]["input_tokens"]
    assert response.usage.output_tokens == message["usage"]["output_tokens"]
    sent = fake.last
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == "sk-client"
    cached = {"cache_control": {"type": "ephemeral"}}  # BRIDGE_PROMPT_CACHE's default
    assert sent.body["system"] == [{"type": "text", "text": "Be kind.", **cached}] and sent.body["max_tokens"] == 32000
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": QUESTION, **cached}]}]


def test_create_with_tools(openai_sdk, fake):
    [use] = blocks("anthropic/tool_use.json", "tool_use")
    fake.reply(fixture("anthropic/tool_use.json"))
    response = openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, tools=[WEATHER])
    [call] = [item for item in response.output if item.type == "function_call"]
    assert (call.call_id, call.name, json.loads(call.arguments)) == (use["id"], use["name"], use["input"])
    assert fake.last.body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a place",
            "input_schema": WEATHER["parameters"],
            "cache_control": {"type": "ephemeral"},
        }
    ]


def test_create_with_parallel_tool_calls(openai_sdk, fake):
    uses = blocks("anthropic/tool_use_parallel.sse", "tool_use")
    fake.reply(json_reply(anthropic_stream_message("anthropic/tool_use_parallel.sse")))
    response = openai_sdk.responses.create(model="claude-sonnet-4-5", input="Name two pelicans", tools=[PELICAN])
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        (u["id"], u["name"], u["input"]) for u in uses
    ]
    assert len(calls) == 2


def test_thinking_is_a_reasoning_item_with_its_summary(openai_sdk, fake):
    [thinking] = blocks("anthropic/thinking.json", "thinking")
    fake.reply(fixture("anthropic/thinking.json"))
    response = openai_sdk.responses.create(
        model="claude-sonnet-4-5",
        input=QUESTION,
        reasoning={"effort": "high", "summary": "auto"},
        include=["reasoning.encrypted_content"],
    )
    [reasoning] = [item for item in response.output if item.type == "reasoning"]
    assert [part.text for part in reasoning.summary] == [thinking["thinking"]]
    assert reasoning.encrypted_content and thinking["thinking"] not in response.output_text
    assert fake.last.body["thinking"]["type"] == "enabled"


def test_a_refusal_is_a_refusal_part(openai_sdk, fake):
    fake.reply(fixture("anthropic/refusal.json"))
    response = openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION)
    parts = [part for item in response.output if item.type == "message" for part in item.content]
    assert [part.refusal for part in parts if part.type == "refusal"] == [
        recorded("anthropic/refusal.json")["stop_details"]["explanation"]
    ]


def test_max_tokens_is_an_incomplete_response(openai_sdk, fake):
    fake.reply(fixture("anthropic/max_tokens.json"))
    response = openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, max_output_tokens=16)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert fake.last.body["max_tokens"] == 16


def test_structured_output_with_a_json_schema_on_a_model_without_native_output(openai_sdk, fake):
    """A forced tool carries the answer (claude-3-7-sonnet takes no output_config.format)."""

    class Weather(pydantic.BaseModel):
        location: str
        temperature_c: float

    answer = {"location": "Paris", "temperature_c": 21.5}
    fake.reply(
        json_reply(
            {
                **recorded("anthropic/tool_use.json"),
                "content": [{"type": "tool_use", "id": "toolu_01", "name": "Weather", "input": answer}],
            }
        )
    )
    response = openai_sdk.responses.parse(model="claude-3-7-sonnet-latest", input=QUESTION, text_format=Weather)
    assert response.output_parsed == Weather(**answer) and response.status == "completed"
    [tool] = fake.last.body["tools"]
    assert tool["name"] == "Weather" and set(tool["input_schema"]["properties"]) == set(answer)
    assert fake.last.body["tool_choice"] == {"type": "tool", "name": "Weather"}


# -- streams ------------------------------------------------------------------------------

STREAMS = [
    "text.sse",
    "tool_use.sse",
    "tool_use_parallel.sse",
    "thinking_tool_use.sse",
    "refusal.sse",
    "max_tokens_mid_tool.sse",
]


@pytest.mark.parametrize("name", STREAMS)
def test_the_stream_helpers_final_response_equals_the_response_not_streamed(openai_sdk, fake, name):
    """As OpenAI does, a response cut short by max tokens ends in response.incomplete; a call it
    cut carries the arguments its deltas streamed (the non-streamed answer has only their parse)."""
    fake.reply(json_reply(anthropic_stream_message(f"anthropic/{name}")), fixture(f"anthropic/{name}"))
    asked = dict(
        model="claude-sonnet-4-5",
        input=QUESTION,
        tools=[WEATHER, PELICAN, FIXED_VERSION],
        reasoning={"effort": "low", "summary": "auto"},
        include=["reasoning.encrypted_content"],
    )
    whole = openai_sdk.responses.create(**asked)
    with openai_sdk.responses.stream(**asked) as stream:
        events = list(stream)
        # the helper's final response is a completed one's; an incomplete one is its last event's
        final = stream.get_final_response() if whole.status == "completed" else events[-1].response
    assert events[0].type == "response.created" and events[-1].type == f"response.{whole.status}"
    streamed = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    for item in whole.output:
        if item.type == "function_call" and item.status == "incomplete":
            item.arguments = streamed  # the only call, the one cut short
    assert comparable(final) == comparable(whole)
    assert fake.last.body["stream"] is True


def test_a_midstream_upstream_error_is_response_failed(openai_sdk, fake):
    fake.reply(fixture("anthropic/error_midstream_overloaded.sse"))
    events = list(openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, stream=True))
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error.code == "server_error" and "Overloaded" in failed.response.error.message
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello"


def test_a_client_gets_data_keepalives_the_sdk_passes_by_while_the_upstream_only_pings(start_bridge, fake):
    """Pings before message_start become comments (the stream helper takes nothing before
    response.created); after it, `keepalive` data events, which reset Codex's idle timer."""
    live = start_bridge(BRIDGE_PING_INTERVAL="0.25")
    events = fixture("anthropic/text.sse").events
    pings = [b'event: ping\ndata: {"type": "ping"}\n\n'] * 6
    paced = events[:1] + pings + events[1:]
    fake.reply(
        Reply(headers={"content-type": "text/event-stream"}, events=pings + paced, pace=0.1),
        Reply(headers={"content-type": "text/event-stream"}, events=pings + paced, pace=0.1),
    )
    raw = requests.post(
        f"{live.url}/v1/responses",
        stream=True,
        headers={"authorization": "Bearer sk-client"},
        json={"model": "claude-sonnet-4-5", "input": QUESTION, "stream": True},
    ).content.decode()
    opening, _, rest = raw.partition("event: response.created\n")
    assert "data:" not in opening and ": keep-alive" in opening
    assert 'event: keepalive\ndata: {"type":"keepalive"}\n\n' in rest
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    with client.responses.stream(model="claude-sonnet-4-5", input=QUESTION) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "keepalive" in types and final.output_text == "".join(
        b["text"] for b in blocks("anthropic/text.sse", "text")
    )


# -- conversations ------------------------------------------------------------------------


def test_two_turn_tool_loop_with_function_call_output(openai_sdk, fake):
    fake.reply(fixture("anthropic/tool_use.json"), fixture("anthropic/text.json"))
    history = [{"role": "user", "content": QUESTION}]
    first = openai_sdk.responses.create(model="claude-sonnet-4-5", input=history, tools=[WEATHER])
    [call] = [item for item in first.output if item.type == "function_call"]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"})
    second = openai_sdk.responses.create(model="claude-sonnet-4-5", input=history, tools=[WEATHER])
    assert second.status == "completed" and second.output_text
    sent = fake.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [b["id"] for b in sent[1]["content"] if b["type"] == "tool_use"] == [call.call_id]
    assert sent[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": call.call_id,
            "content": "sunny, 21 C",
            "cache_control": {"type": "ephemeral"},
        }
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_reasoning_round_trips_as_the_same_signed_thinking_block(openai_sdk, fake, streamed):
    """Codex echoes every reasoning item; its encrypted_content is the signed block, byte-exact."""
    [thinking] = blocks("anthropic/thinking_tool_use.sse", "thinking")
    first_reply = (
        fixture("anthropic/thinking_tool_use.sse")
        if streamed
        else json_reply(anthropic_stream_message("anthropic/thinking_tool_use.sse"))
    )
    fake.reply(first_reply, fixture("anthropic/text.json"))
    asked = dict(
        model="claude-sonnet-4-5",
        tools=[FIXED_VERSION],
        include=["reasoning.encrypted_content"],
        reasoning={"effort": "low", "summary": "auto"},
    )
    history = [{"role": "user", "content": QUESTION}]
    if streamed:
        with openai_sdk.responses.stream(input=history, **asked) as stream:
            first = stream.get_final_response()
    else:
        first = openai_sdk.responses.create(input=history, **asked)
    [call] = [item for item in first.output if item.type == "function_call"]
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "1.2.3"})
    raw = openai_sdk.responses.with_raw_response.create(input=history, **asked)
    assert raw.parse().status == "completed" and "x-bridge-dropped-params" not in raw.headers
    sent = fake.requests[1].body
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": thinking["thinking"],
        "signature": thinking["signature"],
    }


# -- errors -------------------------------------------------------------------------------

ERRORS = OPENAI_CLIENT_ERRORS


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("name, error_class, status", ERRORS)
def test_upstream_errors_raise_the_sdk_error_class(openai_sdk, fake, name, error_class, status, streamed):
    fake.reply(fixture(f"anthropic/{name}"))
    with pytest.raises(error_class) as caught:
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, stream=streamed)
    assert caught.value.status_code == status
    assert caught.value.message.endswith(recorded(f"anthropic/{name}")["error"]["message"])
    assert set(caught.value.body) == {"message", "type", "param", "code"}


def test_permission_error_raises_permission_denied(openai_sdk, fake):
    fake.reply(json_reply({"type": "error", "error": {"type": "permission_error", "message": "no access"}}, 403))
    with pytest.raises(openai.PermissionDeniedError):
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION)


def test_a_429_keeps_the_upstreams_retry_after(openai_sdk, fake):
    """Codex retries a 429 only when it carries retry-after."""
    fake.reply(fixture("anthropic/error_429.json"))
    with pytest.raises(openai.RateLimitError) as caught:
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION)
    assert caught.value.response.headers["retry-after"] == fixture("anthropic/error_429.json").headers["retry-after"]


@pytest.mark.parametrize("upstream_retry_after, expected", [(None, "1"), ("7", "7")], ids=["added", "kept"])
def test_an_overloaded_upstream_is_a_503_with_retry_after(openai_sdk, fake, upstream_retry_after, expected):
    """Codex retries a 503 at once only with retry-after; without it, 30 times over 25 s."""
    reply = fixture("anthropic/error_529.json")
    assert "retry-after" not in reply.headers
    if upstream_retry_after:
        reply.headers["retry-after"] = upstream_retry_after
    fake.reply(reply)
    with pytest.raises(openai.InternalServerError) as caught:
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION)
    assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == expected


def test_an_anthropic_overflow_is_context_length_exceeded(openai_sdk, fake):
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    fake.reply(json_reply({"type": "error", "error": {"type": "invalid_request_error", "message": message}}, 400))
    with pytest.raises(openai.BadRequestError) as caught:
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, stream=True)
    assert (caught.value.code, caught.value.param, caught.value.body["message"]) == (
        "context_length_exceeded",
        "input",
        message,
    )


def test_previous_response_id_is_refused_with_a_400_naming_it(openai_sdk, fake):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_sdk.responses.create(model="claude-sonnet-4-5", input=QUESTION, previous_response_id="resp_1")
    assert caught.value.param == "previous_response_id" and "input" in caught.value.message
    assert fake.requests == [], "nothing reaches the upstream"


@pytest.mark.parametrize(
    "call",
    [
        lambda client: client.responses.retrieve("resp_123"),
        lambda client: client.responses.delete("resp_123"),
        lambda client: client.responses.input_items.list("resp_123"),
    ],
    ids=["retrieve", "delete", "input_items"],
)
def test_stored_responses_are_a_404_saying_nothing_is_stored(openai_sdk, fake, call):
    with pytest.raises(openai.NotFoundError) as caught:
        call(openai_sdk)
    assert "resp_123" in caught.value.message and "stores no responses" in caught.value.message
    assert fake.requests == []


def test_the_routes_answer_without_v1_too(bridge, fake):
    fake.reply(fixture("anthropic/text.json"))
    ok = requests.post(
        f"{bridge.url}/responses",
        json={"model": "claude-sonnet-4-5", "input": QUESTION},
        headers={"authorization": "Bearer sk-client"},
    )
    assert ok.status_code == 200 and ok.json()["status"] == "completed"
    assert is_openai_error(requests.get(f"{bridge.url}/responses/resp_1"), 404)


# -- Codex's own requests -----------------------------------------------------------------


def test_the_codex_captures_are_all_here():
    assert len(CAPTURES) == 10, "the recorded Codex 0.171.0 requests"


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name.split("-POST")[0] for p in CAPTURES])
def test_every_codex_request_as_codex_sent_it_is_answered_and_a_valid_messages_request(bridge, fake, path):
    """Path, headers and body byte for byte as Codex 0.171.0 sent them
    (tests/fixtures/clients/codex-0.171.0/CODEX.md §2)."""
    captured = json.loads(path.read_text())
    headers = {
        name: value
        for name, value in captured["headers"].items()
        if name not in ("host", "content-length", "accept-encoding")
    }
    fake.reply(fixture("anthropic/text.sse"))
    response = requests.post(
        f"{bridge.url}{captured['path']}",
        params=captured["query"],
        headers=headers,
        data=json.dumps(captured["body"]).encode(),
    )
    assert response.status_code == 200, response.text
    events = [json.loads(event.data) for event in sse.Decoder().feed(response.content)]
    assert [e["type"] for e in events][-1] == "response.completed"
    assert any(e["type"] == "response.output_item.done" for e in events), "what Codex records (CODEX.md §4)"
    validate_messages(fake.last.body)
    assert fake.last.body["stream"] is True and fake.last.headers["x-api-key"] == "sk-fake-capture-key"
