"""POST /v1/responses: translated for an Anthropic or a Chat route, passed through for a Responses
one; nothing is stored.

Errors before the first byte are OpenAI's, worded for the Responses clients' retry rules
(tests/fixtures/clients/codex-0.171.0/CODEX.md §5): a 429 keeps the upstream's `retry-after`
(Codex retries a 429 only with one), an overloaded upstream (Anthropic 529) is a 503 that always carries one (Codex
retries a 503 at once only with it, else 30 times over 25 s), and a context overflow is a
400 with `code: "context_length_exceeded"` (Codex then says the context is full), however the
upstream worded it.
"""

from flask import Blueprint, request
from requests.structures import CaseInsensitiveDict

from ..protocols import UPSTREAM_CHAT, UPSTREAM_RESPONSES
from ..protocols.errors import OPENAI, BridgeError
from ..protocols.schemas.responses import validate_responses
from ..serve import observability
from ..serve.streaming import RESPONSES_SSE
from ..translate.anthropic_response import openai_overflow
from ..translate.responses_to_chat import response as from_chat
from ..translate.responses_to_chat import stream as from_chat_stream
from ..translate.responses_to_chat.request import to_chat_request
from ..translate.responses_to_messages.request import to_messages_request
from ..translate.responses_to_messages.response import to_response
from ..translate.responses_to_messages.stream import StreamTranslator
from .http import forward, large_body_slot, pass_through, read_json, route_for

bp = Blueprint("responses_to_messages", __name__)

# Seconds an overloaded upstream's 503 asks the client to wait when the upstream named none.
OVERLOADED_RETRY_AFTER = "1"
_NOT_STORED = (
    "bridge stores no responses, so there is none to {}: send the full conversation "
    "in `input` of each POST /v1/responses"
)


@bp.post("/v1/responses")
@bp.post("/responses")
def create_response():
    with large_body_slot():
        body = read_json("input")
        route = route_for(OPENAI, body)
        if route.protocol != UPSTREAM_RESPONSES:
            body = validate_responses(body)
    if route.protocol == UPSTREAM_RESPONSES:
        return pass_through(route, body)
    if route.protocol == UPSTREAM_CHAT:
        observability.current().direction = "responses_to_chat"
        return forward(
            route,
            lambda deployment: to_chat_request(body, deployment.settings),
            from_chat_stream.StreamTranslator,
            from_chat.to_response,
            RESPONSES_SSE,
            lambda error: with_retry_after(from_chat.responses_overflow(error)),
        )
    return forward(
        route,
        lambda deployment: to_messages_request(body, deployment.settings),
        StreamTranslator,
        to_response,
        RESPONSES_SSE,
        client_error,
    )


@bp.get("/v1/responses/<response_id>")
@bp.get("/responses/<response_id>")
@bp.delete("/v1/responses/<response_id>")
@bp.delete("/responses/<response_id>")
@bp.get("/v1/responses/<response_id>/input_items")
@bp.get("/responses/<response_id>/input_items")
def stored_response(response_id):
    """Stateless: a retrieve, delete or input-items listing finds nothing, and says why."""
    action = {"GET": "retrieve", "DELETE": "delete"}[request.method]
    if request.path.endswith("/input_items"):
        action = "list the input items of"
    raise BridgeError("not_found", f"no response {response_id!r}: " + _NOT_STORED.format(action))


def client_error(error):
    """An upstream error as a Responses client gets it (module docstring)."""
    return with_retry_after(openai_overflow(error, param="input"))


def with_retry_after(error):
    """An overloaded upstream's error, with `retry-after` added when the upstream sent none."""
    headers = error.upstream_headers
    if error.kind != "overloaded" or (headers and "retry-after" in headers):
        return error
    headers = CaseInsensitiveDict(headers or {})
    headers["retry-after"] = OVERLOADED_RETRY_AFTER
    return error.replaced(upstream_headers=headers)
