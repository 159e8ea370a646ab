"""POST /v1/chat/completions, served by an Anthropic Messages upstream."""
from flask import Blueprint, request

from .. import auth
from ..http import bridge, forward, read_json
from ..schemas import openai as schema
from ..streaming import CHAT_SSE
from .request import to_messages_request
from .response import openai_overflow, to_chat_completion
from .stream import StreamTranslator

bp = Blueprint("chat_to_messages", __name__)


@bp.post("/v1/chat/completions")
@bp.post("/chat/completions")
def create_chat_completion():
    state = bridge()
    body = schema.validate_chat(read_json())
    messages_body, context = to_messages_request(body, state.settings)
    return forward(f"{state.settings.anthropic_base_url}/v1/messages",
                   auth.anthropic_headers(state.settings, request.headers), messages_body, context,
                   StreamTranslator, to_chat_completion, CHAT_SSE, openai_overflow)
