"""POST /v1/messages and /v1/messages/count_tokens: translated for an OpenAI Chat route (count_tokens
is then the bridge's own estimate), passed through for an Anthropic one."""

import logging

from flask import Blueprint

from ..protocols import UPSTREAM_MESSAGES, UPSTREAM_RESPONSES
from ..protocols.errors import ANTHROPIC
from ..protocols.schemas import anthropic as schema
from ..serve import observability
from ..serve.streaming import ANTHROPIC_SSE
from ..translate.messages_client import anthropic_overflow
from ..translate.messages_to_chat.request import to_chat_request
from ..translate.messages_to_chat.response import to_anthropic_message
from ..translate.messages_to_chat.stream import StreamTranslator
from ..translate.tokens import count_tokens
from .http import forward, json_response, large_body_slot, pass_through, read_json, route_for, unpaired

bp = Blueprint("messages_to_chat", __name__)
COUNT_TOKENS = "/v1/messages/count_tokens"  # after an Anthropic deployment's base URL
log = logging.getLogger(__name__)


@bp.post("/v1/messages")
@bp.post("/messages")
def create_message():
    with large_body_slot():
        body = read_json()
        route = route_for(ANTHROPIC, body)
        if route.protocol == UPSTREAM_RESPONSES:
            raise unpaired(route, body, "/v1/messages")
        if route.protocol != UPSTREAM_MESSAGES:
            body = schema.validate_messages(body)
    if route.protocol == UPSTREAM_MESSAGES:
        return pass_through(route, body)

    def prepare(deployment):
        chat_body, context = to_chat_request(body, deployment.settings)
        for warning in context.warnings:
            log.warning("request %s: %s", observability.current().request_id, warning)
        return chat_body, context

    return forward(
        route,
        prepare,
        StreamTranslator,
        to_anthropic_message,
        ANTHROPIC_SSE,
        lambda error: anthropic_overflow(error, lambda: count_tokens(body)),
    )


@bp.post("/v1/messages/count_tokens")
@bp.post("/messages/count_tokens")
def count_message_tokens():
    with large_body_slot():
        body = read_json(generates=False)
        route = route_for(ANTHROPIC, body)
        if route.protocol == UPSTREAM_RESPONSES:
            raise unpaired(route, body, "/v1/messages/count_tokens")
        if route.protocol != UPSTREAM_MESSAGES:
            tokens = count_tokens(schema.validate_count_tokens(body))
    if route.protocol == UPSTREAM_MESSAGES:
        return pass_through(route, body, COUNT_TOKENS)
    return json_response({"input_tokens": tokens})
