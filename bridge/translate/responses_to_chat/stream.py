"""Chat Completions chunks -> OpenAI Responses stream events (a small state machine).

The chunks are read by the grammar every Chat pair shares (chat_stream.py: one choice, the
answer's pieces one at a time, the end after the usage); the events are written by the
writer every Responses pair shares (responses_events.py). What each piece becomes:

- `response.created` and `response.in_progress` at the first chunk with a choice.
- reasoning -> a `reasoning` item; its text as `reasoning_summary_text.delta` when a summary
  was asked for; at its end the item carries it in `encrypted_content` (response.py).
- text -> an `output_text` part of a `message` item, each fragment an `output_text.delta`;
  a refusal -> a `refusal` part of the same message, each fragment a `refusal.delta`.
- a tool call -> a `function_call` item, each argument fragment a
  `function_call_arguments.delta`, and its `.done` the fragments joined: exactly what the
  deltas sent, cut short or not. A custom tool's call -> a `custom_tool_call` item whose
  `{"input": "<text>"}` is decoded as the fragments come (custom_tool_call_input.delta);
  its `.done` is the text read from the whole (response.custom_call_input).
- the finish_reason -> the open item's `output_item.done` (`incomplete` for `length`; a
  refusal part first for `content_filter` without a refusal), then, once the usage came
  (or `[DONE]`, or the body's end), `response.completed` or `response.incomplete` with the
  whole response and its usage; without any usage, the request's input estimate and the
  output streamed.

Items are those response.py makes of the same answer, so the last event's response equals
the non-streamed one when the upstream streams reasoning, text and calls in that order (as
servers do). A broken stream raises BridgeError (chat_stream.py); `fail` then ends the
client's stream with `response.failed`, its error code one Codex acts on.
"""

import dataclasses

from ...protocols.errors import OPENAI
from ...protocols.reasoning import chat_reasoning
from ..chat_stream import ChatStream
from ..responses_events import Piece, ResponsesEvents, outcome, output_text, reasoning_item, refusal_part, usage
from .response import FILTERED, call_output, chat_usage


@dataclasses.dataclass
class _Piece(Piece):
    fragments: list = dataclasses.field(default_factory=list)  # reasoning text or arguments so far
    part_type: str = None  # the kind of the message part open: "output_text" or "refusal"
    call_id: str = None


class StreamTranslator(ResponsesEvents, ChatStream):
    """The Chat chunk grammar (bridge/translate/chat_stream.py) read into Responses events."""

    protocol = OPENAI

    def __init__(self, context):
        ChatStream.__init__(self, context)
        ResponsesEvents.__init__(self)
        self.piece = None  # the _Piece the open piece of the answer feeds
        self.status = self.incomplete_details = None  # from the finish_reason

    def on_start(self, chunk):
        return self._open_response()

    # -- pieces ----------------------------------------------------------------------------

    def on_open(self, piece):
        self.piece = state = _Piece()
        if piece == "thinking":
            return self._open_item(
                state, "reasoning", lambda identifier: {"id": identifier, "type": "reasoning", "summary": []}
            )
        if piece == "text":
            return []  # its part opens with what it holds: text or a refusal
        template = call_output(self.context, len(self.items), piece.id, piece.name, "", "in_progress")
        state.call_id = template["call_id"]
        return self._open_call(state, template)

    def on_close(self, piece):
        state = self.piece
        if piece == "thinking":
            text = "".join(state.fragments)
            identifier = state.item.id
            state.item.done = reasoning_item(identifier, text, chat_reasoning(text), self.context.summary)
            return self._summary_done(state, text)
        if piece == "text":
            return self._end_part(state)
        done = call_output(self.context, state.item.index, state.call_id, piece.name, "".join(state.fragments))
        return self._call_done(state, done)

    # -- fragments -------------------------------------------------------------------------

    def on_thinking(self, text):
        self.piece.fragments.append(text)
        return self._summary(self.piece, text)

    def on_text(self, text):
        state = self.piece
        if state.part_type == "output_text":  # the usual delta: its part is open
            state.sent.append(text)
            return [self._delta(state, text)]
        out = self._new_part(state, "output_text")
        state.sent.append(text)
        out.append(self._delta(state, text))
        return out

    def fast_text(self, text):
        """on_text's event for a plain text while its part is open, as the relay frames it (the fast path)."""
        state = self.piece
        if state.part_type != "output_text":
            return None
        state.sent.append(text)
        return self._fast_delta(state, text)

    def on_refusal(self, text):
        state = self.piece
        out = [] if state.part_type == "refusal" else self._new_part(state, "refusal")
        state.sent.append(text)
        return [*out, self._event("response.refusal.delta", **self._where(state), delta=text)]

    def on_arguments(self, call, fragment):
        self.piece.fragments.append(fragment)
        return self._input(self.piece, fragment)

    # -- the end ---------------------------------------------------------------------------

    def on_finish(self, choice):
        reason = choice["finish_reason"]
        out = self._refusal(FILTERED) if reason == "content_filter" and not self.refused else []
        self.status, self.incomplete_details = outcome(reason)
        return out + self._close_item(self.status == "incomplete")

    def on_end(self):
        if self.usage is not None:
            answer_usage = chat_usage(self.usage)
        else:
            answer_usage = usage(self.context.input_tokens, 0, 0, self.output_tokens, 0)
        return self._end_response(self.status, self.incomplete_details, answer_usage)

    # -- message parts ---------------------------------------------------------------------

    def _new_part(self, state, part_type):
        """The message's next part: the open one done, the new one announced."""
        out = self._end_part(state)
        state.part_type, state.sent = part_type, []
        empty = output_text("") if part_type == "output_text" else refusal_part("")
        return out + self._open_part(state, empty)

    def _end_part(self, state):
        if state.part_type is None:
            return []
        text, part_type = "".join(state.sent), state.part_type
        state.part_type = None
        if part_type == "output_text":
            return self._text_done(state, text)
        where = self._where(state)
        part = state.item.parts[state.part] = refusal_part(text)
        return [
            self._event("response.refusal.done", **where, refusal=text),
            self._event("response.content_part.done", **where, part=part),
        ]
