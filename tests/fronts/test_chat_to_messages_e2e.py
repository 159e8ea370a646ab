"""End to end: the official openai SDK -> the bridge over HTTP -> a fake Anthropic upstream.

The fake replays the recorded Anthropic bodies and streams in
tests/fixtures/anthropic; every expectation is read from those recordings.
"""

import json
import socket

import openai
import pydantic
import pytest
import requests

from bridge.protocols import sse
from bridge.translate.chat_to_messages.stream import StreamTranslator
from tests.fake_upstream import Reply, fixture, json_reply
from tests.helpers.accumulators import anthropic_stream_message, openai_fold
from tests.helpers.contexts import chat_to_messages_context, translated
from tests.helpers.recorded import ANTHROPIC_STREAMS, OPENAI_CLIENT_ERRORS, recorded, recorded_events
from tests.helpers.refused import BAD_CHAT_REQUESTS

USER = {"role": "user", "content": "What's the weather in Paris?"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a place",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
    },
}
PELICAN = {"type": "function", "function": {"name": "pelican_name_generator", "parameters": {"type": "object"}}}


# -- plain calls --------------------------------------------------------------------------


def test_plain_create(openai_sdk, fake):
    message = recorded("anthropic/text.json")
    fake.reply(fixture("anthropic/text.json"))
    completion = openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": "Be kind."}, USER]
    )
    choice = completion.choices[0]
    assert choice.message.content == message["content"][0]["text"]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert completion.model == "gpt-4o" and completion.id == f"chatcmpl-{message['id']}"
    assert completion.usage.prompt_tokens == message["usage"]["input_tokens"]
    assert completion.usage.completion_tokens == message["usage"]["output_tokens"]
    sent = fake.last
    assert sent.path == "/v1/messages" and sent.headers["anthropic-version"]
    assert sent.headers["x-api-key"] == "sk-client", "no upstream key held: the client's key is forwarded"
    assert sent.body == {
        "model": "gpt-4o",
        "system": [{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
        "max_tokens": 8192,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": USER["content"], "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }


def test_create_with_tools(openai_sdk, fake):
    message = recorded("anthropic/tool_use.json")
    [use] = [b for b in message["content"] if b["type"] == "tool_use"]
    fake.reply(fixture("anthropic/tool_use.json"))
    completion = openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[USER], tools=[WEATHER], tool_choice="auto"
    )
    [call] = completion.choices[0].message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (use["id"], use["name"], use["input"])
    assert completion.choices[0].finish_reason == "tool_calls"
    assert fake.last.body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a place",
            "input_schema": WEATHER["function"]["parameters"],
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert fake.last.body["tool_choice"] == {"type": "auto"}


def test_reasoning_content_and_refusal_reach_the_sdk(openai_sdk, fake):
    fake.reply(fixture("anthropic/thinking.json"), fixture("anthropic/refusal.json"))
    thought = openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], reasoning_effort="high")
    [thinking] = [b for b in recorded("anthropic/thinking.json")["content"] if b["type"] == "thinking"]
    assert thought.choices[0].message.reasoning_content == thinking["thinking"]
    assert thinking["thinking"] not in thought.choices[0].message.content
    refused = openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER])
    assert refused.choices[0].finish_reason == "content_filter"
    assert refused.choices[0].message.refusal == recorded("anthropic/refusal.json")["stop_details"]["explanation"]


def test_dropped_parameters_are_named_in_a_response_header(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.json"))
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[USER], seed=7, frequency_penalty=0.5, temperature=0.3, top_p=0.5
    )
    assert set(raw.headers["x-bridge-dropped-params"].split(", ")) == {"seed", "frequency_penalty", "top_p"}
    assert raw.parse().choices[0].message.content


def test_response_format_with_the_sdk_parse_helper(openai_sdk, fake):
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
    completion = openai_sdk.chat.completions.parse(model="gpt-4o", messages=[USER], response_format=Weather)
    assert completion.choices[0].message.parsed == Weather(**answer)
    assert completion.choices[0].finish_reason == "stop"
    [tool] = fake.last.body["tools"]
    assert tool["name"] == "Weather" and set(tool["input_schema"]["properties"]) == set(answer)
    assert fake.last.body["tool_choice"] == {"type": "tool", "name": "Weather"}


# -- streams ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ANTHROPIC_STREAMS)
def test_stream_with_include_usage_for_every_recorded_stream(openai_sdk, fake, name):
    """The SDK over HTTP folds what the stream translator makes of the recording (test_chat_to_messages_stream
    checks that against the answer not streamed); only `created`, the time of the request, differs."""
    context = chat_to_messages_context(stream=True, include_usage=True)
    expected = openai_fold(translated(StreamTranslator(context), recorded_events(name)))
    fake.reply(fixture(name))
    stream = openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[USER], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage
    assert {**openai_fold(chunks), "created": None} == {**expected, "created": None}
    assert fake.last.body["stream"] is True


def test_stream_without_include_usage_has_no_usage_chunk(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.sse"))
    chunks = list(openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_midstream_error_reaches_the_sdk_after_the_text_so_far(openai_sdk, fake):
    fake.reply(fixture("anthropic/error_midstream_overloaded.sse"))
    stream = openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[USER], stream=True, stream_options={"include_usage": True}
    )
    received = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "Hello" and "Overloaded" in str(caught.value)


def test_a_broken_upstream_stream_ends_in_an_error(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.sse", drop_after=4))
    with pytest.raises(openai.APIError):
        list(openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=True))


@pytest.mark.parametrize("name", ["tool_use.sse", "tool_use_parallel.sse", "thinking_tool_use.sse"])
def test_stream_helper_accumulates_tool_arguments_into_valid_json(openai_sdk, fake, name):
    calls = [b for b in anthropic_stream_message(f"anthropic/{name}")["content"] if b["type"] == "tool_use"]
    fake.reply(fixture(f"anthropic/{name}"))
    tools = [WEATHER, PELICAN, {"type": "function", "function": {"name": "fixed_version"}}]
    with openai_sdk.chat.completions.stream(model="gpt-4o", messages=[USER], tools=tools) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    got = final.choices[0].message.tool_calls
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in got] == [
        (call["id"], call["name"], call["input"]) for call in calls
    ]
    assert [e.index for e in done] == list(range(len(calls)))
    assert final.choices[0].finish_reason == "tool_calls"


def test_the_response_ends_at_done_even_when_the_upstream_holds_its_connection_open(start_bridge, fake):
    """After message_stop nothing may follow [DONE]: no keep-alive, no timeout error, no wait for the upstream."""
    live = start_bridge(BRIDGE_READ_TIMEOUT=1, BRIDGE_PING_INTERVAL=0.05)
    recorded = fixture("anthropic/text.sse").events
    fake.reply(
        Reply(
            headers={"content-type": "text/event-stream"},
            stall_after=len(recorded),
            events=[*recorded, sse.encode('{"type": "ping"}', event="ping")],
        )
    )
    response = requests.post(
        f"{live.url}/v1/chat/completions", stream=True, json={"model": "gpt-4o", "messages": [USER], "stream": True}
    )
    body = response.content.decode()
    assert body.rstrip("\n").endswith("data: [DONE]"), body[body.find("[DONE]") :]


def test_a_client_gets_sse_comment_keepalives_while_the_upstream_only_pings(start_bridge, fake):
    """Anthropic pings while a model thinks; the client, who sees nothing of them, gets comments."""
    live = start_bridge(BRIDGE_PING_INTERVAL="0.25")
    events = fixture("anthropic/text.sse").events
    pings = [b'event: ping\ndata: {"type": "ping"}\n\n'] * 6
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=events[:1] + pings + events[1:], pace=0.1))
    response = requests.post(
        f"{live.url}/v1/chat/completions", stream=True, json={"model": "gpt-4o", "messages": [USER], "stream": True}
    )
    lines = response.content.decode().split("\n")
    assert response.headers["content-type"].startswith("text/event-stream")
    assert lines.count(": keep-alive") >= 1
    assert [line for line in lines if line.startswith("data: ")][-1] == "data: [DONE]"


# -- errors -------------------------------------------------------------------------------

ERRORS = OPENAI_CLIENT_ERRORS


@pytest.mark.parametrize("name, error_class, status", ERRORS)
def test_upstream_errors_raise_the_sdk_error_class(openai_sdk, fake, name, error_class, status):
    fake.reply(fixture(f"anthropic/{name}"))
    with pytest.raises(error_class) as caught:
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER])
    assert caught.value.status_code == status
    assert caught.value.message.endswith(recorded(f"anthropic/{name}")["error"]["message"])
    assert set(caught.value.body) == {"message", "type", "param", "code"}


def test_permission_error_raises_permission_denied(openai_sdk, fake):
    fake.reply(
        json_reply(
            {
                "type": "error",
                "error": {
                    "type": "permission_error",
                    "message": "Your API key does not have permission to use the specified resource.",
                },
            },
            403,
        )
    )
    with pytest.raises(openai.PermissionDeniedError) as caught:
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER])
    assert "permission" in caught.value.message and caught.value.status_code == 403


def test_request_too_large_is_a_413(openai_sdk, fake):
    fake.reply(
        json_reply(
            {
                "type": "error",
                "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed size."},
            },
            413,
        )
    )
    with pytest.raises(openai.APIStatusError) as caught:
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER])
    assert caught.value.status_code == 413


ANTHROPIC_OVERFLOWS = [
    "prompt is too long: 210000 tokens > 200000 maximum",
    "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input "
    "length or `max_tokens` and try again",
]


@pytest.mark.parametrize("message", ANTHROPIC_OVERFLOWS, ids=["prompt", "prompt-and-max_tokens"])
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_an_anthropic_overflow_is_context_length_exceeded_for_the_sdk(openai_sdk, fake, message, stream):
    """The code LangChain, the Agents SDK and others trim the conversation on; Anthropic's text stays."""
    fake.reply(
        json_reply(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}, "request_id": "req_011"},
            400,
            {"x-should-retry": "false"},
        )
    )
    with pytest.raises(openai.BadRequestError) as caught:
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=stream)
    assert (caught.value.code, caught.value.param, caught.value.body["message"]) == (
        "context_length_exceeded",
        "messages",
        message,
    )


def test_an_anthropic_overflow_mid_stream_is_context_length_exceeded_in_the_error_chunk(openai_sdk, fake):
    head = fixture("anthropic/text.sse").events[:3]
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": ANTHROPIC_OVERFLOWS[0]}}
    fake.reply(fixture("anthropic/text.sse", events=[*head, sse.encode(json.dumps(error), event="error")]))
    with pytest.raises(openai.APIError) as caught:
        list(openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=True))
    assert (caught.value.code, caught.value.param, caught.value.message) == (
        "context_length_exceeded",
        "messages",
        ANTHROPIC_OVERFLOWS[0],
    )


def test_stream_errors_before_the_first_byte_are_http_errors(openai_sdk, fake):
    fake.reply(fixture("anthropic/error_429.json"))
    with pytest.raises(openai.RateLimitError):
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=True)


def test_an_unreachable_upstream_is_a_502(start_bridge, fake):
    with socket.socket() as sock:  # a port nobody listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    live = start_bridge(BRIDGE_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[USER])
    assert caught.value.status_code == 502


def test_an_upstream_that_does_not_answer_in_time_is_a_504(start_bridge, fake):
    live = start_bridge(BRIDGE_READ_TIMEOUT=1)
    fake.reply(fixture("anthropic/text.json", delay_headers=2))
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[USER])
    assert caught.value.status_code == 504


# -- conversations ------------------------------------------------------------------------


def test_agent_loop_with_two_parallel_tool_calls(openai_sdk, fake):
    """The model calls two tools at once; both answers reach Anthropic as one user turn."""
    fake.reply(json_reply(anthropic_stream_message("anthropic/tool_use_parallel.sse")), fixture("anthropic/text.json"))
    messages = [USER]
    names = iter(["Pelly", "Beaky"])
    for _ in range(3):
        completion = openai_sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=[PELICAN])
        message = completion.choices[0].message
        messages.append(message)
        if completion.choices[0].finish_reason != "tool_calls":
            break
        assert len(message.tool_calls) == 2
        messages += [{"role": "tool", "tool_call_id": call.id, "content": next(names)} for call in message.tool_calls]
    assert completion.choices[0].finish_reason == "stop" and len(fake.requests) == 2
    ids = [b["id"] for b in anthropic_stream_message("anthropic/tool_use_parallel.sse")["content"]]
    second = fake.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert [(b["type"], b["id"]) for b in second[1]["content"]] == [("tool_use", i) for i in ids]
    assert second[2]["content"] == [
        {"type": "tool_result", "tool_use_id": ids[0], "content": "Pelly"},
        {"type": "tool_result", "tool_use_id": ids[1], "content": "Beaky", "cache_control": {"type": "ephemeral"}},
    ]


def test_streamed_agent_loop_with_the_stream_helper(openai_sdk, fake):
    fake.reply(fixture("anthropic/tool_use_parallel.sse"), fixture("anthropic/text.sse"))
    messages = [USER]
    with openai_sdk.chat.completions.stream(model="gpt-4o", messages=messages, tools=[PELICAN]) as stream:
        first = stream.get_final_completion().choices[0].message
    messages += [first, *({"role": "tool", "tool_call_id": c.id, "content": "Pelly"} for c in first.tool_calls)]
    with openai_sdk.chat.completions.stream(model="gpt-4o", messages=messages, tools=[PELICAN]) as stream:
        last = stream.get_final_completion()
    assert last.choices[0].finish_reason == "stop"
    results = fake.requests[1].body["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == [c.id for c in first.tool_calls]


def test_thinking_with_tools_round_trips_through_the_echoed_message(openai_sdk, fake):
    """The signed thinking block comes back byte-exact, so thinking stays on for the next turn."""
    answer = anthropic_stream_message("anthropic/thinking_tool_use.sse")
    [thinking] = [b for b in answer["content"] if b["type"] == "thinking"]
    tools = [{"type": "function", "function": {"name": "fixed_version"}}]
    fake.reply(json_reply(answer), fixture("anthropic/text.json"))
    messages = [USER]
    first = openai_sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, reasoning_effort="low")
    messages += [
        first.choices[0].message,
        {"role": "tool", "tool_call_id": first.choices[0].message.tool_calls[0].id, "content": "1.2.3"},
    ]
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=messages, tools=tools, reasoning_effort="low"
    )
    assert raw.parse().choices[0].finish_reason == "stop"
    assert "x-bridge-dropped-params" not in raw.headers
    sent = fake.requests[1].body
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": thinking["thinking"],
        "signature": thinking["signature"],
    }


def test_streamed_thinking_with_tools_round_trips_through_the_stream_helper(openai_sdk, fake):
    answer = anthropic_stream_message("anthropic/thinking_tool_use.sse")
    [thinking] = [b for b in answer["content"] if b["type"] == "thinking"]
    tools = [{"type": "function", "function": {"name": "fixed_version"}}]
    fake.reply(fixture("anthropic/thinking_tool_use.sse"), fixture("anthropic/text.sse"))
    messages = [USER]
    with openai_sdk.chat.completions.stream(
        model="gpt-4o", messages=messages, tools=tools, reasoning_effort="low"
    ) as stream:
        first = stream.get_final_completion().choices[0].message
    messages += [first, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "1.2.3"}]
    with openai_sdk.chat.completions.stream(
        model="gpt-4o", messages=messages, tools=tools, reasoning_effort="low"
    ) as stream:
        assert stream.get_final_completion().choices[0].finish_reason == "stop"
    sent = fake.requests[1].body
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": thinking["thinking"],
        "signature": thinking["signature"],
    }


def test_thinking_with_tools_still_works_when_the_client_drops_the_extension(openai_sdk, fake):
    """A client that rebuilds the assistant message without thinking_blocks: thinking is off for that turn."""
    answer = anthropic_stream_message("anthropic/thinking_tool_use.sse")
    tools = [{"type": "function", "function": {"name": "fixed_version"}}]
    fake.reply(json_reply(answer), fixture("anthropic/text.json"))
    first = (
        openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], tools=tools, reasoning_effort="low")
        .choices[0]
        .message
    )
    plain = {
        "role": "assistant",
        "content": first.content,
        "tool_calls": [call.model_dump() for call in first.tool_calls],
    }
    raw = openai_sdk.chat.completions.with_raw_response.create(
        model="gpt-4o",
        tools=tools,
        reasoning_effort="low",
        messages=[USER, plain, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "1.2.3"}],
    )
    assert raw.parse().choices[0].finish_reason == "stop"
    assert raw.headers["x-bridge-dropped-params"] == "reasoning_effort"
    sent = fake.requests[1].body
    assert "thinking" not in sent
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]


# -- bad input ----------------------------------------------------------------------------


def _bad_requests():
    translated = {
        "every message empty": (
            {"model": "gpt-4o", "messages": [{"role": "user", "content": ""}]},
            "messages",
            "empty",
        ),
        "response_format tool named like a function": (
            {
                "model": "gpt-4o",
                "messages": [USER],
                "tools": [WEATHER],
                "response_format": {"type": "json_schema", "json_schema": {"name": "get_weather"}},
            },
            "response_format",
            "get_weather",
        ),
    }
    return {**BAD_CHAT_REQUESTS, **translated}


BAD = _bad_requests()


@pytest.mark.parametrize("body, field, words", BAD.values(), ids=BAD.keys())
def test_bad_input_is_a_400_in_openai_shape_naming_the_field(openai_sdk, fake, body, field, words):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_sdk.post("/chat/completions", body=body, cast_to=object)
    error = caught.value
    assert error.status_code == 400 and error.param == field and error.type == "invalid_request_error"
    assert f"{field}: " in error.message and words in error.message
    assert fake.requests == [], "nothing reaches the upstream"


def test_a_body_that_is_not_json_is_a_400_in_openai_shape(bridge, fake):
    response = requests.post(
        f"{bridge.url}/v1/chat/completions", data=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and "error" in response.json()


def test_a_paced_stream_arrives_whole(openai_sdk, fake):
    """Events arriving one by one over time are relayed as they come, none lost."""
    fake.reply(fixture("anthropic/text.sse", pace=0.01))
    chunks = list(openai_sdk.chat.completions.create(model="gpt-4o", messages=[USER], stream=True))
    [text] = anthropic_stream_message("anthropic/text.sse")["content"]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text["text"]
