"""Anthropic Messages stream events -> Chat Completions chunks (a small state machine).

Anthropic numbers content blocks; Chat numbers tool calls. Each block is
remembered by its Anthropic index with what it became on the Chat side: text
-> delta.content, thinking -> delta.reasoning_content, a tool_use -> the next
Chat tool index (0, 1, ... over tool calls only), the response_format tool ->
delta.content, and anything Chat cannot show (server tools, compaction) ->
nothing. Signed thinking is sent whole, once its block closes, in the
`thinking_blocks` extension so the client can echo it back; a text block's web
citations go out when it closes, when their end is known, as `delta.annotations`
entries with an `index` (the openai SDK's accumulator merges list entries by it).

The final chunk (finish_reason) and the usage-only chunk go out at
message_stop, and the response ends there (`done`; the Chat framing adds
`data: [DONE]`): nothing may follow [DONE], even when the upstream holds its
connection open. A stream that ends before message_stop is an error, never
a made-up stop; an overflow reported mid-stream carries OpenAI's
`context_length_exceeded` code.
"""

import dataclasses

from ...protocols.errors import OPENAI
from ..anthropic_response import openai_overflow, refusal_text
from ..anthropic_stream import Block, MessagesStream
from ..chat_answer import chunk, chunk_head, text_chunk_frame, tool_call
from .response import arguments, chat_annotations, chat_usage, finish_reason, thinking_entry


@dataclasses.dataclass
class _Block(Block):
    tool_index: int = None  # Chat tool index, for kind "tool"
    sent_input: bool = False  # a non-empty input fragment went out
    thinking: list = dataclasses.field(default_factory=list)
    offset: int = 0  # where a text block starts in the message content


class StreamTranslator(MessagesStream):
    """The Messages event grammar (bridge/translate/anthropic_stream.py) read into Chat chunks."""

    block_type = _Block
    protocol = OPENAI

    def __init__(self, context):
        super().__init__(context.json_tool)
        self.context = context
        self.head = None  # every chunk's fields before its choices, fixed at message_start
        self.tool_calls = 0
        self.thinking_entries = 0
        self.content_length = 0  # characters of delta.content sent, where annotations point
        self.annotations = 0
        self.text_frame = None  # a text chunk's bytes before and after its text, fixed with the head

    # -- events ----------------------------------------------------------------------------

    def reword(self, error):
        return openai_overflow(error)

    def on_message_start(self, message):
        self.head = chunk_head(message.get("id"), self.context)
        self.text_frame = text_chunk_frame(self.head)
        return [self._chunk({"role": "assistant", "content": ""})]

    def on_block_start(self, state):
        block = state.start
        if state.kind == "tool":
            state.tool_index, self.tool_calls = self.tool_calls, self.tool_calls + 1
            return [
                self._chunk({"tool_calls": [{"index": state.tool_index, **tool_call(block["id"], block["name"], "")}]})
            ]
        if state.kind == "text":
            state.offset = self.content_length
            return self.on_text(state, block.get("text"))
        if state.kind == "thinking":
            return self.on_thinking(state, block.get("thinking"))
        return []

    def on_block_stop(self, state):
        if state.kind in ("tool", "json") and not state.sent_input:
            # A tool without arguments streams only "": Chat still needs the JSON "{}".
            return self.on_input(state, arguments(state.start.get("input")))
        if state.kind == "thinking" and state.signature:
            return self._signed({"type": "thinking", "thinking": "".join(state.thinking), "signature": state.signature})
        if state.kind == "redacted":
            return self._signed(state.start)
        if state.kind == "text" and state.citations:
            return self._annotations(chat_annotations(state.citations, state.offset, self.content_length))
        return []

    def on_message_stop(self):
        finish = finish_reason(self.stop_reason, self.tool_calls > 0)
        out = []
        if finish == "content_filter":
            out.append(self._chunk({"refusal": refusal_text(self.stop_details)}))
        out.append(self._chunk({}, finish))
        if self.context.include_usage:
            out.append({**self.head, "choices": [], "usage": chat_usage(self.usage)})
        return out

    def on_text(self, state, text):
        if not text:
            return []
        self.content_length += len(text)
        return [self._chunk({"content": text})]

    def fast_text(self, state, text):
        """on_text's chunk for a plain text, as the relay frames it (the fast path, translator.py)."""
        if not text:
            return b""
        self.content_length += len(text)
        before, after = self.text_frame
        return before + text.encode() + after

    def on_thinking(self, state, text):
        if not text:
            return []
        state.thinking.append(text)
        return [self._chunk({"reasoning_content": text})]

    def on_input(self, state, fragment):
        if not fragment:
            return []
        state.sent_input = True
        if state.kind == "json":
            self.content_length += len(fragment)
            return [self._chunk({"content": fragment})]
        return [self._chunk({"tool_calls": [{"index": state.tool_index, "function": {"arguments": fragment}}]})]

    # -- helpers ---------------------------------------------------------------------------

    def _signed(self, block):
        """Entries carry an `index` so the openai SDK's accumulator appends rather than fails."""
        entry = {"index": self.thinking_entries, **thinking_entry(block)}
        self.thinking_entries += 1
        return [self._chunk({"thinking_blocks": [entry]})]

    def _annotations(self, annotations):
        """A text block's url citations, once its end is known, each with an `index` as `_signed`'s."""
        if not annotations:
            return []
        entries = [{"index": self.annotations + n, **annotation} for n, annotation in enumerate(annotations)]
        self.annotations += len(entries)
        return [self._chunk({"annotations": entries})]

    def _chunk(self, delta, finish=None):
        return chunk(self.head, delta, finish)
