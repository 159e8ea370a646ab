"""POST /v1/chat/completions, served by an Anthropic Messages upstream."""
from flask import Blueprint, request

from .. import auth
from ..errors import OPENAI
from ..http import bridge, dropped_header, json_response, read_json, sse_response
from ..schemas import openai as schema
from ..streaming import relay
from ..upstream import read_json as upstream_json
from .request import to_messages_request
from .response import to_chat_completion
from .stream import StreamTranslator

bp = Blueprint("chat_to_messages", __name__)


@bp.post("/v1/chat/completions")
def create_chat_completion():
    state = bridge()
    body = schema.validate_chat(read_json())
    messages_body, context = to_messages_request(body, state.settings)
    response = state.upstream.request(
        "POST", f"{state.settings.anthropic_base_url}/v1/messages",
        auth.anthropic_headers(state.settings, request.headers), messages_body, stream=context.stream)
    headers = dropped_header(context.dropped)
    if context.stream:
        translator = StreamTranslator(context)
        return sse_response(relay(response, translator, OPENAI, state.settings.ping_interval), headers)
    return json_response(to_chat_completion(upstream_json(response), context), headers=headers)
