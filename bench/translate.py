"""In-process cost of one large request: parse, validate, translate, encode.

The same four steps a route takes, timed apart so a slow one is named:
parsing the raw body (bridge.fronts.http.parse_json, as read_json does), the
direction's marshmallow validation, the pure request translation, and
writing the upstream body (bridge.protocols.json_codec.dumps, as Upstream.request does).
"""

import json
import time

from bridge import settings as settings_module
from bridge.fronts.http import parse_json
from bridge.protocols import json_codec

from . import corpus
from .directions import DIRECTIONS

STEPS = ("parse", "validate", "translate", "encode")


def steps(direction):
    """(validate, translate) of one direction, imported here so that a pair not written yet
    skips only its own table. A pass-through's translation is the swap of model and
    credential (gateway.passthrough), for a deployment of the upstream's protocol."""
    if direction == "messages_to_chat":
        from bridge.protocols.schemas.anthropic import validate_messages
        from bridge.translate.messages_to_chat.request import to_chat_request

        return validate_messages, to_chat_request
    if direction == "chat_to_messages":
        from bridge.protocols.schemas.openai import validate_chat
        from bridge.translate.chat_to_messages.request import to_messages_request

        return validate_chat, to_messages_request
    if direction == "responses_passthrough":
        from bridge.gateway import passthrough
        from bridge.gateway.routes import Deployment
        from bridge.protocols import UPSTREAM_RESPONSES

        return (
            lambda body: passthrough.validate(body, UPSTREAM_RESPONSES),
            lambda body, settings: passthrough.to_upstream(
                body, Deployment("bench", UPSTREAM_RESPONSES, "http://127.0.0.1/v1", settings=settings)
            ),
        )
    if direction == "messages_to_responses":
        from bridge.protocols.schemas.anthropic import validate_messages
        from bridge.translate.messages_to_responses.request import to_responses_request

        return validate_messages, to_responses_request
    if direction == "chat_to_responses":
        from bridge.protocols.schemas.openai import validate_chat
        from bridge.translate.chat_to_responses.request import to_responses_request

        return validate_chat, to_responses_request
    if direction == "responses_to_chat":
        from bridge.protocols.schemas.responses import validate_responses
        from bridge.translate.responses_to_chat.request import to_chat_request

        return validate_responses, to_chat_request
    raise KeyError(direction)


def requests_for(direction):
    """(label, raw request bytes) to time for one direction: its client's captures and large session."""
    path = DIRECTIONS[direction].client_path
    if path == "/v1/messages":
        bodies = [(f"{name} (capture)", body) for name, body in corpus.captures()]
    elif path == "/v1/chat/completions":
        bodies = [(f"{name} (capture, as Chat)", body) for name, body in corpus.captures_as_chat()]
    else:
        bodies = [(f"codex {name} (capture)", body) for name, body in corpus.codex_captures()]
    bodies.append(("500 KB session", corpus.LARGE[path]()))
    return [(label, json.dumps(body, ensure_ascii=False).encode()) for label, body in bodies]


def time_once(raw, validate, translate, settings):
    """Seconds spent in each step for one request."""
    t0 = time.perf_counter()
    body = parse_json(raw)
    t1 = time.perf_counter()
    body = validate(body)
    t2 = time.perf_counter()
    upstream_body, _context = translate(body, settings)
    t3 = time.perf_counter()
    json_codec.dumps(upstream_body)
    t4 = time.perf_counter()
    return {"parse": t1 - t0, "validate": t2 - t1, "translate": t3 - t2, "encode": t4 - t3, "total": t4 - t0}


def measure(direction, repeats=30):
    """[(label, size in bytes, {step: median ms})] or raises what the direction raises."""
    validate, translate = steps(direction)
    settings = settings_module.load({})
    rows = []
    for label, raw in requests_for(direction):
        runs = [time_once(raw, validate, translate, settings) for _ in range(repeats)]
        medians = {step: sorted(run[step] for run in runs)[len(runs) // 2] * 1000 for step in (*STEPS, "total")}
        rows.append((label, len(raw), medians))
    return rows
