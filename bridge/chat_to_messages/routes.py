"""POST /v1/chat/completions, served by an Anthropic Messages upstream."""

from flask import Blueprint

from ..http import bridge, forward, large_body_slot, messages_upstream, read_json
from ..schemas import openai as schema
from ..streaming import CHAT_SSE
from .request import to_messages_request
from .response import openai_overflow, to_chat_completion
from .stream import StreamTranslator

bp = Blueprint("chat_to_messages", __name__)


@bp.post("/v1/chat/completions")
@bp.post("/chat/completions")
def create_chat_completion():
    with large_body_slot():
        body = schema.validate_chat(read_json())
        messages_body, context = to_messages_request(body, bridge().settings)
    return forward(
        *messages_upstream(), messages_body, context, StreamTranslator, to_chat_completion, CHAT_SSE, openai_overflow
    )
