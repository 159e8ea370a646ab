"""Every stream's tokens are counted, on every kind of route, against a real redis-server: as the
upstream reported them, which a Chat upstream does only when asked (bridge asks, and keeps what
the client did not ask for out of its stream), else as bridge estimates them, and then the
access line says so.

The Chat upstream here answers as OpenAI does: a recorded stream taken with
`stream_options.include_usage`, and without its usage-only chunk and `usage: null` fields when
the request did not ask for usage.
"""

import json

import anthropic
import openai
import pytest

from bench.processes import wait_for
from bridge.gateway import passthrough
from bridge.policy import usage
from tests.fake_upstream import FIXTURES, Reply, split_events
from tests.helpers.accumulators import openai_fold
from tests.helpers.recorded import decoded
from tests.helpers.servers import Gate, TextStream, access_lines, metric, next_text

KEY = "sk-team-a"
HI = [{"role": "user", "content": "hi"}]
HI_TOKENS = 3 + 4 + 1  # the reply's priming, one message, "hi" (tokens.py)
ASKED = {"include_usage": True}


def routes(fake, other_fake):
    chat = {"protocol": "openai-chat", "base_url": f"{other_fake.url}/v1"}
    return json.dumps(
        {
            "default_routes": False,
            "routes": [
                {"models": ["gpt-4.1"], "deployments": [{"name": "gpt", **chat}]},
                {"models": ["old-server"], "deployments": [{"name": "old", "stream_usage": False, **chat}]},
                {
                    "models": ["claude-*"],
                    "deployments": [{"name": "claude", "protocol": "anthropic", "base_url": fake.url}],
                },
            ],
        }
    )


@pytest.fixture
def metered(start_bridge, fake, other_fake, redis_server):
    """A bridge that counts team-a's usage in the test's Redis, under these limits."""

    def start(limits="team-a tpd=1000000"):
        return start_bridge(
            BRIDGE_ROUTES=routes(fake, other_fake),
            BRIDGE_CLIENT_KEYS=f"team-a:{KEY}",
            BRIDGE_REDIS_URL=redis_server.url,
            BRIDGE_CLIENT_LIMITS=limits,
            BRIDGE_LOG_LEVEL="INFO",
            BRIDGE_PING_INTERVAL="0.1",
        )

    return start


def used(live, requests=1):
    """team-a's usage today in Redis (as `bridge usage` reads it), once `requests` are counted."""
    settings = live.app.extensions["bridge"].settings
    counts = lambda: usage.today(settings, "team-a").get("team-a", {})  # noqa: E731
    wait_for(lambda: int(counts().get("requests", 0)) >= requests, f"{requests} answers counted")
    return counts()


def unasked(events):
    """A stream's events as OpenAI sends them to a request that does not ask for usage."""
    return [e.replace(b',"usage":null', b"") for e in events if b'"choices":[],"usage":{' not in e]


def with_usage(events, prompt_tokens, completion_tokens):
    """The events with their usage-only chunk reporting these counts."""
    changed = []
    for event in events:
        if b'"choices":[],"usage":{' in event:
            chunk = json.loads(event.removeprefix(b"data: "))
            chunk["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            event = b"data: %s\n\n" % json.dumps(chunk, separators=(",", ":")).encode()
        changed.append(event)
    return changed


def openai_like(events, gates=None):
    """The Chat upstream's answer to a request, as OpenAI answers it: `events` (recorded with
    include_usage) if it asks for usage, else unasked(events). With a list of `gates`: behind a
    Gate the test releases, added to the list."""

    def answer(recorded):
        asked = (recorded.body.get("stream_options") or {}).get("include_usage") is True
        sent = events if asked else unasked(events)
        if gates is not None:
            sent = Gate(sent)
            gates.append(sent)
        return Reply(headers={"content-type": "text/event-stream"}, events=sent)

    return answer


def recorded(name):
    return split_events((FIXTURES / name).read_bytes())


def sdk(live):
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=KEY, max_retries=0)


def chunks_of(raw):
    return [json.loads(e.data) for e in decoded(raw) if e.data != "[DONE]"]


# -- a Chat upstream asked for usage ------------------------------------------------------------


def test_a_chat_stream_without_include_usage_counts_the_upstreams_usage_and_the_client_sees_none(metered, other_fake):
    live = metered()
    events = recorded("openai/tool_calls.sse")  # OpenAI's: `usage: null` on every chunk, then the usage chunk
    other_fake.default = openai_like(events)
    with access_lines() as lines:
        with sdk(live).chat.completions.with_streaming_response.create(
            model="gpt-4.1", messages=HI, stream=True
        ) as response:
            raw = response.read()
        assert used(live) == {"requests": "1", "input": "53", "output": "15"}
    assert other_fake.last.body["stream_options"] == ASKED
    assert raw == b"".join(unasked(events)), "byte for byte the stream OpenAI sends a client that did not ask"
    completion = openai_fold(chunks_of(raw))
    assert completion == openai_fold(chunks_of(b"".join(unasked(events))))
    assert "usage" not in completion and completion["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "get_capital",
        "arguments": '{"country":"UK"}',
    }
    (line,) = lines
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (53, 15, "reported")


def test_a_client_that_asks_for_usage_gets_its_usage_chunk_once(metered, other_fake):
    live = metered()
    events = recorded("openai/tool_calls.sse")
    other_fake.default = openai_like(events)
    client = sdk(live).chat.completions
    with client.with_streaming_response.create(model="gpt-4.1", messages=HI, stream=True, stream_options=ASKED) as r:
        raw = r.read()
    assert raw == b"".join(events)
    chunks = list(client.create(model="gpt-4.1", messages=HI, stream=True, stream_options=ASKED))
    assert [chunk.usage.total_tokens for chunk in chunks if chunk.usage] == [68]
    assert [r.body["stream_options"] for r in other_fake.requests] == [ASKED, ASKED]
    assert used(live, 2) == {"requests": "2", "input": "106", "output": "30"}


def test_500_token_streams_are_refused_once_a_daily_limit_of_1000_is_reached(metered, other_fake):
    """The openai SDK's default, a stream without include_usage, used to count nothing: 4 of 4 admitted."""
    live = metered("team-a tpd=1000")
    other_fake.default = openai_like(with_usage(recorded("openai/text.sse"), 400, 100))
    outcomes = []
    for calls in range(1, 5):
        try:
            list(sdk(live).chat.completions.create(model="gpt-4.1", messages=HI, stream=True))
        except openai.RateLimitError as refused:
            assert "1000 tokens per day" in refused.message
            outcomes.append("refused")
            continue
        outcomes.append("admitted")
        used(live, calls)  # counted before the next call starts
    assert outcomes == ["admitted", "admitted", "refused", "refused"]
    assert len(other_fake.requests) == 2
    assert {k: used(live, 2)[k] for k in ("input", "output")} == {"input": "800", "output": "200"}


# -- bridge's estimate, and the access line saying so ------------------------------------------------


def test_a_stream_from_a_server_not_asked_for_usage_is_counted_as_estimated(metered, other_fake):
    """`stream_usage: false`, for servers that refuse stream_options: the input as count_tokens
    counts it, the output as the text streamed."""
    live = metered()
    events = recorded("openai/text.sse")
    other_fake.default = openai_like(events)
    with access_lines() as lines:
        text = "".join(
            c.choices[0].delta.content or ""
            for c in sdk(live).chat.completions.create(model="old-server", messages=HI, stream=True)
            if c.choices
        )
        counted = used(live)
    assert "stream_options" not in other_fake.last.body
    output = -(-len(text) // 3)
    assert counted == {"requests": "1", "input": str(HI_TOKENS), "output": str(output)}
    (line,) = lines
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (HI_TOKENS, output, "estimated")


def test_an_abandoned_chat_pass_through_stream_is_counted_as_estimated(metered, other_fake):
    live = metered()
    gates = []
    other_fake.default = openai_like(recorded("openai/text.sse"), gates)
    before = [
        metric(live, "bridge_estimated_tokens_total", direction="chat_passthrough", kind=k) for k in ("input", "output")
    ]
    with access_lines() as lines:
        stream = sdk(live).chat.completions.create(model="gpt-4.1", messages=HI, stream=True)
        wait_for(lambda: gates, "the upstream call")
        (gate,) = gates
        gate.release(3)  # the role chunk, "I'm", " unable"
        chunks = iter(stream)
        assert next_text(chunks) + next_text(chunks) == "I'm unable"
        stream.close()  # the client leaves before the usage chunk
        counted = used(live)
    gate.release(len(gate.events))
    assert counted == {"requests": "1", "input": str(HI_TOKENS), "output": str(-(-len("I'm unable") // 3))}
    (line,) = lines
    assert line["usage"] == "estimated" and line["error"] == "client_closed"
    after = [
        metric(live, "bridge_estimated_tokens_total", direction="chat_passthrough", kind=k) for k in ("input", "output")
    ]
    assert [a - b for a, b in zip(after, before, strict=True)] == [HI_TOKENS, 4]


def test_an_abandoned_messages_to_chat_stream_is_counted_as_estimated(metered, other_fake):
    live = metered()
    gates = []
    other_fake.default = openai_like(recorded("openai/text.sse"), gates)
    client = anthropic.Anthropic(base_url=live.url, api_key=KEY, max_retries=0)
    with access_lines() as lines:
        stream = client.messages.create(model="gpt-4.1", max_tokens=64, messages=HI, stream=True)
        wait_for(lambda: gates, "the upstream call")
        (gate,) = gates
        gate.release(3)
        texts = _texts(stream, "content_block_delta", lambda event: event.delta.text, 2)
        stream.close()
        counted = used(live)
    gate.release(len(gate.events))
    assert texts == ["I'm", " unable"]
    assert counted == {"requests": "1", "input": str(HI_TOKENS), "output": str(1 + 3)}  # a delta each, up
    (line,) = lines
    assert (line["direction"], line["usage"], line["error"]) == ("messages_to_chat", "estimated", "client_closed")


ANTHROPIC_FRONTS = {
    "chat": lambda live: (
        sdk(live).chat.completions.create(model="claude-x", messages=HI, stream=True),
        lambda stream: _texts(stream, None, lambda c: c.choices[0].delta.content if c.choices else None, 2),
    ),
    "messages": lambda live: (
        anthropic.Anthropic(base_url=live.url, api_key=KEY, max_retries=0).messages.create(
            model="claude-x", max_tokens=64, messages=HI, stream=True
        ),
        lambda stream: _texts(stream, "content_block_delta", lambda event: event.delta.text, 2),
    ),
    "responses": lambda live: (
        sdk(live).responses.create(model="claude-x", input="hi", stream=True),
        lambda stream: _texts(stream, "response.output_text.delta", lambda event: event.delta, 2),
    ),
}


@pytest.mark.parametrize("front", ANTHROPIC_FRONTS)
def test_an_abandoned_anthropic_stream_counts_the_reported_input_and_the_output_streamed(metered, fake, front):
    """Anthropic reports input at message_start and output (1 there) only at the end."""
    live = metered()
    upstream = TextStream(fake)  # 11 in
    upstream.release_until_text(1)
    with access_lines() as lines:
        stream, read = ANTHROPIC_FRONTS[front](live)
        assert "".join(read(stream)) == "Hello there"
        stream.close()
        counted = used(live)
    upstream.release_rest()
    assert counted == {"requests": "1", "input": "11", "output": str(-(-len("Hello there") // 3))}
    (line,) = lines
    assert line["usage"] == "estimated" and line["error"] == "client_closed"


def _texts(stream, kind, text_of, count):
    """The first `count` non-empty texts of an SDK stream's events of type `kind` (None: any)."""
    texts = []
    for event in stream:
        text = text_of(event) if kind is None or event.type == kind else None
        if text:
            texts.append(text)
            if len(texts) == count:
                return texts
    raise AssertionError(f"the stream ended after {texts}")


def test_the_output_estimate_is_the_text_streamed_not_a_token_a_delta():
    """OpenAI streams about a token a chunk: rounding each chunk up would count "a" as a token."""
    relay = passthrough.ChatRelay(passthrough.Context("m", True, input_tokens=HI_TOKENS))
    for _ in range(30):
        relay.feed(None, {"choices": [{"index": 0, "delta": {"content": "a"}}]})
    call = {"index": 0, "function": {"arguments": "b" * 29}}
    relay.feed(None, {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]})
    relay.feed(None, {"choices": [{"index": 0, "delta": {"reasoning_content": "漢字"}}]})  # 6 bytes
    assert relay.estimate() == (HI_TOKENS, 22)  # 65 bytes / 3, up
