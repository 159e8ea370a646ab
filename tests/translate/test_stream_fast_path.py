"""A translator's fast path (the usual text event written from a template, not parsed) writes
the bytes its full path writes and leaves the same state, on every recorded stream and on
generated text deltas with awkward strings."""

import json
import pathlib
import random

import pytest

from bridge.protocols import json_codec, sse
from bridge.protocols.errors import BridgeError
from bridge.serve import streaming
from bridge.translate import translator
from bridge.translate.messages_to_chat.stream import StreamTranslator as MessagesToChat
from tests.fake_upstream import FIXTURES
from tests.helpers.contexts import messages_to_chat_context

SHARED = pathlib.Path(__file__).parents[2] / ".." / "shared" / "fixtures"
CHAT_STREAMS = sorted(
    path
    for folder in (FIXTURES / "openai", SHARED / "openai")
    for path in folder.glob("*.sse")
    if not path.name.startswith("responses_")
)
AWKWARD = [
    "plain",
    'a "quoted" word',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "é, 漢字, 😀",
    "\u2028\u2029\x7f",
    "",
    "</script>",
    "x" * 100_000,
    " ",
    "\\u0041",
]


def relayed(translator, events, frame, fast):
    """The client's bytes for `events` as the relay writes them (streaming.relay's loop), with or
    without the fast path, the estimate after, and how many events took the fast path."""
    out, taken = [], 0
    try:
        for event in events:
            if fast:
                written = translator.fast(event)
                if written is not None:
                    out.append(written)
                    taken += 1
                    continue
            out += map(frame, translator.feed(event.event, streaming._payload(event)))
        out += map(frame, translator.finish())
    except BridgeError as error:
        out.append(str(error).encode())
    return b"".join(out), translator.estimate(), taken


def same_both_ways(new, events, frame):
    fast = relayed(new(), events, frame, fast=True)
    assert fast[:2] == relayed(new(), events, frame, fast=False)[:2]
    return fast[2]


def chat_chunk(text, ensure_ascii=False, openai=False, **extra):
    """A Chat chunk of `text`; `openai`: as OpenAI writes them with usage asked for, a null usage
    and a random `obfuscation` padding on every chunk."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        **({"usage": None, "obfuscation": "x" * random.randrange(1, 20)} if openai else {}),
        **extra,
    }
    return b"data: %s\n\n" % json.dumps(body, separators=(",", ":"), ensure_ascii=ensure_ascii).encode()


def chat_stream(texts, ensure_ascii=False, openai=False):
    end = {"index": 0, "delta": {}, "finish_reason": "stop"}
    return b"".join(
        [
            chat_chunk("start", openai=openai),
            *(chat_chunk(text, ensure_ascii, openai) for text in texts),
            b'data: {"id":"chatcmpl-1","choices":[%s]}\n\n' % json.dumps(end).encode(),
            b"data: [DONE]\n\n",
        ]
    )


def events_of(data):
    decoder = sse.Decoder()
    return decoder.feed(data) + decoder.close()


def messages_to_chat():
    return MessagesToChat(messages_to_chat_context(stream=True))


@pytest.mark.parametrize("path", CHAT_STREAMS, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
def test_messages_to_chat_recorded_streams(path):
    same_both_ways(messages_to_chat, events_of(path.read_bytes()), streaming.ANTHROPIC_SSE.frame)


@pytest.mark.parametrize("openai", [False, True], ids=["compact", "openai"])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_messages_to_chat_awkward_texts(ensure_ascii, openai):
    taken = same_both_ways(
        messages_to_chat, events_of(chat_stream(AWKWARD * 2, ensure_ascii, openai)), streaming.ANTHROPIC_SSE.frame
    )
    assert taken >= 6  # the plain ones after the first: the fast path is the one tested


def test_messages_to_chat_recorded_openai_text_takes_the_fast_path():
    """OpenAI's chunks (a null usage, padding that changes in each) are read the fast way."""
    path = SHARED / "openai" / "moderation_extra_chunk.sse"
    assert same_both_ways(messages_to_chat, events_of(path.read_bytes()), streaming.ANTHROPIC_SSE.frame) == 1


def test_a_stream_that_does_not_repeat_stops_learning(monkeypatch):
    """Text chunks that differ in more than their text (a member that changes in each) are never
    written the fast way, and the stream stops learning after a few: the full path's cost."""
    learned = []
    learn = json_codec.Shape.learn
    monkeypatch.setattr(json_codec.Shape, "learn", lambda *args: learned.append(learn(*args)) or learned[-1])
    stream = b"".join(chat_chunk("text", created=n) for n in range(100)) + chat_stream([])
    assert same_both_ways(messages_to_chat, events_of(stream), streaming.ANTHROPIC_SSE.frame) == 0
    assert 0 < len(learned) <= translator.LEARNS  # the fast run learns; the full run never does


def test_messages_to_chat_other_chunks_between_texts():
    """A usage, a role, a tool call, another key or order between plain texts: each read in full."""
    stream = b"".join(
        [
            chat_chunk("start"),
            chat_chunk("one"),
            chat_chunk("two", usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}),
            chat_chunk("three", service_tier="default"),
            b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
            b'[{"index":0,"delta":{"role":"assistant","content":"four"},"finish_reason":null}]}\n\n',
            b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
            b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},'
            b'"finish_reason":null}]}\n\n',
            chat_chunk("five"),
            chat_chunk("six"),
            b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
            b'[{"index":0,"delta":{"content":"seven"},"finish_reason":"stop"}]}\n\n',
            chat_chunk("after the end"),
            b"data: [DONE]\n\n",
        ]
    )
    assert same_both_ways(messages_to_chat, events_of(stream), streaming.ANTHROPIC_SSE.frame) >= 1
