"""Pass-through: a client whose route's upstream speaks the client's own protocol.

Nothing is translated. The request is checked for what the bridge itself reads (the
model, `stream`, the output-token limits it may cap), its model name swapped for the
deployment's and its credential for the deployment's, and everything else goes on as the
client wrote it: the upstream validates the rest in the same protocol, and its 4xx reaches
the client in that protocol's shape. A stricter check here would refuse what the upstream
serves (`n`, `logprobs`, a new Anthropic block type) with nothing to translate.

The answer is relayed as the upstream wrote it: a body byte for byte (the upstream's model
name included), a stream event for event, re-framed as it arrives, so that the relay
(streaming.py) still sends keep-alives, meters the usage events, and closes the upstream
when the client leaves. Re-framing costs about 1.6 us per event over the parse the relay
does anyway (a text delta, measured): no reason for a second, byte-copying relay. A stream
that ends before its protocol's last event is cut short with an error event, as a
translated one is. A Messages client's count_tokens goes to the Anthropic deployment's own,
for the upstream's exact count.

A Chat upstream reports a stream's usage only when asked, which the openai SDK does not by
default: unless the deployment's `stream_usage` is off, the bridge asks for it and takes out
of the client's stream what the client did not ask for (the usage-only chunk, and the
`usage: null` then on every other), so that the client gets the stream the upstream would
have sent it. The relays keep bridge's estimate of the tokens (translator.py) for a stream
that stops before its upstream reported them.
"""

import dataclasses

from ..protocols import UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES, json_codec, sse
from ..protocols.errors import ANTHROPIC, OPENAI, BridgeError, from_anthropic, from_openai, invalid
from ..translate import translator
from ..translate.messages_client import TEXT_DELTA_FRAME
from ..translate.model_map import map_model
from ..translate.responses_stream import VARY
from ..translate.tokens import chat_input_tokens, responses_input_tokens, size_tokens, text_size


@dataclasses.dataclass
class Context:
    model: str  # as the client asked for it
    stream: bool
    dropped: tuple = ()  # nothing is dropped; http.answer reports this
    input_tokens: int = None  # an OpenAI stream's input as bridge estimates it, for when no usage comes
    hide_usage: bool = False  # the usage bridge asked for, which the client did not


# The fields the bridge reads, per protocol: everything else is the upstream's to judge
# (a Messages body without max_tokens too: Anthropic says so in its own words).
_TOKEN_FIELDS = {
    UPSTREAM_MESSAGES: ("max_tokens",),
    UPSTREAM_CHAT: ("max_tokens", "max_completion_tokens"),
    UPSTREAM_RESPONSES: ("max_output_tokens",),
}


def validate(body, protocol):
    """The checks pass-through needs (`protocol`: the client's and the upstream's); the model was
    checked when its route was found."""
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise invalid("stream: must be a boolean", param="stream")
    for field in _TOKEN_FIELDS[protocol]:
        value = body.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise invalid(f"{field}: must be a whole number of at least 1", param=field)
    return body


def to_upstream(body, deployment):
    """(the body with the deployment's model name, Context)."""
    upstream_body = {**body, "model": map_model(deployment.settings.model_map, body["model"])}
    context = Context(body["model"], bool(body.get("stream")))
    if context.stream and deployment.protocol == UPSTREAM_CHAT:
        context.input_tokens = chat_input_tokens(body)
        if deployment.settings.openai_stream_usage:
            _ask_for_usage(upstream_body, context)
    elif context.stream and deployment.protocol == UPSTREAM_RESPONSES:
        context.input_tokens = responses_input_tokens(body)  # its usage comes only with its last event
    return upstream_body, context


def _ask_for_usage(body, context):
    """Ask a Chat upstream for the stream's usage unless the client did. A `stream_options` or an
    `include_usage` that is not what the API takes goes on as it is, for the upstream's 400."""
    options = body.get("stream_options")
    options = {} if options is None else options
    if not isinstance(options, dict) or options.get("include_usage") not in (None, False):
        return
    body["stream_options"] = {**options, "include_usage": True}
    context.hide_usage = True


def check_answer(body, protocol):
    """A non-streamed answer is relayed only if it is one: an object, and not an error inside a 200
    (which goes to the client with the error's status, as a translated answer's does)."""
    if not isinstance(body, dict):
        raise BridgeError("api_error", "upstream answered with JSON that is not an object", status=502)
    if protocol == ANTHROPIC and body.get("type") == "error":
        raise from_anthropic(body)
    if protocol == OPENAI and body.get("error") and body.get("status") != "failed":  # a failed response is an answer
        raise from_openai(body)


class _Relay(translator.StreamTranslator):
    """Each upstream event as it came; an upstream error event too, after the access record saw it."""

    def __init__(self, context):
        self.context = context
        self._ending = None  # the upstream's own last events, which the client gets instead of bridge's

    def fail(self, error):
        if self._ending is not None:
            return self._ending
        return super().fail(error)

    def _failed(self, payload, error):
        """Raise `error` for the relay to record, and hand the client the upstream's own event."""
        self._ending = [payload]
        raise error


# TEXT_DELTA_FRAME in parts, around its block's index and its text: the fast path's bytes joined.
_BEFORE_INDEX, _BETWEEN, _AFTER_TEXT = TEXT_DELTA_FRAME.replace(b"%s", b"%d").split(b"%d")


class AnthropicRelay(_Relay):
    protocol = ANTHROPIC
    # What fast() reads an event with, the usual shape (json_codec.Shape.encoded() of it for
    # Bedrock's bytes), and the frame's bytes before the text.
    _writing = (None, None)

    def feed(self, event_name, payload):
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(kind, str):
            raise BridgeError("api_error", "upstream sent a stream event that is not a typed object", status=502)
        if kind == "content_block_delta":  # the output; message_start reported the input
            delta = payload.get("delta")
            value = (
                delta.get("text") or delta.get("partial_json") or delta.get("thinking") if type(delta) is dict else 0
            )
            if type(value) is str:
                self.relayed += len(value) if value.isascii() else text_size(value)  # a call fewer per event
                if self._unread is not None and delta.get("type") == "text_delta":
                    self._learn_text(payload, value)
        elif kind == "error":
            self._failed(payload, from_anthropic(payload))
        elif kind == "content_block_stop":
            self._usual = None  # learned for a block, as its index says
        self.done = kind == "message_stop"
        return [payload]

    def fast(self, event):
        """A text_delta of the learned shape, as the full path writes it (translator.py: the fast
        path, here without a translation): Bedrock's events need no JSON read and write either."""
        if self._usual is None or self.done:
            return self._pass_on(event)
        shape, before = self._writing  # set with _usual (_learn_text); Bedrock's reads bytes
        text = shape.read(event.data)
        if text is None:
            return self._pass_on(event)
        if text.isascii():
            self.relayed += len(text)
        elif type(text) is str:
            self.relayed += text_size(text)
        else:  # Bedrock's event, UTF-8 bytes: read and written as bytes
            try:
                self.relayed += text_size(text.decode())
            except UnicodeDecodeError:
                return self._pass_on(event)  # read by the full path, which refuses it
        return before + (text.encode() if type(text) is str else text) + _AFTER_TEXT

    def fast_text(self, index, text):
        return TEXT_DELTA_FRAME % (index, text.encode())

    def _learn_text(self, payload, text):
        """Learn the shape of a text_delta whose frame is the template's to the byte (its keys in
        the order the template writes them), so that either path writes the same bytes."""
        index = payload.get("index")
        written = sse.encode(json_codec.dumps(payload), "content_block_delta")
        if type(index) is int and self.fast_text(index, text) == written:
            usual, encoded = self._usual, type(self._unread) is bytes
            self._learn(payload, "text", text, at=index, padded=True)
            if self._usual is not usual:  # a new shape: the one fast() reads with, and the frame's head
                self._writing = (
                    self._usual.encoded() if encoded else self._usual,
                    b"%s%d%s" % (_BEFORE_INDEX, index, _BETWEEN),
                )
        else:
            self._unread = None

    def finish(self):
        if self.done:
            return []
        raise BridgeError(
            "api_error", "upstream stream ended before message_stop; the answer is incomplete", status=502
        )


class ChatRelay(_Relay):
    protocol = OPENAI

    def __init__(self, context):
        super().__init__(context)
        self._finished = False  # a finish_reason came

    def feed(self, event_name, payload):
        if payload == translator.DONE:
            self.done = True
            return []
        if not isinstance(payload, dict):
            raise BridgeError("api_error", "upstream sent a stream chunk that is not an object", status=502)
        if payload.get("error"):
            self._failed(payload, from_openai(payload))
        choices = payload.get("choices")
        if type(choices) is list:
            for choice in choices:
                if type(choice) is dict:
                    if choice.get("finish_reason"):
                        self._finished = True
                    delta = choice.get("delta")
                    content = delta.get("content") if type(delta) is dict else None
                    if type(content) is str and len(delta) == 1:  # the usual chunk: text_size, a call fewer
                        self.relayed += len(content) if content.isascii() else text_size(content)
                    elif delta:
                        self.relayed += _output_size(delta)
        if self.context.hide_usage and "usage" in payload:
            if isinstance(payload["usage"], dict) and not choices:
                return []  # the usage-only chunk: the access record heard it
            del payload["usage"]
        return [payload]

    def finish(self):
        """A server that ends its body without `data: [DONE]` after a finish_reason (some do) is
        complete: the relay adds the [DONE] the client waits for."""
        if not self.done and not self._finished:
            raise BridgeError(
                "api_error", "upstream stream ended before a finish_reason; the answer is incomplete", status=502
            )
        self.done = True
        return []

    def estimate(self):
        return self.context.input_tokens, size_tokens(self.relayed)


# The events that end a Responses stream, and the deltas that carry its output.
_RESPONSES_ENDS = ("response.completed", "response.incomplete", "response.failed")
_TEXT_DELTA = "response.output_text.delta"
_TEXT_DELTA_FRAME = b"event: response.output_text.delta\ndata: %s\n\n"
_RESPONSES_DELTAS = {
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
}


class ResponsesRelay(_Relay):
    """A Responses stream, which ends with its response's last state (completed, incomplete or failed).

    An `error` event is relayed as it came, and so is what follows it: OpenAI may end the
    stream there or with a `response.failed`. Either end is the upstream's failure for the
    access record, raised once the client has the event (fail() then adds nothing).
    """

    protocol = OPENAI
    _error = None  # the error event's, until the stream's end

    def feed(self, event_name, payload):
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(kind, str):
            raise BridgeError("api_error", "upstream sent a stream event that is not a typed object", status=502)
        if kind in _RESPONSES_DELTAS:
            delta = payload.get("delta")
            if type(delta) is str:
                self.relayed += len(delta) if delta.isascii() else text_size(delta)
                if self._unread is not None and kind == _TEXT_DELTA:
                    self._learn_text(payload, delta)
        elif kind == "error":
            self._error = from_openai(
                {"error": payload.get("error") if isinstance(payload.get("error"), dict) else payload}
            )
        elif kind == "response.failed":
            response = payload.get("response")
            self._failed(
                payload,
                self._error or from_openai({"error": response.get("error") if isinstance(response, dict) else None}),
            )
        self.done = kind in _RESPONSES_ENDS
        return [payload]

    def fast(self, event):
        """An output_text.delta of the learned shape, its bytes as they came, which are the full
        path's (translator.py: the fast path, here without a translation)."""
        if self._usual is not None and not self.done:
            text = self._usual.read(event.data)
            if text is not None:
                self.relayed += len(text) if text.isascii() else text_size(text)
                return self.fast_text(None, event.data)
        return self._pass_on(event)

    def fast_text(self, index, data):
        return _TEXT_DELTA_FRAME % data.encode()

    def _learn_text(self, payload, text):
        """Learn the shape of a text delta whose data is what the full path writes of it, to the
        byte (compact, its members in that order), so that either path writes the same bytes."""
        if type(self._unread) is str and json_codec.dumps(payload) == self._unread.encode():
            self._learn(payload, "delta", text, vary=VARY)
        else:
            self._unread = None

    def finish(self):
        if self.done:
            return []
        if self._error is not None:
            self._ending = []  # the error event, relayed, was the stream's last
            raise self._error
        raise BridgeError(
            "api_error", "upstream stream ended before response.completed; the answer is incomplete", status=502
        )

    def fail(self, error):
        if self._ending is not None:
            return self._ending
        return [{"type": "error", **error.body_for(self.protocol)}]  # an error event, as OpenAI writes one

    def estimate(self):
        return self.context.input_tokens, size_tokens(self.relayed)


_OUTPUT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")


def _output_size(delta):
    """The text_size of the output in a Chat delta: text, reasoning, a refusal, tool arguments."""
    if type(delta) is not dict:
        return 0
    size = sum(text_size(value) for value in map(delta.get, _OUTPUT_FIELDS) if type(value) is str)
    calls = delta.get("tool_calls")
    for call in calls if type(calls) is list else ():
        function = call.get("function") if type(call) is dict else None
        arguments = function.get("arguments") if type(function) is dict else None
        size += text_size(arguments) if type(arguments) is str else 0
    return size
