"""POST /v1/messages and /v1/messages/count_tokens, served by an OpenAI-compatible upstream."""

import logging

from flask import Blueprint, request

from .. import auth, observability
from ..http import bridge, forward, json_response, large_body_slot, read_json
from ..schemas import anthropic as schema
from ..streaming import ANTHROPIC_SSE
from .request import to_chat_request
from .response import anthropic_overflow, to_anthropic_message
from .stream import StreamTranslator
from .tokens import count_tokens

bp = Blueprint("messages_to_chat", __name__)
log = logging.getLogger(__name__)


@bp.post("/v1/messages")
@bp.post("/messages")
def create_message():
    state = bridge()
    with large_body_slot():
        body = schema.validate_messages(read_json())
        chat_body, context = to_chat_request(body, state.settings)
    for warning in context.warnings:
        log.warning("request %s: %s", observability.current().request_id, warning)
    return forward(
        f"{state.settings.openai_base_url}/chat/completions",
        auth.openai_headers(state.settings, request.headers),
        chat_body,
        context,
        StreamTranslator,
        to_anthropic_message,
        ANTHROPIC_SSE,
        lambda error: anthropic_overflow(error, lambda: count_tokens(body)),
    )


@bp.post("/v1/messages/count_tokens")
@bp.post("/messages/count_tokens")
def count_message_tokens():
    with large_body_slot():
        tokens = count_tokens(schema.validate_count_tokens(read_json()))
    return json_response({"input_tokens": tokens})
