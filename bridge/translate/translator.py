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
"""

import abc

from .tokens import size_tokens

DONE = "[DONE]"


class StreamTranslator(abc.ABC):
    """One upstream stream in, one client stream out."""

    protocol = None  # errors.ANTHROPIC or errors.OPENAI: the shape of the client's error events
    done = False
    relayed = 0  # what the upstream streamed of text, thinking and tool arguments so far (tokens.text_size)

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
