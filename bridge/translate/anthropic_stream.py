"""Reading an Anthropic Messages event stream: the grammar every front with a Messages upstream shares.

Anthropic sends message_start; then, per content block, content_block_start,
content_block_delta... and content_block_stop, the blocks numbered 0, 1, 2... and
never interleaved; then message_delta (stop_reason, stop_details, usage counts that
are cumulative) and message_stop. MessagesStream keeps that bookkeeping: the open
blocks by index, each with the kind the translators tell apart, the stop reason, and
the usage (a null count leaves the earlier one standing, as the anthropic SDK folds
it). Events dispatch through a table, each checked first for the types of the fields
read (shapes.py); `ping` and event types newer than this code produce nothing unless a
translator answers them, an `event: error` raises BridgeError, and a stream that ends
before message_stop is an error, never a made-up stop. A translator says what each piece
becomes for its client in the `on_*` hooks, each returning the outgoing events.
"""

import dataclasses

from ..protocols import shapes
from ..protocols.errors import BridgeError
from . import translator
from .tokens import text_size

# Anthropic content block type -> kind; any other block (compaction...) is "ignored". Server tools
# (web search) run upstream: a translator shows them, if at all, as what they are, never as tool calls.
BLOCK_KINDS = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "redacted",
    "tool_use": "tool",
    "server_tool_use": "server_tool",
    "web_search_tool_result": "search_result",
}


@dataclasses.dataclass
class Block:
    """One content block, remembered by its index from content_block_start to content_block_stop."""

    kind: str  # text | thinking | redacted | tool | json (the JSON-format tool) | server_tool | search_result | ignored
    start: dict  # the content_block_start block
    # Pieces, joined when read (at the block's end): appending to a string would copy it per delta.
    signatures: list = dataclasses.field(default_factory=list)  # a thinking block's, from its start and signature_delta
    citations: list = dataclasses.field(default_factory=list)  # a text block's, from its start and citations_delta
    server_inputs: list = dataclasses.field(default_factory=list)  # a server tool's input JSON, from input_json_delta

    @property
    def signature(self):
        return "".join(self.signatures)

    @property
    def server_input(self):
        return "".join(self.server_inputs)


class MessagesStream(translator.StreamTranslator):
    """The grammar; a front's stream translator subclasses it and answers the hooks below."""

    block_type = Block  # a translator's own Block subclass, for what it remembers per block

    def __init__(self, json_tool=None):
        self.json_tool = json_tool  # the forced tool whose input is the answer
        self.blocks = {}
        self.started = False
        self.usage = {}
        self.stop_reason = self.stop_details = None
        self.done = False  # message_stop translated: the relay ends the response without waiting for the upstream

    def feed(self, event_name, payload):
        """One upstream SSE event (its `event:` name and parsed data) -> the client's events."""
        if self.done or not isinstance(payload, dict):
            return []
        kind = payload.get("type") or event_name
        if kind == "error":
            raise self.reword(shapes.anthropic_error(payload, "error event"))
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # event types newer than this code are skipped
        if kind != "message_start" and not self.started:
            raise broken_stream(f"upstream sent {kind!r} before message_start")
        if kind != "content_block_delta":  # whose handler checks the fields as it reads them
            shapes.anthropic_event(kind, payload)
        return handler(self, payload)

    def fast(self, event):
        """The client's bytes for a text_delta of the learned shape, for the block it was learned
        in (translator.py: the fast path); None for any other event, which goes to feed."""
        usual = self._usual
        if usual is not None:
            data = event.data
            text = usual.read(data if type(data) is str else translator.text_of(data) or "")
            if text is not None:
                written = self.fast_text(self._usual_at, text)
                if written is not None:
                    if text:
                        self.relayed += len(text) if text.isascii() else text_size(text)
                    return written
        return self._pass_on(event)

    def finish(self):
        """The upstream body ended: complete only if message_stop came."""
        if not self.done:
            raise broken_stream("the upstream stream ended before message_stop")
        return []

    # -- hooks: what a translator makes of each piece ---------------------------------------

    def reword(self, error):
        """An upstream's `event: error` in the words the client acts on (a context overflow)."""
        return error

    def on_message_start(self, message):
        return []

    def on_block_start(self, state):
        return []

    def on_text(self, state, text):
        return []

    def on_thinking(self, state, text):
        return []

    def on_input(self, state, fragment):
        """A fragment of a tool_use block's input JSON (kind tool or json)."""
        return []

    def on_block_stop(self, state):
        return []

    def on_message_stop(self):
        return []

    # -- the grammar -------------------------------------------------------------------------

    def _message_start(self, payload):
        self.started = True
        message = payload.get("message") or {}
        self.usage = known_counts(message.get("usage"))
        return self.on_message_start(message)

    def _content_block_start(self, payload):
        index, block = payload.get("index"), payload.get("content_block") or {}
        if index in self.blocks:
            raise broken_stream(f"upstream opened content block {index} twice")
        kind = BLOCK_KINDS.get(block.get("type"), "ignored")
        if kind == "tool" and block.get("name") == self.json_tool:
            kind = "json"
        state = self.blocks[index] = self.block_type(kind, block, signatures=[block.get("signature") or ""])
        if kind == "text" and isinstance(block.get("citations"), list):
            state.citations.extend(block["citations"])
        return self.on_block_start(state)

    def _content_block_delta(self, payload):
        index, delta, value = shapes.anthropic_delta(payload)  # value: the text, thinking, signature or JSON
        state = self.blocks.get(index)
        if state is None:
            raise not_open(index)
        kind = delta.get("type")
        if value and kind != "signature_delta":  # output the upstream generated, shown to the client or not
            self.relayed += len(value) if value.isascii() else text_size(value)  # a call fewer per event
        if kind == "text_delta" and state.kind == "text":
            if value and self._unread is not None:
                self._learn(payload, "text", value, at=state, padded=True)
            return self.on_text(state, value)
        if kind == "thinking_delta" and state.kind == "thinking":
            return self.on_thinking(state, value)
        if kind == "signature_delta" and state.kind == "thinking":
            state.signatures.append(value or "")
            return []
        if kind == "input_json_delta" and state.kind in ("tool", "json"):
            return self.on_input(state, value)
        if kind == "input_json_delta" and state.kind == "server_tool":
            state.server_inputs.append(value or "")
        elif kind == "citations_delta" and state.kind == "text":
            state.citations.append(delta.get("citation"))
        return []

    def _content_block_stop(self, payload):
        state = self._block(payload.get("index"))
        del self.blocks[payload.get("index")]
        self._usual = None  # learned for a block, as its index says
        return self.on_block_stop(state)

    def _message_delta(self, payload):
        delta = payload.get("delta") or {}
        self.stop_reason = delta.get("stop_reason") or self.stop_reason
        self.stop_details = delta.get("stop_details") or self.stop_details
        self.usage.update(known_counts(payload.get("usage")))  # message_delta usage is cumulative
        return []

    def _message_stop(self, payload):
        out = self.on_message_stop()  # may raise: the translator's fail() must still end the stream
        self.done = True
        self._usual = None
        return out

    def _block(self, index):
        if index not in self.blocks:
            raise not_open(index)
        return self.blocks[index]


_HANDLERS = {
    "message_start": MessagesStream._message_start,
    "content_block_start": MessagesStream._content_block_start,
    "content_block_delta": MessagesStream._content_block_delta,
    "content_block_stop": MessagesStream._content_block_stop,
    "message_delta": MessagesStream._message_delta,
    "message_stop": MessagesStream._message_stop,
}


def known_counts(usage):
    """The usage counts the upstream gave: a null leaves the earlier count standing."""
    return {name: value for name, value in (usage or {}).items() if value is not None}


def not_open(index):
    return broken_stream(f"upstream sent an event for content block {index}, which is not open")


def broken_stream(message):
    """An upstream stream that breaks the Messages event grammar: a bad gateway, not a client error."""
    return BridgeError("api_error", message, status=502)
