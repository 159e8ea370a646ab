"""What an upstream sends is bounded, and whatever it sends becomes an error in the client's protocol.

Each front is called with its official SDK over HTTP, in front of the fake upstream: a body
too large, an error too long, a refused held key, an error inside a 200, malformed numbers and
types, too many headers. After each, the same bridge answers a plain request: the service is
healthy. The memory test runs the bridge under gunicorn and reads its worker's peak RSS.
"""

import dataclasses
import json
import logging

import anthropic
import openai
import pytest
import requests

from bench.processes import wait_for
from bridge.protocols.errors import MAX_RELAYED_MESSAGE
from bridge.serve.observability import Record, escaped
from tests.fake_upstream import Reply, fixture, json_reply
from tests.helpers.directions import drain
from tests.helpers.servers import gunicorn

USER = {"role": "user", "content": "hi"}
HELD_KEY = "sk-held-upstream-key-0123456789wxyz"  # its end is no hex: request ids are hex


@dataclasses.dataclass
class Front:
    name: str
    upstream: str  # the fixture folder of the upstream's protocol
    sdk: object

    def ask(self, url, stream=False, api_key="sk-client"):
        """The SDK's call, a stream read to its end: (items, the SDK error that ended it or None)."""
        if self.sdk is anthropic:
            client = anthropic.Anthropic(base_url=url, api_key=api_key, max_retries=0)
            answer = client.messages.create(model="claude-x", max_tokens=64, messages=[USER], stream=stream)
        else:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0)
            if self.name == "chat":
                answer = client.chat.completions.create(model="gpt-x", messages=[USER], stream=stream)
            else:
                answer = client.responses.create(model="gpt-x", input="hi", stream=stream)
        return drain(answer) if stream else (answer, None)

    def stream_failure(self, url):
        """The message of the error that ended a stream, as the SDK's user gets it (None: no error).
        A Responses stream ends in a `response.failed` event, which the SDK passes on as an event."""
        items, error = self.ask(url, stream=True)
        if self.name == "responses" and items and items[-1].type == "response.failed":
            return items[-1].response.error.message
        return error.message if error is not None else None

    def text_of(self, answer):
        if self.name == "messages":
            return answer.content[0].text
        return answer.choices[0].message.content if self.name == "chat" else answer.output_text


FRONTS = [
    Front("chat", "anthropic", openai),
    Front("messages", "openai", anthropic),
    Front("responses", "anthropic", openai),
]
EACH_FRONT = pytest.mark.parametrize("front", FRONTS, ids=lambda front: front.name)


def still_serves(front, url, fake):
    """The bridge answers a plain request after whatever came before."""
    assert requests.get(f"{url}/healthz", timeout=5).json() == {"status": "ok"}
    fake.reply(fixture(f"{front.upstream}/text.json"))
    answer, _ = front.ask(url)
    return bool(front.text_of(answer))


def refused(front, url, stream=False, **ask):
    """The SDK's error for a call the bridge answers with an HTTP error."""
    with pytest.raises(front.sdk.APIStatusError) as caught:
        front.ask(url, stream, **ask)
    return caught.value


# -- a non-streamed body larger than BRIDGE_MAX_UPSTREAM_BODY_BYTES ---------------------------

# A valid answer around one long text, in each upstream protocol: a bridge that read it whole
# would answer it.
ANSWER_AROUND_TEXT = {
    "anthropic": (
        b'{"id":"msg_big","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"',
        b'"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}',
    ),
    "openai": (
        b'{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,'
        b'"message":{"role":"assistant","content":"',
        b'"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}',
    ),
}
PIECE = b"x" * 65536


def huge_answer(upstream, megabytes, declared, status=200, around=None):
    """A JSON answer of about `megabytes` MiB, made up as the fake writes it: chunked, or under a
    content-length when `declared`."""
    head, tail = around or ANSWER_AROUND_TEXT[upstream]
    pieces = megabytes * 16

    def body():
        yield head
        for _ in range(pieces):
            yield PIECE
        yield tail

    length = len(head) + pieces * len(PIECE) + len(tail) if declared else None
    return Reply(status=status, headers={"content-type": "application/json"}, events=body(), length=length)


@EACH_FRONT
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_answer_over_BRIDGE_MAX_UPSTREAM_BODY_BYTES_is_a_502_naming_it_and_its_connection_is_closed(
    start_bridge, fake, front, declared
):
    live = start_bridge(BRIDGE_MAX_UPSTREAM_BODY_BYTES=1024 * 1024)
    fake.reply(huge_answer(front.upstream, 32, declared))
    error = refused(front, live.url)
    assert error.status_code == 502 and "BRIDGE_MAX_UPSTREAM_BODY_BYTES" in error.message
    # The bridge hung up with most of the body unsent: neither read on nor pooled half-read.
    wait_for(lambda: fake.closed_streams, "the fake upstream to see the bridge hang up")
    assert fake.closed_streams[0][1] < 32 * 16
    assert still_serves(front, live.url, fake)


@EACH_FRONT
def test_an_answer_within_BRIDGE_MAX_UPSTREAM_BODY_BYTES_is_answered(start_bridge, fake, front):
    live = start_bridge(BRIDGE_MAX_UPSTREAM_BODY_BYTES=4 * 1024 * 1024)
    fake.reply(huge_answer(front.upstream, 2, declared=False))
    answer, _ = front.ask(live.url)
    assert front.text_of(answer) == "x" * 2 * 1024 * 1024


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def worker_pid(server):
    with open(f"/proc/{server.process.pid}/task/{server.process.pid}/children") as children:
        (pid,) = children.read().split()
    return int(pid)


@pytest.mark.slow
def test_a_200_MB_answer_is_refused_with_the_workers_memory_bounded(tmp_path, fake):
    """With the default limit (8 MiB) the worker's peak RSS grows by far less than the answer:
    it never holds more than the limit of it, whether its length is declared or not."""
    server = gunicorn(tmp_path, fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="4", BRIDGE_LOG_LEVEL="INFO")
    chat = FRONTS[0]
    try:
        assert still_serves(chat, server.url, fake)
        worker = worker_pid(server)
        before = peak_rss_kib(worker)
        for declared in (False, True):
            fake.reply(huge_answer("anthropic", 200, declared))
            error = refused(chat, server.url)
            assert error.status_code == 502 and "BRIDGE_MAX_UPSTREAM_BODY_BYTES" in error.message
        grown = peak_rss_kib(worker) - before
        assert still_serves(chat, server.url, fake)
        assert worker_pid(server) == worker
    finally:
        server.stop()
    assert grown < 48 * 1024, f"the worker's peak RSS grew by {grown} KiB for a 200 MB answer"
    assert [written < 200 * 16 for _, written in fake.closed_streams] == [True, True]


# -- error answers: read in part, their message relayed in part ------------------------------


def error_body(upstream, message):
    error = {"type": "invalid_request_error", "message": message}
    return {"type": "error", "error": error} if upstream == "anthropic" else {"error": error}


@EACH_FRONT
def test_a_20_MB_error_message_is_neither_read_nor_relayed_whole(bridge, fake, front):
    head = json.dumps(error_body(front.upstream, "")).encode()
    cut = head.index(b'"message": "') + len(b'"message": "')
    fake.reply(huge_answer(front.upstream, 20, declared=False, status=400, around=(head[:cut], head[cut:])))
    error = refused(front, bridge.url)
    assert error.status_code == 400 and len(error.response.text) < 1000
    assert "larger than 65536 bytes" in error.message
    wait_for(lambda: fake.closed_streams, "the fake upstream to see the bridge hang up")
    assert still_serves(front, bridge.url, fake)


@EACH_FRONT
def test_a_long_error_message_is_cut_and_marked(bridge, fake, front):
    fake.reply(json_reply(error_body(front.upstream, "z" * 10_000), 400))
    error = refused(front, bridge.url)
    message = error.response.json()["error"]["message"]
    assert error.status_code == 400 and message.count("z") == MAX_RELAYED_MESSAGE
    assert message.endswith(f"… [cut by the bridge: {10_000 - MAX_RELAYED_MESSAGE} more characters]")
    assert still_serves(front, bridge.url, fake)


# -- an upstream 401/403 for the key the bridge holds ---------------------------------------


@EACH_FRONT
@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_refused_held_key_is_a_502_that_shows_nothing_of_the_key(start_bridge, fake, front, status, stream, caplog):
    live = start_bridge(
        BRIDGE_OPENAI_API_KEY=HELD_KEY, BRIDGE_ANTHROPIC_API_KEY=HELD_KEY, BRIDGE_CLIENT_KEYS="sk-client"
    )
    masked = f"Incorrect API key provided: {HELD_KEY[:6]}**********{HELD_KEY[-4:]}"
    fake.reply(json_reply(error_body(front.upstream, masked), status))
    caplog.set_level(logging.WARNING, logger="bridge.gateway.upstream")
    error = refused(front, live.url, stream)
    assert isinstance(error, front.sdk.InternalServerError) and error.status_code == 502
    assert error.response.headers["x-should-retry"] == "false"  # the SDKs would retry a 502
    body = error.response.json()["error"]
    assert body["type"] in ("api_error", "server_error")
    assert f"the bridge's upstream credentials were refused (HTTP {status} from the upstream)" in body["message"]
    assert HELD_KEY[-4:] not in error.response.text and "Incorrect" not in error.response.text
    assert fake.last.headers["x-api-key" if front.upstream == "anthropic" else "authorization"].endswith(HELD_KEY)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "refused the bridge's credentials" in warning.getMessage() and HELD_KEY[-4:] not in caplog.text
    fake.reply(fixture(f"{front.upstream}/text.json"))
    assert front.text_of(front.ask(live.url)[0])


@EACH_FRONT
def test_a_401_for_the_clients_own_key_passed_through_stays_the_clients(bridge, fake, front):
    fake.reply(json_reply(error_body(front.upstream, "invalid x-api-key"), 401))
    error = refused(front, bridge.url)
    assert isinstance(error, front.sdk.AuthenticationError) and "invalid x-api-key" in error.message


# -- an error inside a 200 ------------------------------------------------------------------

# (error type, the status each front answers it with): the type's kind, as before the stream.
ERRORS_IN_A_200 = [
    ("rate_limit_error", {"chat": 429, "messages": 429, "responses": 429}),
    ("overloaded_error", {"chat": 503, "messages": 529, "responses": 503}),
    ("api_error", {"chat": 500, "messages": 502, "responses": 500}),
]


@EACH_FRONT
@pytest.mark.parametrize("error_type, statuses", ERRORS_IN_A_200, ids=[case[0] for case in ERRORS_IN_A_200])
def test_an_error_in_a_200_body_is_an_error_in_the_clients_protocol(bridge, fake, front, error_type, statuses):
    body = error_body(front.upstream, "try later")
    body["error"]["type"] = error_type
    fake.reply(json_reply(body, 200))
    error = refused(front, bridge.url)
    assert error.status_code == statuses[front.name] and "try later" in error.message
    assert still_serves(front, bridge.url, fake)


# -- malformed numbers and types ------------------------------------------------------------

HUGE = "1" + "0" * 400  # 10**400: the json module reads it, orjson does not, a metric cannot take it


def anthropic_answer(**changes):
    return json.dumps({**json.loads(fixture("anthropic/tool_use.json").body), **changes}).replace('"HUGE"', HUGE)


def chat_answer(message=None, **changes):
    completion = json.loads(fixture("openai/tool_calls.json").body)
    completion["choices"][0]["message"].update(message or {})
    return json.dumps({**completion, **changes}).replace('"HUGE"', HUGE)


TOOL_USE = json.loads(fixture("anthropic/tool_use.json").body)["content"][-1]
# upstream protocol -> (what is malformed, the answer, the field the 502 names)
MALFORMED_ANSWERS = {
    "anthropic": [
        ("10**400 tokens", anthropic_answer(usage={"input_tokens": "HUGE", "output_tokens": 1}), "usage.input_tokens"),
        ("tokens a string", anthropic_answer(usage={"input_tokens": "12", "output_tokens": 1}), "usage.input_tokens"),
        ("tokens an array", anthropic_answer(usage={"input_tokens": [], "output_tokens": 1}), "usage.input_tokens"),
        ("tokens negative", anthropic_answer(usage={"input_tokens": -1, "output_tokens": 1}), "usage.input_tokens"),
        ("content a string", anthropic_answer(content="text"), "content"),
        ("a block a string", anthropic_answer(content=["text"]), "content.0"),
        ("stop_reason a number", anthropic_answer(stop_reason=7), "stop_reason"),
        ("tool input an array", anthropic_answer(content=[{**TOOL_USE, "input": []}]), "content.0.input"),
        ("tool name null", anthropic_answer(content=[{**TOOL_USE, "name": None}]), "content.0.name"),
        ("text an object", anthropic_answer(content=[{"type": "text", "text": {"a": 1}}]), "content.0.text"),
    ],
    "openai": [
        ("10**400 tokens", chat_answer(usage={"prompt_tokens": "HUGE"}), "usage.prompt_tokens"),
        ("tokens a string", chat_answer(usage={"prompt_tokens": 3, "completion_tokens": "12"}), "completion_tokens"),
        ("choices a string", chat_answer(choices="none"), "choices"),
        ("content a number", chat_answer({"content": 5}), "choices.0.message.content"),
        ("tool_calls a string", chat_answer({"tool_calls": "call"}), "choices.0.message.tool_calls"),
        (
            "arguments a number",
            chat_answer({"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 5}}]}),
            "choices.0.message.tool_calls.0.function.arguments",
        ),
    ],
}


def per_front(cases):
    return pytest.mark.parametrize(
        "front, case",
        [
            pytest.param(front, case, id=f"{front.name}: {case[0]}")
            for front in FRONTS
            for case in cases[front.upstream]
        ],
    )


@per_front(MALFORMED_ANSWERS)
def test_a_malformed_number_or_type_in_an_answer_is_a_502_naming_the_field(bridge, fake, front, case, caplog):
    _, body, field = case
    fake.reply(Reply(body=body.encode(), headers={"content-type": "application/json"}))
    error = refused(front, bridge.url)
    assert error.status_code == 502 and "upstream sent a malformed answer" in error.message
    assert field in error.message and HUGE not in error.response.text
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert still_serves(front, bridge.url, fake)


# upstream protocol -> (what is malformed, the recorded stream's bytes, replaced by, the field named)
MALFORMED_STREAMS = {
    "anthropic": [
        ("10**400 tokens", b'"input_tokens":10,', b'"input_tokens":' + HUGE.encode() + b",", "usage.input_tokens"),
        ("tokens a string", b'"output_tokens":4}', b'"output_tokens":"4"}', "usage.output_tokens"),
        ("index a string", b'"index":0,"delta"', b'"index":"0","delta"', "index"),
        ("text a number", b'"text":"Hello"', b'"text":5', "delta.text"),
    ],
    "openai": [
        ("10**400 tokens", b'"prompt_tokens":14', b'"prompt_tokens":' + HUGE.encode(), "usage.prompt_tokens"),
        ("content a number", b'"content":"I\'m"', b'"content":5', "choices.0.delta.content"),
    ],
}


@per_front(MALFORMED_STREAMS)
def test_a_malformed_number_or_type_in_a_stream_ends_it_with_an_error_naming_the_field(
    bridge, fake, front, case, caplog
):
    _, replace, by, field = case
    events = fixture(f"{front.upstream}/text.sse").events
    changed = [event.replace(replace, by, 1) for event in events]
    assert changed != events, "the recording no longer holds what the case replaces"
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=changed))
    failure = front.stream_failure(bridge.url)
    assert failure is not None and "upstream sent a malformed" in failure and field in failure
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert still_serves(front, bridge.url, fake)


def test_a_usage_count_no_metric_can_take_is_not_counted_and_the_line_is_still_written():
    """prometheus_client turns a count into a float; 10**400 raised OverflowError as the server
    closed the response (gunicorn then lost count of its connections)."""
    record = Record("POST")
    record.direction, record.status = "chat_to_messages", 200
    record.count({"input_tokens": 10**400, "output_tokens": "12", "cache_read_input_tokens": True})
    record.count({"output_tokens": 7})
    assert record.usage == {"output_tokens": 7}
    record.finish()


# -- log lines -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, logged",
    [
        ("overloaded\n2026-01-01 INFO bridge: all is well", "overloaded\\n2026-01-01 INFO bridge: all is well"),
        ("a\rb\x00c\x1bd\u2028e\x85f", "a\\rb\\x00c\\x1bd\\u2028e\\x85f"),
        ("a \\n is not a newline", "a \\\\n is not a newline"),
        ("naïve café 模型", "naïve café 模型"),
    ],
)
def test_upstream_text_in_a_log_line_has_its_control_characters_escaped(text, logged):
    assert escaped(text) == logged and "\n" not in escaped(text)


def test_upstream_text_in_a_log_line_is_cut():
    assert escaped("z" * 10_000) == "z" * 500 + "…"


# -- answers http.client refuses ------------------------------------------------------------


@EACH_FRONT
@pytest.mark.parametrize(
    "headers, words",
    [
        ({f"x-h{number}": "v" for number in range(5000)}, "got more than 100 headers"),
        ({"x-long": "v" * 70_000}, "got more than 65536 bytes when reading header line"),
    ],
    ids=["5000 headers", "a 70 kB header"],
)
def test_an_answer_http_client_refuses_is_a_malformed_answer_not_a_connect_failure_and_not_retried(
    start_bridge, fake, front, headers, words
):
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01)
    fake.reply(fixture(f"{front.upstream}/text.json", headers={"content-type": "application/json", **headers}))
    error = refused(front, live.url)
    assert error.status_code == 502 and f"the upstream's answer was malformed: {words}" in error.message
    assert "connect" not in error.message and len(fake.requests) == 1
    assert still_serves(front, live.url, fake)
