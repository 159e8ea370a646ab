"""Anthropic Messages stream events -> Chat Completions chunks (a small state machine).

Anthropic numbers content blocks; Chat numbers tool calls. Each block is
remembered by its Anthropic index with what it became on the Chat side: text
-> delta.content, thinking -> delta.reasoning_content, a tool_use -> the next
Chat tool index (0, 1, ... over tool calls only), the response_format tool ->
delta.content, and anything Chat cannot show (server tools, compaction) ->
nothing. Signed thinking is sent whole, once its block closes, in the
`thinking_blocks` extension so the client can echo it back.

The final chunk (finish_reason) and the usage-only chunk go out at
message_stop, and the response ends there (`done`; the Chat framing adds
`data: [DONE]`): nothing may follow [DONE], even when the upstream holds its
connection open. A stream that ends before message_stop is an error, never
a made-up stop.
"""
import dataclasses

from .. import translator
from ..errors import OPENAI, BridgeError
from .response import (arguments, chat_usage, completion_id, finish_reason, openai_overflow, refusal_text,
                       thinking_entry, tool_call)

# Anthropic error type (in an `event: error`) -> BridgeError kind.
ERROR_KINDS = {"invalid_request_error": "invalid_request", "authentication_error": "authentication",
               "permission_error": "permission", "not_found_error": "not_found",
               "request_too_large": "request_too_large", "rate_limit_error": "rate_limit",
               "api_error": "api_error", "overloaded_error": "overloaded", "timeout_error": "timeout"}


@dataclasses.dataclass
class _Block:
    kind: str                 # text | thinking | redacted | tool | json | ignored
    tool_index: int = None    # Chat tool index, for kind "tool"
    start: dict = None        # the content_block_start payload
    sent_input: bool = False  # a non-empty input fragment went out
    thinking: list = dataclasses.field(default_factory=list)
    signature: str = ""


class StreamTranslator(translator.StreamTranslator):
    protocol = OPENAI

    def __init__(self, context):
        self.context = context
        self.id = None
        self.blocks = {}
        self.tool_calls = 0
        self.thinking_entries = 0
        self.usage = {}
        self.stop_reason = self.stop_details = None
        self.done = False  # message_stop translated: the relay ends the response without waiting for the upstream

    def feed(self, event_name, payload):
        if self.done or not isinstance(payload, dict):
            return []
        kind = payload.get("type") or event_name
        if kind == "error":
            raise upstream_error(payload)
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # ping (the relay keeps the client alive), and event types newer than this code
        if kind != "message_start" and self.id is None:
            raise _broken(f"upstream sent {kind!r} before message_start")
        return handler(self, payload)

    def finish(self):
        if not self.done:
            raise _broken("the upstream stream ended before message_stop")
        return []

    # -- events ----------------------------------------------------------------------------

    def _message_start(self, payload):
        message = payload.get("message") or {}
        self.id = completion_id(message.get("id"))
        self.usage = dict(message.get("usage") or {})
        return [self._chunk({"role": "assistant", "content": ""})]

    def _content_block_start(self, payload):
        block = payload.get("content_block") or {}
        state = self._open(payload.get("index"), block)
        if state.kind == "tool":
            return [self._chunk({"tool_calls": [{"index": state.tool_index, **tool_call(
                block["id"], block["name"], "")}]})]
        if state.kind == "text":
            return self._text(block.get("text"))
        if state.kind == "thinking":
            return self._thought(state, block.get("thinking"))
        return []

    def _content_block_delta(self, payload):
        state = self._block(payload.get("index"))
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and state.kind == "text":
            return self._text(delta.get("text"))
        if kind == "thinking_delta" and state.kind == "thinking":
            return self._thought(state, delta.get("thinking"))
        if kind == "signature_delta" and state.kind == "thinking":
            state.signature += delta.get("signature") or ""
            return []
        if kind == "input_json_delta" and state.kind in ("tool", "json"):
            return self._input(state, delta.get("partial_json"))
        return []

    def _content_block_stop(self, payload):
        state = self._block(payload.get("index"))
        del self.blocks[payload.get("index")]
        if state.kind in ("tool", "json") and not state.sent_input:
            # A tool without arguments streams only "": Chat still needs the JSON "{}".
            return self._input(state, arguments(state.start.get("input")))
        if state.kind == "thinking" and state.signature:
            return self._signed({"type": "thinking", "thinking": "".join(state.thinking),
                                 "signature": state.signature})
        if state.kind == "redacted":
            return self._signed(state.start)
        return []

    def _message_delta(self, payload):
        delta = payload.get("delta") or {}
        self.stop_reason = delta.get("stop_reason") or self.stop_reason
        self.stop_details = delta.get("stop_details") or self.stop_details
        self.usage.update(payload.get("usage") or {})  # message_delta usage is cumulative
        return []

    def _message_stop(self, payload):
        self.done = True
        finish = finish_reason(self.stop_reason, self.tool_calls > 0)
        out = []
        if finish == "content_filter":
            out.append(self._chunk({"refusal": refusal_text(self.stop_details)}))
        out.append(self._chunk({}, finish))
        if self.context.include_usage:
            out.append(self._envelope([], usage=chat_usage(self.usage)))
        return out

    # -- helpers ---------------------------------------------------------------------------

    def _open(self, index, block):
        if index in self.blocks:
            raise _broken(f"upstream opened content block {index} twice")
        kind = {"text": "text", "thinking": "thinking", "redacted_thinking": "redacted",
                "tool_use": "tool"}.get(block.get("type"), "ignored")
        if kind == "tool" and block.get("name") == self.context.json_tool:
            kind = "json"
        state = _Block(kind, start=block, signature=block.get("signature") or "")
        if kind == "tool":
            state.tool_index, self.tool_calls = self.tool_calls, self.tool_calls + 1
        self.blocks[index] = state
        return state

    def _block(self, index):
        if index not in self.blocks:
            raise _broken(f"upstream sent an event for content block {index}, which is not open")
        return self.blocks[index]

    def _text(self, text):
        return [self._chunk({"content": text})] if text else []

    def _thought(self, state, text):
        if not text:
            return []
        state.thinking.append(text)
        return [self._chunk({"reasoning_content": text})]

    def _input(self, state, fragment):
        if not fragment:
            return []
        state.sent_input = True
        if state.kind == "json":
            return [self._chunk({"content": fragment})]
        return [self._chunk({"tool_calls": [{"index": state.tool_index, "function": {"arguments": fragment}}]})]

    def _signed(self, block):
        """Entries carry an `index` so the openai SDK's accumulator appends rather than fails."""
        entry = {"index": self.thinking_entries, **thinking_entry(block)}
        self.thinking_entries += 1
        return [self._chunk({"thinking_blocks": [entry]})]

    def _chunk(self, delta, finish=None):
        return self._envelope([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    def _envelope(self, choices, **extra):
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.context.created,
                "model": self.context.model, "choices": choices, **extra}


# The events translated, each by its handler; anything else is skipped.
_HANDLERS = {"message_start": StreamTranslator._message_start,
             "content_block_start": StreamTranslator._content_block_start,
             "content_block_delta": StreamTranslator._content_block_delta,
             "content_block_stop": StreamTranslator._content_block_stop,
             "message_delta": StreamTranslator._message_delta,
             "message_stop": StreamTranslator._message_stop}


def upstream_error(payload):
    """An Anthropic `event: error` as the BridgeError the relay sends on as a Chat error chunk."""
    error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
    kind = ERROR_KINDS.get(error.get("type"), "api_error")
    return openai_overflow(BridgeError(kind, error.get("message") or "the upstream reported an error mid-stream",
                                       upstream_detail=error))


def _broken(message):
    return BridgeError("api_error", message, status=502)
