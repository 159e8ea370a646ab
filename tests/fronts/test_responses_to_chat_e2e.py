"""End to end: the official openai SDK's Responses client (and Codex's own requests) -> bridge's
/v1/responses over HTTP -> a fake Chat-only server replaying tests/fixtures/openai.

Expectations are read from the recordings; what the translators make of each piece is tested
in test_responses_to_chat_{request,response,stream}.py, here only that it reaches a real
client whole, and what reaches the Chat server.
"""

import json

import openai
import pytest
import requests

from bench.processes import wait_for
from bridge import settings as settings_module
from bridge.app import create_app
from bridge.protocols import sse
from bridge.protocols.schemas.openai import validate_chat
from tests.fake_upstream import FIXTURES, chat_stream, fixture, json_reply
from tests.helpers.accumulators import comparable, openai_stream_completion
from tests.helpers.directions import is_openai_error
from tests.helpers.recorded import OVERFLOWS, recorded
from tests.helpers.servers import LiveBridge, access_lines, bridge_env, openai_client

QUESTION = "What's the weather in Paris?"
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a shell.",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" LF'},
}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}],
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
CAPTURES = sorted((FIXTURES / "clients/codex-0.171.0/captures").glob("*.json"))


def routes(fake):
    """deepseek-* on a deployment that takes reasoning_effort and wants its reasoning back (as
    `max_tokens`); every other name on a plain Chat server; both the fake, at /v1."""
    deployment = {"protocol": "openai-chat", "base_url": f"{fake.url}/v1"}
    return {
        "default_routes": False,
        "routes": [
            {
                "models": ["deepseek-*"],
                "deployments": [
                    {
                        **deployment,
                        "name": "deepseek",
                        "reasoning_effort": True,
                        "reasoning_history": True,
                        "max_tokens_param": "max_tokens",
                    }
                ],
            },
            {"models": ["*"], "deployments": [{**deployment, "name": "local"}]},
        ],
    }


@pytest.fixture(scope="module")
def live(fake):
    served = LiveBridge(create_app(settings_module.load(bridge_env(fake, BRIDGE_ROUTES=json.dumps(routes(fake))))))
    yield served
    served.close()


@pytest.fixture
def client(live):
    return openai_client(live.url)


def items(response, kind):
    return [item for item in response.output if item.type == kind]


# -- responses.create ---------------------------------------------------------------------


def test_plain_create(client, fake):
    completion = recorded("openai/text.json")
    fake.reply(fixture("openai/text.json"))
    response = client.responses.create(model="qwen3", instructions="Be kind.", input=QUESTION)
    assert response.status == "completed" and response.model == "qwen3"
    assert response.output_text == completion["choices"][0]["message"]["content"]
    assert response.usage.input_tokens == completion["usage"]["prompt_tokens"]
    assert response.usage.output_tokens == completion["usage"]["completion_tokens"]
    sent = fake.last
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == "Bearer sk-client"
    assert sent.body == {
        "model": "qwen3",
        "messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": QUESTION}],
    }


def test_create_with_tools(client, fake):
    expected = recorded("openai/tool_calls.json")["choices"][0]["message"]["tool_calls"]
    fake.reply(fixture("openai/tool_calls.json"))
    response = client.responses.create(model="qwen3", input=QUESTION, tools=[EXEC])
    assert [(call.call_id, call.name, call.arguments) for call in items(response, "function_call")] == [
        (call["id"], call["function"]["name"], call["function"]["arguments"]) for call in expected
    ]
    assert fake.last.body["tools"] == [
        {
            "type": "function",
            "function": {"name": "exec_command", "parameters": EXEC["parameters"], "description": EXEC["description"]},
        }
    ]


# -- streams ------------------------------------------------------------------------------

STREAMS = [
    "text.sse",
    "ollama_tool_calls.sse",
    "vllm_stop_reason.sse",
    "llamacpp.sse",
    "deepseek_reasoning.sse",
    "groq_tool_calls.sse",
    "tool_calls_parallel.sse",
    "refusal.sse",
    "length.sse",
]


@pytest.mark.parametrize("name", STREAMS)
def test_the_stream_helpers_final_response_equals_the_response_not_streamed(client, fake, name):
    """Streamed: a response cut short by the server's length is response.incomplete."""
    completion = openai_stream_completion(f"openai/{name}")
    fake.reply(json_reply(completion), fixture(f"openai/{name}"))
    asked = dict(model="qwen3", input=QUESTION, tools=[EXEC], reasoning={"effort": "low", "summary": "auto"})
    whole = client.responses.create(**asked)
    with client.responses.stream(**asked) as stream:
        events = list(stream)
        final = stream.get_final_response() if whole.status == "completed" else events[-1].response
    assert events[0].type == "response.created" and events[-1].type == f"response.{whole.status}"
    streamed, plain = comparable(final), comparable(whole)
    if "usage" not in completion:  # the stream's usage is then bridge's estimate, the body's 0
        del streamed["usage"], plain["usage"]
    assert streamed == plain
    assert fake.last.body["stream"] is True and fake.last.body["stream_options"] == {"include_usage": True}


def test_a_custom_tools_call_is_a_custom_tool_call_and_its_output_a_tool_message(client, fake):
    """Codex's apply_patch, freeform: `{"input": text}` upstream, its text in the answer."""
    fake.reply(chat_stream(tool_calls=[("call_patch", "apply_patch", {"input": PATCH})]))
    history = [{"role": "user", "content": "Add hello.txt"}]
    with client.responses.stream(model="qwen3", input=history, tools=[APPLY_PATCH]) as stream:
        first = stream.get_final_response()
    [call] = items(first, "custom_tool_call")
    assert (call.call_id, call.name, call.input) == ("call_patch", "apply_patch", PATCH)
    [tool] = fake.last.body["tools"]
    assert tool["function"]["name"] == "apply_patch" and tool["function"]["parameters"]["required"] == ["input"]
    fake.reply(chat_stream("Done."))
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"type": "custom_tool_call_output", "call_id": "call_patch", "output": "Success."})
    with client.responses.stream(model="qwen3", input=history, tools=[APPLY_PATCH]) as stream:
        assert stream.get_final_response().output_text == "Done."
    _, assistant, output = fake.last.body["messages"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert output == {"role": "tool", "tool_call_id": "call_patch", "content": "Success."}


def test_a_namespaced_tools_call_comes_back_with_its_namespace(client, fake):
    fake.reply(chat_stream(tool_calls=[("call_1", "multi_agent_v1__close_agent", {"target": "a1"})]))
    with client.responses.stream(model="qwen3", input="close a1", tools=[AGENTS]) as stream:
        response = stream.get_final_response()
    [call] = items(response, "function_call")
    assert (call.name, call.namespace, json.loads(call.arguments)) == (
        "close_agent",
        "multi_agent_v1",
        {"target": "a1"},
    )
    assert fake.last.body["tools"][0]["function"]["name"] == "multi_agent_v1__close_agent"


def test_a_stream_is_logged_with_its_direction_upstream_model_and_the_servers_usage(start_bridge, fake):
    live = start_bridge(BRIDGE_ROUTES=json.dumps(routes(fake)), BRIDGE_LOG_LEVEL="INFO")
    usage = openai_stream_completion("openai/deepseek_reasoning.sse")["usage"]
    fake.reply(fixture("openai/deepseek_reasoning.sse"))
    with access_lines() as lines:
        with openai_client(live.url).responses.stream(model="deepseek-reasoner", input=QUESTION) as stream:
            final = stream.get_final_response()
        wait_for(lambda: lines, "the access line")
    [line] = lines
    assert (line["direction"], line["deployment"], line["upstream_model"]) == (
        "responses_to_chat",
        "deepseek",
        "deepseek-reasoner",
    )
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
        "reported",
    )
    assert final.usage.output_tokens_details.reasoning_tokens == usage["completion_tokens_details"]["reasoning_tokens"]


# -- conversations ------------------------------------------------------------------------


def test_parallel_calls_and_their_outputs_reach_the_server_as_one_assistant_message_and_tool_messages(client, fake):
    """Codex's order: call, call, output, output."""
    fake.reply(fixture("openai/tool_calls_parallel.sse"), fixture("openai/text.json"))
    history = [{"role": "user", "content": QUESTION}]
    with client.responses.stream(model="qwen3", input=history, tools=[EXEC]) as stream:
        first = stream.get_final_response()
    calls = items(first, "function_call")
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history += [{"type": "function_call_output", "call_id": c.call_id, "output": f"out {c.call_id}"} for c in calls]
    client.responses.create(model="qwen3", input=history, tools=[EXEC])
    sent = fake.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [(c["id"], c["function"]["arguments"]) for c in sent[1]["tool_calls"]] == [
        (c.call_id, c.arguments) for c in calls
    ]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [(c.call_id, f"out {c.call_id}") for c in calls]


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
def test_reasoning_round_trips_as_reasoning_content_where_the_deployment_wants_it(client, fake, streamed):
    completion = openai_stream_completion("openai/deepseek_reasoning.sse")
    thought = completion["choices"][0]["message"]["reasoning_content"]
    fake.reply(
        fixture("openai/deepseek_reasoning.sse") if streamed else json_reply(completion),
        fixture("openai/text.json"),
        fixture("openai/text.json"),
    )
    history = [{"role": "user", "content": "How do I cross the street?"}]
    asked = dict(reasoning={"summary": "auto"}, include=["reasoning.encrypted_content"])
    if streamed:
        with client.responses.stream(model="deepseek-reasoner", input=history, **asked) as stream:
            first = stream.get_final_response()
    else:
        first = client.responses.create(model="deepseek-reasoner", input=history, **asked)
    [reasoning] = items(first, "reasoning")
    assert [part.text for part in reasoning.summary] == [thought] and reasoning.encrypted_content
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "And at night?"})
    raw = client.responses.with_raw_response.create(model="deepseek-reasoner", input=history, **asked)
    assert raw.parse().status == "completed" and "x-bridge-dropped-params" not in raw.headers
    assistant = fake.requests[1].body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["reasoning_content"] == thought
    # where the deployment does not want it back, it stays out, unnamed: it is bridge's own
    raw = client.responses.with_raw_response.create(model="qwen3", input=history, **asked)
    assert "x-bridge-dropped-params" not in raw.headers
    assert "reasoning_content" not in fake.requests[2].body["messages"][1]


def test_reasoning_another_model_wrote_is_dropped_and_named(client, fake):
    fake.reply(fixture("openai/text.json"))
    history = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABo-openai-encrypted"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": "bye"},
    ]
    raw = client.responses.with_raw_response.create(model="deepseek-reasoner", input=history)
    assert raw.headers["x-bridge-dropped-params"] == "input.1.encrypted_content"
    assert "reasoning_content" not in fake.last.body["messages"][1]


def test_hosted_tools_are_dropped_and_named_and_the_options_the_deployment_takes_are_sent(client, fake):
    fake.reply(fixture("openai/text.json"))
    raw = client.responses.with_raw_response.create(
        model="deepseek-chat",
        input=QUESTION,
        tools=[EXEC, {"type": "web_search"}],
        reasoning={"effort": "xhigh"},
        max_output_tokens=100,
    )
    assert raw.headers["x-bridge-dropped-params"] == "tools.web_search"
    sent = fake.last.body
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["exec_command"]
    assert (sent["reasoning_effort"], sent["max_tokens"]) == ("high", 100)


def test_a_document_by_url_is_a_400_naming_it_and_nothing_goes_upstream(client, fake):
    content = [{"type": "input_file", "file_url": "https://example.com/a.pdf"}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="qwen3", input=[{"role": "user", "content": content}])
    assert caught.value.body["param"] == "input.0.content.0.file_url" and fake.requests == []


# -- errors -------------------------------------------------------------------------------

ERRORS = [
    ("error_400.json", openai.BadRequestError, 400),
    ("error_401.json", openai.AuthenticationError, 401),
    ("error_404.json", openai.NotFoundError, 404),
    ("error_429.json", openai.RateLimitError, 429),
    ("error_500.json", openai.InternalServerError, 500),
    ("error_503.json", openai.InternalServerError, 503),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("name, error_class, status", ERRORS)
def test_upstream_errors_raise_the_sdk_error_class(client, fake, name, error_class, status, streamed):
    fake.reply(fixture(f"openai/{name}"))
    with pytest.raises(error_class) as caught:
        client.responses.create(model="qwen3", input=QUESTION, stream=streamed)
    assert caught.value.status_code == status
    assert recorded(f"openai/{name}")["error"]["message"] in caught.value.message


def test_a_429_keeps_the_servers_retry_after(client, fake):
    """Codex retries a 429 only when it carries retry-after."""
    fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="qwen3", input=QUESTION)
    assert caught.value.response.headers["retry-after"] == fixture("openai/error_429.json").headers["retry-after"]


def test_an_overloaded_server_is_a_503_with_retry_after(client, fake):
    """Codex retries a 503 at once only with retry-after; without it, 30 times over 25 s."""
    assert "retry-after" not in fixture("openai/error_503.json").headers
    fake.reply(fixture("openai/error_503.json"))
    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model="qwen3", input=QUESTION)
    assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == "1"


@pytest.mark.parametrize(
    "reply",
    [
        fixture("openai/error_context_length.json"),
        json_reply({"error": OVERFLOWS["vllm 0.18+"][0]}, 400),
        json_reply({"error": OVERFLOWS["llama.cpp"][0]}, 400),
        json_reply({"error": OVERFLOWS["ollama"][0]["message"]}, 400),
    ],
    ids=["openai", "vllm", "llama.cpp", "ollama"],
)
def test_a_context_overflow_however_the_server_words_it_is_context_length_exceeded(client, fake, reply):
    """What Codex stops on and says the context window is full."""
    fake.reply(reply)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="qwen3", input=QUESTION, stream=True)
    assert (caught.value.code, caught.value.param) == ("context_length_exceeded", "input")


def test_a_midstream_error_is_response_failed(client, fake):
    fake.reply(fixture("openai/groq_midstream_error.sse"))
    events = list(client.responses.create(model="qwen3", input=QUESTION, stream=True))
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error.code == "server_error"


@pytest.mark.parametrize("cut", ["connection dropped", "body ended"])
def test_a_stream_cut_short_is_response_failed(live, client, fake, cut):
    reply = fixture("openai/text.sse", drop_after=3) if cut == "connection dropped" else fixture("openai/text.sse")
    if cut == "body ended":
        reply.events = reply.events[:3]  # a clean end of the body, before the finish_reason
    fake.reply(reply)
    events = list(client.responses.create(model="qwen3", input=QUESTION, stream=True))
    assert events[-1].type == "response.failed"
    assert not [event for event in events if event.type == "response.completed"]
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


# -- Codex's own requests -----------------------------------------------------------------


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name.split("-POST")[0] for p in CAPTURES])
def test_every_codex_request_as_codex_sent_it_is_answered_and_a_valid_chat_request(live, fake, path):
    """Path, headers and body byte for byte as Codex 0.171.0 sent them
    (tests/fixtures/clients/codex-0.171.0/CODEX.md §2)."""
    captured = json.loads(path.read_text())
    headers = {
        name: value
        for name, value in captured["headers"].items()
        if name not in ("host", "content-length", "accept-encoding")
    }
    fake.reply(chat_stream("Hi from a Chat server."))
    response = requests.post(
        f"{live.url}{captured['path']}",
        params=captured["query"],
        headers=headers,
        data=json.dumps(captured["body"]).encode(),
    )
    assert response.status_code == 200, response.text
    events = [json.loads(event.data) for event in sse.Decoder().feed(response.content)]
    assert events[-1]["type"] == "response.completed"
    assert any(e["type"] == "response.output_item.done" for e in events), "what Codex records (CODEX.md §4)"
    validate_chat(fake.last.body)
    assert fake.last.path == "/v1/chat/completions" and fake.last.body["stream"] is True
    assert fake.last.headers["authorization"] == "Bearer sk-fake-capture-key"


def test_the_route_answers_without_v1_too(live, fake):
    fake.reply(fixture("openai/text.json"))
    ok = requests.post(
        f"{live.url}/responses", json={"model": "qwen3", "input": QUESTION}, headers={"authorization": "Bearer k"}
    )
    assert ok.status_code == 200 and ok.json()["status"] == "completed"
    assert is_openai_error(requests.get(f"{live.url}/responses/resp_1"), 404)
