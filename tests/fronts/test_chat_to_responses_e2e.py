"""End to end: the official openai SDK's Chat client -> the bridge over HTTP -> a fake Responses upstream.

The fake replays the recorded Responses bodies and streams in tests/fixtures/openai/responses_*,
and keeps OpenAI's rules (tests/fake_upstream.ResponsesRules): a request OpenAI would refuse
is refused here too, so every test also shows the translated request is one OpenAI takes.
"""

import json
import logging

import openai
import pytest
import requests

from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.app import create_app
from bridge.protocols import sse
from bridge.translate.chat_to_responses.stream import StreamTranslator
from tests.fake_upstream import ResponsesRules, fixture, json_reply, responses_answer, responses_stream
from tests.helpers.accumulators import openai_fold, responses_chat_comparable
from tests.helpers.contexts import chat_to_responses_context, translated
from tests.helpers.recorded import RESPONSES_STREAMS, recorded, recorded_events
from tests.helpers.servers import LiveBridge, access_lines, bridge_env, openai_client

MODEL = "gpt-5-codex"
USER = {"role": "user", "content": "What's the weather in Boston?"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Weather for a place",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
    },
}
CALCULATOR = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
ANSWERED = [name for name in RESPONSES_STREAMS if not name.endswith(("_failed.sse", "_error_event.sse"))]


def routes(fake, **deployment):
    """gpt-5* and codex* to the fake, which speaks the Responses API."""
    codex = {"name": "codex", "protocol": "openai-responses", "base_url": f"{fake.url}/v1", **deployment}
    return json.dumps({"default_routes": False, "routes": [{"models": ["gpt-5*", "codex*"], "deployments": [codex]}]})


@pytest.fixture(scope="module")
def live(fake):
    served = LiveBridge(create_app(settings_module.load(bridge_env(fake, BRIDGE_ROUTES=routes(fake)))))
    yield served
    served.close()


@pytest.fixture
def client(live, fake):
    fake.rules = ResponsesRules()
    return openai_client(live.url)


def final_response(name):
    """The Response a recorded stream's last event carries: the stream's answer not streamed."""
    return recorded_events(name)[-1][1]["response"]


# -- plain calls ----------------------------------------------------------------------------


def test_plain_create(client, fake):
    response = recorded("openai/responses_text.json")
    fake.reply(fixture("openai/responses_text.json"))
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": "Count."}, USER], max_tokens=100
    )
    assert completion.choices[0].message.content == response["output"][0]["content"][0]["text"]
    assert completion.choices[0].finish_reason == "stop" and completion.model == MODEL
    assert completion.id == f"chatcmpl-{response['id']}"
    assert completion.usage.prompt_tokens == response["usage"]["input_tokens"]
    assert (
        completion.usage.prompt_tokens_details.cached_tokens
        == response["usage"]["input_tokens_details"]["cached_tokens"]
    )
    sent = fake.last
    assert sent.path == "/v1/responses" and sent.headers["authorization"] == "Bearer sk-client"
    assert sent.body == {
        "model": MODEL,
        "instructions": "Count.",
        "input": [{"type": "message", "role": "user", "content": USER["content"]}],
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": 100,
        "store": False,
    }


def test_create_with_tools(client, fake):
    [call] = recorded("openai/responses_tool_call.json")["output"]
    fake.reply(fixture("openai/responses_tool_call.json"))
    completion = client.chat.completions.create(model=MODEL, messages=[USER], tools=[WEATHER], tool_choice="required")
    [got] = completion.choices[0].message.tool_calls
    assert (got.id, got.function.name, got.function.arguments) == (call["call_id"], call["name"], call["arguments"])
    assert completion.choices[0].finish_reason == "tool_calls"
    assert fake.last.body["tools"] == [
        {
            "type": "function",
            "name": "get_current_weather",
            "description": "Weather for a place",
            "parameters": WEATHER["function"]["parameters"],
            "strict": False,
        }
    ]
    assert fake.last.body["tool_choice"] == "required"


def test_reasoning_summaries_reach_the_sdk_as_reasoning_content(client, fake):
    response = recorded("openai/responses_reasoning.json")
    fake.reply(fixture("openai/responses_reasoning.json"))
    completion = client.chat.completions.create(model=MODEL, messages=[USER], reasoning_effort="high")
    message = completion.choices[0].message
    assert message.reasoning_content == response["output"][0]["summary"][0]["text"]
    assert completion.usage.completion_tokens_details.reasoning_tokens == 128
    assert fake.last.body["reasoning"] == {"effort": "high", "summary": "auto"}


def test_dropped_parameters_are_named_in_a_response_header(client, fake):
    """temperature would be refused by a reasoning model: the fake's rules say so too."""
    fake.reply(fixture("openai/responses_text.json"))
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[USER], seed=7, stop=["\n"], temperature=0.3, frequency_penalty=0.5
    )
    assert set(raw.headers["x-bridge-dropped-params"].split(", ")) == {
        "seed",
        "stop",
        "temperature",
        "frequency_penalty",
    }
    assert raw.parse().choices[0].message.content
    assert not {"seed", "stop", "temperature", "frequency_penalty"} & set(fake.last.body)


def test_the_incomplete_answer_is_length(client, fake):
    fake.reply(fixture("openai/responses_incomplete.json"))
    completion = client.chat.completions.create(model=MODEL, messages=[USER], max_completion_tokens=100)
    assert completion.choices[0].finish_reason == "length"


# -- streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ANSWERED)
def test_stream_with_include_usage_folds_to_the_non_streamed_answer(client, fake, name):
    """Over HTTP: what the SDK folds of the stream is what the same answer not streamed is."""
    fake.reply(fixture(name), json_reply(final_response(name)))
    chunks = list(
        client.chat.completions.create(
            model=MODEL, messages=[USER], stream=True, stream_options={"include_usage": True}
        )
    )
    plain = client.chat.completions.create(model=MODEL, messages=[USER])
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == final_response(name)["usage"]["total_tokens"]
    expected = openai_fold(translated(StreamTranslator(chat_to_responses_context(stream=True)), recorded_events(name)))
    streamed = responses_chat_comparable(openai_fold(chunks))
    assert streamed["choices"] == responses_chat_comparable(expected)["choices"]
    not_streamed = responses_chat_comparable(plain.to_dict(mode="json", exclude_none=True))
    assert {**streamed, "usage": None} == {**not_streamed, "usage": None}
    assert fake.requests[0].body["stream"] is True


def test_stream_without_include_usage_has_no_usage_chunk(client, fake):
    fake.reply(fixture("openai/responses_text.sse"))
    chunks = list(client.chat.completions.create(model=MODEL, messages=[USER], stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_the_stream_helper_accumulates_the_non_streamed_tool_calls(client, fake):
    response = final_response("openai/responses_reasoning_tool_call.sse")
    fake.reply(fixture("openai/responses_reasoning_tool_call.sse"), json_reply(response))
    with client.chat.completions.stream(model=MODEL, messages=[USER], tools=[CALCULATOR]) as stream:
        done = [event for event in stream if event.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    plain = client.chat.completions.create(model=MODEL, messages=[USER], tools=[CALCULATOR])
    [call] = final.choices[0].message.tool_calls
    [plain_call] = plain.choices[0].message.tool_calls
    assert (call.id, call.function.name, call.function.arguments) == (
        plain_call.id,
        plain_call.function.name,
        plain_call.function.arguments,
    )
    assert [event.index for event in done] == [0] and json.loads(call.function.arguments) == {
        "a": 12,
        "b": 7,
        "op": "add",
    }
    assert final.choices[0].finish_reason == plain.choices[0].finish_reason == "tool_calls"
    assert final.choices[0].message.reasoning_content == plain.choices[0].message.reasoning_content


def test_parallel_tool_calls_stream_to_two_sdk_tool_calls(client, fake):
    fake.reply(
        responses_stream(function_calls=[("call_a", "calculator", {"a": 1}), ("call_b", "calculator", {"a": 2})])
    )
    with client.chat.completions.stream(model=MODEL, messages=[USER], tools=[CALCULATOR]) as stream:
        calls = stream.get_final_completion().choices[0].message.tool_calls
    assert [(c.id, json.loads(c.function.arguments)) for c in calls] == [("call_a", {"a": 1}), ("call_b", {"a": 2})]


def test_the_access_line_names_the_pair_the_upstream_model_and_the_streams_usage(start_bridge, fake):
    """The client asked for no usage; the upstream reported it in its last event, and that counts."""
    live = start_bridge(BRIDGE_ROUTES=routes(fake, model="gpt-5.1-codex-max"), BRIDGE_LOG_LEVEL="INFO")
    name = "openai/responses_reasoning_tool_call.sse"
    fake.reply(fixture(name))
    with access_lines() as lines:
        list(openai_client(live.url).chat.completions.create(model=MODEL, messages=[USER], stream=True))
        wait_for(lambda: lines, "the access line")
    (line,) = lines
    usage = final_response(name)["usage"]
    assert (line["direction"], line["model"], line["upstream_model"]) == (
        "chat_to_responses",
        MODEL,
        "gpt-5.1-codex-max",
    )
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (
        usage["input_tokens"],
        usage["output_tokens"],
        "reported",
    )
    assert fake.last.body["model"] == "gpt-5.1-codex-max"


def test_the_response_ends_at_done_even_when_the_upstream_holds_its_connection_open(start_bridge, fake):
    live = start_bridge(BRIDGE_ROUTES=routes(fake), BRIDGE_READ_TIMEOUT=1, BRIDGE_PING_INTERVAL=0.05)
    events = fixture("openai/responses_text.sse").events
    fake.reply(fixture("openai/responses_text.sse", events=[*events, *events[-1:]], stall_after=len(events)))
    response = requests.post(
        f"{live.url}/v1/chat/completions", stream=True, json={"model": MODEL, "messages": [USER], "stream": True}
    )
    assert response.content.decode().rstrip("\n").endswith("data: [DONE]")


# -- the reasoning round trip ---------------------------------------------------------------


def test_the_reasoning_item_goes_back_byte_for_byte_with_the_echoed_message(client, fake):
    first_answer = final_response("openai/responses_reasoning_tool_call.sse")
    reasoning, call = first_answer["output"]
    fake.reply(json_reply(first_answer), fixture("openai/responses_text.json"))
    messages = [USER]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[CALCULATOR], reasoning_effort="low")
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call["call_id"], "content": "19"}]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=[CALCULATOR], reasoning_effort="low"
    )
    assert raw.parse().choices[0].finish_reason == "stop" and "x-bridge-dropped-params" not in raw.headers
    sent = fake.requests[1].body["input"]
    assert sent[1] == reasoning, "the item as the upstream served it"
    assert json.dumps(sent[1]) == json.dumps(reasoning), "byte for byte, its fields in the upstream's order"
    assert sent[2:] == [
        {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "19"},
    ]


def test_the_streamed_reasoning_item_goes_back_through_the_stream_helper(client, fake):
    name = "openai/responses_reasoning_tool_call.sse"
    [done] = [
        p["item"]
        for _, p in recorded_events(name)
        if p["type"] == "response.output_item.done" and p["item"]["type"] == "reasoning"
    ]
    fake.reply(fixture(name), fixture("openai/responses_text.sse"))
    messages = [USER]
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=[CALCULATOR]) as stream:
        first = stream.get_final_completion().choices[0].message
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "19"}]
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=[CALCULATOR]) as stream:
        assert stream.get_final_completion().choices[0].finish_reason == "stop"
    assert fake.requests[1].body["input"][1] == done


def test_a_client_that_drops_the_extension_still_succeeds_without_the_reasoning(client, fake):
    first_answer = final_response("openai/responses_reasoning_tool_call.sse")
    fake.reply(json_reply(first_answer), fixture("openai/responses_text.json"))
    first = client.chat.completions.create(model=MODEL, messages=[USER], tools=[CALCULATOR]).choices[0].message
    plain = {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in first.tool_calls]}
    tool = {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "19"}
    completion = client.chat.completions.create(model=MODEL, messages=[USER, plain, tool], tools=[CALCULATOR])
    assert completion.choices[0].finish_reason == "stop"
    assert [item["type"] for item in fake.requests[1].body["input"]] == [
        "message",
        "function_call",
        "function_call_output",
    ]


# -- errors ---------------------------------------------------------------------------------

ERRORS = [
    ("openai/responses_error_400_model_not_found.json", openai.BadRequestError, 400),
    ("openai/responses_error_400_temperature.json", openai.BadRequestError, 400),
    ("openai/error_401.json", openai.AuthenticationError, 401),
    ("openai/error_404.json", openai.NotFoundError, 404),
    ("openai/error_429.json", openai.RateLimitError, 429),
    ("openai/error_500.json", openai.InternalServerError, 500),
    ("openai/error_503.json", openai.InternalServerError, 503),
]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("name, error_class, status", ERRORS)
def test_upstream_errors_raise_the_sdk_error_class(client, fake, name, error_class, status, stream):
    fake.reply(fixture(name))
    with pytest.raises(error_class) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER], stream=stream)
    assert caught.value.status_code == status
    assert recorded(name)["error"]["message"] in caught.value.message
    assert set(caught.value.body) == {"message", "type", "param", "code"}


def test_a_429_keeps_its_retry_after(client, fake):
    fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER])
    assert caught.value.response.headers["retry-after"] == "1"


def test_a_deployments_refused_key_is_the_operators_502(start_bridge, fake, monkeypatch, caplog):
    monkeypatch.setenv("CODEX_KEY", "sk-held-by-the-bridge")
    live = start_bridge(BRIDGE_ROUTES=routes(fake, api_key_env="CODEX_KEY"), BRIDGE_CLIENT_KEYS="team:sk-client")
    fake.reply(fixture("openai/error_401.json"))
    caplog.set_level(logging.WARNING, logger="bridge.gateway.upstream")
    with pytest.raises(openai.InternalServerError) as caught:
        openai_client(live.url).chat.completions.create(model=MODEL, messages=[USER])
    assert caught.value.status_code == 502 and "upstream credentials were refused" in caught.value.message
    assert fake.last.headers["authorization"] == "Bearer sk-held-by-the-bridge"
    assert "deployment codex" in caplog.text and "sk-held-by-the-bridge" not in caplog.text


OVERFLOW = {
    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "type": "invalid_request_error",
    "param": "input",
    "code": "context_length_exceeded",
}


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_context_overflow_is_context_length_exceeded_on_messages(client, fake, stream):
    fake.reply(json_reply({"error": OVERFLOW}, 400))
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER], stream=stream)
    assert (caught.value.code, caught.value.param) == ("context_length_exceeded", "messages")
    assert OVERFLOW["message"] in caught.value.message


def test_a_failed_response_mid_stream_is_the_error_chunk_with_the_overflow_code(client, fake):
    events = responses_stream("Hi").events[:2]
    failed = {"type": "response.failed", "response": {"id": "resp_x", "status": "failed", "error": OVERFLOW}}
    fake.reply(
        fixture("openai/responses_text.sse", events=[*events, sse.encode(json.dumps(failed), event=failed["type"])])
    )
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model=MODEL, messages=[USER], stream=True))
    assert (caught.value.code, caught.value.param) == ("context_length_exceeded", "messages")


def test_a_failed_answer_not_streamed_is_its_error(client, fake):
    fake.reply(
        json_reply(
            {
                **responses_answer(),
                "status": "failed",
                "error": {"code": "rate_limit_exceeded", "message": "Slow down."},
            }
        )
    )
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER])
    assert "Slow down." in caught.value.message


def test_an_error_event_mid_stream_reaches_the_sdk_after_the_text_so_far(client, fake):
    events = responses_stream("Hello").events
    text_end = next(n for n, event in enumerate(events) if b"output_text.delta" in event) + 1
    error = fixture("openai/responses_error_event.sse").events
    fake.reply(fixture("openai/responses_text.sse", events=[*events[:text_end], *error]))
    received = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in client.chat.completions.create(model=MODEL, messages=[USER], stream=True):
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "Hello" and "Sorry, something went wrong." in str(caught.value)


def test_the_recorded_failed_stream_ends_in_the_sdks_error(client, fake):
    fake.reply(fixture("openai/responses_failed.sse"))
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model=MODEL, messages=[USER], stream=True))
    assert "You exceeded your current quota" in caught.value.message


@pytest.mark.parametrize(
    "cut, words",
    [
        ({"drop_after": 5}, "the upstream closed the connection mid-response"),
        ({"events": fixture("openai/responses_text.sse").events[:-1]}, "ended before response.completed"),
    ],
    ids=["connection", "body"],
)
def test_a_stream_cut_short_ends_in_an_error_never_a_stop(client, fake, cut, words):
    fake.reply(fixture("openai/responses_text.sse", **cut))
    chunks = []
    with pytest.raises(openai.APIError) as caught:
        chunks.extend(client.chat.completions.create(model=MODEL, messages=[USER], stream=True))
    assert words in caught.value.message
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks)


def test_bad_input_is_a_400_and_nothing_reaches_the_upstream(client, fake):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER], n=2)
    assert caught.value.param == "n" and fake.requests == []
