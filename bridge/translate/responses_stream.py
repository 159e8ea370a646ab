"""Reading an OpenAI Responses event stream: the grammar every front with a Responses upstream shares.

OpenAI sends response.created (then response.in_progress, or response.queued first);
then the output items, each numbered by its output_index, from
response.output_item.added to response.output_item.done, which carries the whole item
(a reasoning item's final encrypted_content only there). Between them come the item's
own events: a message's content parts (content_part.added / .done) with their
output_text.delta or refusal.delta; a reasoning item's summary parts
(reasoning_summary_part.added / .done, reasoning_summary_text.delta) and raw reasoning
text (reasoning_text.delta); a function call's function_call_arguments.delta / .done,
a custom tool call's custom_tool_call_input.delta / .done. The stream ends with
response.completed, response.incomplete (max_output_tokens, content_filter) or
response.failed, each carrying the whole response with its usage.

ResponsesStream keeps that bookkeeping: the open items by output_index, each with the
kind the translators tell apart. Events dispatch through a table, each checked first for
the types of the fields read (shapes.py). Events newer than this code, hosted tools'
progress events and annotations produce nothing unless a translator answers them. An
`error` event and a response.failed raise BridgeError (responses_response.failure), an event
for an item that is not open is a 502, and a stream that ends before its last event is
an error, never a made-up end. A translator says what each piece becomes for its client
in the `on_*` hooks, each returning the outgoing events.
"""

import dataclasses

from ..protocols import shapes
from ..protocols.errors import BridgeError
from . import translator
from .responses_response import failure
from .tokens import text_size

# Responses output item type -> kind; any other item (hosted tools' calls...) is "ignored".
ITEM_KINDS = {
    "message": "message",
    "reasoning": "reasoning",
    "function_call": "function",
    "custom_tool_call": "custom",
}
# The events that end a stream, and the status each says.
_LAST = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}
# The members of a text delta that change from one to the next (translator.py: the fast path).
VARY = ("sequence_number", "obfuscation")


@dataclasses.dataclass
class Item:
    """One output item, remembered by its output_index from output_item.added to output_item.done."""

    kind: str  # message | reasoning | function | custom | ignored
    index: int  # its output_index
    start: dict  # the item as output_item.added gave it
    done: dict = None  # the whole item, from output_item.done
    streamed: bool = False  # a delta of its content (text, summary, arguments) came


class ResponsesStream(translator.StreamTranslator):
    """The grammar; a front's stream translator subclasses it and answers the hooks below."""

    item_type = Item  # a translator's own Item subclass, for what it remembers per item

    def __init__(self):
        self.items = {}
        self.started = False
        self.response = None  # the response the last event carried
        self.done = False  # the last event translated: the relay ends the response without waiting

    def feed(self, event_name, payload):
        """One upstream SSE event (its `event:` name and parsed data) -> the client's events."""
        if self.done or not isinstance(payload, dict):
            return []  # a compatible server's `data: [DONE]` included
        kind = payload.get("type") or event_name
        delta = _DELTAS.get(kind)
        if delta is not None:  # the stream's bulk: checked as it is read
            index, value = shapes.responses_delta(kind, payload)
            item = self._item(index, kind)
            if value:
                item.streamed = True
                self.relayed += len(value) if value.isascii() else text_size(value)
                if self._unread is not None and kind == "response.output_text.delta" and item.kind == "message":
                    self._learn(payload, "delta", value, at=item, vary=VARY)
            return delta(self, item, value) if value else []
        if kind == "error":
            raise self.reword(event_error(payload))
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # event types newer than this code, hosted tools' progress, annotations
        if kind != "response.created" and not self.started:
            raise broken_stream(f"upstream sent {kind!r} before response.created")
        shapes.responses_event(kind, payload)
        return handler(self, payload)

    def fast(self, event):
        """The client's bytes for an output_text.delta of the learned shape, for the message part it
        was learned in (translator.py: the fast path); None for any other event, which goes to feed."""
        usual = self._usual
        if usual is not None:
            text = usual.read(event.data)
            if text is not None:
                if not text:
                    return b""
                written = self.fast_text(self._usual_at, text)
                if written is not None:
                    self.relayed += len(text) if text.isascii() else text_size(text)
                    return written
        return self._pass_on(event)

    def finish(self):
        """The upstream body ended: complete only if its last event came."""
        if not self.done:
            raise broken_stream("the upstream stream ended before response.completed")
        return []

    # -- hooks: what a translator makes of each piece ---------------------------------------

    def reword(self, error):
        """An upstream's error event or failed response in the words the client acts on (a context overflow)."""
        return error

    def on_response_start(self, response):
        return []

    def on_item_start(self, item):
        return []

    def on_part_start(self, item, part):
        """A message's content part (output_text or refusal) opened."""
        return []

    def on_text(self, item, text):
        return []

    def on_refusal(self, item, text):
        return []

    def on_part_done(self, item, part):
        return []

    def on_summary_part(self, item, summary_index):
        """A reasoning item's summary part opened (its text follows in on_summary)."""
        return []

    def on_summary(self, item, text):
        return []

    def on_reasoning_text(self, item, text):
        """Raw reasoning text (open-weight models' servers): a reasoning item's `content`."""
        return []

    def on_arguments(self, item, fragment):
        """A fragment of a function call's arguments (JSON text) or a custom tool call's input."""
        return []

    def on_item_done(self, item):
        """The item ended; item.done is the whole item."""
        return []

    def on_response_end(self, response):
        """response.completed or response.incomplete: its status, incomplete_details and usage."""
        return []

    # -- the grammar -------------------------------------------------------------------------

    def _created(self, payload):
        if self.started:
            raise broken_stream("upstream sent response.created twice")
        self.started = True
        return self.on_response_start(payload.get("response") or {})

    def _item_added(self, payload):
        index, item = payload.get("output_index"), payload.get("item")
        if index is None or item is None:
            raise broken_stream("upstream sent response.output_item.added without its item")
        if index in self.items:
            raise broken_stream(f"upstream opened output item {index} twice")
        state = self.items[index] = self.item_type(ITEM_KINDS.get(item["type"], "ignored"), index, item)
        return self.on_item_start(state)

    def _item_done(self, payload):
        state = self._item(payload.get("output_index"), "response.output_item.done")
        del self.items[state.index]
        self._usual = None  # learned for an item's part, as its indices say
        state.done = payload.get("item") or state.start
        return self.on_item_done(state)

    def _part_added(self, payload):
        state = self._item(payload.get("output_index"), "response.content_part.added")
        return self.on_part_start(state, payload.get("part") or {}) if state.kind == "message" else []

    def _part_done(self, payload):
        state = self._item(payload.get("output_index"), "response.content_part.done")
        return self.on_part_done(state, payload.get("part") or {}) if state.kind == "message" else []

    def _summary_part(self, payload):
        state = self._item(payload.get("output_index"), "response.reasoning_summary_part.added")
        return self.on_summary_part(state, payload.get("summary_index") or 0) if state.kind == "reasoning" else []

    def _item_event(self, payload):
        """An item's own .done event: its whole text or arguments, which its deltas already gave."""
        self._item(payload.get("output_index"), payload.get("type"))
        return []

    def _last(self, payload):
        self.response = payload.get("response") or {}
        if _LAST[payload["type"]] == "failed":
            raise self.reword(failed_error(self.response))
        out = self.on_response_end(self.response)  # may raise: the translator's fail() must still end the stream
        self.done = True
        self._usual = None
        return out

    def _ignored(self, payload):
        return []

    def _item(self, index, kind):
        state = self.items.get(index)
        if state is None:
            if not self.started:
                raise broken_stream(f"upstream sent {kind!r} before response.created")
            raise broken_stream(f"upstream sent {kind!r} for output item {index}, which is not open")
        return state

    # -- the deltas, by kind of item they belong to -------------------------------------------

    def _text(self, item, value):
        return self.on_text(item, value) if item.kind == "message" else []

    def _refusal(self, item, value):
        return self.on_refusal(item, value) if item.kind == "message" else []

    def _summary(self, item, value):
        return self.on_summary(item, value) if item.kind == "reasoning" else []

    def _reasoning_text(self, item, value):
        return self.on_reasoning_text(item, value) if item.kind == "reasoning" else []

    def _arguments(self, item, value):
        return self.on_arguments(item, value) if item.kind in ("function", "custom") else []


_DELTAS = {
    "response.output_text.delta": ResponsesStream._text,
    "response.refusal.delta": ResponsesStream._refusal,
    "response.reasoning_summary_text.delta": ResponsesStream._summary,
    "response.reasoning_text.delta": ResponsesStream._reasoning_text,
    "response.function_call_arguments.delta": ResponsesStream._arguments,
    "response.custom_tool_call_input.delta": ResponsesStream._arguments,
}
_HANDLERS = {
    "response.created": ResponsesStream._created,
    "response.in_progress": ResponsesStream._ignored,
    "response.queued": ResponsesStream._ignored,
    "response.output_item.added": ResponsesStream._item_added,
    "response.output_item.done": ResponsesStream._item_done,
    "response.content_part.added": ResponsesStream._part_added,
    "response.content_part.done": ResponsesStream._part_done,
    "response.reasoning_summary_part.added": ResponsesStream._summary_part,
    "response.reasoning_summary_part.done": ResponsesStream._item_event,
    "response.output_text.done": ResponsesStream._item_event,
    "response.refusal.done": ResponsesStream._item_event,
    "response.reasoning_summary_text.done": ResponsesStream._item_event,
    "response.reasoning_text.done": ResponsesStream._item_event,
    "response.function_call_arguments.done": ResponsesStream._item_event,
    "response.custom_tool_call_input.done": ResponsesStream._item_event,
    **dict.fromkeys(_LAST, ResponsesStream._last),
}


def event_error(payload):
    """An `error` event as the BridgeError it names (responses_response.failure). OpenAI nests
    the error object ({"type": "error", "error": {type, code, message}}, as recorded); its API
    reference puts code and message on the event itself."""
    return failure(payload["error"] if isinstance(payload.get("error"), dict) else payload)


def failed_error(response):
    """A failed response's `error` ({code, message}) as a BridgeError (responses_response.failure)."""
    return failure(response.get("error"))


def broken_stream(message):
    """An upstream stream that breaks the Responses event grammar: a bad gateway, not a client error."""
    return BridgeError("api_error", message, status=502)
