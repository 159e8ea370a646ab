"""Anthropic Messages stream events -> OpenAI Responses stream events (a small state machine).

The client gets the events OpenAI sends, each with `type` and a `sequence_number`
counting from 0: `response.created` and `response.in_progress` at message_start;
per output item `response.output_item.added`, its parts and deltas, and
`response.output_item.done` with the whole item; last `response.completed`, or
`response.incomplete` when max_tokens cut the answer, with the whole response.
Items are those response.py makes of the same answer, built by its helpers, so
the last event's response equals the non-streamed one.

Every upstream fragment goes on as it arrives: text as `output_text.delta`,
thinking as `reasoning_summary_text.delta` (only when a summary was asked for),
tool input as `function_call_arguments.delta`, the JSON-format tool's input as
`output_text.delta`. A custom tool's input arrives as the JSON of
`{"input": "<text>"}`; its text is decoded as the fragments come, up to the last
whole character, and sent as `custom_tool_call_input.delta`. The `.done` events
carry the value read from the whole block (tool JSON read as the upstream's own
SDK reads it, written as response.py writes it); when that value does not
continue what the deltas sent, the deltas' sum is the same JSON, not the same text.

An item ends (`output_item.done`) when the next item begins or the message ends,
so a refusal can still join the last message and a cut-off answer marks its last
item `incomplete`; a block's parts and `.done` events close with the block.
A web search is a `web_search_call` item: `response.web_search_call.in_progress` when
it opens, `.searching` once its query is whole, `.completed` with its result. A text
part's url citations are `response.output_text.annotation.added` events before its
`.done` events. Anthropic `ping` and blocks Responses cannot show (other server
tools, compaction) produce nothing. The event grammar is read by bridge/translate/anthropic_stream.py: an
upstream `event: error` raises BridgeError, and so does a stream that ends
before message_stop; `fail` then ends the client's stream with `response.failed`,
its error code one Codex acts on (response.response_error).
"""

import dataclasses
import json
import re

from ...protocols import json_codec
from ...protocols.errors import OPENAI
from ..anthropic_response import refusal_text
from ..anthropic_stream import Block, MessagesStream, broken_stream
from .response import (
    arguments,
    call_item,
    envelope,
    is_web_search,
    item_id,
    message_item,
    outcome,
    output_text,
    reasoning_item,
    refusal_part,
    refused,
    response_error,
    search_status,
    summary_text,
    url_annotations,
    usage,
    web_search_item,
)

# A call item's events and the field its deltas build.
CALL_EVENTS = {
    "function_call": ("response.function_call_arguments", "arguments"),
    "custom_tool_call": ("response.custom_tool_call_input", "input"),
}
# How a custom tool's input JSON opens: the request translator declares `{"input": string}`.
_INPUT_OPENING = re.compile(r'\s*\{\s*"input"\s*:\s*"')
_OPENING_MAX = 256  # characters of input waited for to see that opening: the rest is not kept per fragment
_HIGH_SURROGATES = ("d8", "d9", "da", "db")


@dataclasses.dataclass
class _Item:
    """An output item from output_item.added to output_item.done."""

    index: int
    type: str
    id: str
    done: dict = None  # the item as output_item.done carries it
    parts: list = dataclasses.field(default_factory=list)  # a message's content, each part as done


@dataclasses.dataclass
class _Block(Block):
    item: _Item = None  # the item it feeds, once it feeds one
    part: int = None  # its content index in a message (text, json)
    fragments: list = dataclasses.field(default_factory=list)  # thinking or input JSON so far
    sent: list = dataclasses.field(default_factory=list)  # what its deltas sent, joined at the block's end
    summary_open: bool = False
    custom: "_InputText" = None
    finished: bool = False


class StreamTranslator(MessagesStream):
    """The Messages event grammar (bridge/translate/anthropic_stream.py) read into Responses events."""

    block_type = _Block
    protocol = OPENAI

    def __init__(self, context):
        super().__init__(context.json_tool)
        self.context = context
        self.sequence = 0
        self.opened = False  # response.created is out
        self.items = []  # every item added so far; the last may be open
        self.output = []  # the items done, for the final response
        self.searches = {}  # server_tool_use id -> its web_search_call _Item

    def fail(self, error):
        """The events that end the stream after `error`: response.failed with the items done so far."""
        if self.done:
            return []
        out = [] if self.opened else self._open_response()
        self.done = True
        failed = envelope(self.context, "failed", list(self.output), error=response_error(error))
        return [*out, self._event("response.failed", response=failed)]

    # -- upstream events -------------------------------------------------------------------

    def on_message_start(self, message):
        return [] if self.opened else self._open_response()

    def on_block_start(self, state):
        block = state.start
        if state.kind == "text":
            return self.on_text(state, block.get("text"))
        if state.kind == "json":
            return self._open_part(state, output_text(""))
        if state.kind == "tool":
            return self._open_call(state)
        if state.kind in ("thinking", "redacted"):
            out = self._open_item(
                state, "reasoning", lambda identifier: {"id": identifier, "type": "reasoning", "summary": []}
            )
            return out + self.on_thinking(state, block.get("thinking"))
        if state.kind == "server_tool" and is_web_search(block):
            return self._open_search(state)
        if state.kind == "search_result":
            return self._search_done(block)
        return []

    def on_message_stop(self):
        out = []
        if refused(self.stop_reason):
            out += self._refusal(refusal_text(self.stop_details))
        status, incomplete_details = outcome(self.stop_reason)
        out += self._close_item(status == "incomplete")
        final = envelope(
            self.context, status, list(self.output), usage=usage(self.usage), incomplete_details=incomplete_details
        )
        return [*out, self._event(f"response.{status}", response=final)]

    # -- items and parts -------------------------------------------------------------------

    def _open_response(self):
        self.opened = True
        return [
            self._event(kind, response=envelope(self.context, "in_progress", []))
            for kind in ("response.created", "response.in_progress")
        ]

    def _open_item(self, state, item_type, added):
        """Close the open item and announce the next, which `state` feeds; `added(id)` is it as announced."""
        out = self._close_item()
        index = len(self.items)
        item = state.item = _Item(index, item_type, item_id(self.context, item_type, index))
        self.items.append(item)
        return [*out, self._event("response.output_item.added", output_index=index, item=added(item.id))]

    def _close_item(self, incomplete=False):
        """output_item.done for the open item, after whatever of its blocks the upstream left open."""
        item = self._open()
        if item is None:
            return []
        out = []
        for state in list(self.blocks.values()):
            if state.item is item:
                out += self.on_block_stop(state)
        if item.type == "message":
            item.done = message_item(item.id, item.parts)
        if incomplete and "status" in item.done:
            item.done["status"] = "incomplete"
        self.output.append(item.done)
        return [*out, self._event("response.output_item.done", output_index=item.index, item=item.done)]

    def _open(self):
        """The last item, while it has not had its output_item.done."""
        if self.items and len(self.output) < len(self.items):
            return self.items[-1]
        return None

    def _open_part(self, state, empty_part):
        """A new content part in the open message, or in a new one when another item came between."""
        out, message = [], self._open()
        if message is None or message.type != "message":
            out = self._open_item(state, "message", lambda identifier: message_item(identifier, [], "in_progress"))
        else:
            state.item = message
        state.part = len(state.item.parts)
        state.item.parts.append(empty_part)
        return [*out, self._event("response.content_part.added", **self._where(state), part=empty_part)]

    def _open_call(self, state):
        block = state.start
        template = call_item(self.context, len(self.items), block.get("id"), block.get("name"), {}, "in_progress")
        field = CALL_EVENTS[template["type"]][1]
        out = self._open_item(state, template["type"], lambda identifier: {**template, field: ""})
        if template["type"] == "custom_tool_call":
            state.custom = _InputText()
        return out

    def _open_search(self, state):
        """A web search Anthropic runs: a web_search_call item, in progress until its result comes."""
        out = self._open_item(
            state, "web_search_call", lambda identifier: web_search_item(identifier, {}, "in_progress")
        )
        state.item.done = web_search_item(state.item.id, {})
        self.searches[state.start.get("id")] = state.item
        return [*out, self._event("response.web_search_call.in_progress", **self._where(state))]

    def _search_done(self, result):
        item = self.searches.get(result.get("tool_use_id"))
        if item is None or item.done["status"] != "incomplete":
            return []
        item.done["status"] = search_status(result)
        if item.done["status"] != "completed":
            return []
        return [self._event("response.web_search_call.completed", item_id=item.id, output_index=item.index)]

    def _refusal(self, text):
        state = _Block("refusal", {})
        out = self._open_part(state, refusal_part(""))
        where = self._where(state)
        state.item.parts[state.part] = refusal_part(text)
        return [
            *out,
            self._event("response.refusal.delta", **where, delta=text),
            self._event("response.refusal.done", **where, refusal=text),
            self._event("response.content_part.done", **where, part=refusal_part(text)),
        ]

    # -- fragments -------------------------------------------------------------------------

    def on_text(self, state, text):
        if not text:
            return []
        out = self._open_part(state, output_text("")) if state.part is None else []
        state.sent.append(text)
        return [*out, self._delta(state, text)]

    def on_thinking(self, state, text):
        if not text:
            return []
        state.fragments.append(text)
        if not self.context.summary:
            return []
        where = {"item_id": state.item.id, "output_index": state.item.index, "summary_index": 0}
        out = []
        if not state.summary_open:
            state.summary_open = True
            out.append(self._event("response.reasoning_summary_part.added", **where, part=summary_text("")))
        return [*out, self._event("response.reasoning_summary_text.delta", **where, delta=text)]

    def on_input(self, state, fragment):
        state.fragments.append(fragment or "")
        if state.custom is not None:
            fragment = state.custom.feed(fragment or "")
        if not fragment:
            return []
        state.sent.append(fragment)
        return [self._delta(state, fragment)]

    def _delta(self, state, text):
        """A delta of what the block builds: message text, a call's arguments or a custom tool's input."""
        if state.kind in ("text", "json"):
            return self._event("response.output_text.delta", **self._where(state), delta=text, logprobs=[])
        return self._event(CALL_EVENTS[state.item.type][0] + ".delta", **self._where(state), delta=text)

    # -- block ends ------------------------------------------------------------------------

    def on_block_stop(self, state):
        """The block's .done events; the value they carry is the one response.py makes of the block."""
        if state.finished or state.item is None:
            return []
        state.finished = True
        item, where, sent = state.item, self._where(state), "".join(state.sent)
        if state.kind in ("text", "json"):
            text = sent if state.kind == "text" else arguments(self._tool_input(state))
            part = item.parts[state.part] = output_text(text, url_annotations(state.citations, text))
            return [
                *self._rest(state, sent, text),
                *(
                    self._event("response.output_text.annotation.added", **where, annotation_index=n, annotation=note)
                    for n, note in enumerate(part["annotations"])
                ),
                self._event("response.output_text.done", **where, text=text, logprobs=[]),
                self._event("response.content_part.done", **where, part=part),
            ]
        if state.kind == "server_tool":
            item.done = web_search_item(item.id, self._server_input(state))
            return [self._event("response.web_search_call.searching", **where)]
        if state.kind == "tool":
            block = state.start
            item.done = call_item(self.context, item.index, block.get("id"), block.get("name"), self._tool_input(state))
            kind, field = CALL_EVENTS[item.type]
            named = {"name": item.done["name"]} if field == "arguments" else {}
            return [
                *self._rest(state, sent, item.done[field]),
                self._event(kind + ".done", **where, **named, **{field: item.done[field]}),
            ]
        thinking = {"type": "thinking", "thinking": "".join(state.fragments), "signature": state.signature}
        item.done = reasoning_item(item.id, thinking if state.kind == "thinking" else state.start, self.context.summary)
        if not state.summary_open:
            return []
        text = thinking["thinking"]
        where = {"item_id": item.id, "output_index": item.index, "summary_index": 0}
        return [
            self._event("response.reasoning_summary_text.done", **where, text=text),
            self._event("response.reasoning_summary_part.done", **where, part=summary_text(text)),
        ]

    def _rest(self, state, sent, value):
        """The delta for what the final value adds to what the deltas `sent`, when it continues it."""
        if len(value) <= len(sent) or not value.startswith(sent):
            return []
        return [self._delta(state, value[len(sent) :])]

    @staticmethod
    def _server_input(state):
        """A server tool's input, or {} when it is not whole JSON: the search's query is only shown."""
        try:
            return json.loads(state.server_input or "{}")
        except (ValueError, RecursionError):
            return {}

    def _tool_input(self, state):
        """Tool input as the anthropic SDK folds the fragments: an input cut off is read up to the cut."""
        raw = "".join(state.fragments)
        if not raw:
            return state.start.get("input")
        try:
            return json_codec.loads_partial(raw)
        except (ValueError, RecursionError):
            raise broken_stream(f"upstream sent tool input that is not JSON: {raw[:80]!r}") from None

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _where(state):
        where = {"item_id": state.item.id, "output_index": state.item.index}
        if state.part is not None:
            where["content_index"] = state.part
        return where

    def _event(self, kind, **fields):
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event


class _InputText:
    """The text of a custom tool's `{"input": "<text>"}` JSON, decoded as its fragments arrive.

    Decoding starts once the fragments open with the `input` string and stops at its
    closing quote; it holds back a trailing backslash escape until the escape is whole
    (a `\\uD83D` until its low surrogate), so each piece decodes on its own and the pieces
    join to the string's value. JSON in another shape decodes nothing here; the block's
    end then sends the whole input at once.
    """

    def __init__(self):
        self.raw = ""
        self.start = None  # where the string's content begins in raw, once seen
        self.closed = False

    def feed(self, fragment):
        if self.closed:
            return ""
        self.raw += fragment
        if self.start is None:
            opening = _INPUT_OPENING.match(self.raw)
            if opening is None:
                # Not the opening yet; longer than any opening but padded with spaces, it is another shape.
                self.closed = len(self.raw) > _OPENING_MAX
                return ""
            self.start = opening.end()
        end = self._whole(self.start)
        # Keep only what is not decoded yet: appending to the whole input would copy it per fragment.
        piece, self.raw, self.start = self.raw[self.start : end], self.raw[end:], 0
        try:
            return json.loads(f'"{piece}"')
        except ValueError:  # not JSON string content: leave it to the block's end
            self.closed = True
            return ""

    def _whole(self, position):
        """Where the decodable run from `position` ends: at the closing quote or a cut escape."""
        raw = self.raw
        while position < len(raw):
            char = raw[position]
            if char == '"':
                self.closed = True
                return position
            if char != "\\":
                position += 1
                continue
            width = 6 if raw[position + 1 : position + 2] == "u" else 2
            if width == 6 and raw[position + 2 : position + 4].lower() in _HIGH_SURROGATES:
                # A high surrogate decodes with the low one that follows it as one character.
                after = raw[position + 6 : position + 8]
                if after in ("", "\\"):
                    return position
                if after == "\\u":
                    width = 12
            if len(raw) < position + width:
                return position
            position += width
        return position
