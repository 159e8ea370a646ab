"""A translator's fast path (the usual text event written from a template, not parsed) writes
the bytes its full path writes and leaves the same state, on every recorded stream and on
generated text deltas with awkward strings."""

import json
import random

import pytest

from bridge.gateway.passthrough import AnthropicRelay, ResponsesRelay
from bridge.gateway.passthrough import Context as PassThroughContext
from bridge.protocols import json_codec, sse
from bridge.protocols.errors import BridgeError
from bridge.serve import streaming
from bridge.translate import translator
from bridge.translate.chat_to_messages.stream import StreamTranslator as ChatToMessages
from bridge.translate.chat_to_responses.stream import StreamTranslator as ChatToResponses
from bridge.translate.messages_to_chat.stream import StreamTranslator as MessagesToChat
from bridge.translate.messages_to_responses.stream import StreamTranslator as MessagesToResponses
from bridge.translate.responses_to_chat.stream import StreamTranslator as ResponsesToChat
from bridge.translate.responses_to_messages.stream import StreamTranslator as ResponsesToMessages
from tests.fake_upstream import FIXTURES
from tests.helpers.contexts import (
    chat_to_messages_context,
    chat_to_responses_context,
    messages_to_chat_context,
    messages_to_responses_context,
    responses_to_chat_context,
    responses_to_messages_context,
)

CHAT_STREAMS = sorted(path for path in (FIXTURES / "openai").glob("*.sse") if not path.name.startswith("responses_"))
RESPONSES_STREAMS = sorted(
    [*(FIXTURES / "openai").glob("responses_*.sse"), *FIXTURES.glob("clients/codex-*/sse_examples/*.sse")]
)
ANTHROPIC_STREAMS = sorted((FIXTURES / "anthropic").glob("*.sse"))
PADDING = random.Random(0)  # lengths of the padding servers add to their events (varied, repeatable)
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
    fast = translator.fast if fast and translator.fast_text is not None else None
    try:
        for event in events:
            if fast is not None:
                written = fast(event)
                if written is not None:
                    out.append(written)
                    taken += 1
                    continue
            out += map(frame, translator.feed(event.event, streaming._payload(event)))
        out += map(frame, translator.finish())
    except BridgeError as error:
        out.append(str(error).encode())
    state = repr({name: value for name, value in vars(translator).items() if not name.startswith("_")})
    return b"".join(out), translator.estimate(), state, taken


def same_both_ways(new, events, frame):
    """The fast path's bytes, estimate and state are the full path's; how many events it took."""
    fast = relayed(new(), events, frame, fast=True)
    assert fast[:3] == relayed(new(), events, frame, fast=False)[:3]
    return fast[3]


def chat_chunk(text, ensure_ascii=False, openai=False, **extra):
    """A Chat chunk of `text`; `openai`: as OpenAI writes them with usage asked for, a null usage
    and a random `obfuscation` padding on every chunk."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        **({"usage": None, "obfuscation": "x" * PADDING.randrange(1, 20)} if openai else {}),
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


def responses_to_chat():
    return ResponsesToChat(responses_to_chat_context(stream=True))


FROM_CHAT = [
    pytest.param(messages_to_chat, streaming.ANTHROPIC_SSE.frame, id="messages_to_chat"),
    pytest.param(responses_to_chat, streaming.RESPONSES_SSE.frame, id="responses_to_chat"),
]


@pytest.mark.parametrize(("new", "frame"), FROM_CHAT)
@pytest.mark.parametrize("path", CHAT_STREAMS, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
def test_chat_upstream_recorded_streams(new, frame, path):
    same_both_ways(new, events_of(path.read_bytes()), frame)


@pytest.mark.parametrize("openai", [False, True], ids=["compact", "openai"])
@pytest.mark.parametrize("ensure_ascii", [False, True])
@pytest.mark.parametrize(("new", "frame"), FROM_CHAT)
def test_chat_upstream_awkward_texts(new, frame, ensure_ascii, openai):
    taken = same_both_ways(new, events_of(chat_stream(AWKWARD * 2, ensure_ascii, openai)), frame)
    assert taken >= 6  # the plain ones after the first: the fast path is the one tested


@pytest.mark.parametrize(("new", "frame"), FROM_CHAT)
def test_chat_upstream_recorded_openai_text_takes_the_fast_path(new, frame):
    """OpenAI's chunks (a null usage, padding that changes in each) are read the fast way."""
    path = FIXTURES / "openai" / "moderation_extra_chunk.sse"
    assert same_both_ways(new, events_of(path.read_bytes()), frame) == 1


@pytest.mark.parametrize(
    ("extra", "learns"),
    [
        (lambda n: {"created": n}, translator.LEARNS + 1),  # the first shape, then every one misses
        (lambda n: {"x": {"content": "y"}}, translator.LEARNS),  # a second "content": no shape
    ],
    ids=["a member that changes", "no shape"],
)
def test_a_stream_that_does_not_repeat_stops_learning(monkeypatch, extra, learns):
    """Text chunks that differ in more than their text, or of no shape, are never written the fast
    way, and the stream stops learning after a few: the full path's cost."""
    learned = []
    learn = json_codec.Shape.learn
    monkeypatch.setattr(
        json_codec.Shape, "learn", lambda *args, **form: learned.append(learn(*args, **form)) or learned[-1]
    )
    stream = chat_chunk("start") + b"".join(chat_chunk("text", **extra(n)) for n in range(100)) + chat_stream([])
    assert same_both_ways(messages_to_chat, events_of(stream), streaming.ANTHROPIC_SSE.frame) == 0
    assert len(learned) == learns  # and none in the full run


@pytest.mark.parametrize(("new", "frame"), FROM_CHAT)
def test_chat_upstream_other_chunks_between_texts(new, frame):
    """A usage, a role, a refusal, a tool call, another key or order between plain texts: each read
    in full."""
    refusal = {"index": 0, "delta": {"refusal": "no"}, "finish_reason": None}
    stream = b"".join(
        [
            chat_chunk("start"),
            chat_chunk("one"),
            chat_chunk("one and a half"),
            b'data: {"id":"chatcmpl-1","choices":[%s]}\n\n' % json.dumps(refusal).encode(),
            chat_chunk("after the refusal"),
            chat_chunk("after the refusal again"),
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
    assert same_both_ways(new, events_of(stream), frame) >= 1


def anthropic_event(payload, padding=0, ensure_ascii=False):
    """An Anthropic event; `padding`: spaces before its closing brace, as Anthropic pads them."""
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=ensure_ascii)
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), (data[:-1] + " " * padding + "}").encode())


def text_delta(text, index=0, padding=0, ensure_ascii=False):
    delta = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}
    return anthropic_event(delta, padding, ensure_ascii)


def anthropic_stream(texts, padding=False, ensure_ascii=False):
    """A message of a text block of `texts`, a tool call, and a text block of `texts` again."""

    def block(index, texts):
        start = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        return [
            anthropic_event(start),
            *(text_delta(text, index, PADDING.randrange(20) if padding else 0, ensure_ascii) for text in texts),
            anthropic_event({"type": "content_block_stop", "index": index}),
        ]

    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    arguments = {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": {}}
    return b"".join(
        [
            anthropic_event({"type": "message_start", "message": message}),
            *block(0, texts),
            anthropic_event({"type": "content_block_start", "index": 1, "content_block": tool}),
            anthropic_event(arguments),
            anthropic_event({"type": "content_block_stop", "index": 1}),
            *block(2, texts),
            anthropic_event(
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}
            ),
            anthropic_event({"type": "message_stop"}),
        ]
    )


def chat_to_messages():
    return ChatToMessages(chat_to_messages_context(stream=True, include_usage=True))


def responses_to_messages():
    return ResponsesToMessages(responses_to_messages_context(stream=True))


def messages_passthrough():
    return AnthropicRelay(PassThroughContext("m", True))


FROM_ANTHROPIC = [
    pytest.param(chat_to_messages, streaming.CHAT_SSE.frame, id="chat_to_messages"),
    pytest.param(responses_to_messages, streaming.RESPONSES_SSE.frame, id="responses_to_messages"),
    pytest.param(messages_passthrough, streaming.ANTHROPIC_SSE.frame, id="messages_passthrough"),
]


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
@pytest.mark.parametrize("path", ANTHROPIC_STREAMS, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
def test_anthropic_upstream_recorded_streams(new, frame, path):
    same_both_ways(new, events_of(path.read_bytes()), frame)


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_recorded_padded_text_takes_the_fast_path(new, frame):
    """Anthropic's events (padded with a different number of spaces each) are read the fast way."""
    path = FIXTURES / "anthropic" / "cache_read.sse"
    assert same_both_ways(new, events_of(path.read_bytes()), frame) >= 3


@pytest.mark.parametrize("padding", [False, True], ids=["compact", "padded"])
@pytest.mark.parametrize("ensure_ascii", [False, True])
@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_awkward_texts(new, frame, ensure_ascii, padding):
    stream = anthropic_stream(AWKWARD * 2, padding, ensure_ascii)
    assert same_both_ways(new, events_of(stream), frame) >= 12  # in both blocks


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_other_events_between_texts(new, frame):
    """Another key order, a block reopened as thinking under the learned index, text after
    message_stop (its block never stopped), text after its block: each read in full."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": {}}

    def start(index, kind):
        block = {"type": kind, kind: ""}
        return anthropic_event({"type": "content_block_start", "index": index, "content_block": block})

    stream = b"".join(
        [
            anthropic_event({"type": "message_start", "message": message}),
            start(0, "text"),
            text_delta("one"),
            text_delta("two"),
            b"event: content_block_delta\n"
            b'data: {"index":0,"type":"content_block_delta","delta":{"text":"x","type":"text_delta"}}\n\n',
            text_delta("three"),
            anthropic_event({"type": "content_block_stop", "index": 0}),
            start(0, "thinking"),
            text_delta("in a thinking block"),
            anthropic_event({"type": "content_block_stop", "index": 0}),
            start(1, "text"),
            text_delta("five", index=1),
            text_delta("six", index=1),
            anthropic_event({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {}}),
            anthropic_event({"type": "message_stop"}),
            text_delta("after the end", index=1),
        ]
    )
    assert same_both_ways(new, events_of(stream), frame) >= 2
    stopped = stream.replace(
        b"event: message_delta",
        anthropic_event({"type": "content_block_stop", "index": 1})
        + text_delta("after its block", index=1)
        + b"event: message_delta",
    )
    assert same_both_ways(new, events_of(stopped), frame) >= 1


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_many_text_blocks_each_take_the_fast_path(new, frame):
    """Each block's first shape is free: an answer of many text blocks (citations) is read the fast
    way in every one."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": {}}
    blocks = 3 * translator.LEARNS
    stream = [anthropic_event({"type": "message_start", "message": message})]
    for index in range(blocks):
        start = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        stream += [anthropic_event(start), *(text_delta(text, index) for text in ("a", "b", "c"))]
        stream.append(anthropic_event({"type": "content_block_stop", "index": index}))
    stream.append(anthropic_event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}))
    stream.append(anthropic_event({"type": "message_stop"}))
    assert same_both_ways(new, events_of(b"".join(stream)), frame) == 2 * blocks


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_bedrock_events_take_the_fast_path(new, frame):
    """Bedrock's events carry their JSON as UTF-8 bytes, read as text by the fast path."""
    stream = anthropic_stream(["a", "é", "c", *AWKWARD], padding=True)
    events = [sse.Event(event.event, event.data.encode()) for event in events_of(stream)]
    assert same_both_ways(new, events, frame) >= 12  # in both blocks


@pytest.mark.parametrize(("new", "frame"), FROM_ANTHROPIC)
def test_anthropic_upstream_bedrock_event_not_utf8_goes_the_full_way(new, frame):
    """Bytes that are not UTF-8, after the shape was learned, are the full path's to refuse."""
    events = [sse.Event(event.event, event.data.encode()) for event in events_of(anthropic_stream(["a", "b", "c"]))]
    broken = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\xff"}}'
    events.insert(4, sse.Event(None, broken))  # after "a" taught the shape and "b" took it
    assert same_both_ways(new, events, frame) == 1


def responses_event(kind, ensure_ascii=False, **fields):
    data = json.dumps({"type": kind, **fields}, separators=(",", ":"), ensure_ascii=ensure_ascii)
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), data.encode())


def responses_stream(texts, openai=False, ensure_ascii=False):
    """A response of a message of `texts`, a function call, and a message of `texts` again; its
    events numbered; `openai`: with a new obfuscation padding on each delta, as OpenAI writes them."""
    numbers = iter(range(10_000))

    def event(kind, **fields):
        return responses_event(kind, ensure_ascii, sequence_number=next(numbers), **fields)

    def message(index, texts):
        item = {"id": f"msg_{index}", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        padding = {"obfuscation": "p" * PADDING.randrange(1, 16)} if openai else {}
        done = {**item, "status": "completed", "content": [{**part, "text": "".join(texts)}]}
        return [
            event("response.output_item.added", output_index=index, item=item),
            event("response.content_part.added", **where, part=part),
            *(event("response.output_text.delta", **where, delta=text, logprobs=[], **padding) for text in texts),
            event("response.output_text.done", **where, text="".join(texts)),
            event("response.content_part.done", **where, part={**part, "text": "".join(texts)}),
            event("response.output_item.done", output_index=index, item=done),
        ]

    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "c",
        "name": "f",
        "arguments": "{}",
    }
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m", "output": []}
    usage = {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}
    return b"".join(
        [
            event("response.created", response=response),
            event("response.in_progress", response=response),
            *message(0, texts),
            event("response.output_item.added", output_index=1, item={**call, "arguments": ""}),
            event("response.function_call_arguments.delta", item_id="fc_1", output_index=1, delta="{}"),
            event("response.output_item.done", output_index=1, item=call),
            *message(2, texts),
            event("response.completed", response={**response, "status": "completed", "usage": usage}),
        ]
    )


def messages_to_responses():
    return MessagesToResponses(messages_to_responses_context(stream=True))


def chat_to_responses():
    return ChatToResponses(chat_to_responses_context(stream=True, include_usage=True))


def responses_passthrough():
    return ResponsesRelay(PassThroughContext("m", True))


FROM_RESPONSES = [
    pytest.param(messages_to_responses, streaming.ANTHROPIC_SSE.frame, id="messages_to_responses"),
    pytest.param(chat_to_responses, streaming.CHAT_SSE.frame, id="chat_to_responses"),
    pytest.param(responses_passthrough, streaming.RESPONSES_SSE.frame, id="responses_passthrough"),
]


@pytest.mark.parametrize(("new", "frame"), FROM_RESPONSES)
@pytest.mark.parametrize("path", RESPONSES_STREAMS, ids=lambda path: path.name)
def test_responses_upstream_recorded_streams(new, frame, path):
    same_both_ways(new, events_of(path.read_bytes()), frame)


@pytest.mark.parametrize(("new", "frame"), FROM_RESPONSES)
def test_responses_upstream_recorded_text_takes_the_fast_path(new, frame):
    """OpenAI's text deltas (numbered, padded with a new obfuscation each) are read the fast way."""
    assert same_both_ways(new, events_of((FIXTURES / "openai" / "responses_reasoning.sse").read_bytes()), frame) >= 9


@pytest.mark.parametrize(("new", "frame"), FROM_RESPONSES)
@pytest.mark.parametrize("openai", [False, True], ids=["compact", "openai"])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_responses_upstream_awkward_texts(new, frame, ensure_ascii, openai):
    stream = responses_stream(AWKWARD * 2, openai, ensure_ascii)
    assert same_both_ways(new, events_of(stream), frame) >= 12  # in both messages


@pytest.mark.parametrize(("new", "frame"), FROM_RESPONSES)
def test_responses_upstream_other_events_between_texts(new, frame):
    """Another key order, a delta for another part or a refusal, deltas after the part's or the
    item's end, after the last event: each read in full."""
    where = {"item_id": "msg_0", "output_index": 0}
    stream = responses_stream(["one", "two", "three"]).replace(
        b"event: response.output_text.done",
        b"".join(
            [
                b"event: response.output_text.delta\n"
                b'data: {"sequence_number":90,"type":"response.output_text.delta","item_id":"msg_0",'
                b'"output_index":0,"content_index":0,"delta":"x","logprobs":[]}\n\n',
                responses_event(
                    "response.output_text.delta", sequence_number=91, **where, content_index=0, delta="y", logprobs=[]
                ),
                responses_event("response.refusal.delta", sequence_number=92, **where, content_index=0, delta="no"),
                responses_event(
                    "response.output_text.delta", sequence_number=93, **where, content_index=0, delta="z", logprobs=[]
                ),
                b"event: response.output_text.done",
            ]
        ),
        1,
    )
    after_part = responses_event(
        "response.output_text.delta", sequence_number=94, **where, content_index=0, delta="after its part", logprobs=[]
    )
    stream = stream.replace(b"event: response.output_item.done", after_part + b"event: response.output_item.done", 1)
    stream += responses_event(
        "response.output_text.delta",
        sequence_number=99,
        item_id="msg_2",
        output_index=2,
        content_index=0,
        delta="after the end",
        logprobs=[],
    )
    assert same_both_ways(new, events_of(stream), frame) >= 4
    item_done = stream.index(b"\n\n", stream.index(b"event: response.output_item.done")) + 2
    after_item = after_part.replace(b"after its part", b"after its item")
    assert same_both_ways(new, events_of(stream[:item_done] + after_item + stream[item_done:]), frame) >= 2


OPENAI_CHUNK = '{"id":"c","choices":[{"delta":{"content":"%s"}}],"usage":null,"obfuscation":"%s"}'


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (OPENAI_CHUNK % ("other text", "padding"), "other text"),
        (OPENAI_CHUNK % ("", ""), ""),
        (OPENAI_CHUNK % ("a\\u0022", "p"), None),  # an escape
        (OPENAI_CHUNK % ("a", "p\\"), None),
        (OPENAI_CHUNK % ("a", "p\x01"), None),  # a control character
        (OPENAI_CHUNK % ("a", 'p","x":"'), None),  # another member
        ('{"id":"c","choices":[{"delta":{"content":"}],"usage":null,"obfuscation":"p"}', None),
        ('{"id":"c","choices":[{"delta":{"content":"a"}}],"usage":null,"obfuscation":"p"}  ', None),
        ('{"id":"c","choices":[{"delta":{"content":"a"}}],"usage":{},"obfuscation":"p"}', None),
    ],
)
def test_a_shape_reads_its_document_with_other_strings_only(data, read):
    shape = json_codec.Shape.learn(OPENAI_CHUNK % ("text", "pad"), "content", "text", ("obfuscation",))
    assert shape.read(data) == read


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (OPENAI_CHUNK % ("other text", "padding"), "other text"),
        (OPENAI_CHUNK % ("é, 漢字, 😀", "pädding"), "é, 漢字, 😀"),
        (OPENAI_CHUNK % ("", ""), ""),
        (OPENAI_CHUNK % ("a\\u0022", "p"), None),
        (OPENAI_CHUNK % ("a", 'p","x":"'), None),
        ('{"id":"c","choices":[{"delta":{"content":"a"}}],"usage":{},"obfuscation":"p"}', None),
    ],
)
def test_an_encoded_shape_reads_the_utf8_of_what_its_shape_reads(data, read):
    """Bedrock's events, UTF-8 bytes, read without decoding them: what the text shape reads of
    the text, as its UTF-8."""
    shape = json_codec.Shape.learn(OPENAI_CHUNK % ("text", "pad"), "content", "text", ("obfuscation",))
    assert shape.read(data) == read
    assert shape.encoded().read(data.encode()) == (None if read is None else read.encode())


def test_an_encoded_shape_takes_no_other_bytes():
    """An integer that is not one, padding that is not JSON whitespace, a hole not read that is
    not UTF-8: none is the shape; the hole read is its reader's to decode."""
    learned = '{"type":"d","sequence_number":4,"delta":"x","o":"p"}'
    shape = json_codec.Shape.learn(learned, "delta", "x", ("sequence_number", "o"), padded=True).encoded()
    assert shape.read(learned.encode()) == b"x"
    assert shape.read(b'{"type":"d","sequence_number":17,"delta":"y","o":"q"\n }') == b"y"
    assert shape.read(b'{"type":"d","sequence_number":17,"delta":"y","o":"q"\xa0}') is None
    for number in (b"", b"01", b"-1", b"1.5", "٣".encode(), b"null"):
        assert shape.read(learned.encode().replace(b"4", number)) is None
    assert shape.read(learned.encode().replace(b'"p"', b'"\xff"')) is None
    assert shape.read(learned.encode().replace(b'"x"', b'"\xff"')) == b"\xff"


def test_a_padded_shape_takes_any_whitespace_before_the_closing_brace():
    learned = '{"type":"d","delta":{"text":"x"}}'
    shape = json_codec.Shape.learn(learned, "text", "x", padded=True)
    padded = ['{"type":"d","delta":{"text":"y"}%s}' % space for space in ("", " ", " \t\r\n" * 9)]
    assert [shape.read(data) for data in padded] == ["y", "y", "y"]
    assert shape.read('{"type":"d","delta":{"text":"y" }}') is None  # inside, not before the closing brace
    assert json_codec.Shape.learn(learned, "text", "x").read(padded[1]) is None


def test_a_shape_takes_no_document_whose_head_and_tail_overlap():
    shape = json_codec.Shape.learn('{"a":"x"}', "a", "x")
    assert (shape.read('{"a":"yz"}'), shape.read('{"a":"}')) == ("yz", None)


@pytest.mark.parametrize("number", ["0", "17", "123456789012345678901234567890"])
def test_a_shape_reads_an_integer_that_varies(number):
    learned = '{"type":"d","sequence_number":4,"delta":"x","logprobs":[]}'
    shape = json_codec.Shape.learn(learned, "delta", "x", ("sequence_number",))
    assert shape.read(learned.replace("4", number).replace('"x"', '"y z"')) == "y z"


@pytest.mark.parametrize("number", ["", "01", "-1", "1.5", "1e5", "٣", "²", "null"])
def test_a_shape_takes_no_other_number(number):
    learned = '{"type":"d","sequence_number":4,"delta":"x","logprobs":[]}'
    shape = json_codec.Shape.learn(learned, "delta", "x", ("sequence_number",))
    assert shape.read(learned.replace("4", number)) is None


@pytest.mark.parametrize(
    "data",
    [
        '{"a":"x","a":"x"}',  # the key twice
        '{"a":"x\\"","b":1}',  # not the value as read
        '{"a":"x","o":"p","o":"q"}',  # a member that varies, twice
        '{"a":"x","o":"p\\n"}',  # a member that varies, not plain
        '{"a":"x","o":1.5}',
    ],
)
def test_no_shape_is_learned_from_a_document_it_could_not_read(data):
    assert json_codec.Shape.learn(data, "a", "x", ("o",)) is None


def test_passthrough_relays_text_deltas_in_another_key_order_as_they_came():
    """The pass-through writes what the upstream sent: deltas whose keys are in another order than
    the template's are not learned, so none is rewritten in the template's order."""
    reordered = b"".join(
        b'event: content_block_delta\ndata: {"index":0,"delta":{"text":"%s","type":"text_delta"},'
        b'"type":"content_block_delta"}\n\n' % text
        for text in (b"one", b"two", b"three")
    )
    stream = anthropic_stream(["a", "b"]).replace(text_delta("a"), reordered, 1)
    assert same_both_ways(messages_passthrough, events_of(stream), streaming.ANTHROPIC_SSE.frame) == 1  # block 2's "b"
