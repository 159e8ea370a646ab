"""OpenAI Responses stream events -> Chat Completions chunks (a small state machine).

Each upstream event is translated as it comes: `response.created` is the role chunk;
`output_text` deltas are `delta.content`, `refusal` deltas `delta.refusal`, reasoning
summary (or raw reasoning text) deltas `delta.reasoning_content` (a blank line before each
new part, as response.py joins them); a `function_call` item is the next Chat tool index
(0, 1, ... over calls only), opened with its call_id and name, its argument deltas as they
come. A reasoning item that carries `encrypted_content` is sent whole once it is done, as
a `thinking_blocks` entry with an `index` (the openai SDK's accumulator merges list
entries by it) whose signature is the item (protocols/reasoning.py); an item whose text
came only in its `output_item.done` (no deltas) sends it then.

`response.completed` / `response.incomplete` are the finish chunk (response.finish_reason)
and, when the client asked for `stream_options.include_usage`, the usage-only chunk; the
response ends there (`done`, then the Chat framing's `data: [DONE]`). `response.failed`
and an `error` event are the client's error chunk (responses_response.failure; a context
overflow with OpenAI's `context_length_exceeded` code); a stream that ends before its last
event is an error, never a made-up stop.
"""

import dataclasses

from ...protocols import shapes
from ...protocols.errors import OPENAI, BridgeError
from .. import translator
from ..anthropic_response import openai_overflow
from ..responses_response import PART_SEPARATOR, failure, reasoning_text
from ..tokens import size_tokens, text_size
from .response import chat_usage, completion_id, finish_reason, thinking_entry, tool_call


@dataclasses.dataclass
class _Item:
    """One output item, remembered by its output_index from output_item.added to output_item.done."""

    kind: str  # the item's type: message | function_call | reasoning | any other (left out)
    tool_index: int = None  # Chat tool index, for a function_call
    sent: bool = False  # some of its output went to the client


class StreamTranslator(translator.StreamTranslator):
    """The Responses event grammar read into Chat chunks."""

    protocol = OPENAI

    def __init__(self, context):
        self.context = context
        self.head = None  # every chunk's fields before its choices, fixed at response.created
        self.items = {}
        self.tool_calls = 0
        self.thinking_entries = 0
        self.reasoning_at = None  # (output_index, part field, part index) of the reasoning text last sent

    def feed(self, event_name, payload):
        if self.done or not isinstance(payload, dict):
            return []
        kind = payload.get("type") or event_name
        if kind == "error":  # its error object inside (as recorded), or the event itself (as documented)
            raise openai_overflow(failure(payload["error"] if isinstance(payload.get("error"), dict) else payload))
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # keep-alives, annotations, event types newer than this code
        if self.head is None and kind != "response.created":
            raise _broken(f"upstream sent {kind!r} before response.created")
        return handler(self, payload)

    def finish(self):
        if not self.done:
            raise _broken("the upstream stream ended before response.completed")
        return []

    def estimate(self):
        return self.context.input_tokens, size_tokens(self.relayed)

    # -- events ----------------------------------------------------------------------------

    def _created(self, payload):
        response = _field(payload, "response", dict) or {}
        self.head = {
            "id": completion_id(response.get("id") if isinstance(response.get("id"), str) else None),
            "object": "chat.completion.chunk",
            "created": self.context.created,
            "model": self.context.model,
        }
        return [self._chunk({"role": "assistant", "content": ""})]

    def _item_added(self, payload):
        index, item = _index(payload), payload.get("item")
        shapes.responses_item(item, _STREAM, "item")
        state = self.items[index] = _Item(item.get("type"))
        if state.kind != "function_call":
            return []
        state.tool_index, self.tool_calls = self.tool_calls, self.tool_calls + 1
        opened = self._chunk(
            {"tool_calls": [{"index": state.tool_index, **tool_call(item["call_id"], item["name"], "")}]}
        )
        return [opened, *self._arguments(state, item.get("arguments"))]

    def _text(self, payload):
        state, delta = self._delta(payload)
        if state.kind != "message" or not delta:
            return []
        state.sent = True
        return [self._chunk({"content": delta})]

    def _refusal(self, payload):
        state, delta = self._delta(payload)
        if state.kind != "message" or not delta:
            return []
        state.sent = True
        return [self._chunk({"refusal": delta})]

    def _function_arguments(self, payload):
        state, delta = self._delta(payload)
        return self._arguments(state, delta) if state.kind == "function_call" else []

    def _summary(self, payload):
        return self._reasoning(payload, "summary", payload.get("summary_index"))

    def _reasoning_text(self, payload):
        return self._reasoning(payload, "content", payload.get("content_index"))

    def _item_done(self, payload):
        index, item = _index(payload), payload.get("item")
        shapes.responses_item(item, _STREAM, "item")
        state = self.items.pop(index, None)
        if state is None:
            raise _broken(f"upstream ended output item {index}, which is not open")
        out = []
        if state.kind == "message" and not state.sent:
            out += self._whole_message(item)
        elif state.kind == "function_call" and not state.sent:
            out += self._arguments(state, item.get("arguments"))
        elif state.kind == "reasoning":
            if not state.sent:
                text = reasoning_text(item)
                out += self._reasoning_chunk(state, (index, "whole", 0), text) if text else []
            if item.get("encrypted_content"):
                entry = {"index": self.thinking_entries, **thinking_entry(item, reasoning_text(item))}
                self.thinking_entries += 1
                out.append(self._chunk({"thinking_blocks": [entry]}))
        return out

    def _ended(self, payload):
        response = _field(payload, "response", dict) or {}
        shapes.responses_answer(response, _STREAM)
        out = [self._chunk({}, finish_reason(response, self.tool_calls > 0))]
        if self.context.include_usage:
            out.append({**self.head, "choices": [], "usage": chat_usage(response.get("usage"))})
        self.done = True
        return out

    def _failed(self, payload):
        response = _field(payload, "response", dict) or {}
        raise openai_overflow(failure(response.get("error")))

    # -- helpers ---------------------------------------------------------------------------

    def _delta(self, payload):
        """(the open item an output delta is for, its text), the text counted as relayed output."""
        index = _index(payload)
        state = self.items.get(index)
        if state is None:
            raise _broken(f"upstream sent {payload.get('type')!r} for output item {index}, which is not open")
        delta = _field(payload, "delta", str)
        if delta:
            self.relayed += len(delta) if delta.isascii() else text_size(delta)
        return state, delta

    def _arguments(self, state, fragment):
        if not fragment:
            return []
        state.sent = True
        return [self._chunk({"tool_calls": [{"index": state.tool_index, "function": {"arguments": fragment}}]})]

    def _reasoning(self, payload, field, part):
        state, delta = self._delta(payload)
        if state.kind != "reasoning" or not delta:
            return []
        return self._reasoning_chunk(state, (_index(payload), field, part), delta)

    def _reasoning_chunk(self, state, at, text):
        """Reasoning text; a new part after earlier reasoning starts with a blank line."""
        if self.reasoning_at is not None and at != self.reasoning_at:
            text = PART_SEPARATOR + text
        self.reasoning_at = at
        state.sent = True
        return [self._chunk({"reasoning_content": text})]

    def _whole_message(self, item):
        """A message whose text came only with its end."""
        out = []
        for part in item.get("content") or []:
            if part.get("type") == "output_text" and part.get("text"):
                out.append(self._chunk({"content": part["text"]}))
            elif part.get("type") == "refusal" and part.get("refusal"):
                out.append(self._chunk({"refusal": part["refusal"]}))
        return out

    def _chunk(self, delta, finish=None):
        return {**self.head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


_HANDLERS = {
    "response.created": StreamTranslator._created,
    "response.output_item.added": StreamTranslator._item_added,
    "response.output_text.delta": StreamTranslator._text,
    "response.refusal.delta": StreamTranslator._refusal,
    "response.function_call_arguments.delta": StreamTranslator._function_arguments,
    "response.reasoning_summary_text.delta": StreamTranslator._summary,
    "response.reasoning_text.delta": StreamTranslator._reasoning_text,
    "response.output_item.done": StreamTranslator._item_done,
    "response.completed": StreamTranslator._ended,
    "response.incomplete": StreamTranslator._ended,
    "response.failed": StreamTranslator._failed,
}
_STREAM = "stream event"


def _index(payload):
    index = payload.get("output_index")
    if type(index) is not int:
        raise _broken(f"{payload.get('type')} has no integer output_index")
    return index


def _field(payload, name, kind):
    value = payload.get(name)
    if value is not None and not isinstance(value, kind):
        raise _broken(f"{payload.get('type')}: {name} must be {kind.__name__}")
    return value


def _broken(message):
    """An upstream stream that breaks the Responses event grammar: a bad gateway, not a client error."""
    return BridgeError("api_error", f"upstream sent a malformed stream: {message}", status=502)
