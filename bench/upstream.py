"""A fast fake upstream that speaks the three protocols, for the benchmark.

One asyncio process on one core: keep-alive HTTP/1.1, no framework, so it
is never the bottleneck (the benchmark measures it directly too). The
request path picks the protocol (`.../chat/completions` answers as OpenAI
Chat, `.../responses` as OpenAI Responses, `.../v1/messages` as Anthropic)
and `"stream": true` picks a stream. The three answer the same text with
the same number of text events.

The shape of the answer travels in the model name, the one field every
direction carries through unchanged (a prefix that routes it is ignored):
`bench-n50-p20` streams 50 text events, 20 ms apart. Every text event
carries its emission time as `@<CLOCK_MONOTONIC seconds>@`, so a client on
the same machine can compute the delay from upstream emission to its own
receipt whatever proxy and translation sit in between.

Run: python -m bench.upstream PORT
"""

import asyncio
import json
import re
import sys
import time

_SHAPE = re.compile(r"-n(\d+)(?:-p(\d+(?:\.\d+)?))?")
_CRLF2 = b"\r\n\r\n"
_HOLE = "TEXT_HOLE"  # where an event's text goes in its pre-rendered frame

OPENAI_BODY = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1770933883,
    "model": "gpt-4.1-nano-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "refusal": None,
                "annotations": [],
                "content": "Galaxy Day celebrates the universe's vastness, beauty, and our collective "
                "curiosity about the cosmos. " * 4,
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 16,
        "completion_tokens": 90,
        "total_tokens": 106,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_bench",
}

ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5-20250929",
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "content": [
        {
            "type": "text",
            "text": "Galaxy Day celebrates the universe's vastness, beauty, "
            "and our collective curiosity about the cosmos. " * 4,
        }
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 16,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 90,
        "service_tier": "standard",
    },
}


def _sse(payload, event=None):
    data = json.dumps(payload, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {data}\n\n"


class _Stream:
    """A stream's frames: `head`, one text event per delta (`text`: the frame around its
    text) and `tail`; Responses numbers its events and repeats the text at the end."""

    repeats_text = False

    def event(self, text, number):
        """The text event `number` (from 0) of a stream."""
        before, after = self.text
        return before + text + after

    def end(self, text, events):
        """The frames after `events` text events whose texts joined are `text`."""
        return self.tail


class OpenAIStream(_Stream):
    """Chat Completions chunks as OpenAI sends them: role chunk, deltas, finish, usage, [DONE]."""

    def __init__(self):
        def chunk(delta, finish=None, **extra):
            return {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1727346168,
                "model": "gpt-4o-2024-08-06",
                "system_fingerprint": "fp_bench",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                **extra,
            }

        self.head = _sse(chunk({"role": "assistant", "content": "", "refusal": None}))
        before, _, after = _sse(chunk({"content": _HOLE})).partition(_HOLE)
        self.text = (before, after)
        self.tail = (
            _sse(chunk({}, "stop"))
            + _sse(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 1727346168,
                    "model": "gpt-4o-2024-08-06",
                    "system_fingerprint": "fp_bench",
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 16,
                        "completion_tokens": 50,
                        "total_tokens": 66,
                        "prompt_tokens_details": {"cached_tokens": 0},
                    },
                }
            )
            + "data: [DONE]\n\n"
        )


class AnthropicStream(_Stream):
    """Messages events as Anthropic sends them: message_start ... message_stop."""

    def __init__(self):
        self.head = _sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-sonnet-4-5-20250929",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 16,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
            "message_start",
        ) + _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        )
        before, _, after = _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": _HOLE}},
            "content_block_delta",
        ).partition(_HOLE)
        self.text = (before, after)
        self.tail = (
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            + _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 50},
                },
                "message_delta",
            )
            + _sse({"type": "message_stop"}, "message_stop")
        )


def _response(status, output, usage):
    """A Responses API response object as OpenAI sends it (store off, as bridge asks)."""
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1770933883,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": 1024,
        "max_tool_calls": None,
        "model": "gpt-4.1-nano-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def _output_text(text):
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _message(status, content):
    return {"id": "msg_bench", "type": "message", "status": status, "content": content, "role": "assistant"}


def _responses_usage(input_tokens, output_tokens):
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


RESPONSES_BODY = _response(
    "completed",
    [_message("completed", [_output_text(OPENAI_BODY["choices"][0]["message"]["content"])])],
    _responses_usage(16, 90),
)


def _named(kind, **fields):
    """A Responses event: its type is also its SSE event name."""
    return _sse({"type": kind, **fields}, kind)


class ResponsesStream(_Stream):
    """Responses events as OpenAI sends them: response.created, in_progress, the message item and
    its text part added, the text deltas, the text, part and item done, response.completed with
    usage; every event numbered, the text repeated whole in the last four."""

    repeats_text = True
    _OPENING = 4  # events before the first delta
    _WHERE = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}

    def __init__(self):
        opened = _response("in_progress", [], None)
        self.head = (
            _named("response.created", sequence_number=0, response=opened)
            + _named("response.in_progress", sequence_number=1, response=opened)
            + _named("response.output_item.added", sequence_number=2, output_index=0, item=_message("in_progress", []))
            + _named("response.content_part.added", sequence_number=3, **self._WHERE, part=_output_text(""))
        )
        frame = _named("response.output_text.delta", sequence_number=_HOLE, **self._WHERE, delta=_HOLE, logprobs=[])
        self._delta = frame.split(f'"{_HOLE}"')  # before the number, between it and the text, after

    def event(self, text, number):
        before, between, after = self._delta
        return f'{before}{self._OPENING + number}{between}"{text}"{after}'

    def end(self, text, events):
        number = self._OPENING + events
        part = _output_text(text)
        item = _message("completed", [part])
        done = _response("completed", [item], _responses_usage(16, events))
        return (
            _named("response.output_text.done", sequence_number=number, **self._WHERE, text=text, logprobs=[])
            + _named("response.content_part.done", sequence_number=number + 1, **self._WHERE, part=part)
            + _named("response.output_item.done", sequence_number=number + 2, output_index=0, item=item)
            + _named("response.completed", sequence_number=number + 3, response=done)
        )


PROTOCOLS = {
    "openai": (OpenAIStream(), json.dumps(OPENAI_BODY).encode()),
    "anthropic": (AnthropicStream(), json.dumps(ANTHROPIC_BODY).encode()),
    "responses": (ResponsesStream(), json.dumps(RESPONSES_BODY).encode()),
}
_TOKEN = " token"  # the text of an unstamped event


def chunked(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def _stamp():
    return f"@{time.monotonic():.6f}@ "


def text_event(stream, stamp=True, number=0):
    """Text event `number` of a stream; with `stamp` its text is the emission time."""
    return stream.event(_stamp() if stamp else _TOKEN, number).encode()


_unpaced_cache = {}


def unpaced_body(protocol, events):
    """A whole unpaced stream as one chunked body, built once per shape: the upstream stays cheap."""
    key = (protocol, events)
    if key not in _unpaced_cache:
        stream = PROTOCOLS[protocol][0]
        parts = [stream.head.encode()]
        parts += [text_event(stream, stamp=False, number=number) for number in range(events)]
        parts.append(stream.end(_TOKEN * events, events).encode())
        _unpaced_cache[key] = b"".join(chunked(p) for p in parts) + b"0\r\n\r\n"
    return _unpaced_cache[key]


def response_head(status, content_type, length=None):
    lines = [f"HTTP/1.1 {status}", f"content-type: {content_type}"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


_SLOT = 0.002  # paced events due within one slot of this many seconds go out in one wake-up
_due = {}  # slot -> [(callback, argument)] of the events due in it


def _at(loop, when, callback, argument):
    """callback(argument) at the end of the slot that holds `when`: one timer and one wake-up per
    slot however many streams are due in it, so hundreds of paced streams cost this process
    hundreds of writes per slot, not hundreds of timers. An event's stamp is taken when it is
    written, so the slot's wait is not counted as delay."""
    slot = (int(when / _SLOT) + 1) * _SLOT
    if slot not in _due:
        _due[slot] = []
        loop.call_at(slot, _fire, slot)
    _due[slot].append((callback, argument))


def _fire(slot):
    for callback, argument in _due.pop(slot):
        callback(argument)


async def _paced(writer, protocol, events, pace):
    """Event k goes out at k × `pace` after the head, from a shared timer (`_at`): a task step, a
    sleep and a drain per event cost this process more CPU than the bridge spends relaying it,
    and a late event no longer delays the rest (thousands of streams, one core)."""
    stream = PROTOCOLS[protocol][0]
    writer.write(response_head("200 OK", "text/event-stream") + chunked(stream.head.encode()))
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    start = loop.time()
    texts = []  # kept only for a stream that repeats them at its end

    def emit(sent):
        if writer.is_closing():  # the bridge closed the stream: its client left
            done.set_result(None)
            return
        text = _stamp()
        writer.write(chunked(stream.event(text, sent).encode()))
        if stream.repeats_text:
            texts.append(text)
        if sent + 1 < events:
            _at(loop, start + (sent + 2) * pace, emit, sent + 1)
        else:
            done.set_result(None)

    if events:
        _at(loop, start + pace, emit, 0)
        await done
    writer.write(chunked(stream.end("".join(texts), events).encode()) + b"0\r\n\r\n")


async def _answer(writer, path, body):
    route = path.split("?")[0]
    protocol = (
        "openai"
        if route.endswith("/chat/completions")
        else "responses"
        if route.endswith("/responses")
        else "anthropic"
    )
    try:
        request = json.loads(body)
    except ValueError:
        writer.write(response_head("400 Bad Request", "application/json", 2) + b"{}")
        return
    shape = _SHAPE.search(str(request.get("model", "")))
    events = int(shape.group(1)) if shape else 50
    pace = float(shape.group(2) or 0) / 1000 if shape else 0.0
    if not request.get("stream"):
        payload = PROTOCOLS[protocol][1]
        writer.write(response_head("200 OK", "application/json", len(payload)) + payload)
    elif pace:
        await _paced(writer, protocol, events, pace)
    else:
        writer.write(response_head("200 OK", "text/event-stream") + unpaced_body(protocol, events))


def connection(answer):
    """An asyncio connection handler: each request of a keep-alive connection read (its head, its
    body) and answered by `await answer(writer, path, body)`; a `connection: close` request (a
    /healthz probe's, as a load balancer asks) ends the connection after its answer."""

    async def serve(reader, writer):
        try:
            while True:
                head = await reader.readuntil(_CRLF2)
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length, close = 0, False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value)
                    elif name == "connection":
                        close = value.strip().lower() == "close"
                body = await reader.readexactly(length) if length else b"{}"
                await answer(writer, path, body)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return serve


async def listen(port, answer, name):
    """Serve `answer` (see connection) on 127.0.0.1:`port` until killed."""
    server = await asyncio.start_server(connection(answer), "127.0.0.1", port, backlog=4096)
    print(f"{name} on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(listen(int(sys.argv[1]), _answer, "bench upstream"))
