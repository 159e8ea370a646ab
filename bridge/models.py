"""Model names: the operator's map from client names to upstream names, and GET /v1/models."""
import fnmatch

from flask import Blueprint, request

from . import auth
from .chat_to_messages.response import to_openai_model_list
from .errors import ANTHROPIC, OPENAI
from .http import bridge, json_response
from .messages_to_chat.response import to_anthropic_model_list
from .upstream import read_json

bp = Blueprint("models", __name__)


def map_model(model_map, name):
    """Exact entries win over wildcard ones; wildcards are tried in the order given."""
    for pattern, target in model_map:
        if pattern == name:
            return target
    for pattern, target in model_map:
        if "*" in pattern and fnmatch.fnmatchcase(name, pattern):
            return target
    return name


def aliases(model_map):
    """Client-facing names the map defines exactly (wildcard patterns are not model ids)."""
    return [pattern for pattern, _ in model_map if "*" not in pattern]


def protocol_of_models_request(headers):
    return ANTHROPIC if headers.get("anthropic-version") else OPENAI


@bp.get("/v1/models")
@bp.get("/models")
def list_models():
    state = bridge()
    settings = state.settings
    if protocol_of_models_request(request.headers) == ANTHROPIC:
        response = state.upstream.request("GET", f"{settings.openai_base_url}/models",
                                          auth.openai_headers(settings, request.headers))
        return json_response(to_anthropic_model_list(read_json(response), aliases(settings.model_map)))
    response = state.upstream.request("GET", f"{settings.anthropic_base_url}/v1/models?limit=1000",
                                      auth.anthropic_headers(settings, request.headers))
    return json_response(to_openai_model_list(read_json(response), aliases(settings.model_map)))
