"""Every stream translator's work is linear in its stream: 80,000 deltas cost about eight times 10,000.

Every stream of a worker is relayed by its one stream-loop thread, so a translator that copies
all it has kept on each delta (a string grown with +=) holds every other stream of the worker a
little longer on each of them, until a long answer holds them for seconds. Each front runs here
in process as the relay runs it per event: the SSE decoder fed 64 KiB reads, the translator, the
client's framing; each kind of delta its translator keeps something of, 10,000 and 80,000 times.

The bound on the ratio of their CPU times is twice linear (16 for 8): the least of up to three
runs stays under it on a shared, noisy machine, while a copy per delta of 16-character deltas
goes far beyond it.
"""

import json
import time

import pytest

from bridge.gateway.passthrough import AnthropicRelay, ChatRelay
from bridge.gateway.passthrough import Context as PassThroughContext
from bridge.protocols import sse
from bridge.serve.streaming import ANTHROPIC_SSE, CHAT_SSE, RESPONSES_SSE, _payload
from bridge.translate.chat_to_messages.stream import StreamTranslator as ChatFront
from bridge.translate.chat_to_responses.stream import StreamTranslator as ChatOnResponses
from bridge.translate.messages_to_chat.stream import StreamTranslator as MessagesFront
from bridge.translate.messages_to_responses.stream import StreamTranslator as MessagesOnResponses
from bridge.translate.responses_to_chat.stream import StreamTranslator as ResponsesFromChat
from bridge.translate.responses_to_messages.stream import StreamTranslator as ResponsesFront
from tests.helpers.contexts import (
    chat_to_messages_context,
    chat_to_responses_context,
    messages_to_chat_context,
    messages_to_responses_context,
    responses_to_chat_context,
    responses_to_messages_context,
)

pytestmark = pytest.mark.slow  # seconds of CPU: make test-fast leaves it out (setup.cfg)

FEW, MANY = 10_000, 80_000
BOUND = 2 * MANY / FEW
PIECE = "sixteen chars.. "
READ = 65536  # the relay's read size


def _event(kind, **fields):
    return sse.encode(json.dumps({"type": kind, **fields}), event=kind)


def anthropic_stream(start, delta, count, opening=(), closing=()):
    """message_start; one block `start`, its deltas (`delta` `count` times amid the others), its end; the stop."""

    def block_delta(value):
        return _event("content_block_delta", index=0, delta=value)

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {}}
    return b"".join(
        [
            _event("message_start", message=message),
            _event("content_block_start", index=0, content_block=start),
            *map(block_delta, opening),
            block_delta(delta) * count,
            *map(block_delta, closing),
            _event("content_block_stop", index=0),
            _event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": count}),
            _event("message_stop"),
        ]
    )


def chat_stream(delta, count, opening=(), closing=()):
    """A role chunk, then chunks of `delta` `count` times between the others, the finish, [DONE]."""

    def chunk(fields, finish=None):
        choice = {"index": 0, "delta": fields, "finish_reason": finish}
        return sse.encode(json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]}))

    return b"".join(
        [
            chunk({"role": "assistant", "content": ""}),
            *map(chunk, opening),
            chunk(delta) * count,
            *map(chunk, closing),
            chunk({}, "stop"),
            sse.encode("[DONE]"),
        ]
    )


def responses_stream(item, delta, count):
    """A Responses upstream's stream: response.created; one output `item` with `delta` events
    (their type) `count` times, the item done; response.completed."""
    response = {"id": "resp_1", "status": "in_progress", "output": []}
    at = {"output_index": 0, "item_id": item["id"]}
    return b"".join(
        [
            _event("response.created", response=response),
            _event("response.output_item.added", item=item, **at),
            _event(delta, delta=PIECE, content_index=0, summary_index=0, **at) * count,
            _event("response.output_item.done", item=item, **at),
            _event("response.completed", response={**response, "status": "completed"}),
        ]
    )


TEXT = ({"type": "text", "text": ""}, {"type": "text_delta", "text": PIECE})
THINKING = ({"type": "thinking", "thinking": "", "signature": ""}, {"type": "thinking_delta", "thinking": PIECE})
SIGNATURE = ({"type": "thinking", "thinking": "", "signature": ""}, {"type": "signature_delta", "signature": PIECE})


def tool(name, key="q", kind="tool_use"):
    """A tool_use (or server_tool_use) block whose input is {key: "<the pieces>"}."""
    return {
        "start": {"type": kind, "id": "toolu_1", "name": name, "input": {}},
        "delta": {"type": "input_json_delta", "partial_json": PIECE},
        "opening": [{"type": "input_json_delta", "partial_json": '{"%s": "' % key}],
        "closing": [{"type": "input_json_delta", "partial_json": '"}'}],
    }


def call(fields):
    return {"tool_calls": [{"index": 0, "function": fields}]}


# A Responses upstream's output item and the delta event it streams.
RESPONSES_TEXT = ({"type": "message", "id": "msg_1", "content": []}, "response.output_text.delta")
RESPONSES_SUMMARY = (
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
    "response.reasoning_summary_text.delta",
)
RESPONSES_ARGUMENTS = (
    {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f"},
    "response.function_call_arguments.delta",
)
NAMED = {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "lookup", "arguments": ""}}]}
PATCHING = {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "apply_patch", "arguments": '{"input": "'}}]}
CUSTOM = {"apply_patch": {"kind": "custom", "name": "apply_patch", "namespace": None}}

# front-kind: (translator, framing, the stream of `count` deltas)
STREAMS = {
    "chat-text": (lambda: ChatFront(chat_to_messages_context(stream=True)), CHAT_SSE, TEXT),
    "chat-thinking": (lambda: ChatFront(chat_to_messages_context(stream=True)), CHAT_SSE, THINKING),
    "chat-signature": (lambda: ChatFront(chat_to_messages_context(stream=True)), CHAT_SSE, SIGNATURE),
    "chat-search": (
        lambda: ChatFront(chat_to_messages_context(stream=True)),
        CHAT_SSE,
        tool("web_search", key="query", kind="server_tool_use"),
    ),
    "chat-tool": (lambda: ChatFront(chat_to_messages_context(stream=True)), CHAT_SSE, tool("lookup")),
    "chat-json": (
        lambda: ChatFront(chat_to_messages_context(stream=True, json_tool="answer")),
        CHAT_SSE,
        tool("answer"),
    ),
    "responses-text": (lambda: ResponsesFront(responses_to_messages_context(stream=True)), RESPONSES_SSE, TEXT),
    "responses-summary": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True, summary=True)),
        RESPONSES_SSE,
        THINKING,
    ),
    "responses-signature": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True)),
        RESPONSES_SSE,
        SIGNATURE,
    ),
    "responses-search": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True)),
        RESPONSES_SSE,
        tool("web_search", key="query", kind="server_tool_use"),
    ),
    "responses-tool": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True)),
        RESPONSES_SSE,
        tool("lookup"),
    ),
    "responses-json": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True, json_tool="answer")),
        RESPONSES_SSE,
        tool("answer"),
    ),
    "responses-custom": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True, tools=CUSTOM)),
        RESPONSES_SSE,
        tool("apply_patch", key="input"),
    ),
    "responses-custom-other-shape": (
        lambda: ResponsesFront(responses_to_messages_context(stream=True, tools=CUSTOM)),
        RESPONSES_SSE,
        tool("apply_patch", key="patch"),
    ),
    "messages-text": (lambda: MessagesFront(messages_to_chat_context(stream=True)), ANTHROPIC_SSE, {"content": PIECE}),
    "messages-reasoning": (
        lambda: MessagesFront(messages_to_chat_context(stream=True)),
        ANTHROPIC_SSE,
        {"reasoning_content": PIECE},
    ),
    "messages-tool": (
        lambda: MessagesFront(messages_to_chat_context(stream=True)),
        ANTHROPIC_SSE,
        {"delta": call({"arguments": PIECE}), "opening": [NAMED]},
    ),
    "messages-tool-named-last": (
        lambda: MessagesFront(messages_to_chat_context(stream=True)),
        ANTHROPIC_SSE,
        {"delta": call({"arguments": PIECE}), "closing": [call({"name": "lookup"})]},
    ),
    "responses-chat-text": (
        lambda: ResponsesFromChat(responses_to_chat_context(stream=True)),
        RESPONSES_SSE,
        {"content": PIECE},
    ),
    "responses-chat-refusal": (
        lambda: ResponsesFromChat(responses_to_chat_context(stream=True)),
        RESPONSES_SSE,
        {"refusal": PIECE},
    ),
    "responses-chat-summary": (
        lambda: ResponsesFromChat(responses_to_chat_context(stream=True, summary=True)),
        RESPONSES_SSE,
        {"reasoning_content": PIECE},
    ),
    "responses-chat-tool": (
        lambda: ResponsesFromChat(responses_to_chat_context(stream=True)),
        RESPONSES_SSE,
        {"delta": call({"arguments": PIECE}), "opening": [NAMED]},
    ),
    "responses-chat-custom": (
        lambda: ResponsesFromChat(responses_to_chat_context(stream=True, tools=CUSTOM)),
        RESPONSES_SSE,
        {"delta": call({"arguments": PIECE}), "opening": [PATCHING], "closing": [call({"arguments": '"}'})]},
    ),
    "messages-on-responses-text": (
        lambda: MessagesOnResponses(messages_to_responses_context(stream=True)),
        ANTHROPIC_SSE,
        RESPONSES_TEXT,
    ),
    "messages-on-responses-summary": (
        lambda: MessagesOnResponses(messages_to_responses_context(stream=True)),
        ANTHROPIC_SSE,
        RESPONSES_SUMMARY,
    ),
    "messages-on-responses-arguments": (
        lambda: MessagesOnResponses(messages_to_responses_context(stream=True)),
        ANTHROPIC_SSE,
        RESPONSES_ARGUMENTS,
    ),
    "chat-on-responses-text": (
        lambda: ChatOnResponses(chat_to_responses_context(stream=True)),
        CHAT_SSE,
        RESPONSES_TEXT,
    ),
    "chat-on-responses-summary": (
        lambda: ChatOnResponses(chat_to_responses_context(stream=True)),
        CHAT_SSE,
        RESPONSES_SUMMARY,
    ),
    "chat-on-responses-arguments": (
        lambda: ChatOnResponses(chat_to_responses_context(stream=True)),
        CHAT_SSE,
        RESPONSES_ARGUMENTS,
    ),
    "passthrough-messages": (lambda: AnthropicRelay(PassThroughContext("m", True)), ANTHROPIC_SSE, TEXT),
    "passthrough-chat": (lambda: ChatRelay(PassThroughContext("m", True)), CHAT_SSE, {"content": PIECE}),
}


def upstream_body(shape, count):
    """The upstream stream of `count` deltas of a STREAMS shape: a Messages block, Chat deltas, or
    a Responses item and its delta event."""
    if isinstance(shape, tuple) and isinstance(shape[1], str):
        return responses_stream(*shape, count)
    if isinstance(shape, tuple):
        return anthropic_stream(*shape, count)
    if "start" in shape:
        return anthropic_stream(count=count, **shape)
    if "delta" in shape:
        return chat_stream(count=count, **shape)
    return chat_stream(shape, count)


def relayed(translator, framing, body):
    """What the relay does per read of an upstream body: decode, translate, frame."""
    decoder = sse.Decoder()
    for at in range(0, len(body), READ):
        for event in decoder.feed(body[at : at + READ]):
            for item in translator.feed(event.event, _payload(event)):
                framing.frame(item)
    for item in translator.finish():
        framing.frame(item)


def cpu_seconds(make, framing, body):
    started = time.process_time()
    relayed(make(), framing, body)
    return time.process_time() - started


@pytest.mark.parametrize("name", STREAMS)
def test_a_translators_work_grows_linearly_with_its_deltas(name):
    make, framing, shape = STREAMS[name]
    few, many = upstream_body(shape, FEW), upstream_body(shape, MANY)
    translator = make()
    relayed(translator, framing, few)
    assert translator.done  # read to its end, each delta translated: the stream is one its translator takes
    ratios = []
    for _ in range(3):  # the least of up to three: a busy neighbour slows one run, not all of them
        ratios.append(cpu_seconds(make, framing, many) / cpu_seconds(make, framing, few))
        if min(ratios) < BOUND:
            break
    assert min(ratios) < BOUND, f"{MANY} deltas cost {min(ratios):.1f} times {FEW}: more than linear"
