"""Both directions over HTTP, as their clients call them: one Direction per translated pair,
with its paths, bodies and the answers a fake upstream gives."""

import contextlib
import dataclasses
import json
import socket
import struct
import threading
import time

import anthropic
import openai
import pytest

from bridge.protocols.errors import ANTHROPIC, OPENAI, BridgeError
from bridge.serve.streaming import ANTHROPIC_SSE, CHAT_SSE
from bridge.translate import translator
from bridge.translate.translator import DONE
from tests.fake_upstream import fixture
from tests.helpers.accumulators import anthropic_stream_message, openai_stream_completion

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


@contextlib.contextmanager
def deaf_upstream():
    """(its port, the connections it accepted) of a server that accepts each connection and never
    reads from it: a request larger than the kernel's buffers cannot be sent whole. Its receive
    buffer is made small."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # accepted sockets inherit it
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        held = []
        threading.Thread(target=lambda: held.extend(iter(listener.accept, None)), daemon=True).start()
        try:
            yield listener.getsockname()[1], held
        finally:
            for sock, _ in held:
                sock.close()


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
