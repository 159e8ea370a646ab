"""The stream-translator contract: what the relay (streaming.py) calls, and each front's stream.py is.

A stream translator is a pure state machine over one upstream stream. The
relay decodes the upstream's SSE body and, for each event, calls
`feed(event_name, payload)`: the `event:` name (or None) and the parsed JSON
data, or DONE for an OpenAI upstream's `data: [DONE]`. At the body's end it
calls `finish()`. Each returns the client's next events, every one a dict
that the client's framing (streaming.py) writes as SSE.

When the stream cannot go on, feed or finish raise BridgeError, and the relay
sends what `fail(error)` returns, then ends the response. Once the client's
last event is out the translator sets `done`, and the relay ends the
response at once instead of waiting (and pinging) for the upstream's end.

A translator also keeps bridge's own count of the stream's tokens (`estimate`),
which the access record uses for what the upstream did not report: a Chat
upstream reports usage only at its end (and only when asked), an Anthropic
one its output only at its end, and a client may leave before either.

Keep-alives are not a translator's business: the relay sends the client's
own kind whenever nothing went to the client for a while, an upstream ping
included.

The fast path: most of a stream is one event, a piece of text, repeated but for that text.
A translator whose pair writes the client's text event from a template (`fast_text`) learns
the shape of the upstream's usual text event from one that `feed` read (json_codec.Shape),
and `fast(event)` then writes the next ones that have that shape without parsing them or
making any item, moving the state as `feed` would; any other event, it passes on (None) to
`feed`. The relay skips it for a record that keeps the answer's text, which must see every
item, and a shape is learned only from an event the record reads nothing from (no usage).
"""

import abc

from ..protocols import json_codec
from .tokens import size_tokens

DONE = "[DONE]"
# How many times a stream may fail to learn its usual event's shape, or learn one that then
# misses: one whose text events do not repeat (a member that changes in every one) stops trying
# and costs no more than the full path.
LEARNS = 8


class StreamTranslator(abc.ABC):
    """One upstream stream in, one client stream out."""

    protocol = None  # errors.ANTHROPIC or errors.OPENAI: the shape of the client's error events
    done = False
    relayed = 0  # what the upstream streamed of text, thinking and tool arguments so far (tokens.text_size)
    # The fast path (above): the grammar's fast(event), and the pair's writer of the client's bytes
    # for a plain text, called as the grammar's on_text, None when that text is for feed (a part of
    # another kind open); fast_text None: no fast path.
    fast = fast_text = None
    _usual = _usual_at = None  # the usual text event's json_codec.Shape, and where its text goes (a block...)
    _unread = None  # the data of the event fast() last passed on to feed, to learn the shape from
    _learns = LEARNS

    @abc.abstractmethod
    def feed(self, event_name, payload):
        """The client events for one upstream event."""

    @abc.abstractmethod
    def finish(self):
        """The client events owed once the upstream body ended, or BridgeError if it ended too early."""

    def estimate(self):
        """(input, output) tokens as bridge counts them: the request's input (None where the upstream
        reports it at the stream's start, as Anthropic's message_start does) and the output so far."""
        return None, size_tokens(self.relayed)

    def fail(self, error):
        """The events that end the client's stream after `error`: the protocol's error event."""
        return [error.body_for(self.protocol)]

    def _pass_on(self, event):
        """fast()'s answer for an event it does not write: None, the event kept to learn from."""
        if self._learns:
            self._unread = event.data
        return None

    def _learn(self, payload, key, text, at=None, **form):
        """Take the event fast() passed on, now read as `payload` whose member `key` is the text
        `text` going `at` its place, as the shape of the usual text event (json_codec.Shape;
        `form`: what changes from one event to the next, its `vary` and `padded`)."""
        data, self._unread = self._unread, None
        if type(data) is not str:  # Bedrock's events come as bytes (fast() reads them decoded)
            data = text_of(data)
            if data is None:
                self._learns = 0
                return
        if not json_codec.plain(text):
            return  # an escape: not a shape to learn, and no try spent
        shape = None
        if payload.get("usage") is None and "message" not in payload and "response" not in payload:
            shape = json_codec.Shape.learn(data, key, text, **form)
        if shape is None or self._usual is not None:
            # a try spent: no shape, or the one learned missed a text event of its piece (the
            # first shape of a piece, an Anthropic block or a Responses part, is free)
            self._learns -= 1
        if shape is not None:
            self._usual, self._usual_at = shape, at


def text_of(data):
    """An event's data as text: Bedrock's come as UTF-8 bytes; None for bytes that are not
    UTF-8, which only the full path reads (and refuses)."""
    if type(data) is str:
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None
