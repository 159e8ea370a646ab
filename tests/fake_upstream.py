"""A real HTTP server that plays the upstream: it replays recorded bodies and streams.

Tests queue replies with `fake.reply(...)`; every request that reaches the
fake is recorded (path, headers, parsed JSON body) so a test can check what
the bridge actually sent upstream. Streams are written with chunked
transfer encoding, optionally paced, so the bridge sees them arrive the way
a real server sends them. A fake made with `listening=False` has its port
bound but refuses every connection until `listen()`: an upstream that is
still starting. A fake given `rules` (ResponsesRules) answers a POST to
.../responses that breaks one of OpenAI's rules with OpenAI's error, as the
real API does, and keeps its queued reply for the next request.
"""

import dataclasses
import json
import pathlib
import select
import socket
import ssl
import sys
import threading
import time
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from openai.types.responses import response_create_params, response_input_item_param, tool_param

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@dataclasses.dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict = dataclasses.field(default_factory=dict)
    events: list = None  # SSE events (bytes) written one by one, for streams
    pace: float = 0.0  # seconds to wait before each event
    drop_after: int = None  # close the connection after this many events
    delay_headers: float = 0.0  # seconds to wait before sending the status line, or until the bridge closes
    stall_after: int = None  # go silent after this many events, holding the connection open
    stall_for: float = 30.0  # ... for this long at most, or until the bridge closes it
    cut_after: int = None  # send `body` as one chunk that promises all of it, close after this many
    # of its bytes: a server that died while answering
    length: int = None  # send `events` unchunked under this content-length: a body too large to hold,
    # made up as it is written (a generator)
    end_delay: float = 0.0  # seconds between the last event and a chunked body's end


@dataclasses.dataclass
class Recorded:
    method: str
    path: str
    headers: dict
    body: object
    peer: tuple = None  # the bridge's end of the connection it came on
    raw: bytes = b""  # the body's bytes as they came (a signature is over them)


def split_events(raw):
    """Split a recorded SSE body into events, keeping each one's bytes unchanged."""
    text = raw.replace(b"\r\n", b"\n")
    parts = [p + b"\n\n" for p in text.split(b"\n\n") if p.strip()]
    return parts


def fixture(name, **overrides):
    """A Reply that replays tests/fixtures/<name> (.sse stream or .json body with .meta.json)."""
    path = FIXTURES / name
    raw = path.read_bytes()
    if path.suffix == ".sse":
        reply = Reply(headers={"content-type": "text/event-stream"}, events=split_events(raw))
    else:
        reply = Reply(body=raw, headers={"content-type": "application/json"})
        meta = path.with_name(path.stem + ".meta.json")
        if meta.exists():
            info = json.loads(meta.read_text())
            reply.status = info["status"]
            reply.headers = dict(info["headers"])
    for key, value in overrides.items():
        setattr(reply, key, value)
    return reply


def json_reply(body, status=200, headers=None):
    return Reply(
        status=status, body=json.dumps(body).encode(), headers={"content-type": "application/json", **(headers or {})}
    )


def message(text, usage, model="claude-x"):
    """A non-streamed Anthropic Messages answer: one text block, ended, with this usage."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def chat_stream(text="", tool_calls=(), model="fake-model", reasoning=""):
    """A streamed Chat Completions answer as an OpenAI-compatible server writes it: a role chunk,
    the reasoning (`reasoning_content`, as DeepSeek and vLLM send it), the text, each tool call
    `(id, name, arguments dict)` whole in one chunk, the finish reason, a usage chunk, then
    `data: [DONE]`."""

    def data(choices, **extra):
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": choices,
            **extra,
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def delta(fields, finish_reason=None):
        return data([{"index": 0, "delta": fields, "finish_reason": finish_reason}])

    events = [delta({"role": "assistant", "content": ""})]
    if reasoning:
        events.append(delta({"reasoning_content": reasoning}))
    if text:
        events.append(delta({"content": text}))
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        events.append(
            delta(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ]
                }
            )
        )
    events.append(delta({}, "tool_calls" if tool_calls else "stop"))
    events.append(data([], usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}))
    events.append(b"data: [DONE]\n\n")
    return Reply(headers={"content-type": "text/event-stream"}, events=events)


def messages_stream(text="", tool_uses=(), model="claude-sonnet-4-5"):
    """A streamed Anthropic Messages answer as Anthropic writes it: message_start, the text as one
    block (a list of strings: a delta each), each tool use `(id, name, input dict)` as one block
    with its input in one delta, then message_delta with the stop reason and message_stop."""

    def event(kind, **fields):
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

    events = [
        event(
            "message_start",
            message={
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 1},
            },
        )
    ]
    pieces = [text] if isinstance(text, str) else text
    blocks = ([({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])] if text else []) + [
        (
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": json.dumps(arguments)}],
        )
        for call_id, name, arguments in tool_uses
    ]
    for index, (start, deltas) in enumerate(blocks):
        events += [
            event("content_block_start", index=index, content_block=start),
            *(event("content_block_delta", index=index, delta=delta) for delta in deltas),
            event("content_block_stop", index=index),
        ]
    events += [
        event(
            "message_delta",
            delta={"stop_reason": "tool_use" if tool_uses else "end_turn", "stop_sequence": None},
            usage={"output_tokens": 10},
        ),
        event("message_stop"),
    ]
    return Reply(headers={"content-type": "text/event-stream"}, events=events)


def responses_answer(text="", function_calls=(), reasoning=None, model="gpt-5", status="completed"):
    """A non-streamed Responses API answer: an optional reasoning item `(summary text,
    encrypted_content)`, the text as one message, each function call `(call_id, name, arguments
    dict)` as one item, with usage. `status` "incomplete" says max_output_tokens cut it."""
    output = []
    if reasoning:
        summary, encrypted = reasoning
        output.append(
            {
                "id": "rs_fake",
                "type": "reasoning",
                "encrypted_content": encrypted,
                "summary": [{"type": "summary_text", "text": summary}],
            }
        )
    if text:
        output.append(
            {
                "id": "msg_fake",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
            }
        )
    output += [
        {
            "id": f"fc_fake_{index}",
            "type": "function_call",
            "status": "completed",
            "arguments": json.dumps(arguments),
            "call_id": call_id,
            "name": name,
        }
        for index, (call_id, name, arguments) in enumerate(function_calls)
    ]
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 5 if reasoning else 0},
            "total_tokens": 110,
        },
    }


def responses_stream(text="", function_calls=(), reasoning=None, model="gpt-5", status="completed"):
    """The same answer streamed as OpenAI writes it: response.created and response.in_progress,
    each output item between output_item.added and output_item.done (the reasoning summary, the
    text and each call's arguments in one delta), then response.completed, or response.incomplete,
    carrying the whole answer."""
    answer = responses_answer(text, function_calls, reasoning, model, status)
    events = []

    def event(kind, **fields):
        fields = {"type": kind, "sequence_number": len(events), **fields}
        events.append(f"event: {kind}\ndata: {json.dumps(fields)}\n\n".encode())

    opening = {**answer, "status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
    event("response.created", response=opening)
    event("response.in_progress", response=opening)
    for index, item in enumerate(answer["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            part = item["summary"][0]
            event("response.output_item.added", output_index=index, item={**item, "summary": []})
            event("response.reasoning_summary_part.added", **at, summary_index=0, part={**part, "text": ""})
            event("response.reasoning_summary_text.delta", **at, summary_index=0, delta=part["text"])
            event("response.reasoning_summary_text.done", **at, summary_index=0, text=part["text"])
            event("response.reasoning_summary_part.done", **at, summary_index=0, part=part)
        elif item["type"] == "message":
            part = item["content"][0]
            event(
                "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
            )
            event("response.content_part.added", **at, content_index=0, part={**part, "text": ""})
            event("response.output_text.delta", **at, content_index=0, delta=part["text"], logprobs=[])
            event("response.output_text.done", **at, content_index=0, text=part["text"], logprobs=[])
            event("response.content_part.done", **at, content_index=0, part=part)
        else:
            event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            event("response.function_call_arguments.delta", **at, delta=item["arguments"])
            event("response.function_call_arguments.done", **at, arguments=item["arguments"])
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed" if status == "completed" else "response.incomplete", response=answer)
    return Reply(headers={"content-type": "text/event-stream"}, events=events)


def _type_names(union):
    """The `type` values of the members of one of the openai SDK's request unions (a member's
    `type` is a Literal, or an Optional one)."""

    def names(hint):
        return [name for arg in typing.get_args(hint) for name in ([arg] if isinstance(arg, str) else names(arg))]

    return frozenset(name for member in typing.get_args(union) for name in names(typing.get_type_hints(member)["type"]))


class ResponsesRules:
    """What OpenAI's /v1/responses refuses, so a fake with these rules refuses it too.

    The field, input item and tool names are the official openai SDK's (its request types are
    generated from OpenAI's API spec); the statuses and wordings are OpenAI's, as recorded
    (tests/fixtures/openai/responses_error_*) or as quoted in users' reports.
    `reasoning_models`: prefixes of the model names that reason: only they return encrypted
    reasoning, and they refuse `temperature`.
    """

    FIELDS = frozenset(typing.get_type_hints(response_create_params.ResponseCreateParamsStreaming))
    ITEM_TYPES = _type_names(response_input_item_param.ResponseInputItemParam)
    TOOL_TYPES = _type_names(tool_param.ToolParam)

    def __init__(self, reasoning_models=("o1", "o3", "o4", "gpt-5", "codex")):
        self.reasoning_models = tuple(reasoning_models)

    def refusal(self, body):
        """The error reply OpenAI gives this request body, or None when it breaks no rule."""
        for field in body:
            if field not in self.FIELDS:
                return _openai_error(400, f"Unknown parameter: '{field}'.", field, "unknown_parameter")
        limit = body.get("max_output_tokens")
        if isinstance(limit, int) and limit < 16:
            return _openai_error(
                400,
                "Invalid 'max_output_tokens': integer below minimum value. "
                f"Expected a value >= 16, but got {limit} instead.",
                "max_output_tokens",
                "integer_below_min_value",
            )
        reasons = str(body.get("model", "")).startswith(self.reasoning_models)
        if reasons and "temperature" in body:
            return _openai_error(
                400, "Unsupported parameter: 'temperature' is not supported with this model.", "temperature", None
            )
        if not reasons and "reasoning.encrypted_content" in (body.get("include") or ()):
            return _openai_error(400, "Encrypted content is not supported with this model.", "include", None)
        for index, tool in enumerate(body.get("tools") or ()):
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind not in self.TOOL_TYPES:
                return _invalid_value(kind, self.TOOL_TYPES, f"tools[{index}].type")
        items = body.get("input")
        for index, item in enumerate(items if isinstance(items, list) else ()):
            kind = item.get("type", "message") if isinstance(item, dict) else None
            if kind not in self.ITEM_TYPES:
                return _invalid_value(kind, self.ITEM_TYPES, f"input[{index}].type")
            # Nothing is stored under store:false, so an id (an item_reference's too) can only
            # name an item that is not there; but a reasoning item that carries its encrypted
            # content is sent whole, its id with it (the API requires one), as Codex sends it.
            stored = item.get("id")
            carried = kind == "reasoning" and item.get("encrypted_content")
            if body.get("store") is False and stored and not carried:
                return _openai_error(
                    404,
                    f"Item with id '{stored}' not found. Items are not persisted when `store` is set to false. "
                    "Try again with `store` set to true, or remove this item from your input.",
                    "input",
                    None,
                )
        return None


def _openai_error(status, message, param, code):
    return json_reply(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, status
    )


def _invalid_value(value, supported, param):
    names = ", ".join(f"'{name}'" for name in sorted(supported))
    return _openai_error(400, f"Invalid value: '{value}'. Supported values are: {names}.", param, "invalid_value")


class Flood:
    """An Anthropic text stream that does not end, written as fast as the connection takes it.

    A Reply's `events`: message_start and the text block's start, then the same text delta over
    and over, in writes of about 64 KiB, until `limit` bytes (a guard, should the reader never
    stop). `sent` counts the bytes handed to the connection so far.
    """

    def __init__(self, limit=2 * 1024**3):
        events = messages_stream("flood " * 170).events
        self._opening, delta = b"".join(events[:2]), events[2]
        self._write = delta * (65536 // len(delta))
        self.limit = limit
        self.sent = 0

    def __iter__(self):
        self.sent = len(self._opening)
        yield self._opening
        while self.sent < self.limit:
            self.sent += len(self._write)
            yield self._write


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of connects from a loaded bridge must not hit SYN retries

    def handle_error(self, request, client_address):
        """The bridge closing a stream early is what many tests do, not an error to print. The
        traceback it printed also parsed source lines with `ast` (Python 3.11's carets) while a
        test built an app, and CPython 3.11.7's parser is not safe from two threads at once
        (gh-106905): one run failed with "AST constructor recursion depth mismatch"."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeUpstream:
    def __init__(self, listening=True, tls=None, rules=None):
        """`tls`: (certificate, key) files to answer over HTTPS, as real upstreams do. `rules`: a
        ResponsesRules the POSTs to .../responses must keep (also settable, `fake.rules = ...`)."""
        self.requests = []
        self._replies = []
        self.default = None  # a Reply, or a function of the Recorded request returning one
        self.rules = rules
        self.closed_streams = []  # (path, events written) of streams the client closed early
        self.closed_unanswered = []  # (path, time.monotonic()) of calls closed during delay_headers
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _handler(self), bind_and_activate=False)
        self.server.server_bind()
        scheme = "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = None
        if listening:
            self.listen()

    def listen(self):
        """Start accepting connections; until then the kernel refuses them (the port is bound, not listening)."""
        self.server.server_activate()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def reply(self, *replies):
        with self._lock:
            self._replies.extend(replies)

    def reset(self):
        with self._lock:
            self.requests.clear()
            self._replies.clear()
            self.closed_streams.clear()
            self.closed_unanswered.clear()
            self.default = None
            self.rules = None

    @property
    def last(self):
        return self.requests[-1]

    def _next(self, recorded):
        refusal = self._refusal(recorded)
        if refusal is not None:
            return refusal
        with self._lock:
            if self._replies:
                return self._replies.pop(0)
        if callable(self.default):
            return self.default(recorded)
        return self.default or json_reply({"error": {"message": "fake upstream: no reply queued"}}, 599)

    def _refusal(self, recorded):
        """OpenAI's error for a Responses request that breaks the rules; the queued reply waits."""
        rules = self.rules
        if rules is None or recorded.method != "POST" or not isinstance(recorded.body, dict):
            return None
        if not recorded.path.split("?")[0].endswith("/responses"):
            return None
        return rules.refusal(recorded.body)

    def close(self):
        if self._thread is not None:
            self.server.shutdown()
        self.server.server_close()


def _handler(fake):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # As real servers do: without it a write after a small one waits for the bridge's delayed
        # ACK (40 ms), so a stream on a reused connection showed a 40 ms first byte.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _serve(self):
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            recorded = Recorded(
                self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, self.client_address, raw
            )
            fake.requests.append(recorded)
            reply = fake._next(recorded)
            if reply.delay_headers and self._closed_within(reply.delay_headers):
                fake.closed_unanswered.append((self.path, time.monotonic()))
                self.close_connection = True
                return
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if reply.cut_after is not None:
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s" % (len(reply.body), reply.body[: reply.cut_after]))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.events is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            chunked = reply.length is None
            self.send_header(*(("transfer-encoding", "chunked") if chunked else ("content-length", str(reply.length))))
            self.end_headers()
            written = 0
            try:
                for event in reply.events:
                    if reply.drop_after is not None and written >= reply.drop_after:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if written == reply.stall_after and self._closed_within(reply.stall_for):
                        raise ConnectionResetError  # recorded below, like any client that left
                    if reply.pace:
                        time.sleep(reply.pace)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
                    self.wfile.flush()
                    written += 1
                if chunked:
                    time.sleep(reply.end_delay)
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                fake.closed_streams.append((self.path, written))
                self.close_connection = True

        def _closed_within(self, seconds):
            """Stay silent for `seconds`; True as soon as the peer closes the connection."""
            readable, _, _ = select.select([self.connection], [], [], seconds)
            if not readable:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        do_GET = do_POST = _serve

    return Handler
