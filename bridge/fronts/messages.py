"""POST /v1/messages and /v1/messages/count_tokens: translated for an OpenAI Chat route (count_tokens
is then the bridge's own estimate) and for an OpenAI Responses route (count_tokens asks the upstream's
input-token count, else estimates), passed through for an Anthropic one."""

import logging

from flask import Blueprint

from ..protocols import MESSAGES_COUNT_TOKENS, UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES
from ..protocols.errors import ANTHROPIC, BridgeError
from ..protocols.schemas import anthropic as schema
from ..serve import observability
from ..serve.streaming import ANTHROPIC_SSE
from ..translate.messages_client import anthropic_overflow
from ..translate.messages_to_chat.request import to_chat_request
from ..translate.messages_to_chat.response import to_anthropic_message
from ..translate.messages_to_chat.stream import StreamTranslator
from ..translate.messages_to_responses import request as to_responses
from ..translate.messages_to_responses import response as from_responses
from ..translate.messages_to_responses import stream as responses_stream
from ..translate.tokens import count_tokens
from .http import forward, json_response, large_body_slot, pass_through, read_json, route_for

bp = Blueprint("messages_to_chat", __name__)
INPUT_TOKENS = "/responses/input_tokens"  # after an OpenAI Responses deployment's base URL
# Statuses of an upstream without an input-token count (a Responses server that is not OpenAI's).
_NO_COUNTER = (404, 405)
log = logging.getLogger(__name__)
# Upstream protocol -> (request translation, stream translator, answer translation).
_PAIRS = {
    UPSTREAM_CHAT: (to_chat_request, StreamTranslator, to_anthropic_message),
    UPSTREAM_RESPONSES: (
        to_responses.to_responses_request,
        responses_stream.StreamTranslator,
        from_responses.to_anthropic_message,
    ),
}


@bp.post("/v1/messages")
@bp.post("/messages")
def create_message():
    with large_body_slot():
        body = read_json()
        route = route_for(ANTHROPIC, body)
        if route.protocol != UPSTREAM_MESSAGES:
            body = schema.validate_messages(body)
    if route.protocol == UPSTREAM_MESSAGES:
        return pass_through(route, body)
    translate, stream_translator, translate_body = _PAIRS[route.protocol]

    def prepare(deployment):
        upstream_body, context = translate(body, deployment.settings)
        for warning in context.warnings:
            log.warning("request %s: %s", observability.current().request_id, warning)
        return upstream_body, context

    return forward(
        route,
        prepare,
        stream_translator,
        translate_body,
        ANTHROPIC_SSE,
        lambda error: anthropic_overflow(error, lambda: count_tokens(body)),
    )


@bp.post("/v1/messages/count_tokens")
@bp.post("/messages/count_tokens")
def count_message_tokens():
    with large_body_slot():
        body = read_json(generates=False)
        route = route_for(ANTHROPIC, body)
        if route.protocol != UPSTREAM_MESSAGES:
            body = schema.validate_count_tokens(body)
        if route.protocol == UPSTREAM_CHAT:
            return json_response({"input_tokens": count_tokens(body)})
    if route.protocol == UPSTREAM_MESSAGES:
        return pass_through(route, body, MESSAGES_COUNT_TOKENS)
    try:
        return _upstream_count(route, body)
    except BridgeError as error:
        if error.upstream_status not in _NO_COUNTER:
            raise
    with large_body_slot():
        return json_response({"input_tokens": count_tokens(body)})


def _upstream_count(route, body):
    """A Responses deployment's own count of the translated request (OpenAI's input-token count)."""

    def prepare(deployment):
        return to_responses.counted_request(body, deployment.settings)

    return forward(
        route,
        prepare,
        responses_stream.StreamTranslator,
        from_responses.input_tokens,
        ANTHROPIC_SSE,
        lambda error: error,
        path=INPUT_TOKENS,
    )
