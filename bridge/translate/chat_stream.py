"""Reading a Chat Completions chunk stream: the grammar every pair with a Chat upstream shares.

A Chat stream is data-only chunks, each with one choice (index 0) whose `delta` carries a
piece of the answer: reasoning (`reasoning_content`, `reasoning`, Mistral's thinking
parts), text (`content`), a refusal, or tool-call fragments keyed by the call's `index`;
then a chunk with the `finish_reason`, a usage chunk (`choices: []`) when the request asked
for one, and `data: [DONE]`. ChatStream keeps that bookkeeping and hands a translator the
answer as pieces, one open at a time, in order: "thinking", "text" (a refusal is text too),
or a ChatCall. A piece of another kind closes the open one first; a translator says what
each piece becomes for its client in the `on_*` hooks, each returning the outgoing events.

- A call opens once its name is known (Ollama and Groq send a call whole in one chunk; a
  server may send arguments before the name, which wait for it). A new `id` on a used index
  is a new call. A fragment for a call whose piece already closed cannot be placed any more
  (neither client protocol interleaves): a 502 rather than wrong arguments.
- Empty strings and empty `tool_calls` arrays are no content.
- The end waits, after the finish_reason, for the usage that follows (the `choices: []`
  chunk, or OpenRouter's late chunk), `[DONE]`, or the end of the body. Usage seen on
  earlier chunks stands meanwhile (`self.usage`); `output_tokens` estimates what was streamed.
- A stream that ends before any finish_reason, a call never named, an `event: error` or a
  `{"error": ...}` chunk, several choices, or a chunk of the wrong shape raises BridgeError.
- Chunks without choices before the answer (Azure prompt_filter_results), SSE comments, and
  anything after the end (moderation) are passed by.
"""

import dataclasses

from ..protocols import shapes
from ..protocols.errors import BridgeError, from_openai
from . import translator
from .chat_response import arguments_text, content_parts, json_object, reasoning_text
from .tokens import text_tokens
from .translator import DONE

# The members of a usual chunk that change from one to the next: OpenAI's random padding.
_VARY = ("obfuscation",)


@dataclasses.dataclass(eq=False)
class ChatCall:
    """One tool call of the answer, from its first fragment to its last."""

    id: str
    name: str
    pending: list = dataclasses.field(default_factory=list)  # argument fragments that came before the name
    opened: bool = False


class ChatStream(translator.StreamTranslator):
    """The grammar; a pair's stream translator subclasses it and answers the hooks below."""

    def __init__(self, context):
        self.context = context  # the request's: `input_tokens` is the input estimate
        self.started = False
        self.open = None  # the open piece: "thinking", "text" or a ChatCall
        self.calls = {}  # OpenAI tool-call index -> the latest ChatCall with that index
        self.tool_called = False
        self.refused = False
        self.finished = None  # the choice that carried the finish_reason, once it came
        self.usage = None  # the latest usage the upstream reported
        self.output_tokens = 0  # estimate of what was streamed, for when no usage comes
        self.done = False  # the client's last event is out: the relay may end the response

    def fast(self, event):
        """The client's bytes for a usual text chunk of the learned shape (translator.py: the fast
        path); None for any other event, which goes to feed."""
        usual = self._usual
        if usual is not None and event.event is None and self.open == "text" and self.finished is None:
            text = usual.read(event.data)
            if text is not None:
                if not text:
                    return b""
                written = self.fast_text(text)
                if written is not None:
                    self.output_tokens += text_tokens(text)
                    return written
        return self._pass_on(event)

    def feed(self, event, payload):
        if self.done:
            return []
        text = self._usual_text(payload) if event is None else None
        if text is not None:  # the usual chunk: nothing below applies to it
            if self._unread is not None:
                self._learn(payload, "content", text, vary=_VARY)
            return self._text(text) if text else []
        if event == "error" or (isinstance(payload, dict) and payload.get("error")):
            raise self.reword(from_openai(payload))
        if payload == DONE:
            return self._end()
        if not isinstance(payload, dict):
            raise BridgeError("api_error", "upstream sent a stream chunk that is not an object", status=502)
        shapes.chat_chunk(payload)  # from here on: choices a list of objects, usage an object or None
        usage = payload.get("usage")
        if usage is not None:
            self.usage = usage
        choices = payload.get("choices") or []
        if len(choices) > 1 or (choices and choices[0].get("index", 0) != 0):
            raise BridgeError(
                "api_error", "upstream streamed several choices; the client's answer carries exactly one", status=502
            )
        if self.finished is not None:
            return self._end() if usage is not None else []
        if not choices:
            return []
        out = [] if self.started else self.on_start(payload)
        self.started = True
        choice = choices[0]
        out += self._pieces(choice.get("delta") or {})
        if choice.get("finish_reason"):
            out += self._close()
            self.finished = choice
            out += self.on_finish(choice)
        return out

    def finish(self):
        return [] if self.done else self._end()

    def estimate(self):
        """The request's input estimate, and the output streamed when no usage comes."""
        return self.context.input_tokens, self.output_tokens

    # -- hooks: what a translator makes of each piece ---------------------------------------

    def reword(self, error):
        """An upstream's error event in the words the client acts on (a context overflow)."""
        return error

    def on_start(self, chunk):
        """The first chunk with a choice: the answer begins."""
        return []

    def on_open(self, piece):
        """A piece begins ("thinking", "text" or a named ChatCall), after the one before closed."""
        return []

    def on_close(self, piece):
        return []

    def on_thinking(self, text):
        return []

    def on_text(self, text):
        return []

    def on_refusal(self, text):
        """A refusal's text, in the "text" piece."""
        return []

    def on_arguments(self, call, fragment):
        return []

    def on_finish(self, choice):
        """The finish_reason came (in `choice`), the open piece closed; usage may follow."""
        return []

    def on_end(self):
        """The answer's end: the usage (self.usage, None when none came) is all there will be."""
        return []

    # -- the grammar -------------------------------------------------------------------------

    def _usual_text(self, chunk):
        """The text of the usual chunk, else None: mid-answer, one choice (index 0) whose delta is
        text alone (Ollama and OpenRouter add "role": "assistant" to every delta, which says
        nothing new), no finish_reason, usage or error. Each field is checked as it is read, so
        such a chunk needs no shapes.chat_chunk."""
        if not self.started or self.finished is not None or type(chunk) is not dict:
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

    def _pieces(self, delta):
        """The pieces one delta carries, each to its hook."""
        content = delta.get("content")
        if len(delta) == 1 and type(content) is str:  # the usual chunk, text alone: nothing below applies
            return self._text(content) if content else []
        out = self._thinking(reasoning_text(delta))
        for kind, text in content_parts(content):
            out += self._thinking(text) if kind == "thinking" else self._text(text)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refused = True
            self.output_tokens += text_tokens(refusal)
            out += self._switch("text") + self.on_refusal(refusal)
        for position, entry in enumerate(delta.get("tool_calls") or []):
            if isinstance(entry, dict):
                out += self._tool_call(position, entry)
        return out

    def _thinking(self, text):
        if not text:
            return []
        self.output_tokens += text_tokens(text)
        return self._switch("thinking") + self.on_thinking(text)

    def _text(self, text):
        self.output_tokens += text_tokens(text)
        if self.open == "text":
            return self.on_text(text)
        return self._switch("text") + self.on_text(text)

    def _tool_call(self, position, entry):
        index = entry.get("index")
        index = index if isinstance(index, int) else position
        function = json_object(entry.get("function"))
        name, call_id = function.get("name"), entry.get("id")
        arguments = arguments_text(function.get("arguments"))
        call = self.calls.get(index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = self.calls[index] = ChatCall(call_id, name)
        elif call.opened and call is not self.open:  # its piece is closed
            if not arguments:
                return []  # a repeat of a finished call's id or name adds nothing
            raise BridgeError(
                "api_error",
                f"upstream sent more arguments for tool call {index} after another part of the "
                "answer had started; the client's stream cannot go back to it",
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
            out = self._switch(call)
            call.opened = True
            arguments, call.pending = "".join([*call.pending, arguments]), []
        if arguments:
            self.output_tokens += text_tokens(arguments)
            out += self.on_arguments(call, arguments)
        return out

    def _switch(self, piece):
        """Open `piece` unless it is the open one, closing the one before."""
        if self.open == piece:
            return []
        out = self._close()
        self.open = piece
        return out + self.on_open(piece)

    def _close(self):
        if self.open is None:
            return []
        piece, self.open = self.open, None
        return self.on_close(piece)

    def _end(self):
        if self.finished is None:
            raise BridgeError(
                "api_error", "upstream stream ended before a finish_reason; the answer is incomplete", status=502
            )
        unnamed = [index for index, call in self.calls.items() if not call.opened]
        if unnamed:
            raise BridgeError("api_error", f"upstream streamed tool call {unnamed[0]} without a name", status=502)
        self.done = True
        return self.on_end()
