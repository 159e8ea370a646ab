"""A fast fake upstream that speaks both protocols, for the benchmark.

One asyncio process on one core: keep-alive HTTP/1.1, no framework, so it
is never the bottleneck (the benchmark measures it directly too). The
request path picks the protocol (`.../chat/completions` answers as OpenAI,
`.../v1/messages` as Anthropic) and `"stream": true` picks a stream.

The shape of the answer travels in the model name, the one field both
translation directions carry through unchanged: `bench-n50-p20` streams 50
text events, 20 ms apart. Every text event carries its emission time as
`@<CLOCK_MONOTONIC seconds>@`, so a client on the same machine can compute
the delay from upstream emission to its own receipt whatever proxy and
translation sit in between.

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


class OpenAIStream:
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


class AnthropicStream:
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


PROTOCOLS = {
    "openai": (OpenAIStream(), json.dumps(OPENAI_BODY).encode()),
    "anthropic": (AnthropicStream(), json.dumps(ANTHROPIC_BODY).encode()),
}


def chunked(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def text_event(stream, stamp=True):
    """One text event; with `stamp` its text is the emission time."""
    before, after = stream.text
    text = f"@{time.monotonic():.6f}@ " if stamp else " token"
    return (before + text + after).encode()


_unpaced_cache = {}


def unpaced_body(protocol, events):
    """A whole unpaced stream as one chunked body, built once per shape: the upstream stays cheap."""
    key = (protocol, events)
    if key not in _unpaced_cache:
        stream = PROTOCOLS[protocol][0]
        parts = [stream.head.encode()] + [text_event(stream, stamp=False)] * events + [stream.tail.encode()]
        _unpaced_cache[key] = b"".join(chunked(p) for p in parts) + b"0\r\n\r\n"
    return _unpaced_cache[key]


def response_head(status, content_type, length=None):
    lines = [f"HTTP/1.1 {status}", f"content-type: {content_type}"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _paced(writer, protocol, events, pace):
    """Event k goes out at k × `pace` after the head, from a timer callback: a task step, a
    sleep and a drain per event cost this process more CPU than the bridge spends relaying it,
    and a late event no longer delays the rest (thousands of streams, one core)."""
    stream = PROTOCOLS[protocol][0]
    writer.write(response_head("200 OK", "text/event-stream") + chunked(stream.head.encode()))
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    start = loop.time()

    def emit(sent):
        if writer.is_closing():  # the bridge closed the stream: its client left
            done.set_result(None)
            return
        writer.write(chunked(text_event(stream)))
        if sent + 1 < events:
            loop.call_at(start + (sent + 2) * pace, emit, sent + 1)
        else:
            done.set_result(None)

    if events:
        loop.call_at(start + pace, emit, 0)
        await done
    writer.write(chunked(stream.tail.encode()) + b"0\r\n\r\n")


async def _answer(writer, path, body):
    protocol = "openai" if path.split("?")[0].endswith("/chat/completions") else "anthropic"
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


async def _serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(_CRLF2)
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b"{}"
            await _answer(writer, path, body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port):
    server = await asyncio.start_server(_serve, "127.0.0.1", port, backlog=4096)
    print(f"bench upstream on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
