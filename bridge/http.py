"""Small request/response helpers shared by the routes of both directions."""
import json
import math
import re

from flask import Response, current_app, g, request
from werkzeug.exceptions import RequestEntityTooLarge

from .errors import BridgeError, invalid

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def bridge():
    """The per-app state built once in create_app: settings and the upstream client."""
    return current_app.extensions["bridge"]


def read_json():
    """The request body as a JSON object, or a 4xx that says what is wrong with it."""
    content_type = (request.mimetype or "").lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise BridgeError("invalid_request", "Content-Type must be application/json, got "
                          + repr(request.content_type or "nothing"), status=415)
    raw = request.get_data(cache=False)
    if request.content_length is None and len(raw) >= current_app.config["MAX_CONTENT_LENGTH"]:
        # werkzeug ends a chunked body at the limit without a word; it would look like cut JSON
        raise RequestEntityTooLarge()
    if not raw.strip():
        raise invalid("request body is empty; expected a JSON object")
    try:
        body = json.loads(raw, parse_constant=_not_json, parse_float=_finite)
    except UnicodeDecodeError:
        raise invalid("request body is not valid UTF-8") from None
    except ValueError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise invalid("request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise invalid(f"request body must be a JSON object, got {type(body).__name__}")
    where = _lone_surrogate(body)
    if where is not None:
        raise invalid(f"{where}: holds a lone UTF-16 surrogate (half of an emoji?), which is not "
                      "valid Unicode", param=where)
    g.requested_model = body.get("model") if isinstance(body.get("model"), str) else None  # access log
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


def _lone_surrogate(body):
    """The dotted path of a key or string holding a lone surrogate, or None.

    JSON may escape half of a UTF-16 pair ("\\ud83d"), and Python keeps it in the string,
    where it later fails every UTF-8 encode. Walked with a stack: bodies may nest deeply.
    """
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
    return Response(json.dumps(body, ensure_ascii=False), status=status,
                    headers=headers or {}, mimetype="application/json")


def sse_response(chunks, headers=None):
    return Response(chunks, headers={**SSE_HEADERS, **(headers or {})},
                    mimetype="text/event-stream", direct_passthrough=True)


def dropped_header(names):
    """Report parameters dropped for lack of an equivalent upstream."""
    return {"x-bridge-dropped-params": ", ".join(names)} if names else {}
