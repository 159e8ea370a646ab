"""Chat Completions chunks -> Anthropic Messages stream events (a small state machine).

The chunk grammar (one choice, the pieces of the answer one at a time, the end after the
usage) is bridge/translate/chat_stream.py; here is what each piece becomes, as the anthropic
SDK's accumulator reads the Messages stream grammar:
- `message_start` once, at the first chunk that carries a choice, with a full
  usage object (the request's input estimate, zero output, both cache fields).
- Content blocks are opened in order, indices 0, 1, 2..., one open at a time:
  reasoning in a thinking block, `content`/`refusal` in a text block, each tool
  call in its own tool_use block.
- Every argument fragment is forwarded as `input_json_delta`, including the
  one in the chunk that names the call; a call complete in one chunk
  (Ollama, Groq) is one start and one delta.
- `finish_reason` closes the open block; `message_delta` (stop_reason and
  final usage) and `message_stop` wait for the usage that follows, or
  `[DONE]`, or the end of the body; without any usage, output tokens are
  estimated from the streamed text.
- A broken stream raises BridgeError; the relay sends `event: error` (a
  context overflow in Anthropic's words, as before the stream).
"""

from ...protocols.errors import ANTHROPIC
from ..chat_stream import ChatStream
from ..messages_client import TEXT_DELTA_FRAME, anthropic_overflow, client_tool_id, message_start, stop_fields
from . import response

_EMPTY_BLOCKS = {
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
    "text": {"type": "text", "text": ""},
}


class StreamTranslator(ChatStream):
    protocol = ANTHROPIC

    def __init__(self, context):
        super().__init__(context)
        self.blocks = 0  # content blocks opened so far = index of the next one

    def reword(self, error):
        return anthropic_overflow(error, lambda: self.context.input_tokens)

    def on_start(self, chunk):
        return [message_start(chunk.get("id"), self.context)]

    def on_open(self, piece):
        if isinstance(piece, str):
            block = dict(_EMPTY_BLOCKS[piece])
        else:
            block = {
                "type": "tool_use",
                "id": client_tool_id(piece.id),
                "name": response.client_tool_name(self.context, piece.name),
                "input": {},
            }
        self.blocks += 1
        return [{"type": "content_block_start", "index": self.blocks - 1, "content_block": block}]

    def on_close(self, piece):
        return [{"type": "content_block_stop", "index": self.blocks - 1}]

    def on_thinking(self, text):
        return [self._block_delta({"type": "thinking_delta", "thinking": text})]

    def on_text(self, text):
        # _block_delta's event, written out: this is the call for every text chunk of an answer
        return [
            {"type": "content_block_delta", "index": self.blocks - 1, "delta": {"type": "text_delta", "text": text}}
        ]

    on_refusal = on_text

    def fast_text(self, text):
        return TEXT_DELTA_FRAME % (self.blocks - 1, text.encode())

    def on_arguments(self, call, fragment):
        return [self._block_delta({"type": "input_json_delta", "partial_json": fragment})]

    def on_end(self):
        choice = self.finished
        stop = stop_fields(
            choice["finish_reason"],
            self.tool_called,
            self.refused,
            response.matched_stop(choice, self.context.stop_sequences),
        )
        if self.usage is not None:
            usage = response.usage(self.usage)
        else:
            usage = {"output_tokens": self.output_tokens}
        return [{"type": "message_delta", "delta": stop, "usage": usage}, {"type": "message_stop"}]

    def _block_delta(self, delta):
        return {"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}
