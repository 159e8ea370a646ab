"""Prompt caching for OpenAI clients: the openai SDK -> the bridge over HTTP -> the fake Anthropic upstream.

Chat has no cache_control, so the bridge marks where a conversation's stable prefix ends
(BRIDGE_PROMPT_CACHE, on by default). What matters is that a request of an agent loop
marks the prefix the next one starts with, so that Anthropic's cache would hit.
"""

import json

import openai
import pytest

from tests.fake_upstream import fixture, json_reply
from tests.helpers.accumulators import anthropic_stream_message
from tests.helpers.recorded import recorded

EPHEMERAL = {"type": "ephemeral"}
SYSTEM = {"role": "system", "content": "You name pelicans. " * 200}
PELICAN = {"type": "function", "function": {"name": "pelican_name_generator", "parameters": {"type": "object"}}}


def marked(body):
    """(where, marker) of each cache mark in an upstream body, in prompt order."""
    marks = [
        (f"tools[{n}]", tool["cache_control"])
        for n, tool in enumerate(body.get("tools", ()))
        if "cache_control" in tool
    ]
    system = body.get("system")
    if isinstance(system, list):
        marks += [(f"system[{n}]", b["cache_control"]) for n, b in enumerate(system) if "cache_control" in b]
    for m, turn in enumerate(body["messages"]):
        marks += [
            (f"messages[{m}][{n}]", b["cache_control"]) for n, b in enumerate(turn["content"]) if "cache_control" in b
        ]
    return marks


def unmarked(value):
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def tool_loop(client, fake):
    """Three calls: two answered with tool calls, the third with text (and a recorded cache read)."""
    fake.reply(
        fixture("anthropic/tool_use.json"),
        json_reply(anthropic_stream_message("anthropic/tool_use_parallel.sse")),
        fixture("anthropic/cache_usage.json"),
    )
    messages = [SYSTEM, {"role": "user", "content": "Name three pelicans."}]
    completions = []
    for _ in range(3):
        completion = client.chat.completions.create(model="gpt-4o", messages=messages, tools=[PELICAN])
        completions.append(completion)
        message = completion.choices[0].message
        messages.append(message)
        messages += [{"role": "tool", "tool_call_id": c.id, "content": "Pelly"} for c in message.tool_calls or ()]
    assert [c.choices[0].finish_reason for c in completions] == ["tool_calls", "tool_calls", "stop"]
    return completions, [request.body for request in fake.requests]


def test_a_three_turn_tool_loop_marks_tools_system_and_each_turns_prefix(openai_sdk, fake):
    completions, bodies = tool_loop(openai_sdk, fake)
    assert [marked(body) for body in bodies] == [
        [("tools[0]", EPHEMERAL), ("system[0]", EPHEMERAL), ("messages[0][0]", EPHEMERAL)],
        [
            ("tools[0]", EPHEMERAL),
            ("system[0]", EPHEMERAL),
            ("messages[0][0]", EPHEMERAL),
            ("messages[2][0]", EPHEMERAL),
        ],
        [
            ("tools[0]", EPHEMERAL),
            ("system[0]", EPHEMERAL),
            ("messages[2][0]", EPHEMERAL),
            ("messages[4][1]", EPHEMERAL),
        ],
    ]
    for before, after in zip(bodies, bodies[1:], strict=False):
        # The block that ended one request is marked, with the same prefix, in the next: a cache hit.
        end = len(before["messages"])
        assert after["messages"][end - 1] == before["messages"][end - 1]
        assert unmarked(after["messages"][:end]) == unmarked(before["messages"])
        assert after["system"] == before["system"] and after["tools"] == before["tools"]
    usage = recorded("anthropic/cache_usage.json")["usage"]
    assert completions[2].usage.prompt_tokens_details.cached_tokens == usage["cache_read_input_tokens"]


def test_with_caching_off_nothing_is_marked_and_prompt_cache_key_is_named(start_bridge, fake):
    live = start_bridge(BRIDGE_PROMPT_CACHE="off")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    _, bodies = tool_loop(client, fake)
    assert "cache_control" not in json.dumps(bodies)
    fake.reply(fixture("anthropic/text.json"))
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "Hi"}], prompt_cache_key="loop-1"
    )
    assert raw.headers["x-bridge-dropped-params"] == "prompt_cache_key"


def test_one_hour_ttl_marks_with_it_and_prompt_cache_key_is_not_named(start_bridge, fake):
    live = start_bridge(BRIDGE_PROMPT_CACHE="1h")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/text.json"))
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "Hi"}], prompt_cache_key="loop-1"
    )
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert marked(fake.last.body) == [("system[0]", hour), ("messages[0][0]", hour)]
    assert "x-bridge-dropped-params" not in raw.headers


def test_a_deployment_turns_caching_off_for_its_route(start_bridge, fake):
    routes = {
        "routes": [
            {
                "models": ["claude-*"],
                "deployments": [
                    {"name": "no-cache", "protocol": "anthropic", "base_url": fake.url, "prompt_cache": "off"}
                ],
            }
        ]
    }
    live = start_bridge(BRIDGE_ROUTES=json.dumps(routes))
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    fake.reply(fixture("anthropic/text.json"), fixture("anthropic/text.json"))
    for model in ("claude-sonnet-4-5", "gpt-4o"):
        client.chat.completions.create(model=model, messages=[SYSTEM, {"role": "user", "content": "Hi"}])
    assert [bool(marked(request.body)) for request in fake.requests] == [False, True]


def test_a_client_that_marks_its_own_prompt_keeps_its_marks(openai_sdk, fake):
    fake.reply(fixture("anthropic/text.json"))
    own = {"type": "ephemeral", "ttl": "1h"}
    openai_sdk.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": [{"type": "text", "text": "Rules.", "cache_control": own}]},
            {"role": "user", "content": "Hi"},
        ],
    )
    assert marked(fake.last.body) == [("system[0]", own)]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_streamed_cache_read_is_reported_as_cached_tokens(openai_sdk, fake, api):
    fake.reply(fixture("anthropic/cache_read.sse"))
    read = anthropic_stream_message("anthropic/cache_read.sse")["usage"]["cache_read_input_tokens"]
    if api == "chat":
        chunks = openai_sdk.chat.completions.create(
            model="gpt-4o",
            messages=[SYSTEM, {"role": "user", "content": "Hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        assert [chunk.usage for chunk in chunks][-1].prompt_tokens_details.cached_tokens == read
    else:
        events = openai_sdk.responses.create(model="gpt-4o", instructions=SYSTEM["content"], input="Hi", stream=True)
        # The recording stops at max_tokens: the response ends incomplete, with its usage.
        [last] = [event.response for event in events if event.type == "response.incomplete"]
        assert last.usage.input_tokens_details.cached_tokens == read
    assert marked(fake.last.body)
