"""OpenAI Responses stream events -> Chat Completions chunks (a small state machine).

The grammar (events in order, items by output_index, checks, errors) is responses_stream.py;
this module says what each piece is for a Chat client, as it comes. `response.created` is the
role chunk; `output_text` deltas are `delta.content`, `refusal` deltas `delta.refusal`,
reasoning summary (or raw reasoning text) deltas `delta.reasoning_content` (a blank line
before each new part, as response.py joins them); a `function_call` item is the next Chat tool
index (0, 1, ... over calls only), opened with its call_id and name, then its argument deltas.
A reasoning item that carries `encrypted_content` is sent whole once it is done (only
output_item.done has its final encrypted_content), as a `thinking_blocks` entry with an
`index` (the openai SDK's accumulator merges list entries by it) whose signature is the item;
an item whose text or arguments came only with its end sends them then.

`response.completed` / `response.incomplete` are the finish chunk (response.finish_reason)
and, when the client asked for `stream_options.include_usage`, the usage-only chunk; the
response ends there (`done`, then the Chat framing's `data: [DONE]`). `response.failed` and
an `error` event are the client's error chunk, a context overflow with OpenAI's
`context_length_exceeded` code; a stream that ends before its last event is an error, never
a made-up stop.
"""

import dataclasses

from ...protocols.errors import OPENAI
from ..anthropic_response import openai_overflow
from ..chat_answer import chunk, chunk_head, text_chunk_frame, tool_call
from ..responses_response import PART_SEPARATOR, reasoning_text
from ..responses_stream import Item, ResponsesStream
from ..tokens import size_tokens
from .response import chat_usage, finish_reason, thinking_entry


@dataclasses.dataclass
class _Item(Item):
    tool_index: int = None  # Chat tool index, for kind "function"
    part: int = 0  # the summary part its reasoning text is in


class StreamTranslator(ResponsesStream):
    """The Responses event grammar (bridge/translate/responses_stream.py) read into Chat chunks."""

    item_type = _Item
    protocol = OPENAI

    def __init__(self, context):
        super().__init__()
        self.context = context
        self.head = None  # every chunk's fields before its choices, fixed at response.created
        self.text_frame = None  # a text chunk's bytes before and after its text, fixed with the head
        self.tool_calls = 0
        self.thinking_entries = 0
        self.reasoning_at = None  # (output_index, part) of the reasoning text last sent

    def estimate(self):
        return self.context.input_tokens, size_tokens(self.relayed)

    # -- events ----------------------------------------------------------------------------

    def reword(self, error):
        return openai_overflow(error)

    def on_response_start(self, response):
        self.head = chunk_head(response.get("id"), self.context)
        self.text_frame = text_chunk_frame(self.head)
        return [self._chunk({"role": "assistant", "content": ""})]

    def on_item_start(self, item):
        if item.kind != "function":
            return []
        item.tool_index, self.tool_calls = self.tool_calls, self.tool_calls + 1
        call = tool_call(item.start.get("call_id") or "", item.start.get("name") or "", "")
        return [
            self._chunk({"tool_calls": [{"index": item.tool_index, **call}]}),
            *self.on_arguments(item, item.start.get("arguments")),
        ]

    def on_text(self, item, text):
        return [self._chunk({"content": text})]

    def fast_text(self, item, text):
        """on_text's chunk for a plain text, as the relay frames it (the fast path, translator.py)."""
        before, after = self.text_frame
        return before + text.encode() + after

    def on_refusal(self, item, text):
        return [self._chunk({"refusal": text})]

    def on_summary_part(self, item, summary_index):
        item.part = summary_index
        return []

    def on_summary(self, item, text):
        return self._reasoning(item, item.part, text)

    def on_reasoning_text(self, item, text):
        return self._reasoning(item, item.part, text)

    def on_arguments(self, item, fragment):
        if item.kind != "function" or not fragment:
            return []
        return [self._chunk({"tool_calls": [{"index": item.tool_index, "function": {"arguments": fragment}}]})]

    def on_item_done(self, item):
        """What came only with the item's end: text or arguments without deltas, and a reasoning
        item's thinking_blocks entry (its final encrypted_content is only here)."""
        whole = item.done
        if item.kind == "message" and not item.streamed:
            return self._whole_message(whole)
        if item.kind == "function" and not item.streamed:
            return self.on_arguments(item, whole.get("arguments"))
        if item.kind != "reasoning":
            return []
        text = reasoning_text(whole)
        out = self._reasoning(item, "whole", text) if text and not item.streamed else []
        if whole.get("encrypted_content"):
            entry = {"index": self.thinking_entries, **thinking_entry(whole, text)}
            self.thinking_entries += 1
            out.append(self._chunk({"thinking_blocks": [entry]}))
        return out

    def on_response_end(self, response):
        out = [self._chunk({}, finish_reason(response, self.tool_calls > 0))]
        if self.context.include_usage:
            out.append({**self.head, "choices": [], "usage": chat_usage(response.get("usage"))})
        return out

    # -- helpers ---------------------------------------------------------------------------

    def _reasoning(self, item, part, text):
        """Reasoning text; a new part after earlier reasoning starts with a blank line (response.py's join)."""
        at = (item.index, part)
        if self.reasoning_at is not None and at != self.reasoning_at:
            text = PART_SEPARATOR + text
        self.reasoning_at = at
        return [self._chunk({"reasoning_content": text})]

    def _whole_message(self, item):
        out = []
        for part in item.get("content") or []:
            if part.get("type") == "output_text" and part.get("text"):
                out.append(self._chunk({"content": part["text"]}))
            elif part.get("type") == "refusal" and part.get("refusal"):
                out.append(self._chunk({"refusal": part["refusal"]}))
        return out

    def _chunk(self, delta, finish=None):
        return chunk(self.head, delta, finish)
