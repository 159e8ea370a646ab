"""What the test modules share, so that none of them imports another.

Recorded fixtures are named by their path under tests/fixtures ("anthropic/text.json"),
as `fake_upstream.fixture` names them.
"""
import json

from anthropic.lib.streaming._beta_messages import accumulate_event
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from bridge import sse
from bridge.chat_to_messages.request import Context as ChatToMessagesContext
from bridge.messages_to_chat.request import Context as MessagesToChatContext
from bridge.streaming import DONE
from tests.fake_upstream import FIXTURES

# -- recorded fixtures ----------------------------------------------------------------------------

# The recorded streams whose answer completes; the others end in an `event: error`, or carry
# several answers (multi_choice.sse), which the bridge refuses.
ANTHROPIC_STREAMS = sorted(f"anthropic/{path.name}" for path in (FIXTURES / "anthropic").glob("*.sse")
                           if path.name != "error_midstream_overloaded.sse")
OPENAI_STREAMS = sorted(f"openai/{path.name}" for path in (FIXTURES / "openai").glob("*.sse")
                        if path.name not in ("groq_midstream_error.sse", "multi_choice.sse"))


def recorded(name):
    """A recorded JSON body."""
    return json.loads((FIXTURES / name).read_text())


def recorded_events(name):
    """A recorded stream as (event name, payload) pairs, decoded by bridge.sse as the relay decodes
    it; the payload is the parsed JSON, or DONE for OpenAI's `[DONE]`."""
    decoder = sse.Decoder()
    decoded = decoder.feed((FIXTURES / name).read_bytes()) + decoder.close()
    return [(event.event, DONE if event.data.strip() == DONE else json.loads(event.data)) for event in decoded]


# -- translator contexts ----------------------------------------------------------------------------

def chat_to_messages_context(**overrides):
    """What the chat_to_messages translators know of a plain request for gpt-4o."""
    return ChatToMessagesContext(**{"stream": False, "model": "gpt-4o", "created": 1700000000, **overrides})


def messages_to_chat_context(**overrides):
    """What the messages_to_chat translators know of a plain request, with an input estimate of 42."""
    return MessagesToChatContext(**{"model": "claude-sonnet-4-5", "stream": False, "dropped": [],
                                    "tool_names": {}, "stop_sequences": (), "input_tokens": 42, **overrides})


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
    chunks = [{**payload, "choices": [{"delta": {}, **choice} for choice in payload.get("choices") or []]}
              for _, payload in recorded_events(name) if payload != DONE]
    return openai_fold(chunks)


def without_nulls(value):
    """`value` without its null fields, which read as absent ones do."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value
