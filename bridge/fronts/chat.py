"""POST /v1/chat/completions: translated for an Anthropic or a Responses route, passed through for
an OpenAI Chat one."""

from flask import Blueprint

from ..protocols import UPSTREAM_CHAT, UPSTREAM_RESPONSES
from ..protocols.errors import OPENAI
from ..protocols.schemas import openai as schema
from ..serve import observability
from ..serve.streaming import CHAT_SSE
from ..translate.anthropic_response import openai_overflow
from ..translate.chat_to_messages.request import to_messages_request
from ..translate.chat_to_messages.response import to_chat_completion
from ..translate.chat_to_messages.stream import StreamTranslator
from ..translate.chat_to_responses.request import to_responses_request
from ..translate.chat_to_responses.response import to_chat_completion as responses_to_chat_completion
from ..translate.chat_to_responses.stream import StreamTranslator as ResponsesStreamTranslator
from .http import forward, large_body_slot, pass_through, read_json, route_for

bp = Blueprint("chat_to_messages", __name__)


@bp.post("/v1/chat/completions")
@bp.post("/chat/completions")
def create_chat_completion():
    with large_body_slot():
        body = read_json()
        route = route_for(OPENAI, body)
        if route.protocol != UPSTREAM_CHAT:
            body = schema.validate_chat(body)
    if route.protocol == UPSTREAM_CHAT:
        return pass_through(route, body)
    if route.protocol == UPSTREAM_RESPONSES:
        observability.current().direction = "chat_to_responses"
        return forward(
            route,
            lambda deployment: to_responses_request(body, deployment.settings),
            ResponsesStreamTranslator,
            responses_to_chat_completion,
            CHAT_SSE,
            openai_overflow,
        )
    return forward(
        route,
        lambda deployment: to_messages_request(body, deployment.settings),
        StreamTranslator,
        to_chat_completion,
        CHAT_SSE,
        openai_overflow,
    )
