"""Chat Completions chunks -> Anthropic Messages stream events (a small state machine).

Lifecycle (the Messages stream grammar, as the anthropic SDK's accumulator reads it):
- `message_start` once, at the first chunk that carries a choice, with a full
  usage object (the request's input estimate, zero output, both cache fields).
- Content blocks are opened in order, indices 0, 1, 2..., one open at a time:
  reasoning (`reasoning_content`, `reasoning`, Mistral thinking parts) in a
  thinking block, `content`/`refusal` in a text block, each tool call (keyed
  by its OpenAI `index`, or by a new `id` on a reused index) in its own
  tool_use block. A block of another kind closes the open one first.
- Every argument fragment is forwarded as `input_json_delta`, including the
  one in the chunk that names the call; a call complete in one chunk
  (Ollama, Groq) is one start and one delta. A fragment for a call whose
  block is already closed cannot be placed any more (Anthropic blocks never
  interleave): that is a 502 error event rather than a wrong tool input.
- Empty strings and empty `tool_calls` arrays are no content: never an
  empty delta.
- `finish_reason` closes the open block; `message_delta` (stop_reason and
  final usage) and `message_stop` wait for the usage that follows (the
  `choices: []` chunk, or OpenRouter's late chunk), or `[DONE]`, or the end
  of the body. Usage seen on earlier chunks is kept as a fallback; without
  any, output tokens are estimated from the streamed text.
- A stream that ends before any `finish_reason`, an `event: error`, or a
  `{"error": ...}` chunk raises BridgeError; the relay sends `event: error`
  (a context overflow in Anthropic's words, as before the stream).
- Chunks without choices before the answer (Azure prompt_filter_results),
  SSE comments, and anything after message_stop (moderation) are ignored.
"""

import dataclasses

from ...protocols import shapes
from ...protocols.errors import ANTHROPIC, BridgeError, from_openai
from .. import translator
from ..messages_client import anthropic_overflow, arguments_text, client_tool_id, message_id, stop_fields
from ..tokens import text_tokens
from ..translator import DONE
from . import response


@dataclasses.dataclass(eq=False)
class _Call:
    id: str
    name: str
    pending: list = dataclasses.field(default_factory=list)  # argument fragments that came before the name
    opened: bool = False


class StreamTranslator(translator.StreamTranslator):
    protocol = ANTHROPIC

    def __init__(self, context):
        self.context = context
        self.started = False
        self.blocks = 0  # content blocks opened so far = index of the next one
        self.open = None  # the open block: "thinking", "text" or a _Call
        self.calls = {}  # OpenAI tool-call index -> the latest _Call with that index
        self.tool_called = False
        self.refused = False
        self.stop = None  # message_delta's stop fields, once the finish_reason came
        self.usage = None  # the latest usage the upstream reported
        self.output_tokens = 0  # estimate of what was streamed, for when no usage comes
        self.done = False  # message_stop sent: the relay may end the response

    def feed(self, event, payload):
        if self.done:
            return []
        text = self._usual_text(payload) if event is None else None
        if text is not None:  # the usual chunk: nothing below applies to it
            return self._text(text) if text else []
        if event == "error" or (isinstance(payload, dict) and payload.get("error")):
            error = from_openai(payload)
            raise anthropic_overflow(error, lambda: self.context.input_tokens)
        if payload == DONE:
            return self._end_message()
        if not isinstance(payload, dict):
            raise BridgeError("api_error", "upstream sent a stream chunk that is not an object", status=502)
        shapes.chat_chunk(payload)  # from here on: choices a list of objects, usage an object or None
        usage = payload.get("usage")
        if usage is not None:
            self.usage = usage
        choices = payload.get("choices") or []
        if len(choices) > 1 or (choices and choices[0].get("index", 0) != 0):
            raise BridgeError(
                "api_error",
                "upstream streamed several choices; an Anthropic message carries exactly one answer",
                status=502,
            )
        if self.stop is not None:
            return self._end_message() if usage is not None else []
        if not choices:
            return []
        out = [] if self.started else [self._message_start(payload)]
        self.started = True
        choice = choices[0]
        out += self._delta(choice.get("delta") or {})
        if choice.get("finish_reason"):
            out += self._close()
            self.stop = stop_fields(
                choice["finish_reason"],
                self.tool_called,
                self.refused,
                response.matched_stop(choice, self.context.stop_sequences),
            )
        return out

    def finish(self):
        return [] if self.done else self._end_message()

    def estimate(self):
        """The input message_start carried, and the output message_delta says when no usage comes."""
        return self.context.input_tokens, self.output_tokens

    def _usual_text(self, chunk):
        """The text of the usual chunk, else None: mid-answer, one choice (index 0) whose delta is
        text alone (Ollama and OpenRouter add "role": "assistant" to every delta, which says
        nothing new), no finish_reason, usage or error. Each field is checked as it is read, so
        such a chunk needs no shapes.chat_chunk."""
        if not self.started or self.stop is not None or type(chunk) is not dict:
            return None
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None or chunk.get("error"):
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason") is not None or choice.get("index", 0) != 0:
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or (len(delta) != 1 and (len(delta) != 2 or delta.get("role") != "assistant")):
            return None
        text = delta.get("content")
        return text if type(text) is str else None

    # -- content -----------------------------------------------------------------

    def _delta(self, delta):
        content = delta.get("content")
        if len(delta) == 1 and type(content) is str:  # the usual chunk, text alone: nothing below applies
            return self._text(content) if content else []
        out = self._thinking(response.reasoning_text(delta))
        for kind, text in response.content_parts(content):
            out += self._thinking(text) if kind == "thinking" else self._text(text)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refused = True
            out += self._text(refusal)
        for position, entry in enumerate(delta.get("tool_calls") or []):
            if isinstance(entry, dict):
                out += self._tool_call(position, entry)
        return out

    def _thinking(self, text):
        if not text:
            return []
        self.output_tokens += text_tokens(text)
        out = self._switch("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        return out + [self._block_delta({"type": "thinking_delta", "thinking": text})]

    def _text(self, text):
        self.output_tokens += text_tokens(text)
        out = [] if self.open == "text" else self._switch("text", {"type": "text", "text": ""})
        # _block_delta's event, written out: this is the call for every text chunk of an answer
        out.append(
            {"type": "content_block_delta", "index": self.blocks - 1, "delta": {"type": "text_delta", "text": text}}
        )
        return out

    def _tool_call(self, position, entry):
        index = entry.get("index")
        index = index if isinstance(index, int) else position
        function = response.json_object(entry.get("function"))
        name, call_id = function.get("name"), entry.get("id")
        arguments = arguments_text(function.get("arguments"))
        call = self.calls.get(index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = self.calls[index] = _Call(id=call_id, name=name)
        elif call.opened and call is not self.open:  # its block is closed
            if not arguments:
                return []  # a repeat of a finished call's id or name adds nothing
            raise BridgeError(
                "api_error",
                f"upstream sent more arguments for tool call {index} after "
                "another block had started; Anthropic streams cannot interleave blocks",
                status=502,
            )
        else:
            call.id, call.name = call.id or call_id, call.name or name
        out = []
        if not call.opened:
            if not call.name:
                call.pending.append(arguments)
                return []
            self.tool_called = True
            out = self._switch(
                call,
                {
                    "type": "tool_use",
                    "id": client_tool_id(call.id),
                    "name": response.client_tool_name(self.context, call.name),
                    "input": {},
                },
            )
            call.opened = True
            arguments, call.pending = "".join([*call.pending, arguments]), []
        if arguments:
            self.output_tokens += text_tokens(arguments)
            out.append(self._block_delta({"type": "input_json_delta", "partial_json": arguments}))
        return out

    # -- blocks ------------------------------------------------------------------

    def _switch(self, key, block):
        """Open a block for `key` unless it is the open one, closing the previous block."""
        if self.open == key:
            return []
        out = self._close()
        self.open = key
        self.blocks += 1
        return out + [{"type": "content_block_start", "index": self.blocks - 1, "content_block": block}]

    def _close(self):
        if self.open is None:
            return []
        self.open = None
        return [{"type": "content_block_stop", "index": self.blocks - 1}]

    def _block_delta(self, delta):
        return {"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}

    # -- message -----------------------------------------------------------------

    def _message_start(self, chunk):
        return {
            "type": "message_start",
            "message": {
                "id": message_id(chunk.get("id")),
                "type": "message",
                "role": "assistant",
                "model": self.context.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": self.context.input_tokens,
                    "output_tokens": 0,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }

    def _end_message(self):
        if self.stop is None:
            raise BridgeError(
                "api_error", "upstream stream ended before a finish_reason; the answer is incomplete", status=502
            )
        unnamed = [index for index, call in self.calls.items() if not call.opened]
        if unnamed:
            raise BridgeError("api_error", f"upstream streamed tool call {unnamed[0]} without a name", status=502)
        self.done = True
        if self.usage is not None:
            usage = response.usage(self.usage)
        else:
            usage = {"output_tokens": self.output_tokens}
        return [{"type": "message_delta", "delta": self.stop, "usage": usage}, {"type": "message_stop"}]
