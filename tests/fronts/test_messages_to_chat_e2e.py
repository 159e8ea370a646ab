"""End to end: the official anthropic SDK -> the bridge over HTTP -> a fake OpenAI-compatible upstream.

The fake replays the recorded Chat bodies and streams in tests/fixtures/openai;
expectations are read from those recordings. The recorded Claude Code requests
in tests/fixtures/clients are replayed as Claude Code sent them (path, headers,
body) and what reached the fake upstream is checked to be a valid Chat request.
"""

import json
import re

import anthropic
import pytest
import requests

from bridge.translate.messages_to_chat.stream import StreamTranslator
from bridge.translate.tokens import count_tokens
from tests.fake_upstream import FIXTURES, fixture, json_reply, split_events
from tests.helpers.accumulators import anthropic_fold, openai_stream_completion
from tests.helpers.contexts import messages_to_chat_context, translated
from tests.helpers.recorded import OPENAI_STREAMS, recorded, recorded_events, replay
from tests.helpers.upstream_requests import CHAT_FIELDS, assert_valid_chat_request

OPENAI = FIXTURES / "openai"
CLIENTS = sorted((FIXTURES / "clients").glob("**/claude_code_*.json"))
HI = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def create(client, **extra):
    return client.messages.create(model="claude-opus-4-8", max_tokens=512, messages=HI, **extra)


# -- messages.create on recorded bodies ------------------------------------------------------


def test_create_text(anthropic_sdk, fake):
    body = recorded("openai/text.json")
    fake.reply(fixture("openai/text.json"))
    message = create(anthropic_sdk, system="Be brief.")
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == body["choices"][0]["message"]["content"]
    assert message.stop_reason == "end_turn" and message.model == "claude-opus-4-8"
    cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert message.usage.input_tokens == body["usage"]["prompt_tokens"] - cached
    assert message.usage.cache_read_input_tokens == cached
    assert message.usage.output_tokens == body["usage"]["completion_tokens"]
    sent = fake.last
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."}, HI[0]]
    assert sent.body["max_completion_tokens"] == 512 and "stream" not in sent.body
    assert sent.headers["authorization"] == "Bearer sk-ant-client", "pass-through: the client's key goes upstream"


def test_create_tool_calls(anthropic_sdk, fake):
    calls = recorded("openai/tool_calls.json")["choices"][0]["message"]["tool_calls"]
    fake.reply(fixture("openai/tool_calls.json"))
    message = create(anthropic_sdk, tools=[WEATHER], tool_choice={"type": "any"})
    assert [(b.type, b.id, b.name, b.input) for b in message.content] == [
        ("tool_use", c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls
    ]
    assert message.stop_reason == "tool_use"
    assert fake.last.body["tool_choice"] == "required"
    assert fake.last.body["tools"][0]["function"]["name"] == "get_weather"


def test_create_reasoning(anthropic_sdk, fake):
    source = recorded("openai/deepseek_reasoning.json")["choices"][0]["message"]
    fake.reply(fixture("openai/deepseek_reasoning.json"))
    message = create(anthropic_sdk)
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == source["reasoning_content"]
    assert thinking.signature == ""
    assert text.text == source["content"]


def test_create_refusal(anthropic_sdk, fake):
    source = recorded("openai/refusal.json")["choices"][0]["message"]
    fake.reply(fixture("openai/refusal.json"))
    message = create(anthropic_sdk)
    assert message.stop_reason == "refusal" and message.content[0].text == source["refusal"]
    assert message.stop_details.type == "refusal"


def test_create_length(anthropic_sdk, fake):
    fake.reply(fixture("openai/length.json"))
    assert create(anthropic_sdk).stop_reason == "max_tokens"


def test_create_content_filter(anthropic_sdk, fake):
    fake.reply(fixture("openai/content_filter.json"))
    message = create(anthropic_sdk)
    assert message.stop_reason == "refusal" and message.content == []


def test_a_multi_choice_answer_is_a_server_error(anthropic_sdk, fake):
    body = recorded("openai/text.json")
    body["choices"].append({**body["choices"][0], "index": 1})
    fake.reply(json_reply(body))
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(anthropic_sdk)
    assert caught.value.status_code == 502 and "2 choices" in caught.value.message


# -- messages.stream on every recorded stream ----------------------------------------------------


@pytest.mark.parametrize("name", OPENAI_STREAMS)
def test_stream_every_recorded_stream(anthropic_sdk, fake, name):
    """The SDK over HTTP gets what the stream translator makes of the recording, which
    test_messages_to_chat_stream checks against the answer not streamed."""
    context = messages_to_chat_context(
        stream=True, model="claude-opus-4-8", input_tokens=count_tokens({"messages": HI, "tools": [WEATHER]})
    )
    expected = anthropic_fold(translated(StreamTranslator(context), recorded_events(name)))
    fake.reply(fixture(name))
    with anthropic_sdk.messages.stream(model="claude-opus-4-8", max_tokens=512, messages=HI, tools=[WEATHER]) as stream:
        message = stream.get_final_message()
    assert message.to_dict(mode="json", exclude_none=True) == expected
    sent = fake.last.body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_stream_events_arrive_in_anthropic_order(anthropic_sdk, fake):
    fake.reply(fixture("openai/tool_calls_parallel.sse"))
    with anthropic_sdk.messages.stream(model="claude-opus-4-8", max_tokens=512, messages=HI, tools=[WEATHER]) as stream:
        types = [event.type for event in stream]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert types.count("content_block_start") == types.count("content_block_stop") == 2


def test_stream_stop_reasons_for_refusal_length_and_content_filter(anthropic_sdk, fake):
    expected = {"refusal.sse": "refusal", "length.sse": "max_tokens", "content_filter.sse": "refusal"}
    for name, stop_reason in expected.items():
        fake.reply(fixture(f"openai/{name}"))
        with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            assert stream.get_final_message().stop_reason == stop_reason, name


def test_stream_vllm_stop_sequence(anthropic_sdk, fake):
    events = [
        json.dumps({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]}),
        json.dumps({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": "END"}]}),
        "[DONE]",
    ]
    fake.reply(fixture("openai/text.sse", events=[f"data: {e}\n\n".encode() for e in events]))
    with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI, stop_sequences=["END"]) as stream:
        message = stream.get_final_message()
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
    assert fake.last.body["stop"] == ["END"]


def test_groq_mid_stream_error_raises_an_sdk_error(anthropic_sdk, fake):
    error = next(p for name, p in recorded_events("openai/groq_midstream_error.sse") if name == "error")
    fake.reply(fixture("openai/groq_midstream_error.sse"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            stream.get_final_message()
    assert error["error"]["message"] in str(caught.value)


def test_multi_choice_stream_raises_an_sdk_error(anthropic_sdk, fake):
    fake.reply(fixture("openai/multi_choice.sse"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            stream.get_final_message()
    assert "choices" in str(caught.value)


def test_a_stream_that_ends_before_its_finish_reason_raises_an_sdk_error(anthropic_sdk, fake):
    events = split_events((OPENAI / "text.sse").read_bytes())
    fake.reply(fixture("openai/text.sse", events=events[:4]))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            stream.get_final_message()
    assert "finish_reason" in str(caught.value)


def test_a_connection_dropped_mid_stream_raises_an_sdk_error(anthropic_sdk, fake):
    fake.reply(fixture("openai/text.sse", drop_after=4))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
            stream.get_final_message()
    assert caught.value.body["error"]["type"] == "api_error"


def test_stream_without_usage_request_when_switched_off(start_bridge, fake):
    live = start_bridge(BRIDGE_OPENAI_STREAM_USAGE="false")
    client = anthropic.Anthropic(base_url=live.url, api_key="k", max_retries=0)
    fake.reply(fixture("openai/text_no_usage.sse"))
    with client.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
        message = stream.get_final_message()
    assert "stream_options" not in fake.last.body and message.usage.output_tokens > 0


def test_pings_while_the_upstream_is_silent_never_follow_message_stop_nor_disturb_the_sdk(start_bridge, fake):
    live = start_bridge(BRIDGE_PING_INTERVAL="0.05")
    fake.reply(fixture("openai/text.sse", pace=0.3))
    response = requests.post(
        f"{live.url}/v1/messages", json={"model": "m", "max_tokens": 64, "messages": HI, "stream": True}
    )
    names = [line[len("event: ") :] for line in response.text.splitlines() if line.startswith("event: ")]
    assert "ping" in names and names[-1] == "message_stop"
    text = openai_stream_completion("openai/text.sse")["choices"][0]["message"]["content"]
    fake.reply(fixture("openai/text.sse", pace=0.1))
    client = anthropic.Anthropic(base_url=live.url, api_key="k", max_retries=0)
    with client.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
        assert stream.get_final_message().content[0].text == text


def test_an_error_inside_a_200_body_becomes_an_sdk_error(anthropic_sdk, fake):
    fake.reply(json_reply({"error": {"message": "model is still loading", "type": "server_error"}}))
    with pytest.raises(anthropic.APIStatusError) as caught:
        create(anthropic_sdk)
    assert caught.value.status_code == 502 and "model is still loading" in caught.value.message


# -- count_tokens ---------------------------------------------------------------------------


def test_count_tokens(anthropic_sdk, fake):
    request = {"model": "claude-opus-4-8", "messages": HI, "system": "Be brief.", "tools": [WEATHER]}
    counted = anthropic_sdk.messages.count_tokens(**request)
    assert counted.input_tokens == count_tokens(request) > 0
    assert fake.requests == [], "counted locally, no upstream call"


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, error_class, status",
    [
        ("error_400.json", anthropic.BadRequestError, 400),
        ("error_401.json", anthropic.AuthenticationError, 401),
        ("error_404.json", anthropic.NotFoundError, 404),
        ("error_429.json", anthropic.RateLimitError, 429),
        ("error_500.json", anthropic.InternalServerError, 500),
        ("error_503.json", anthropic.OverloadedError, 529),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_upstream_errors_raise_the_matching_sdk_error(anthropic_sdk, fake, name, error_class, status, streamed):
    upstream = recorded(f"openai/{name}")["error"]
    fake.reply(fixture(f"openai/{name}"))
    with pytest.raises(error_class) as caught:
        if streamed:
            with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI) as stream:
                stream.get_final_message()
        else:
            create(anthropic_sdk)
    assert caught.value.status_code == status
    assert caught.value.body["type"] == "error" and upstream["message"] in caught.value.body["error"]["message"]


def test_rate_limit_keeps_retry_after(anthropic_sdk, fake):
    meta = json.loads((OPENAI / "error_429.meta.json").read_text())
    fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(anthropic.RateLimitError) as caught:
        create(anthropic_sdk)
    assert caught.value.response.headers["retry-after"] == meta["headers"]["retry-after"]


# -- context overflow: Anthropic's own words, the ones Claude Code compacts on ------------------------

ESTIMATE = count_tokens({"model": "claude-opus-4-8", "max_tokens": 512, "messages": HI})
OVERFLOWS = [
    pytest.param(
        fixture("openai/error_context_length.json"), "prompt is too long: 131072 tokens > 128000 maximum", id="openai"
    ),
    pytest.param(
        json_reply(
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                    "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages "
                    "or completion.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
            400,
        ),
        "input length and `max_tokens` exceed context limit: 4000 + 1000 > 4096, decrease input length or "
        "`max_tokens` and try again",
        id="vllm",
    ),
    pytest.param(
        json_reply(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            },
            400,
        ),
        "prompt is too long: 5000 tokens > 4096 maximum",
        id="llama.cpp",
    ),
    pytest.param(
        json_reply({"error": {"message": "the input length exceeds the context length", "type": "api_error"}}, 400),
        f"prompt is too long: {ESTIMATE} tokens > {ESTIMATE} maximum",
        id="ollama-no-numbers",
    ),
    pytest.param(
        json_reply(
            {
                "error": "Trying to keep the first 6269 tokens when context the overflows. However, the "
                "model is loaded with context length of only 4096 tokens, which is not enough."
            },
            400,
        ),
        "prompt is too long: 4096 tokens > 4096 maximum",
        id="lm-studio-string-error",
    ),
]


@pytest.mark.parametrize("reply, message", OVERFLOWS)
@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_an_upstream_overflow_is_anthropics_prompt_too_long_in_the_sdk(anthropic_sdk, fake, reply, message, streamed):
    fake.reply(reply)
    with pytest.raises(anthropic.BadRequestError) as caught:
        if streamed:
            with anthropic_sdk.messages.stream(model="claude-opus-4-8", max_tokens=512, messages=HI) as stream:
                stream.get_final_message()
        else:
            create(anthropic_sdk)
    assert caught.value.body["error"] == {"type": "invalid_request_error", "message": message}
    if message.startswith("prompt"):
        assert re.search(r"prompt is too long: \d+ tokens > \d+ maximum", caught.value.message)


def test_an_overflow_reported_mid_stream_is_anthropics_in_the_error_event(anthropic_sdk, fake):
    """vLLM checks some limits only once the stream began, and says so in a data chunk."""
    head = fixture("openai/text.sse").events[:2]
    overflow = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your request has "
            "9000 input tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    fake.reply(fixture("openai/text.sse", events=[*head, b"data: " + json.dumps(overflow).encode() + b"\n\n"]))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_sdk.messages.stream(model="claude-opus-4-8", max_tokens=512, messages=HI) as stream:
            stream.get_final_message()
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 9000 tokens > 8192 maximum",
    }


# -- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, path",
    [
        ({"model": "m", "messages": HI}, "max_tokens"),
        ({"model": "m", "max_tokens": 5, "messages": []}, "messages"),
        ({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "hologram"}]}],
            },
            "messages.0.content.1.type",
        ),
        ({"model": "m", "max_tokens": "5", "messages": HI}, "max_tokens"),
        ({"model": "m", "max_tokens": 5, "messages": HI, "stop_sequences": list("abcde")}, "stop_sequences"),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": HI,
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "tools.0.type",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    *HI,
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                    {"role": "user", "content": "no result"},
                ],
            },
            "messages.1.content.0",
        ),
    ],
)
def test_bad_input_is_an_anthropic_400_naming_the_field(bridge, fake, body, path):
    response = requests.post(f"{bridge.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{path}: ")
    assert fake.requests == []


def test_bad_input_raises_bad_request_error_in_the_sdk(anthropic_sdk):
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_sdk.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "nonsense"}]}],
        )
    assert caught.value.body["error"]["message"].startswith("messages.0.content.1.type: ")


def test_malformed_json_is_a_400_in_anthropic_shape(bridge):
    response = requests.post(
        f"{bridge.url}/v1/messages", data=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_count_tokens_bad_input_names_the_field(anthropic_sdk):
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_sdk.messages.count_tokens(model="m", messages=[{"role": "user", "content": 5}])
    assert caught.value.body["error"]["message"].startswith("messages.0.content: ")


# -- the recorded Claude Code requests ---------------------------------------------------------------------


@pytest.mark.parametrize("path", CLIENTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recorded_claude_code_request_is_served(bridge, fake, path):
    capture = json.loads(path.read_text())
    body = capture["body"]
    if "count_tokens" in capture["path"]:
        response = replay(bridge.url, capture)
        assert response.status_code == 200 and response.json()["input_tokens"] == count_tokens(body)
        assert fake.requests == []
        return
    streamed = bool(body.get("stream"))
    fake.reply(fixture("openai/text.sse" if streamed else "openai/text.json"))
    response = replay(bridge.url, capture)
    assert response.status_code == 200, response.text
    if streamed:
        assert response.headers["content-type"].startswith("text/event-stream")
        names = [line[len("event: ") :] for line in response.text.splitlines() if line.startswith("event: ")]
        assert names[0] == "message_start" and names[-1] == "message_stop"
    else:
        assert response.json()["type"] == "message"
    sent = fake.last
    assert sent.path == "/v1/chat/completions"
    assert_valid_chat_request(sent.body)
    assert set(sent.body) <= CHAT_FIELDS
    assert sent.body["model"] == body["model"], "unmapped names pass through"
    assert "x-anthropic-billing-header" not in json.dumps(sent.body), "a per-request hash defeats prefix caching"
    presented = capture["headers"].get("x-api-key") or capture["headers"]["authorization"].split(" ", 1)[1]
    assert sent.headers["authorization"] == f"Bearer {presented}"
    assert all(h not in sent.headers for h in ("anthropic-version", "anthropic-beta", "x-api-key"))
    dropped = response.headers.get("x-bridge-dropped-params", "")
    assert all(field in dropped for field in ("context_management", "thinking"))
    sent_ids = [c["id"] for m in sent.body["messages"] for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in sent.body["messages"] if m["role"] == "tool"]
    assert sent_ids == answered


def test_claude_code_haiku_requests_reach_the_mapped_model_and_answer_as_haiku(start_bridge, fake):
    live = start_bridge(
        BRIDGE_MODEL_MAP=json.dumps({"claude-*haiku*": "gpt-4.1-mini"}), BRIDGE_OPENAI_REASONING_EFFORT="true"
    )
    capture = json.loads((FIXTURES / "clients" / "claude_code_model_haiku.json").read_text())
    fake.reply(fixture("openai/text.sse"))
    response = replay(live.url, capture)
    assert response.status_code == 200
    start = json.loads(next(line for line in response.text.splitlines() if line.startswith("data: "))[6:])
    assert start["message"]["model"] == capture["body"]["model"]
    assert fake.last.body["model"] == "gpt-4.1-mini"
    assert fake.last.body["reasoning_effort"] == "high", "thinking budget 31999"


def test_a_tool_loop_through_the_sdk(anthropic_sdk, fake):
    """Turn 1 answers with a tool call; turn 2 sends its result back and gets text."""
    fake.reply(fixture("openai/tool_calls.sse"), fixture("openai/text.sse"))
    tools = [{"name": "get_capital", "input_schema": {"type": "object"}}]
    with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=HI, tools=tools) as stream:
        first = stream.get_final_message()
    [use] = [b for b in first.content if b.type == "tool_use"]
    history = [
        *HI,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "London"}]},
    ]
    with anthropic_sdk.messages.stream(model="m", max_tokens=64, messages=history, tools=tools) as stream:
        assert stream.get_final_message().stop_reason == "end_turn"
    sent = fake.last.body["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == use.id and sent[-1] == {
        "role": "tool",
        "tool_call_id": use.id,
        "content": "London",
    }
    assert json.loads(sent[-2]["tool_calls"][0]["function"]["arguments"]) == use.input


# -- the SDKs' tool runners and Claude Code 2.1.332 -------------------------------------------------


def _chat_answer(message, finish_reason):
    return json_reply(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


def test_the_sdk_tool_runner_completes_a_two_turn_loop_with_the_whole_history_upstream(anthropic_sdk, fake):
    """The default tool_runner threads its turns server-side; refused, it resends every message itself."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_capital", "arguments": '{"country": "UK"}'}}
    fake.reply(
        _chat_answer({"content": None, "tool_calls": [call]}, "tool_calls"),
        _chat_answer({"content": "London."}, "stop"),
    )

    @anthropic.beta_tool
    def get_capital(country: str) -> str:
        """The capital of a country."""
        return {"UK": "London"}[country]

    runner = anthropic_sdk.beta.messages.tool_runner(
        model="m", max_tokens=64, tools=[get_capital], messages=[{"role": "user", "content": "Capital of the UK?"}]
    )
    answers = list(runner)
    assert [a.stop_reason for a in answers] == ["tool_use", "end_turn"]
    assert answers[-1].content[0].text == "London."
    assert len(fake.requests) == 2, "the refused thread turns never went upstream"
    assert fake.requests[-1].body["messages"] == [
        {"role": "user", "content": "Capital of the UK?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_capital", "arguments": '{"country":"UK"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "London"},
    ]


def test_a_raw_thread_continuation_is_refused_with_details_and_nothing_goes_upstream(bridge, fake):
    body = {
        "model": "m",
        "max_tokens": 64,
        "thread": {"type": "continue", "previous_message_id": "msg_1"},
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]}],
    }
    response = requests.post(f"{bridge.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith("thread: ")
    assert error["details"] == {"error_code": "thread_unsupported_request", "unsupported": []}
    assert fake.requests == []
    fake.reply(fixture("openai/text.json"))
    body.pop("thread")
    body["messages"] = HI
    assert requests.post(f"{bridge.url}/v1/messages", json=body).status_code == 200, "the service stays healthy"


def test_the_sdk_raises_its_thread_error_class(anthropic_sdk, fake):
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_sdk.messages.create(model="m", max_tokens=64, messages=HI, extra_body={"thread": {"type": "create"}})
    assert type(caught.value).__name__ == "ThreadUnsupportedRequestError"
    assert fake.requests == []


def test_safeguards_are_named_and_logged_at_warning_with_the_request_id(bridge, fake, caplog):
    capture = json.loads(
        (FIXTURES / "clients" / "claude-code-2.1.332" / "claude_code_interactive_turn1.json").read_text()
    )
    fake.reply(fixture("openai/text.sse"))
    with caplog.at_level("WARNING", logger="bridge"):
        response = replay(bridge.url, capture)
        assert response.status_code == 200
    assert "safeguards" in response.headers["x-bridge-dropped-params"].split(", ")
    [record] = [r for r in caplog.records if "safeguards" in r.getMessage()]
    assert response.headers["request-id"] in record.getMessage() and record.levelname == "WARNING"
