"""The official SDKs' stream accumulators, run over what bridge streams: the events a client
receives must fold into the answer the SDK would have built."""

import json

from anthropic.lib.streaming._beta_messages import accumulate_event
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from bridge.protocols.reasoning import reasoning_item
from bridge.translate.translator import DONE
from tests.helpers.recorded import recorded_events


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


RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


def responses_fold(out, rebuild=False):
    """The openai SDK's Responses stream state fed a translator's events: its final response, and
    the events it fires (each event parsed and validated as the SDK's ResponseStreamEvent).

    With `rebuild`, the last event's response comes without `output`, so the SDK must rebuild
    it from the output_item.done events.
    """
    state, fired = ResponseStreamState(input_tools=omit, text_format=omit), []
    for event in out:
        parsed = RESPONSES_EVENT.validate_python(event)
        if rebuild and event["type"] in ("response.completed", "response.incomplete"):
            parsed.response.output = None
        fired.extend(state.handle_event(parsed))
    final = json.loads(fired[-1].response.to_json())
    return _without_sdk_fields(final), fired


def _without_sdk_fields(value):
    """The SDK's parsed response adds `parsed` and `parsed_arguments`, which are not on the wire."""
    if isinstance(value, dict):
        return {k: _without_sdk_fields(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [_without_sdk_fields(v) for v in value]
    return value


def comparable(response):
    """An SDK's Response without what differs between two requests for the same answer: its id
    (which every item id carries) and its creation time; and without nulls, as the stream helper's
    ParsedResponse adds `parsed` fields."""
    text = json.dumps(response.model_dump(mode="json", exclude_none=True)).replace(
        response.id.removeprefix("resp_"), "ID"
    )
    return {**json.loads(text), "created_at": None}


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


def responses_chat_comparable(completion):
    """A Chat completion from a Responses upstream as far as its streamed and non-streamed forms
    must agree: nulls read as absent; `created`, the time of each request; the stream's merge
    `index` of list entries; content "" where no text came (the role chunk); and a reasoning
    item's encrypted_content, which OpenAI encrypts anew for each event that carries the item
    (the stream sends its output_item.done's, a body has the final response's)."""
    completion = {**without_nulls(completion), "created": None}
    message = completion["choices"][0]["message"]
    if message.get("content") == "":
        del message["content"]
    for entry in [*message.get("thinking_blocks", []), *message.get("tool_calls", [])]:
        entry.pop("index", None)
    for entry in message.get("thinking_blocks", []):
        entry["signature"] = {**reasoning_item(entry["signature"]), "encrypted_content": "..."}
    return completion
