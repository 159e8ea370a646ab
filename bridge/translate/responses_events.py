"""Answering a Responses client: the `response` object and its event stream, whatever the upstream
(pure functions, and the event writer every pair serving a Responses client shares).

The response names the model the client asked for, carries the request's `response_id` and
`created_at`, and repeats the request parameters in `Context.echo` (responses_client.py).
Item ids are the type's prefix and the response id's hex with the output index, so the
streamed and the non-streamed answer agree. A `reasoning` item always carries bridge's own
`encrypted_content` for the client to echo (protocols/reasoning.py) and shows its text as a
`summary_text` only when the request asked for a summary. A call to a custom tool is a
`custom_tool_call` whose `input` is the text of the upstream's `{"input": "..."}`, a call to a
namespaced tool carries its `namespace`. A cut-off answer (the upstream's finish reason
`length`) is `status: "incomplete"`, `incomplete_details.reason: "max_output_tokens"`, with
its last item `incomplete`, as OpenAI does. Usage follows OpenAI: `input_tokens` include
cache reads and writes, shown again as `cached_tokens` and `cache_write_tokens` (Codex reads
both), and `output_tokens` include `reasoning_tokens`.

ResponsesEvents writes the stream the client gets, the events OpenAI sends, each with `type`
and a `sequence_number` counting from 0: `response.created` and `response.in_progress`; per
output item `response.output_item.added`, its parts and deltas, and
`response.output_item.done` with the whole item; last `response.completed`, or
`response.incomplete`, with the whole response; `response.failed` when the stream cannot
go on, its error code one Codex acts on (response_error). One item is open at a time: an
item ends (`output_item.done`) when the next begins or the answer ends, so a refusal can
still join the last message and a cut-off answer marks its last item `incomplete`.
"""

import dataclasses
import json
import re

from ..protocols import json_codec, overflow

ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "reasoning": "rs",
    "web_search_call": "ws",
}
# The request parameters a Response must repeat, when the request translator has not set them.
REQUIRED_ECHO = {"tool_choice": "auto", "tools": [], "parallel_tool_calls": True}
# A call item's events and the field its deltas build.
CALL_EVENTS = {
    "function_call": ("response.function_call_arguments", "arguments"),
    "custom_tool_call": ("response.custom_tool_call_input", "input"),
}
# How a custom tool's input JSON opens: the request translators declare `{"input": string}`.
_INPUT_OPENING = re.compile(r'\s*\{\s*"input"\s*:\s*"')
_OPENING_MAX = 256  # characters of input waited for to see that opening: the rest is not kept per fragment
_HIGH_SURROGATES = ("d8", "d9", "da", "db")


# -- the response and its items ------------------------------------------------------------


def envelope(context, status, output, *, usage=None, error=None, incomplete_details=None):
    """The response object around `output`, in every state the stream announces too."""
    return {
        "id": context.response_id,
        "object": "response",
        "created_at": context.created_at,
        "status": status,
        "error": error,
        "incomplete_details": incomplete_details,
        "model": context.model,
        "output": output,
        "usage": usage,
        **REQUIRED_ECHO,
        **context.echo,
    }


def outcome(finish_reason):
    """`status` and `incomplete_details` for OpenAI's finish reason: a cut-off answer is incomplete."""
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    return "completed", None


def mark_incomplete(output):
    """The last item of a cut-off answer is incomplete (a message, a call; not a reasoning item)."""
    if output and "status" in output[-1]:
        output[-1]["status"] = "incomplete"


def item_id(context, item_type, output_index):
    """Stable within one response and unique across responses: the response id carries 32 random hex digits."""
    return f"{ID_PREFIXES[item_type]}_{context.response_id.removeprefix('resp_')}{output_index:04x}"


def message_item(identifier, parts, status="completed"):
    return {"id": identifier, "type": "message", "status": status, "role": "assistant", "content": parts}


def output_text(text, annotations=()):
    return {"type": "output_text", "text": text, "annotations": list(annotations), "logprobs": []}


def refusal_part(text):
    return {"type": "refusal", "refusal": text}


def summary_text(text):
    return {"type": "summary_text", "text": text}


def reasoning_item(identifier, text, encrypted, summary):
    """The reasoning's text is a summary only when asked for; `encrypted` always rides along."""
    return {
        "id": identifier,
        "type": "reasoning",
        "summary": [summary_text(text)] if summary and text else [],
        "encrypted_content": encrypted,
    }


def client_tool(context, upstream_name):
    """What the client declared under an upstream tool name: {"kind", "name", "namespace"}."""
    return context.tools.get(upstream_name) or {"kind": "function", "name": upstream_name, "namespace": None}


def call_item(context, output_index, call_id, upstream_name, value, status="completed"):
    """A function_call (`value`: its arguments, JSON text) or, for a custom tool, a custom_tool_call
    (`value`: its input text), under the client's own tool name."""
    tool = client_tool(context, upstream_name)
    item_type = "custom_tool_call" if tool["kind"] == "custom" else "function_call"
    item = {
        "id": item_id(context, item_type, output_index),
        "type": item_type,
        "status": status,
        "call_id": call_id,
        "name": tool["name"],
        CALL_EVENTS[item_type][1]: value,
    }
    if tool.get("namespace"):
        item["namespace"] = tool["namespace"]
    return item


def custom_input(tool_input):
    """A custom tool's freeform text: the request translators declared it as `{"input": string}`."""
    value = tool_input.get("input") if isinstance(tool_input, dict) else tool_input
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def usage(input_tokens, cached, cache_write, output, reasoning, **extra):
    """Responses usage: `input_tokens` include the cache reads and writes, `output` the reasoning."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output,
        **extra,
    }


def response_error(error):
    """The Response `error` for a BridgeError, with a code Codex acts on.

    rate_limit_exceeded: Codex retries after the delay it reads from "try again in Ns";
    context_length_exceeded: it stops and says the context window is full; anything
    else is server_error, which it retries with backoff.
    """
    message = error.message
    if error.kind == "rate_limit":
        seconds = _seconds((error.upstream_headers or {}).get("retry-after"))
        if seconds is not None:
            message = f"{message.rstrip('.')}. Please try again in {seconds:g}s."
        return {"code": "rate_limit_exceeded", "message": message}
    if error.code == "context_length_exceeded" or overflow.find(error.upstream_detail) is not None:
        return {"code": "context_length_exceeded", "message": message}
    return {"code": "server_error", "message": message}


def _seconds(retry_after):
    """A Retry-After given in seconds; an HTTP date (rare upstream) gives no delay here."""
    try:
        seconds = float(retry_after)
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < float("inf") else None


# -- the stream ----------------------------------------------------------------------------


@dataclasses.dataclass
class Item:
    """An output item from output_item.added to output_item.done."""

    index: int
    type: str
    id: str
    done: dict = None  # the item as output_item.done carries it
    parts: list = dataclasses.field(default_factory=list)  # a message's content, each part as done


@dataclasses.dataclass
class Piece:
    """What feeds an item (an upstream block or part of the answer): the writer's bookkeeping of it."""

    item: Item = None  # the item it feeds, once it feeds one
    part: int = None  # its content index in a message
    sent: list = dataclasses.field(default_factory=list)  # what its deltas sent, joined at its end
    summary_open: bool = False  # its reasoning summary part was announced
    custom: "InputText" = None  # a custom tool call's input, decoded as it comes
    # its part's text delta as the relay frames it, once the fast path wrote one (a cache)
    frame: bytes = dataclasses.field(default=None, repr=False, compare=False)


class ResponsesEvents:
    """The writer of a Responses event stream, mixed into a pair's stream translator.

    The translator holds a `context` (responses_client.Context) and calls these as the
    upstream's answer comes; `_closing(item)` is its hook for what must be said of an item's
    pieces before the item is done.
    """

    context = None
    done = False

    def __init__(self):
        self.sequence = 0  # the next event's sequence_number
        self.opened = False  # response.created is out
        self.items = []  # every item added so far; the last may be open
        self.output = []  # the items done, for the final response

    def fail(self, error):
        """The events that end the stream after `error`: response.failed with the items done so far."""
        if self.done:
            return []
        out = [] if self.opened else self._open_response()
        self.done = True
        failed = envelope(self.context, "failed", list(self.output), error=response_error(error))
        return [*out, self._event("response.failed", response=failed)]

    # -- the response ----------------------------------------------------------------------

    def _open_response(self):
        self.opened = True
        return [
            self._event(kind, response=envelope(self.context, "in_progress", []))
            for kind in ("response.created", "response.in_progress")
        ]

    def _end_response(self, status, incomplete_details, answer_usage):
        """The open item closed, and the last event: response.completed or response.incomplete."""
        out = self._close_item(status == "incomplete")
        final = envelope(
            self.context, status, list(self.output), usage=answer_usage, incomplete_details=incomplete_details
        )
        return [*out, self._event(f"response.{status}", response=final)]

    # -- items and parts -------------------------------------------------------------------

    def _closing(self, item):
        """The events owed by `item`'s pieces before its output_item.done."""
        return []

    def _open_item(self, piece, item_type, added):
        """Close the open item and announce the next, which `piece` feeds; `added(id)` is it as announced."""
        out = self._close_item()
        index = len(self.items)
        item = piece.item = Item(index, item_type, item_id(self.context, item_type, index))
        self.items.append(item)
        return [*out, self._event("response.output_item.added", output_index=index, item=added(item.id))]

    def _close_item(self, incomplete=False):
        """output_item.done for the open item, after whatever of its pieces are still open."""
        item = self._open()
        if item is None:
            return []
        out = self._closing(item)
        if item.type == "message":
            item.done = message_item(item.id, item.parts)
        if incomplete and "status" in item.done:
            item.done["status"] = "incomplete"
        self.output.append(item.done)
        return [*out, self._event("response.output_item.done", output_index=item.index, item=item.done)]

    def _open(self):
        """The last item, while it has not had its output_item.done."""
        if self.items and len(self.output) < len(self.items):
            return self.items[-1]
        return None

    def _open_part(self, piece, empty_part):
        """A new content part in the open message, or in a new one when another item came between."""
        out, message = [], self._open()
        if message is None or message.type != "message":
            out = self._open_item(piece, "message", lambda identifier: message_item(identifier, [], "in_progress"))
        else:
            piece.item = message
        piece.part = len(piece.item.parts)
        piece.item.parts.append(empty_part)
        piece.frame = None
        return [*out, self._event("response.content_part.added", **self._where(piece), part=empty_part)]

    def _open_call(self, piece, template):
        """A call item, announced as `template` with nothing of its arguments or input yet."""
        field = CALL_EVENTS[template["type"]][1]
        out = self._open_item(piece, template["type"], lambda identifier: {**template, field: ""})
        if template["type"] == "custom_tool_call":
            piece.custom = InputText()
        return out

    def _refusal(self, text):
        """A refusal part, whole, in the open message (or a new one)."""
        piece = Piece()
        out = self._open_part(piece, refusal_part(""))
        where = self._where(piece)
        piece.item.parts[piece.part] = refusal_part(text)
        return [
            *out,
            self._event("response.refusal.delta", **where, delta=text),
            self._event("response.refusal.done", **where, refusal=text),
            self._event("response.content_part.done", **where, part=refusal_part(text)),
        ]

    # -- fragments -------------------------------------------------------------------------

    def _delta(self, piece, text):
        """A delta of what the piece builds: message text, a call's arguments or a custom tool's input."""
        item = piece.item
        if item.type == "message":
            sequence = self.sequence
            self.sequence = sequence + 1
            return _text_delta(sequence, piece, text)
        return self._event(CALL_EVENTS[item.type][0] + ".delta", **self._where(piece), delta=text)

    def _fast_delta(self, piece, text):
        """_delta's event of a plain text for the message, as the relay frames it (serve/streaming.py):
        the fast path (translator.py)."""
        frame = piece.frame
        if frame is None:
            data = b"event: response.output_text.delta\ndata: %s\n\n" % json_codec.dumps(_text_delta(0, piece, ""))
            data = data.replace(b"%", b"%%").replace(b'"sequence_number":0,', b'"sequence_number":%d,', 1)
            frame = piece.frame = data.replace(b'"delta":""', b'"delta":"%s"', 1)
        sequence = self.sequence
        self.sequence = sequence + 1
        return frame % (sequence, text.encode())

    def _input(self, piece, fragment):
        """A fragment of a call's arguments as its delta; a custom call's, as the text it decodes to."""
        if piece.custom is not None:
            fragment = piece.custom.feed(fragment)
        if not fragment:
            return []
        piece.sent.append(fragment)
        return [self._delta(piece, fragment)]

    def _summary(self, piece, text):
        """Reasoning text as a summary delta (its part announced first), when a summary was asked for."""
        if not self.context.summary or not text:
            return []
        where = {"item_id": piece.item.id, "output_index": piece.item.index, "summary_index": 0}
        out = []
        if not piece.summary_open:
            piece.summary_open = True
            out.append(self._event("response.reasoning_summary_part.added", **where, part=summary_text("")))
        return [*out, self._event("response.reasoning_summary_text.delta", **where, delta=text)]

    # -- piece ends ------------------------------------------------------------------------

    def _text_done(self, piece, text, annotations=()):
        """A message's text part done, its value `text` (what the deltas sent, or the whole answer)."""
        where = self._where(piece)
        part = piece.item.parts[piece.part] = output_text(text, annotations)
        return [
            *self._rest(piece, text),
            *(
                self._event("response.output_text.annotation.added", **where, annotation_index=n, annotation=note)
                for n, note in enumerate(part["annotations"])
            ),
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=part),
        ]

    def _call_done(self, piece, done):
        """A call's arguments or input done: `done` is the whole item, as output_item.done will carry it."""
        piece.item.done = done
        kind, field = CALL_EVENTS[done["type"]]
        named = {"name": done["name"]} if field == "arguments" else {}
        return [
            *self._rest(piece, done[field]),
            self._event(kind + ".done", **self._where(piece), **named, **{field: done[field]}),
        ]

    def _summary_done(self, piece, text):
        """The summary part's .done events, when it was announced."""
        if not piece.summary_open:
            return []
        where = {"item_id": piece.item.id, "output_index": piece.item.index, "summary_index": 0}
        return [
            self._event("response.reasoning_summary_text.done", **where, text=text),
            self._event("response.reasoning_summary_part.done", **where, part=summary_text(text)),
        ]

    def _rest(self, piece, value):
        """The delta for what the final value adds to what the deltas sent, when it continues it."""
        sent = "".join(piece.sent)
        if len(value) <= len(sent) or not value.startswith(sent):
            return []
        return [self._delta(piece, value[len(sent) :])]

    @staticmethod
    def _where(piece):
        where = {"item_id": piece.item.id, "output_index": piece.item.index}
        if piece.part is not None:
            where["content_index"] = piece.part
        return where

    def _event(self, kind, **fields):
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event


def _text_delta(sequence, piece, text):
    """The event of every text delta of an answer (_event and _where written out)."""
    return {
        "type": "response.output_text.delta",
        "sequence_number": sequence,
        "item_id": piece.item.id,
        "output_index": piece.item.index,
        "content_index": piece.part,
        "delta": text,
        "logprobs": [],
    }


class InputText:
    """The text of a custom tool's `{"input": "<text>"}` JSON, decoded as its fragments arrive.

    Decoding starts once the fragments open with the `input` string and stops at its
    closing quote; it holds back a trailing backslash escape until the escape is whole
    (a `\\uD83D` until its low surrogate), so each piece decodes on its own and the pieces
    join to the string's value. JSON in another shape decodes nothing here; the call's
    end then sends the whole input at once.
    """

    def __init__(self):
        self.raw = ""
        self.start = None  # where the string's content begins in raw, once seen
        self.closed = False

    def feed(self, fragment):
        if self.closed:
            return ""
        self.raw += fragment
        if self.start is None:
            opening = _INPUT_OPENING.match(self.raw)
            if opening is None:
                # Not the opening yet; longer than any opening but padded with spaces, it is another shape.
                self.closed = len(self.raw) > _OPENING_MAX
                return ""
            self.start = opening.end()
        end = self._whole(self.start)
        # Keep only what is not decoded yet: appending to the whole input would copy it per fragment.
        piece, self.raw, self.start = self.raw[self.start : end], self.raw[end:], 0
        try:
            return json.loads(f'"{piece}"')
        except ValueError:  # not JSON string content: leave it to the call's end
            self.closed = True
            return ""

    def _whole(self, position):
        """Where the decodable run from `position` ends: at the closing quote or a cut escape."""
        raw = self.raw
        while position < len(raw):
            char = raw[position]
            if char == '"':
                self.closed = True
                return position
            if char != "\\":
                position += 1
                continue
            width = 6 if raw[position + 1 : position + 2] == "u" else 2
            if width == 6 and raw[position + 2 : position + 4].lower() in _HIGH_SURROGATES:
                # A high surrogate decodes with the low one that follows it as one character.
                after = raw[position + 6 : position + 8]
                if after in ("", "\\"):
                    return position
                if after == "\\u":
                    width = 12
            if len(raw) < position + width:
                return position
            position += width
        return position
