"""Small request/response helpers shared by the routes of both directions."""

import contextlib
import json
import math
import re
import time
from urllib.parse import quote

from flask import Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from ..gateway import failover, passthrough, upstream
from ..policy import admission, auth, limits
from ..protocols import UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES, json_codec, ratelimit
from ..protocols.errors import BridgeError, invalid
from ..serve import observability
from ..serve.environ import STREAM_LOOP
from ..serve.streaming import ANTHROPIC_SSE, CHAT_SSE, RESPONSES_SSE, relay

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def bridge():
    """The per-app state built once in create_app: settings, routes, balancer, upstream client.

    Through the app, not the `current_app` proxy's attributes: each of those costs as much as
    several plain calls, and the proxies are looked up several times in every request."""
    return current_app._get_current_object().extensions["bridge"]


def read_json(items="messages", generates=True):
    """The request body as a JSON object, or a 4xx that says what is wrong with it, once the
    client's limits admit it (admission.admit_body; `generates`: it may cost tokens).

    `items` names the request's list of messages (`input` for Responses), for the request limits.
    """
    asked = request._get_current_object()  # one lookup of the request, not one per attribute
    content_type = (asked.mimetype or "").lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise BridgeError(
            "invalid_request",
            "Content-Type must be application/json, got " + repr(asked.content_type or "nothing"),
            status=415,
        )
    raw = asked.get_data(cache=False)
    state = bridge()
    if asked.content_length is None and len(raw) >= state.settings.max_body_bytes:
        # werkzeug ends a chunked body at the limit without a word; it would look like cut JSON
        raise RequestEntityTooLarge()
    settings = state.settings
    limits.check_values(raw, settings.max_json_values)
    body = parse_json(raw)
    limits.check_parsed(body, items, settings)
    record = observability.current()
    record.model = body.get("model") if isinstance(body.get("model"), str) else None
    record.asked(body)
    auth.check_model(record, record.model)
    admission.admit_body(state, raw, body, generates)
    return body


# Seconds a client refused a large-body slot is asked to wait before it tries again.
LARGE_BODY_RETRY_AFTER = "1"


def large_body_slot():
    """Hold one of this worker's large-body slots while the request is read, parsed and translated.

    A body over BRIDGE_LARGE_BODY_BYTES, or of unknown length (chunked), may cost many times its
    size until it is translated; the slots bound how many of them do so at once. With one GIL per
    worker, more at once would take as long in all and hold more memory meanwhile. A request that
    finds none free within BRIDGE_LARGE_BODY_WAIT gets a 503 with `retry-after`, which both SDKs
    retry (admission.refusal). A small body, most requests, takes no slot machinery at all.
    """
    state = bridge()
    size = request._get_current_object().content_length
    if size is not None and size <= state.settings.large_body_bytes:
        return _NO_SLOT
    return _large_body_slot(state)


_NO_SLOT = contextlib.nullcontext()


@contextlib.contextmanager
def _large_body_slot(state):
    if not state.large_body_slots.acquire(timeout=state.settings.large_body_wait):
        raise admission.refusal(
            "overloaded",
            f"the bridge is busy with other large requests (BRIDGE_LARGE_BODY_SLOTS={state.settings.large_body_slots}"
            " per worker); try again shortly",
            LARGE_BODY_RETRY_AFTER,
        )
    try:
        yield
    finally:
        state.large_body_slots.release()


def parse_json(raw):
    """A request body's bytes as a JSON object, or a 400 that says what is wrong with them."""
    if not raw.strip():
        raise invalid("request body is empty; expected a JSON object")
    try:
        body = json_codec.loads(raw, fallback=_parse_strictly)
    except UnicodeDecodeError:
        raise invalid("request body is not valid UTF-8") from None
    except ValueError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise invalid("request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise invalid(f"request body must be a JSON object, got {type(body).__name__}")
    return body


def _parse_strictly(raw):
    """What orjson refused, parsed by the json module to say exactly what is wrong with it.

    The json module also takes what is valid JSON but not valid Unicode, a lone surrogate,
    which orjson refuses: that is looked for here, and only here.
    """
    body = json.loads(raw, parse_constant=_not_json, parse_float=_finite)
    where = _lone_surrogate(raw, body)
    if where is not None:
        raise invalid(
            f"{where}: holds a lone UTF-16 surrogate (half of an emoji?), which is not valid Unicode", param=where
        )
    return body


def _not_json(token):
    """Python's parser accepts NaN and Infinity; JSON (and every upstream) does not."""
    raise ValueError(f"{token} is not a JSON number")


def _finite(text):
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text[:20]} is too large for a JSON number")
    return number


_SURROGATE = re.compile("[\ud800-\udfff]")
# In a UTF-8 body (no NUL byte: UTF-16 and UTF-32 JSON have them) a surrogate gets in only as
# a \uD800-\uDFFF escape or as the same code point in (invalid) UTF-8, which json.loads lets
# through. Two searches of the raw bytes cost a fraction of the walk below, which only the
# bodies they find pay for.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")


def _lone_surrogate(raw, body):
    """The dotted path of a key or string holding a lone surrogate, or None.

    JSON may escape half of a UTF-16 pair ("\\ud83d"), and Python keeps it in the string,
    where it later fails every UTF-8 encode. Walked with a stack: bodies may nest deeply.
    """
    if b"\x00" not in raw and not _SURROGATE_ESCAPE.search(raw) and not _SURROGATE_UTF8.search(raw):
        return None
    pending = [((), body)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return ".".join(map(str, path))
            continue
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            if isinstance(key, str) and _SURROGATE.search(key):
                return ".".join(map(str, path + (key,)))
            pending.append((path + (key,), child))
    return None


def json_response(body, status=200, headers=None):
    observability.current().answered(body)
    return Response(json_codec.dumps(body), status=status, headers=headers or {}, mimetype="application/json")


def sse_response(chunks, headers=None):
    return Response(
        chunks, headers={**SSE_HEADERS, **(headers or {})}, mimetype="text/event-stream", direct_passthrough=True
    )


def forward(route, prepare, stream_translator, translate_body, framing, reword, passthrough=False, path=None):
    """POST a request to the route's deployments (failover.py) and answer the client with the answer.

    `prepare(deployment)` gives (upstream body, context) for one deployment. `reword` gives an
    upstream's error in the client's protocol's own words where that matters to the client (a
    context overflow), and any other error unchanged.
    """

    def prepared(deployment):
        with large_body_slot():  # translating a large body costs memory as reading it did
            return prepare(deployment)

    try:
        deployment, response, context = failover.send(bridge(), route, prepared, passthrough, path)
        return answer(response, context, stream_translator, translate_body, framing, deployment.cloud)
    except upstream.ClientLeft:
        return Response(status=499)  # for the access line (nginx's status for it): nobody reads it
    except BridgeError as error:
        raise reword(error) from None


_PASSED_THROUGH = {
    UPSTREAM_MESSAGES: ("messages_passthrough", passthrough.AnthropicRelay, ANTHROPIC_SSE),
    UPSTREAM_CHAT: ("chat_passthrough", passthrough.ChatRelay, CHAT_SSE),
    UPSTREAM_RESPONSES: ("responses_passthrough", passthrough.ResponsesRelay, RESPONSES_SSE),
}


def pass_through(route, body, path=None):
    """Forward the client's body untranslated to a route of its own protocol (passthrough.py),
    to its generation endpoint or `path`."""
    direction, relay_class, framing = _PASSED_THROUGH[route.protocol]
    passthrough.validate(body, route.protocol)
    observability.current().direction = direction
    return forward(
        route,
        lambda deployment: passthrough.to_upstream(body, deployment),
        relay_class,
        None,
        framing,
        _same,
        passthrough=True,
        path=path,
    )


def _same(error):
    return error


def route_for(client_protocol, body):
    """The route for the body's model: the one field every request must have before anything else."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: a model name (a non-empty string) is required", param="model")
    return bridge().routes.route_for(client_protocol, model)


def answer(response, context, stream_translator, translate_body, framing, cloud=None):
    """The client's answer to an upstream's: its stream relayed and translated, or its body translated.

    A `cloud` deployment's (gateway/bedrock.py, vertex.py) stream is decoded by its decoder, and
    its body put in Anthropic's shape first."""
    headers = {
        **dropped_header(context.dropped),
        **ratelimit.client_headers(stream_translator.protocol, response.headers, time.time()),
    }
    if context.stream:
        settings = bridge().settings
        events = relay(
            response,
            stream_translator(context),
            framing,
            settings.ping_interval,
            settings.max_event_bytes,
            settings.client_stall_timeout,
            request._get_current_object().environ.get(STREAM_LOOP),
            cloud and cloud.decoder(settings.max_event_bytes),
        )
        return sse_response(events, headers)
    body = upstream.read_json(response)
    content = response.content
    shaped = body if cloud is None else cloud.answer(body)
    if shaped is not body:
        body, content = shaped, json_codec.dumps(shaped)
    if translate_body is None:  # pass-through: the upstream's bytes as it sent them
        passthrough.check_answer(body, stream_translator.protocol)
        observability.current().answered(body)
        return Response(content, headers=headers, mimetype="application/json")
    return json_response(translate_body(body, context), headers=headers)


# Most bytes of x-bridge-dropped-params, and of one name in it (README: Deploy, nginx's header buffer).
DROPPED_HEADER_BYTES = 1024
DROPPED_NAME_BYTES = 100


def dropped_header(names):
    """Report parameters dropped for lack of an equivalent upstream.

    A name may be any JSON key the client sent: percent-encoded, it cannot break the header
    (a newline, a character outside Latin-1) nor be read as two names (a comma). A long one is
    cut to DROPPED_NAME_BYTES, ending in `...`; and the names that do not fit in
    DROPPED_HEADER_BYTES are counted at the end (`...and 140 more`): a Codex session begun on
    another model drops every reasoning item, and a header too large for a proxy's buffer
    would lose the whole answer after the upstream ran.
    """
    room = DROPPED_HEADER_BYTES - len(f", ...and {len(names)} more")
    shown, size = [], -2
    for name in names:
        entry = _header_name(name)
        size += 2 + len(entry)
        if size > room:
            break
        shown.append(entry)
    if len(shown) < len(names):
        shown.append(f"...and {len(names) - len(shown)} more")
    return {"x-bridge-dropped-params": ", ".join(shown)} if names else {}


def _header_name(name):
    """`name` percent-encoded, cut to DROPPED_NAME_BYTES ending in `...` when it is longer."""
    quoted = quote(name[:DROPPED_NAME_BYTES], safe="")
    if len(name) <= DROPPED_NAME_BYTES and len(quoted) <= DROPPED_NAME_BYTES:
        return quoted
    return _ESCAPE_CUT.sub("", quoted[: DROPPED_NAME_BYTES - 3]) + "..."


# A percent-escape cut short at the end of a shortened name.
_ESCAPE_CUT = re.compile(r"%[0-9A-F]?$")
