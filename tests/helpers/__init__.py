"""What the test modules share, so that none of them imports another (conftest holds only fixtures).

Recorded fixtures are named by their path under tests/fixtures ("anthropic/text.json"), as
`fake_upstream.fixture` names them. Starting processes and waiting for them is
bench/processes.py's, which the load test uses too: the tools never import from tests/.

Deploy helpers run the shipped files for real, gunicorn from deploy/gunicorn.conf.py and nginx
from deploy/nginx/bridge.conf. Only ports and paths are changed, and only from the outside:
gunicorn gets `--bind` and environment variables, nginx gets a copy of the site file with its
ports, certificate and log paths replaced, inside a minimal nginx.conf. Upstream streams are
gated: the fake upstream sends each event only when the test releases it, so a test can check
what the client holds in between.
"""

import contextlib
import dataclasses
import json
import logging
import os
import pwd
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

import anthropic
import httpx2
import openai
import pytest
import requests
from anthropic.lib.streaming._beta_messages import accumulate_event
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.serving import make_server

from bench.processes import ROOT, Gunicorn, accepts, free_port, upstream_env, wait_for
from bridge.protocols import sse
from bridge.protocols.errors import ANTHROPIC, OPENAI, BridgeError
from bridge.protocols.overflow import Overflow
from bridge.serve.observability import access_log
from bridge.serve.streaming import ANTHROPIC_SSE, CHAT_SSE
from bridge.translate import translator
from bridge.translate.chat_to_messages.request import Context as ChatToMessagesContext
from bridge.translate.messages_to_chat.request import Context as MessagesToChatContext
from bridge.translate.responses_to_messages.request import Context as ResponsesToMessagesContext
from bridge.translate.translator import DONE
from tests.fake_upstream import FIXTURES, Reply, fixture

# -- recorded fixtures ----------------------------------------------------------------------------

# The recorded streams whose answer completes; the others end in an `event: error`, or carry
# several answers (multi_choice.sse), which the bridge refuses.
ANTHROPIC_STREAMS = sorted(
    f"anthropic/{path.name}"
    for path in (FIXTURES / "anthropic").glob("*.sse")
    if path.name != "error_midstream_overloaded.sse"
)
OPENAI_STREAMS = sorted(
    f"openai/{path.name}"
    for path in (FIXTURES / "openai").glob("*.sse")
    if path.name not in ("groq_midstream_error.sse", "multi_choice.sse")
)


def recorded(name):
    """A recorded JSON body."""
    return json.loads((FIXTURES / name).read_text())


def replay(url, capture):
    """Send a client capture (tests/fixtures/clients) as the client did: same path (with
    ?beta=true), same headers, same body."""
    headers = {
        k: v
        for k, v in capture["headers"].items()
        if k not in ("content-length", "host", "connection", "accept-encoding")
    }
    return requests.post(
        url + capture["path"],
        data=json.dumps(capture["body"]),
        headers=headers,
        stream=bool(capture["body"].get("stream")),
    )


def decoded(chunks):
    """The SSE events in a body (bytes, or the byte chunks it came in), decoded by bridge.protocols.sse to its end."""
    decoder = sse.Decoder()
    events = [event for chunk in ([chunks] if isinstance(chunks, bytes) else chunks) for event in decoder.feed(chunk)]
    return events + decoder.close()


def recorded_events(name):
    """A recorded stream as (event name, payload) pairs, decoded as the relay decodes it; the
    payload is the parsed JSON, or DONE for OpenAI's `[DONE]`."""
    return [
        (event.event, DONE if event.data.strip() == DONE else json.loads(event.data))
        for event in decoded((FIXTURES / name).read_bytes())
    ]


# (what the upstream's error object says, what it reports). Wordings as the servers print them.
OVERFLOWS = {
    "openai": (
        {
            "message": "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
        Overflow(limit=128000, prompt=130512),
    ),
    "openai, the code alone": (
        {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        },
        Overflow(),
    ),
    "openai, older, with the completion": (
        {
            "message": "This model's maximum context length is 4097 tokens, however you requested 4231 tokens "
            "(3975 in your prompt; 256 for the completion). Please reduce your prompt; or completion length."
        },
        Overflow(limit=4097, prompt=3975, output=256),
    ),
    "vllm, messages and completion": (
        {
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
            "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages "
            "or completion.",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=4096, prompt=4000, output=1000),
    ),
    "vllm 0.10-0.17, input alone": (
        {
            "message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
            "tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=32768, prompt=40000),
    ),
    "vllm 0.10-0.17, max_tokens": (
        {
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
            "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=4096, prompt=2778, output=8000),
    ),
    "vllm 0.18+": (
        {
            "message": "This model's maximum context length is 8192 tokens. However, you requested 64 output tokens "
            "and your prompt contains at least 10000 input tokens, for a total of at least 10064 tokens. "
            "Please reduce the length of the input prompt or the number of requested output tokens. "
            "(parameter=input_tokens, value=10000)",
            "type": "BadRequestError",
            "code": 400,
        },
        Overflow(limit=8192, prompt=10000, output=64),
    ),
    "vllm 0.18+, max_tokens over the window": (
        {
            "message": "max_tokens=32000 cannot be greater than max_model_len=max_total_tokens=16384. Please request "
            "fewer output tokens. (parameter=max_tokens, value=32000)",
            "type": "BadRequestError",
        },
        Overflow(limit=16384, output=32000),
    ),
    "deepseek": (
        {
            "message": "This model's maximum context length is 65536 tokens. However, you requested 70000 "
            "tokens (70000 in the messages, 0 in the completion). Please reduce the length of the "
            "messages or completion.",
            "type": "invalid_request_error",
        },
        Overflow(limit=65536, prompt=70000, output=0),
    ),
    "openrouter": (
        {
            "message": "This endpoint's maximum context length is 8192 tokens. However, you requested about "
            "12000 tokens (10000 of text input, 2000 in the output). Please reduce the length of "
            'either one, or use the "middle-out" transform to compress your prompt automatically.',
            "code": 400,
        },
        Overflow(limit=8192, prompt=10000, output=2000),
    ),
    "llama.cpp": (
        {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        },
        Overflow(limit=4096, prompt=5000),
    ),
    "llama.cpp, older": (
        {
            "code": 400,
            "message": "the request exceeds the available context size. try increasing "
            "the context size or enable context shift",
            "type": "invalid_request_error",
        },
        Overflow(),
    ),
    "ollama": ({"message": "the input length exceeds the context length"}, Overflow()),
    "lm studio": (
        {
            "message": "Trying to keep the first 6269 tokens when context the overflows. However, the model "
            "is loaded with context length of only 4096 tokens, which is not enough."
        },
        Overflow(limit=4096),
    ),
    "mistral": (
        {
            "message": "Prompt contains 10000 tokens and 0 draft tokens, too large for model with 8192 maximum "
            "context length"
        },
        Overflow(limit=8192, prompt=10000),
    ),
    "anthropic, prompt": (
        {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
        Overflow(limit=200000, prompt=210000),
    ),
    "anthropic, prompt and max_tokens": (
        {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 188240 + "
            "21333 > 200000, decrease input length or `max_tokens` and try again",
        },
        Overflow(limit=200000, prompt=188240, output=21333),
    ),
}


# The recorded non-streamed Anthropic answers every OpenAI front translates.
ANTHROPIC_BODIES = [
    "text.json",
    "tool_use.json",
    "thinking.json",
    "redacted_thinking.json",
    "refusal.json",
    "stop_sequence.json",
    "max_tokens.json",
    "cache_usage.json",
    "pause_turn.json",
]
# An Anthropic upstream's recorded errors, and what an OpenAI client's SDK raises for each, at what status.
OPENAI_CLIENT_ERRORS = [
    ("error_400.json", openai.BadRequestError, 400),
    ("error_401.json", openai.AuthenticationError, 401),
    ("error_404.json", openai.NotFoundError, 404),
    ("error_429.json", openai.RateLimitError, 429),
    ("error_500.json", openai.InternalServerError, 500),
    ("error_529.json", openai.InternalServerError, 503),
]


# -- translator contexts ----------------------------------------------------------------------------


def chat_to_messages_context(**overrides):
    """What the chat_to_messages translators know of a plain request for gpt-4o."""
    return ChatToMessagesContext(**{"stream": False, "model": "gpt-4o", "created": 1700000000, **overrides})


RESPONSE_ID = "resp_" + "0123456789abcdef" * 2
# What a Response repeats of a request, as the request translator fills Context.echo for a plain request.
RESPONSES_ECHO = {
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_output_tokens": None,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {"format": {"type": "text"}},
    "metadata": {},
    "store": False,
    "truncation": "disabled",
    "user": None,
}


def responses_to_messages_context(**overrides):
    """What the responses_to_messages translators know of a plain request for gpt-5.5."""
    values = {
        "model": "gpt-5.5",
        "stream": False,
        "response_id": RESPONSE_ID,
        "created_at": 1700000000,
        "echo": RESPONSES_ECHO,
        "tools": {},
    }
    return ResponsesToMessagesContext(**{**values, **overrides})


def messages_to_chat_context(**overrides):
    """What the messages_to_chat translators know of a plain request, with an input estimate of 42."""
    return MessagesToChatContext(
        **{
            "model": "claude-sonnet-4-5",
            "stream": False,
            "dropped": [],
            "tool_names": {},
            "stop_sequences": (),
            "input_tokens": 42,
            **overrides,
        }
    )


def translated(translator, events, eof=True):
    """What a stream translator makes of (event name, payload) pairs, and of the end of the body."""
    out = [item for name, payload in events for item in translator.feed(name, payload)]
    return out + (translator.finish() if eof else [])


# -- the official SDKs' stream accumulators -------------------------------------------------------------


def openai_fold(chunks):
    """The completion the openai SDK's own accumulator (`ChatCompletionStreamState`) makes of Chat chunks.

    Chunks are built as the SDK builds them off the wire (construct_type, no validation), and
    skipped where its `.stream()` skips them (object not "chat.completion.chunk": Azure's
    annotations); keep-alives and [DONE] are not chunks. The snapshot, not get_final_completion():
    that one only adds parsing, and raises on finish_reason length and content_filter. Null fields
    are left out, here and in anthropic_fold: they read as absent ones do.
    """
    state = ChatCompletionStreamState()
    for chunk in chunks:
        if isinstance(chunk, dict):
            chunk = construct_type(type_=ChatCompletionChunk, value=chunk)
        if isinstance(chunk, ChatCompletionChunk) and chunk.object == "chat.completion.chunk":
            state.handle_chunk(chunk)
    return state.current_completion_snapshot.to_dict(mode="json", exclude_none=True, warnings=False)


def anthropic_fold(events):
    """The message the anthropic SDK's own accumulator (`accumulate_event`) makes of Messages events.

    Its beta accumulator, which `client.beta.messages.stream()` (Claude Code's) runs: unlike the GA
    one it keeps usage.iterations, what a compacted answer's body carries.
    """
    message, buffers = None, {}
    for event in events:
        message = accumulate_event(event=event, current_snapshot=message, json_bufs=buffers, request_headers=None)
    return message.to_dict(mode="json", exclude_none=True, warnings=False)


def anthropic_stream_message(name):
    """A recorded Anthropic stream as the Messages body of the same answer not streamed."""
    return anthropic_fold(payload for _, payload in recorded_events(name))


def openai_stream_completion(name):
    """A recorded OpenAI stream as the Chat completion of the same answer not streamed.

    A choice without `delta` (Azure's content-filter annotations) carries nothing, but the SDK's
    accumulator fails on it (openai-python#1677): it gets an empty one.
    """
    chunks = [
        {**payload, "choices": [{"delta": {}, **choice} for choice in payload.get("choices") or []]}
        for _, payload in recorded_events(name)
        if payload != DONE
    ]
    return openai_fold(chunks)


def without_nulls(value):
    """`value` without its null fields, which read as absent ones do."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


# -- both directions over HTTP, as their clients call them ------------------------------------------

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}


def is_anthropic_error(response, status, error_type):
    """An error answered in Anthropic's shape, with this status and error type."""
    body = response.json()
    return (
        response.status_code == status
        and body["type"] == "error"
        and body["error"]["type"] == error_type
        and body["error"]["message"]
    )


def is_openai_error(response, status):
    """An error answered in OpenAI's shape, with this status."""
    body = response.json()
    return response.status_code == status and set(body["error"]) >= {"message", "type", "param", "code"}


class Echo(translator.StreamTranslator):
    """A translator that passes each Anthropic-style event through and counts what it saw."""

    def __init__(self, protocol=ANTHROPIC):
        self.protocol = protocol
        self.fed = []
        self.finished = False

    def feed(self, name, payload):
        self.fed.append(payload)
        if payload == DONE:
            self.done = True
            return []
        if payload.get("type") == "boom":
            raise BridgeError("api_error", "translator gave up")
        return [payload]

    def finish(self):
        self.finished = True
        return []


# The framing each client protocol's streams are written in.
FRAMING = {ANTHROPIC: ANTHROPIC_SSE, OPENAI: CHAT_SSE}


@contextlib.contextmanager
def full_backlog():
    """A port whose listen queue is full: the kernel drops new SYNs, so a connect just hangs.

    A few non-blocking connects fill the queue whatever size the kernel makes of listen(0)."""
    with socket.socket() as listener, contextlib.ExitStack() as fillers:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):
            filler = fillers.enter_context(socket.socket())
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        yield port


def recorded_text(direction):
    """The text of the upstream's recorded stream, as the upstream's own SDK accumulates it."""
    name = f"{direction.upstream}/text.sse"
    if direction.upstream == "openai":
        return openai_stream_completion(name)["choices"][0]["message"]["content"]
    return "".join(block["text"] for block in anthropic_stream_message(name)["content"])


class SlammingDoor:
    """A server that accepts each connection and closes it at once, counting them; with
    `after`, it reads the request and resets the connection that many seconds later, with no
    answer, as a load balancer dropping an idle connection does mid-generation."""

    def __init__(self, after=None):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.after = after
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.after is not None:
                conn.recv(65536)
                time.sleep(self.after)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
            conn.close()

    def close(self):
        self.listener.close()


@dataclasses.dataclass
class Direction:
    """One direction as its client sees it, and the upstream protocol behind it."""

    name: str
    path: str
    body: dict
    sdk: object  # the client's SDK module
    upstream: str  # fixture folder of the upstream's protocol
    base_url_setting: str
    overloaded: str  # the upstream's own fixture for "try again later"
    overloaded_status: int  # what the client sees for it

    def client(self, url, sdk_retries=False):
        """The SDK's client; with `sdk_retries` its own default retries, else none."""
        options = {} if sdk_retries else {"max_retries": 0}
        if self.sdk is anthropic:
            return anthropic.Anthropic(base_url=url, api_key="sk-client", **options)
        return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-client", **options)

    def ask(self, url, stream=False):
        """Call the bridge as the SDK user would; a stream is returned unread."""
        return self.create(self.client(url), stream)

    def create(self, client, stream=False, raw=False):
        """The call with a given client (`raw`: its with_raw_response form, for headers)."""
        resource = client.messages if self.sdk is anthropic else client.chat.completions
        if raw:
            resource = resource.with_raw_response
        return resource.create(stream=stream, **self.body)

    def is_error(self, response, status, anthropic_type):
        if self.sdk is anthropic:
            return is_anthropic_error(response, status, anthropic_type)
        return is_openai_error(response, status)

    def upstream_base(self, port):
        return f"http://127.0.0.1:{port}" + ("/v1" if self.upstream == "openai" else "")

    def upstream_text(self, event):
        """The text one raw upstream event carries, or ''."""
        data = event.split(b"data:", 1)[1].strip()
        if data == b"[DONE]":
            return ""
        data = json.loads(data)
        if self.upstream == "anthropic":
            return data["delta"].get("text", "") if data["type"] == "content_block_delta" else ""
        return (data["choices"][0]["delta"].get("content") or "") if data["choices"] else ""

    def text_of(self, items):
        """The text a client assembled from stream items (SDK events or chunks)."""
        if self.sdk is anthropic:
            return "".join(e.delta.text for e in items if e.type == "content_block_delta")
        return "".join(c.choices[0].delta.content or "" for c in items if c.choices)


MESSAGES_TO_CHAT = Direction(
    "messages_to_chat",
    "/v1/messages",
    {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    anthropic,
    "openai",
    "BRIDGE_OPENAI_BASE_URL",
    "openai/error_503.json",
    529,
)
CHAT_TO_MESSAGES = Direction(
    "chat_to_messages",
    "/v1/chat/completions",
    {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
    openai,
    "anthropic",
    "BRIDGE_ANTHROPIC_BASE_URL",
    "anthropic/error_529.json",
    503,
)
DIRECTIONS = [pytest.param(d, id=d.name) for d in (MESSAGES_TO_CHAT, CHAT_TO_MESSAGES)]
EACH = pytest.mark.parametrize("direction", DIRECTIONS)
STREAMED_OR_NOT = pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])


def recorded_stream(direction, **reply):
    """A recorded text stream of the direction's upstream, as the fake upstream replays it."""
    return fixture(f"{direction.upstream}/text.sse", **reply)


def drain(stream):
    """Read a stream to its end: (items received, the SDK error that ended it or None)."""
    items = []
    try:
        for item in stream:
            items.append(item)
    except (anthropic.APIError, openai.APIError) as error:
        return items, error
    return items, None


# -- what reaches an OpenAI-compatible upstream -------------------------------------------------------

CHAT_FIELDS = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "user",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "response_format",
    "stream",
    "stream_options",
}
OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def assert_valid_chat_request(chat):
    """What an OpenAI-compatible server insists on, checked on what the bridge sends."""
    assert set(chat) <= CHAT_FIELDS, set(chat) - CHAT_FIELDS
    assert "cache_control" not in json.dumps(chat)
    messages = chat["messages"]
    assert messages and all(m["role"] in ("system", "user", "assistant", "tool") for m in messages)
    assert all(m["role"] != "system" for m in messages[1:]), "system only leads"
    for tool in chat.get("tools", []):
        assert tool["type"] == "function" and OPENAI_TOOL_NAME.match(tool["function"]["name"])
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object" and isinstance(parameters["properties"], dict)
    waiting = set()
    for position, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in waiting, f"message {position} answers no open call"
            waiting.discard(message["tool_call_id"])
            assert isinstance(message["content"], str)
            continue
        assert not waiting, f"calls {waiting} unanswered before message {position}"
        content = message.get("content")
        if isinstance(content, list):
            assert content and role == "user", "content parts only in user messages"
            for part in content:
                assert part["type"] in ("text", "image_url", "file")
                assert part["type"] != "text" or part["text"]
        if role == "assistant":
            calls = message.get("tool_calls") or []
            assert content or calls, "never an empty assistant message"
            for call in calls:
                assert call["type"] == "function" and len(call["id"]) <= 40
                assert OPENAI_TOOL_NAME.match(call["function"]["name"])
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
            waiting = {call["id"] for call in calls}
            assert len(waiting) == len(calls)
        else:
            assert content, f"message {position} is empty"
    assert not waiting


def foreign_reasoning_session(turns):
    """The `input` of a Codex session begun on an OpenAI model: per turn, reasoning that OpenAI
    encrypted (which bridge drops and names, `input.N.encrypted_content`), a tool call and its output."""
    items = [{"role": "user", "content": "fix the build"}]
    for number in range(turns):
        items += [
            {"type": "reasoning", "summary": [], "encrypted_content": f"gAAAAABo{number:04d}" + "Q" * 200},
            {"type": "function_call", "call_id": f"call_{number}", "name": "shell", "arguments": '{"cmd": "ls"}'},
            {"type": "function_call_output", "call_id": f"call_{number}", "output": "ok"},
        ]
    return items


# -- Chat requests the bridge refuses: validate_chat's cases, also sent over HTTP ---------------------------

USER = {"role": "user", "content": "hi"}


def call(name="lookup", arguments="{}", call_id="call_1"):
    """A Chat tool call, as an assistant message in a request carries it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat(*messages, **params):
    """A Chat request body; USER asks when no message is given."""
    return {"model": "gpt-4o", "messages": list(messages) or [USER], **params}


TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}

# (request, field path the 400 must name, words the message must contain)
BAD_CHAT_REQUESTS = {
    "several choices": (chat(n=2), "n", "one choice"),
    "logprobs": (chat(logprobs=True), "logprobs", "log probabilities"),
    "top_logprobs": (chat(top_logprobs=3), "top_logprobs", "log probabilities"),
    "audio input": (
        chat({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}),
        "messages.0.content.0.type",
        "audio input",
    ),
    "audio output modality": (chat(modalities=["text", "audio"]), "modalities", "audio output"),
    "audio output parameters": (chat(audio={"voice": "alloy", "format": "mp3"}), "audio", "audio output"),
    "custom tool": (chat(tools=[{"type": "custom", "custom": {"name": "grammar"}}]), "tools.0.type", "custom tools"),
    "custom tool choice": (
        chat(tools=[TOOL], tool_choice={"type": "custom", "custom": {"name": "x"}}),
        "tool_choice.type",
        "custom tool choices",
    ),
    "allowed_tools tool choice": (
        chat(tools=[TOOL], tool_choice={"type": "allowed_tools", "allowed_tools": {}}),
        "tool_choice.type",
        "allowed_tools",
    ),
    "custom tool call in history": (
        chat(
            USER,
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "x", "input": "free text"}}],
            },
        ),
        "messages.1.tool_calls.0.type",
        "custom tool calls",
    ),
    "role function": (
        chat({"role": "function", "name": "lookup", "content": "42"}),
        "messages.0.role",
        "legacy function calling",
    ),
    "legacy functions": (chat(functions=[{"name": "lookup"}]), "functions", "legacy function calling"),
    "legacy function_call": (chat(function_call="auto"), "function_call", "legacy function calling"),
    "legacy function_call in history": (
        chat(USER, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}),
        "messages.1.function_call",
        "legacy function calling",
    ),
    "uploaded file": (
        chat({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}),
        "messages.0.content.0.file.file_id",
        "file_data",
    ),
    "non-PDF file": (
        chat(
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_data": "data:application/zip;base64,UEsDBA==", "filename": "a.zip"}}
                ],
            }
        ),
        "messages.0.content.0.file.file_data",
        "application/pdf",
    ),
    "file part without data": (
        chat({"role": "user", "content": [{"type": "file", "file": {"filename": "a.pdf"}}]}),
        "messages.0.content.0.file.file_data",
        "required",
    ),
    "unsupported image type": (
        chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}}]}),
        "messages.0.content.0.image_url.url",
        "image/bmp",
    ),
    "image URL scheme": (
        chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}]}),
        "messages.0.content.0.image_url.url",
        "http(s) URL",
    ),
    "unknown user part": (
        chat({"role": "user", "content": [{"type": "video_url", "video_url": {}}]}),
        "messages.0.content.0.type",
        "expected one of: file, image_url, text",
    ),
    "refusal part from a user": (
        chat({"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}),
        "messages.0.content.0.type",
        "expected one of: file, image_url, text",
    ),
    "image in a system message": (
        chat(
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
            USER,
        ),
        "messages.0.content.0.type",
        "expected one of: text",
    ),
    "no messages": ({"model": "gpt-4o", "messages": []}, "messages", "at least one user or assistant"),
    "only system messages": (
        chat({"role": "system", "content": "be brief"}, {"role": "developer", "content": "be exact"}),
        "messages",
        "at least one user or assistant",
    ),
    "unknown role": (
        chat({"role": "critic", "content": "x"}),
        "messages.0.role",
        "'critic' is not a supported message role; expected one of: assistant, developer, system, tool, user",
    ),
    "role that is an object": (chat({"role": {"name": "user"}, "content": "x"}), "messages.0.role", "'user'"),
    "part type that is an array": (
        chat({"role": "user", "content": [{"type": ["text"], "text": "x"}]}),
        "messages.0.content.0.type",
        "'text'",
    ),
    "tool type that is an object": (
        chat(tools=[{"type": {}, "function": {"name": "lookup"}}]),
        "tools.0.type",
        "expected one of: function",
    ),
    "arguments not JSON": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="{city: Paris}")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "not valid JSON",
    ),
    "arguments not an object": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="[1, 2]")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "got array",
    ),
    "empty arguments": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments="")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ),
        "messages.1.tool_calls.0.function.arguments",
        "not valid JSON",
    ),
    "tool result without a call": (
        chat(USER, {"role": "tool", "tool_call_id": "call_1", "content": "x"}),
        "messages.1.tool_call_id",
        "must follow an assistant message",
    ),
    "tool result for another call": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call()]},
            {"role": "tool", "tool_call_id": "call_9", "content": "x"},
        ),
        "messages.2.tool_call_id",
        "'call_9'",
    ),
    "unanswered tool call": (
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(), call(call_id="call_2")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            USER,
        ),
        "messages.1.tool_calls.1.id",
        "'call_2'",
    ),
    "tool call without an id": (
        chat(USER, {"role": "assistant", "tool_calls": [call(call_id="")]}),
        "messages.1.tool_calls.0.id",
        "Shorter than minimum",
    ),
    "named tool choice not among tools": (
        chat(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "elsewhere"}}),
        "tool_choice.function.name",
        "'elsewhere'",
    ),
    "tool choice word": (chat(tools=[TOOL], tool_choice="any"), "tool_choice", "'required'"),
    "tool name": (
        chat(tools=[{"type": "function", "function": {"name": "get weather!"}}]),
        "tools.0.function.name",
        "a-z",
    ),
    "temperature range": (chat(temperature=2.5), "temperature", "2"),
    "max_tokens zero": (chat(max_tokens=0), "max_tokens", "1"),
    "max_completion_tokens as text": (chat(max_completion_tokens="100"), "max_completion_tokens", "integer"),
    "reasoning effort": (chat(reasoning_effort="extreme"), "reasoning_effort", "Must be one of"),
    "json schema root": (
        chat(response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "array"}}}),
        "response_format.json_schema.schema",
        "object",
    ),
    "temperature as a string": (chat(temperature="0.5"), "temperature", "Not a valid number"),
    "top_p as a boolean": (chat(top_p=True), "top_p", "Not a valid number"),
    "stream as a number": (chat(stream=1), "stream", "Not a valid boolean"),
    "response format type": (
        chat(response_format={"type": "yaml"}),
        "response_format.type",
        "expected one of: json_object, json_schema, text",
    ),
    "thinking budget": (chat(thinking={"type": "enabled", "budget_tokens": 10}), "thinking", "1024"),
    "model missing": ({"messages": [USER]}, "model", "required"),
    "stream flag type": (chat(stream="yes"), "stream", "boolean"),
    "web search options type": (chat(web_search_options="on"), "web_search_options", "Invalid input type"),
    "web search context size": (
        chat(web_search_options={"search_context_size": "huge"}),
        "web_search_options.search_context_size",
        "Must be one of",
    ),
}


# -- the real client CLIs (tests/clients/package.json) ----------------------------------------------


def run_cli(command, cwd, env, timeout):
    """A real client's CLI run to its end with no input, or the test failed with what it printed."""
    try:
        return subprocess.run(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as expired:
        printed = [
            out.decode(errors="replace") if isinstance(out, bytes) else out or ""
            for out in (expired.stdout, expired.stderr)
        ]
        pytest.fail(
            f"{os.path.basename(command[0])} did not finish in {timeout} s\nstdout:\n{printed[0]}\n"
            f"stderr:\n{printed[1]}"
        )


def pinned_cli(name, executable, version, home):
    """`executable` when it is the pinned `version`; else the test skips, or fails under CI=true,
    where a missing CLI must not pass unnoticed."""
    problem = None
    if not executable.exists():
        problem = (
            f"{name} {version} is not installed in .clients/: `make test` (or `make clients`) installs it with npm"
        )
    else:
        try:
            shown = subprocess.run(
                [str(executable), "--version"],
                env={"PATH": os.environ["PATH"], "HOME": str(home)},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            problem = f"{executable} --version failed: {error}"
        else:
            if version not in shown.stdout.partition("\n")[0].split():
                problem = (
                    f".clients/ holds {name} {shown.stdout.strip() or shown.stderr.strip()!r}, "
                    f"not the pinned {version}: `make clients` installs it"
                )
    if problem:
        unavailable(problem)
    return executable


def unavailable(problem):
    """Skip a test for what this machine lacks, naming it; under CI=true fail instead, since
    `make test` there installs everything (tests/install-programs.sh, make clients)."""
    if os.environ.get("CI") == "true":
        pytest.fail(problem)
    pytest.skip(problem, allow_module_level=True)


def program(name, package=None):
    """The path of system program `name`, else unavailable(): Debian's `package` has it."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        unavailable(f"{name} is not installed: apt-get install {package or name} (make test does, as root)")
    return found


# -- the bridge in this process, under gunicorn, behind nginx ---------------------------------------


def metric(live, name, **labels):
    """The sum of a metric's samples with these labels, as GET /metrics tells it."""
    text = requests.get(f"{live.url}/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@contextlib.contextmanager
def access_lines():
    """Every access line written meanwhile, parsed (next to the logger's own stderr handler)."""
    written = []
    handler = logging.Handler()
    handler.emit = lambda record: written.append(json.loads(record.getMessage()))
    access_log.addHandler(handler)
    try:
        yield written
    finally:
        access_log.removeHandler(handler)


NGINX_SITE = ROOT / "deploy" / "nginx" / "bridge.conf"


def bridge_env(fake, **extra):
    """Settings for a bridge in front of the fake upstream: no retries, quiet logs, then `extra`."""
    return {
        **upstream_env(fake.url),
        "BRIDGE_RETRIES": "0",
        "BRIDGE_LOG_LEVEL": "WARNING",
        **{k: str(v) for k, v in extra.items()},
    }


class LiveBridge:
    """The bridge app served by werkzeug's threaded server in this process."""

    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def install(directory):
    """This checkout installed as `pip install /opt/bridge` installs it, into `directory`/site,
    which is returned. Built from a copy as a fresh clone has it (a build/ left in the checkout
    would go into the wheel), offline, without the dependencies: the venv has them."""
    source, site = directory / "source", directory / "site"
    unversioned = [
        line.strip().rstrip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", *unversioned))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return site


def served_from(server):
    """The directories gunicorn's workers loaded the app from, as each logged it."""
    return re.findall(r"Serving the app from (\S+)", server.log())


def gunicorn(workdir, fake, *flags, site=None, cwd=None, port=None, **env):
    """gunicorn from the shipped config in front of the fake upstream, logging at DEBUG.

    With `site` (from install()) it serves that install, and is checked to: the workers must
    say they loaded the app from there, not from the checkout or the venv.
    """
    if site:
        env["PYTHONPATH"] = str(site)
    server = Gunicorn(
        workdir, fake.url, *flags, cwd=cwd, port=port, **bridge_env(fake, **{"BRIDGE_LOG_LEVEL": "DEBUG", **env})
    )
    if site:
        assert served_from(server) and set(served_from(server)) == {str(site / "bridge")}, server.log()
    return server


def socket_buffers():
    """The most the kernel may buffer between a fast upstream and a client that reads nothing, less
    the client's own receive buffer: the upstream's send buffer, the bridge's receive buffer from
    it and send buffer to the client (sysctl maxima, which autotuning may reach on loopback)."""

    def maximum(name):
        with open(f"/proc/sys/net/ipv4/{name}") as fh:
            return int(fh.read().split()[2])

    return 2 * maximum("tcp_wmem") + maximum("tcp_rmem")


def settled(upstream, bound):
    """What a Flood upstream had sent once it could send no more (nothing for a second), or fail as
    soon as it has sent more than `bound`."""
    deadline = time.monotonic() + 30  # a hang guard
    last, since = upstream.sent, time.monotonic()
    while upstream.sent <= bound and time.monotonic() < deadline:
        time.sleep(0.1)
        if upstream.sent != last:
            last, since = upstream.sent, time.monotonic()
        elif time.monotonic() - since >= 1:
            return last
    raise AssertionError(f"the upstream is still sending: {upstream.sent} bytes so far")


class Gate:
    """Upstream events that the fake upstream sends only as the test releases them."""

    def __init__(self, events):
        self.events = list(events)
        self._released = threading.Semaphore(0)
        self.released = 0  # events the test let go
        self.sent = 0  # events handed to the fake upstream's writer

    def __iter__(self):
        for event in self.events:
            self._released.acquire(timeout=60)  # a failed test must not hang the fake forever
            self.sent += 1
            yield event

    def release(self, count=1):
        for _ in range(count):
            self.released += 1
            self._released.release()


def self_signed_certificate(directory):
    """A throwaway certificate for 127.0.0.1, made with the openssl command."""
    cert, key = directory / "bridge.crt", directory / "bridge.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def adapted_site(site, https_port, http_port, bridge_ports, cert, key, log_dir):
    """The shipped site file with its ports and paths replaced; each must be found as shipped.
    Its `server` line becomes one per bridge port, with the shipped parameters, as an operator
    adds a line per VM."""
    server = re.search(r"server 127\.0\.0\.1:8080( [^;]*)?;", site)
    assert server, "deploy/nginx/bridge.conf no longer has its server 127.0.0.1:8080 line"
    replacements = [
        ("listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        (
            server.group(0),
            "\n    ".join(f"server 127.0.0.1:{port}{server.group(1) or ''};" for port in bridge_ports),
        ),
        ("/etc/ssl/certs/bridge.crt", str(cert)),
        ("/etc/ssl/private/bridge.key", str(key)),
        ("/var/log/nginx/", f"{log_dir}/"),
    ]
    for shipped, local in replacements:
        assert shipped in site, f"deploy/nginx/bridge.conf no longer has {shipped!r}"
        site = site.replace(shipped, local)
    return site


class Nginx:
    """nginx serving the shipped site file in front of one Gunicorn or several, with `workers`
    worker processes."""

    def __init__(self, tmp_path, *bridge_ports, workers=1):
        self.dir = tmp_path / "nginx"
        self.dir.mkdir()
        self.https_port, self.http_port = free_port(), free_port()
        self.cert, key = self_signed_certificate(self.dir)
        site = self.dir / "bridge.conf"
        site.write_text(
            adapted_site(
                NGINX_SITE.read_text(), self.https_port, self.http_port, bridge_ports, self.cert, key, self.dir
            )
        )
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
        conf = self.dir / "nginx.conf"
        conf.write_text(f"""
{user}
daemon off;
worker_processes {workers};
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    include {site};
}}
""")
        check = subprocess.run(
            [nginx_binary(), "-t", "-c", str(conf), "-p", str(self.dir)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [nginx_binary(), "-c", str(conf), "-p", str(self.dir)], stderr=subprocess.DEVNULL
        )
        self.url = f"https://127.0.0.1:{self.https_port}"
        self.http_url = f"http://127.0.0.1:{self.http_port}"
        wait_for(self._listening, "nginx to listen")

    def _listening(self):
        if self.process.poll() is not None:
            raise AssertionError(f"nginx exited: {(self.dir / 'error.log').read_text()}")
        return accepts(self.https_port)

    def access_log(self):
        return (self.dir / "bridge.access.log").read_text()

    def stop(self):
        self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish their requests
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def nginx_binary():
    return program("nginx", "nginx-light")


def openai_client(url, cafile=None, api_key="sk-client"):
    """The official SDK pointed at `url`; a 10 s read timeout turns a held-back event into a failure."""
    verify = ssl.create_default_context(cafile=str(cafile)) if cafile else True
    return openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=api_key,
        max_retries=0,
        timeout=10,
        http_client=httpx2.Client(verify=verify, timeout=10),
    )


def anthropic_client(url, cafile=None, api_key="sk-ant-client"):
    """openai_client's counterpart: the anthropic SDK pointed at `url`, the same way."""
    verify = ssl.create_default_context(cafile=str(cafile)) if cafile else True
    return anthropic.Anthropic(
        base_url=url,
        api_key=api_key,
        max_retries=0,
        timeout=10,
        http_client=httpx2.Client(verify=verify, timeout=10),
    )


class TextStream:
    """An upstream Anthropic text stream (a recorded fixture), gated, and the texts it carries."""

    FIXTURE = "anthropic/text_sdk.sse"

    def __init__(self, fake):
        self.gate = Gate(fixture(self.FIXTURE).events)
        self.texts = [
            (index, json.loads(event.split(b"data: ", 1)[1])["delta"]["text"])
            for index, event in enumerate(self.gate.events)
            if b"event: content_block_delta" in event
        ]
        fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=self.gate))

    def release_until_text(self, number):
        """Let the upstream send everything up to and including text `number`."""
        self.gate.release(self.texts[number][0] + 1 - self.gate.released)

    def release_rest(self):
        self.gate.release(len(self.gate.events) - self.gate.released)


def open_text_streams(url, fake, count, api_key="sk-client"):
    """`count` gated Chat streams (TextStream upstreams), opened one after another, each read
    to its first text: a list of (upstream, client chunks) pairs."""
    opened = []
    for _ in range(count):
        upstream = TextStream(fake)
        upstream.release_until_text(0)
        chunks = iter(openai_client(url, api_key=api_key).chat.completions.create(stream=True, **TEXT_CHAT))
        assert next_text(chunks) == upstream.texts[0][1]
        opened.append((upstream, chunks))
    return opened


TEXT_CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def next_text(chunks):
    """The next non-empty content the client receives."""
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            return chunk.choices[0].delta.content
    raise AssertionError("the stream ended before the next text")
