"""End to end: the official anthropic SDK -> the bridge over HTTP -> a fake OpenAI Responses upstream
that keeps OpenAI's rules (ResponsesRules: unknown fields, item ids under store:false, ...).

The fake replays the recorded Responses bodies and streams in tests/fixtures/openai (and the fake's
own builder); expectations are read from those recordings, and what reached the fake is checked.
"""

import json

import anthropic
import pytest
import requests

from tests.fake_upstream import FIXTURES, ResponsesRules, fixture, json_reply, responses_answer, responses_stream
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error
from tests.helpers.recorded import recorded, recorded_events
from tests.helpers.servers import anthropic_client

OPENAI = FIXTURES / "openai"
MODEL = "claude-opus-4-8"
HI = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def live(start_bridge, other_fake):
    """claude-* routed to a Responses deployment on `other_fake` as gpt-5; the client's key goes upstream."""
    other_fake.rules = ResponsesRules()
    document = {
        "routes": [
            {
                "models": ["claude-*"],
                "deployments": [
                    {
                        "name": "responses",
                        "protocol": "openai-responses",
                        "base_url": f"{other_fake.url}/v1",
                        "model": "gpt-5",
                        "max_tokens": 4096,
                    }
                ],
            }
        ],
    }
    return start_bridge(BRIDGE_ROUTES=json.dumps(document))


@pytest.fixture
def client(live):
    return anthropic_client(live.url)


def create(client, **extra):
    return client.messages.create(**{"model": MODEL, "max_tokens": 8192, "messages": HI, **extra})


def streamed(client, **extra):
    with client.messages.stream(**{"model": MODEL, "max_tokens": 8192, "messages": HI, **extra}) as stream:
        return stream.get_final_message()


def reasoning_items(body):
    return [item for item in body["input"] if item.get("type") == "reasoning"]


def carried(item):
    """What of an upstream reasoning item goes back: all but its output status."""
    return {key: value for key, value in item.items() if key != "status"}


# -- answers ---------------------------------------------------------------------------------------


def test_create_text(client, other_fake):
    body = recorded("openai/responses_text.json")
    other_fake.reply(fixture("openai/responses_text.json"))
    message = create(client, system="Be brief.", metadata={"user_id": "user_1_session_2"})
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == body["output"][-1]["content"][0]["text"]
    assert message.stop_reason == "end_turn" and message.model == MODEL
    cached = body["usage"]["input_tokens_details"]["cached_tokens"]
    assert message.usage.input_tokens == body["usage"]["input_tokens"] - cached
    assert message.usage.cache_read_input_tokens == cached
    assert message.usage.output_tokens == body["usage"]["output_tokens"]
    sent = other_fake.last
    assert sent.path == "/v1/responses"
    assert sent.body["instructions"] == "Be brief." and sent.body["model"] == "gpt-5"
    assert sent.body["store"] is False and sent.body["include"] == ["reasoning.encrypted_content"]
    assert sent.body["max_output_tokens"] == 4096, "the deployment's cap"
    assert sent.body["user"].startswith("sha256:") and "user_1" not in json.dumps(sent.body)
    assert sent.headers["authorization"] == "Bearer sk-ant-client", "no key held: the client's goes upstream"


def test_stream_text_arrives_as_anthropic_events(client, other_fake):
    other_fake.reply(fixture("openai/responses_text.sse"))
    body = recorded_events("openai/responses_text.sse")[-1][1]["response"]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=HI) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert message.content[0].text == body["output"][-1]["content"][0]["text"]
    assert message.usage.output_tokens == body["usage"]["output_tokens"]
    assert other_fake.last.body["stream"] is True


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "Sunny, 21 degrees."},
        {"text": "Sunny.", "reasoning": ("Looked it up.", "gAAAA-enc")},
        {"reasoning": ("Need a tool.", "gAAAA-enc"), "function_calls": [("call_1", "get_weather", {"city": "Paris"})]},
        {"text": "Sunny and", "status": "incomplete"},
    ],
)
def test_the_accumulated_stream_is_the_answer_not_streamed(client, other_fake, answer):
    other_fake.reply(json_reply(responses_answer(**answer)), responses_stream(**answer))
    whole = create(client, tools=[WEATHER])
    folded = streamed(client, tools=[WEATHER])
    assert folded.to_dict(exclude_none=True) == whole.to_dict(exclude_none=True)


def test_a_tool_loop(client, other_fake):
    other_fake.reply(fixture("openai/responses_tool_call.json"))
    call = next(
        item for item in recorded("openai/responses_tool_call.json")["output"] if item["type"] == "function_call"
    )
    first = create(client, tools=[WEATHER], tool_choice={"type": "any", "disable_parallel_tool_use": True})
    sent = other_fake.last.body
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER["input_schema"],
            "strict": False,
        }
    ]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False
    tool_use = first.content[-1]
    assert first.stop_reason == "tool_use" and tool_use.id == call["call_id"] and tool_use.name == call["name"]

    other_fake.reply(fixture("openai/responses_text.json"))
    history = [
        *HI,
        {"role": "assistant", "content": [block.to_dict() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "Sunny"}]},
    ]
    create(client, tools=[WEATHER], messages=history)
    items = other_fake.last.body["input"]
    assert items[-2:] == [
        {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny"},
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_reasoning_round_trip_byte_for_byte(client, other_fake, stream):
    """The reasoning item of the first answer reaches the upstream again, as it came, with the tool result."""
    name = "openai/responses_reasoning_tool_call.sse"
    events = recorded_events(name)
    if stream:
        other_fake.reply(fixture(name))
        first = streamed(client, tools=[WEATHER])
        item = next(
            p["item"]
            for _, p in events
            if p["type"] == "response.output_item.done" and p["item"]["type"] == "reasoning"
        )
    else:
        whole = events[-1][1]["response"]
        other_fake.reply(json_reply(whole))
        first = create(client, tools=[WEATHER])
        item = next(item for item in whole["output"] if item["type"] == "reasoning")
    assert [block.type for block in first.content] == ["thinking", "tool_use"]
    thinking, tool_use = first.content
    # Claude Code keeps only type, thinking and signature of an old thinking block
    kept = {"type": "thinking", "thinking": thinking.thinking, "signature": thinking.signature}
    other_fake.reply(fixture("openai/responses_text.json"))
    history = [
        *HI,
        {"role": "assistant", "content": [kept, tool_use.to_dict()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "19"}]},
    ]
    answer = requests.post(
        f"{client.base_url}/v1/messages",
        json={"model": MODEL, "max_tokens": 1024, "messages": history, "tools": [WEATHER]},
        headers={**ANTHROPIC_HEADERS, "x-api-key": "sk-ant-client"},
    )
    assert answer.status_code == 200, answer.text
    raw = other_fake.last.body
    assert reasoning_items(raw) == [carried(item)]
    assert json.dumps(reasoning_items(raw)[0]) == json.dumps(carried(item)), "byte for byte, key order too"
    assert "x-bridge-dropped-params" not in answer.headers


def test_thinking_from_an_anthropic_model_is_dropped_and_named_never_sent(client, other_fake):
    thinking = recorded("anthropic/thinking.json")["content"][0]
    other_fake.reply(fixture("openai/responses_text.json"))
    history = [*HI, {"role": "assistant", "content": [thinking, {"type": "text", "text": "Sunny."}]}, HI[0]]
    answer = client.messages.with_raw_response.create(model=MODEL, max_tokens=1024, messages=history)
    assert answer.headers["x-bridge-dropped-params"] == "messages.1.content.0"
    assert not reasoning_items(other_fake.last.body) and thinking["signature"] not in json.dumps(other_fake.last.body)


def test_dropped_parameters_are_named(client, other_fake):
    other_fake.reply(fixture("openai/responses_text.json"))
    answer = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=1024,
        messages=HI,
        stop_sequences=["END"],
        extra_body={"top_k": 3, "temperature": 0.2},
    )
    assert set(answer.headers["x-bridge-dropped-params"].split(", ")) == {"stop_sequences", "top_k", "temperature"}
    assert not {"stop", "top_k", "temperature"} & set(other_fake.last.body)


def test_effort_max_is_xhigh_with_summaries(client, other_fake):
    other_fake.reply(fixture("openai/responses_text.json"))
    create(client, extra_body={"output_config": {"effort": "max"}})
    assert other_fake.last.body["reasoning"] == {"effort": "xhigh", "summary": "auto"}


# -- count_tokens ----------------------------------------------------------------------------------


def test_count_tokens_is_the_upstreams_own_count(client, other_fake):
    other_fake.reply(json_reply({"object": "response.input_tokens", "input_tokens": 1234}))
    count = client.messages.count_tokens(model=MODEL, messages=HI, system="Be brief.", tools=[WEATHER])
    assert count.input_tokens == 1234
    sent = other_fake.last
    assert sent.path == "/v1/responses/input_tokens"
    assert set(sent.body) == {"model", "instructions", "input", "reasoning", "tools"}


@pytest.mark.parametrize("status", [404, 405])
def test_count_tokens_without_an_upstream_counter_is_the_estimate(client, other_fake, status):
    other_fake.reply(json_reply({"error": {"message": "Not found", "type": "invalid_request_error"}}, status))
    assert client.messages.count_tokens(model=MODEL, messages=HI).input_tokens > 0


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, error_class, status",
    [
        ("error_400.json", anthropic.BadRequestError, 400),
        ("error_401.json", anthropic.AuthenticationError, 401),
        ("error_404.json", anthropic.NotFoundError, 404),
        ("error_429.json", anthropic.RateLimitError, 429),
        ("error_500.json", anthropic.InternalServerError, 500),
        ("error_503.json", anthropic.OverloadedError, 529),
        ("responses_error_400_model_not_found.json", anthropic.BadRequestError, 400),
    ],
)
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_upstream_errors_are_anthropic_errors(client, live, other_fake, name, error_class, status, stream):
    other_fake.reply(fixture(f"openai/{name}"))
    with pytest.raises(error_class) as caught:
        streamed(client) if stream else create(client)
    assert caught.value.status_code == status
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["message"]
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


def test_a_rate_limit_keeps_retry_after(client, other_fake):
    meta = json.loads((OPENAI / "error_429.meta.json").read_text())
    other_fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(anthropic.RateLimitError) as caught:
        create(client)
    assert caught.value.response.headers["retry-after"] == meta["headers"]["retry-after"]


def test_a_context_overflow_is_the_message_claude_code_compacts_on(client, other_fake):
    other_fake.reply(fixture("openai/error_context_length.json"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client)
    assert caught.value.message.startswith("prompt is too long: ") or "prompt is too long: " in str(caught.value)
    assert caught.value.body["error"]["message"] == "prompt is too long: 131072 tokens > 128000 maximum"


def test_an_overflow_as_a_failed_response_mid_stream_is_an_anthropic_error_event(live, other_fake):
    overflow = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    reply = responses_stream(text="x")
    failed = {
        "type": "response.failed",
        "sequence_number": 2,
        "response": {"id": "r", "status": "failed", "error": overflow},
    }
    reply.events = reply.events[:2] + [f"event: response.failed\ndata: {json.dumps(failed)}\n\n".encode()]
    other_fake.reply(reply)
    answer = requests.post(
        f"{live.url}/v1/messages",
        json={"model": MODEL, "max_tokens": 64, "messages": HI, "stream": True},
        headers={**ANTHROPIC_HEADERS, "x-api-key": "sk-ant-client"},
    )
    last = answer.text.strip().split("\n\n")[-1]
    assert last.startswith("event: error")
    error = json.loads(last.split("data: ", 1)[1])["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith("prompt is too long: ")


@pytest.mark.parametrize("name", ["responses_error_event.sse", "responses_failed.sse"])
def test_an_error_mid_stream_reaches_the_sdk(client, other_fake, name):
    other_fake.reply(fixture(f"openai/{name}"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        streamed(client)
    assert caught.value.body["type"] == "error"


def test_a_stream_cut_short_is_an_error_not_an_answer(client, other_fake):
    other_fake.reply(fixture("openai/responses_text.sse", drop_after=6))
    with pytest.raises(anthropic.APIStatusError) as caught:
        streamed(client)
    assert caught.value.body["error"]["type"] == "api_error"


def test_a_bad_request_is_a_400_in_anthropics_shape_and_nothing_goes_upstream(live, other_fake):
    answer = requests.post(
        f"{live.url}/v1/messages",
        json={"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": [{"type": "nope"}]}]},
        headers=ANTHROPIC_HEADERS,
    )
    assert is_anthropic_error(answer, 400, "invalid_request_error") and not other_fake.requests


def test_a_deployments_capabilities_say_its_model_has_no_encrypted_reasoning(start_bridge, other_fake):
    """An Azure deployment of gpt-4o under a name of its own: OpenAI would refuse the include."""
    other_fake.rules = ResponsesRules()
    deployment = {
        "name": "azure-4o",
        "protocol": "openai-responses",
        "base_url": f"{other_fake.url}/v1",
        "model": "prod-chat",
        "capabilities": {"encrypted_reasoning": False},
    }
    live = start_bridge(BRIDGE_ROUTES=json.dumps({"routes": [{"models": ["claude-*"], "deployments": [deployment]}]}))
    other_fake.reply(fixture("openai/responses_text.json"))
    create(anthropic_client(live.url), extra_body={"temperature": 0.5})
    sent = other_fake.last.body
    assert "include" not in sent and "reasoning" not in sent and sent["temperature"] == 0.5
