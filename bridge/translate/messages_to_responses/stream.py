"""OpenAI Responses events -> Anthropic Messages stream events (the hooks of responses_stream.py).

The Messages stream grammar, as the anthropic SDK's accumulator reads it:
- `message_start` at response.created, with a full usage object (the request's input
  estimate, zero output, both cache fields).
- Blocks open in the order their content arrives, indices 0, 1, 2..., one at a time:
  - a reasoning item's thinking block at its first summary (or raw reasoning) text, each part
    after the first led by a blank line as the answer joins them; at output_item.done its
    `signature` (the whole item in bridge's form, response.thinking_block) as one
    signature_delta. An item without text opens its block only then, and one with neither
    text nor encrypted content opens none, as in the answer.
  - a message's content part (output_text or refusal) a text block, at its first delta; a
    refusal also makes stop_reason `refusal`.
  - a function call a tool_use block at output_item.added (its name and call_id are there),
    each arguments fragment an input_json_delta; a call whose fragments never came (a
    server that sends only the finished item) gets its arguments as one delta.
- At response.completed or response.incomplete: the open block closed, then `message_delta`
  (stop_reason as response.stop says, the final usage) and `message_stop`.
- An `error` event, a response.failed, or a stream cut short is an `event: error` (a context
  overflow in Anthropic's words, as before the stream).
"""

import dataclasses

from ...protocols.errors import ANTHROPIC
from ...protocols.reasoning import reasoning_signature
from .. import responses_stream
from ..messages_client import TEXT_DELTA_FRAME, anthropic_overflow, message_start
from ..tokens import size_tokens
from . import response


@dataclasses.dataclass
class _Item(responses_stream.Item):
    block: int = None  # the index of its open block, if one is open
    summaries: int = 0  # summary parts opened so far
    raw: bool = False  # raw reasoning text came (then its summary, if any, is not shown)


class StreamTranslator(responses_stream.ResponsesStream):
    protocol = ANTHROPIC
    item_type = _Item

    def __init__(self, context):
        super().__init__()
        self.context = context
        self.blocks = 0  # content blocks opened so far = index of the next one
        self.open = None  # the item whose block is open
        self.tool_called = False
        self.refused = False

    def estimate(self):
        """The input message_start carried, and the output streamed so far."""
        return self.context.input_tokens, size_tokens(self.relayed)

    def reword(self, error):
        return anthropic_overflow(error, lambda: self.context.input_tokens)

    # -- the hooks ------------------------------------------------------------------------

    def on_response_start(self, upstream):
        return [message_start(upstream.get("id"), self.context)]

    def on_item_start(self, item):
        if item.kind != "function":
            return []
        self.tool_called = True
        return self._open(item, response.tool_use(item.start, self.context, {}))

    def on_text(self, item, text):
        out = [] if item.block is not None else self._open(item, {"type": "text", "text": ""})
        out.append({"type": "content_block_delta", "index": item.block, "delta": {"type": "text_delta", "text": text}})
        return out

    def fast_text(self, item, text):
        """on_text's event for a plain text in an open block, as the relay frames it (the fast path)."""
        return None if item.block is None else TEXT_DELTA_FRAME % (item.block, text.encode())

    def on_refusal(self, item, text):
        self.refused = True
        return self.on_text(item, text)

    def on_part_done(self, item, part):
        return self._close(item)

    def on_summary_part(self, item, summary_index):
        item.summaries += 1
        if item.summaries == 1 or item.raw:
            return []
        return self._thinking(item, response.SUMMARY_JOIN)

    def on_summary(self, item, text):
        return [] if item.raw else self._thinking(item, text)

    def on_reasoning_text(self, item, text):
        if item.summaries:
            return []  # its summary is what is shown
        item.raw = True
        return self._thinking(item, text)

    def on_arguments(self, item, fragment):
        if item.kind != "function":
            return []
        if item.block is None:
            raise responses_stream.broken_stream(
                f"upstream sent arguments for output item {item.index} after another item's content; "
                "Anthropic streams cannot interleave blocks"
            )
        return [self._delta(item, {"type": "input_json_delta", "partial_json": fragment})]

    def on_item_done(self, item):
        if item.kind == "reasoning":
            text = "" if item.streamed else response.reasoning_text(item.done)
            out = self._thinking(item, text) if text else []
            signature = reasoning_signature(item.done)
            if signature:
                out += self._thinking(item, "")
                out.append(self._delta(item, {"type": "signature_delta", "signature": signature}))
            return out + self._close(item)
        if item.kind == "function":
            arguments = item.done.get("arguments")
            out = []
            if not item.streamed and arguments:
                out.append(self._delta(item, {"type": "input_json_delta", "partial_json": arguments}))
            return out + self._close(item)
        return self._close(item)

    def on_response_end(self, upstream):
        out = self._close(self.open) if self.open is not None else []
        delta = {**response.stop(upstream, self.tool_called, self.refused)}
        usage = upstream.get("usage")
        counts = response.usage(usage) if usage else {"output_tokens": size_tokens(self.relayed)}
        return out + [{"type": "message_delta", "delta": delta, "usage": counts}, {"type": "message_stop"}]

    # -- blocks ---------------------------------------------------------------------------

    def _thinking(self, item, text):
        """Thinking text for a reasoning item's block, opened first if need be ("" opens only)."""
        out = [] if item.block is not None else self._open(item, {"type": "thinking", "thinking": "", "signature": ""})
        if text:
            out.append(self._delta(item, {"type": "thinking_delta", "thinking": text}))
        return out

    def _open(self, item, block):
        out = self._close(self.open) if self.open is not None else []
        item.block, self.open = self.blocks, item
        self.blocks += 1
        return out + [{"type": "content_block_start", "index": item.block, "content_block": block}]

    def _close(self, item):
        if item.block is None:
            return []
        index, item.block = item.block, None
        if self.open is item:
            self.open = None
        return [{"type": "content_block_stop", "index": index}]

    def _delta(self, item, delta):
        return {"type": "content_block_delta", "index": item.block, "delta": delta}
