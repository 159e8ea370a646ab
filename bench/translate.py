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

STEPS = ("parse", "validate", "translate", "encode")


def directions():
    """direction -> (validate, translate); imported late so a missing direction only skips itself."""
    from bridge.protocols.schemas.anthropic import validate_messages
    from bridge.protocols.schemas.openai import validate_chat
    from bridge.translate.chat_to_messages.request import to_messages_request
    from bridge.translate.messages_to_chat.request import to_chat_request

    return {
        "messages_to_chat": (validate_messages, to_chat_request),
        "chat_to_messages": (validate_chat, to_messages_request),
    }


def requests_for(direction):
    """(label, raw request bytes) to time for one direction."""
    if direction == "messages_to_chat":
        bodies = [(f"{name} (capture)", body) for name, body in corpus.captures()]
        bodies.append(("500 KB session", corpus.anthropic_large()))
    else:
        bodies = [(f"{name} (capture, as Chat)", body) for name, body in corpus.captures_as_chat()]
        bodies.append(("500 KB session", corpus.openai_large()))
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
    validate, translate = directions()[direction]
    settings = settings_module.load({})
    rows = []
    for label, raw in requests_for(direction):
        runs = [time_once(raw, validate, translate, settings) for _ in range(repeats)]
        medians = {step: sorted(run[step] for run in runs)[len(runs) // 2] * 1000 for step in (*STEPS, "total")}
        rows.append((label, len(raw), medians))
    return rows
