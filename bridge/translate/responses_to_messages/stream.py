"""Anthropic Messages stream events -> OpenAI Responses stream events (a small state machine).

The client gets the events OpenAI sends (the writer, ResponsesEvents, is
bridge/translate/responses_events.py, shared with the other pairs serving Responses
clients): `response.created` and `response.in_progress` at message_start; per output
item `response.output_item.added`, its parts and deltas, and
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
A call whose JSON max_tokens cut short carries exactly what its deltas sent (its
arguments the raw fragments joined, a custom call's input the text decoded so far),
in its `.done` event and in its item, which the cut marks `incomplete`.

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
its error code one Codex acts on (responses_events.response_error).
"""

import dataclasses
import json

from ...protocols import json_codec
from ...protocols.errors import OPENAI
from ..anthropic_response import FINISH_REASONS, refusal_text
from ..anthropic_stream import Block, MessagesStream, broken_stream
from ..responses_events import CALL_EVENTS, Piece, ResponsesEvents, outcome, output_text
from .response import (
    anthropic_usage,
    arguments,
    is_web_search,
    refused,
    search_status,
    thinking_item,
    tool_call_item,
    url_annotations,
    web_search_item,
)


@dataclasses.dataclass
class _Block(Piece, Block):
    fragments: list = dataclasses.field(default_factory=list)  # thinking or input JSON so far
    finished: bool = False


class StreamTranslator(ResponsesEvents, MessagesStream):
    """The Messages event grammar (bridge/translate/anthropic_stream.py) read into Responses events."""

    block_type = _Block
    protocol = OPENAI

    def __init__(self, context):
        MessagesStream.__init__(self, context.json_tool)
        ResponsesEvents.__init__(self)
        self.context = context
        self.searches = {}  # server_tool_use id -> its web_search_call Item

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
            template = tool_call_item(
                self.context, len(self.items), block.get("id"), block.get("name"), {}, "in_progress"
            )
            return self._open_call(state, template)
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
        status, incomplete_details = outcome(FINISH_REASONS.get(self.stop_reason))
        return out + self._end_response(status, incomplete_details, anthropic_usage(self.usage))

    # -- items -----------------------------------------------------------------------------

    def _closing(self, item):
        """The item's blocks the upstream left open end with it."""
        out = []
        for state in list(self.blocks.values()):
            if state.item is item:
                out += self.on_block_stop(state)
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

    # -- fragments -------------------------------------------------------------------------

    def on_text(self, state, text):
        if not text:
            return []
        out = self._open_part(state, output_text("")) if state.part is None else []
        state.sent.append(text)
        return [*out, self._delta(state, text)]

    def fast_text(self, state, text):
        """on_text's event for a plain text, as the relay frames it (the fast path): its part opened
        with the text the shape was learned from."""
        if not text:
            return b""
        state.sent.append(text)
        return self._fast_delta(state, text)

    def on_thinking(self, state, text):
        if not text:
            return []
        state.fragments.append(text)
        return self._summary(state, text)

    def on_input(self, state, fragment):
        state.fragments.append(fragment or "")
        return self._input(state, fragment or "")

    # -- block ends ------------------------------------------------------------------------

    def on_block_stop(self, state):
        """The block's .done events; the value they carry is the one response.py makes of the block."""
        if state.finished or state.item is None:
            return []
        state.finished = True
        item = state.item
        if state.kind in ("text", "json"):
            text = "".join(state.sent) if state.kind == "text" else arguments(self._tool_input(state)[0])
            return self._text_done(state, text, url_annotations(state.citations, text))
        if state.kind == "server_tool":
            item.done = web_search_item(item.id, self._server_input(state))
            return [self._event("response.web_search_call.searching", **self._where(state))]
        if state.kind == "tool":
            block = state.start
            tool_input, whole = self._tool_input(state)
            done = tool_call_item(self.context, item.index, block.get("id"), block.get("name"), tool_input)
            if not whole:  # cut short: exactly what the deltas sent
                done[CALL_EVENTS[done["type"]][1]] = "".join(state.sent)
            return self._call_done(state, done)
        thinking = {"type": "thinking", "thinking": "".join(state.fragments), "signature": state.signature}
        item.done = thinking_item(item.id, thinking if state.kind == "thinking" else state.start, self.context.summary)
        return self._summary_done(state, thinking["thinking"])

    @staticmethod
    def _server_input(state):
        """A server tool's input, or {} when it is not whole JSON: the search's query is only shown."""
        try:
            return json.loads(state.server_input or "{}")
        except (ValueError, RecursionError):
            return {}

    def _tool_input(self, state):
        """(tool input, whether its JSON was whole): a cut-off input is read up to the cut, as the
        anthropic SDK folds the fragments."""
        raw = "".join(state.fragments)
        if not raw:
            return state.start.get("input"), True
        try:
            return json.loads(raw), True  # not orjson: a model's integers stay exact however long
        except (ValueError, RecursionError):
            pass
        try:
            return json_codec.loads_partial(raw), False
        except (ValueError, RecursionError):
            raise broken_stream(f"upstream sent tool input that is not JSON: {raw[:80]!r}") from None
