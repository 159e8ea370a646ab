"""GET /v1/models[/{id}]: the upstream's models and the operator's aliases (model_map.py).

A model id is one of the operator's exact aliases or one the upstream lists, as in the list.
Retrieving one: an alias is answered here without asking the upstream (like the list, which
has no upstream entry for it); any other id is asked of the upstream's own retrieve endpoint,
and if that answers 404 (vLLM and llama.cpp have none; OpenAI's 404 may only mean "unknown"),
looked up in the upstream's list, so an unknown id costs two upstream calls. An id with a `/`
(`meta-llama/Llama-3-8B` on vLLM) or a bare `.`/`..` is only looked up in the list: in the
upstream's URL path it would name another path, one the bridge's key must not be sent to.
"""

from urllib.parse import quote

from flask import Blueprint, request

from . import auth
from .chat_to_messages.response import to_openai_model, to_openai_model_list
from .errors import ANTHROPIC, OPENAI, BridgeError
from .http import bridge, json_response
from .messages_to_chat.response import to_anthropic_model, to_anthropic_model_list
from .model_map import aliases
from .schemas.anthropic import validate_model_list_query
from .upstream import read_json

bp = Blueprint("models", __name__)


def protocol_of_models_request(headers):
    return ANTHROPIC if headers.get("anthropic-version") else OPENAI


@bp.get("/v1/models")
@bp.get("/models")
def list_models():
    settings = bridge().settings
    if protocol_of_models_request(request.headers) == ANTHROPIC:
        page = validate_model_list_query(request.args.to_dict())
        return json_response(to_anthropic_model_list(_upstream_list(ANTHROPIC), aliases(settings.model_map), *page))
    return json_response(to_openai_model_list(_upstream_list(OPENAI), aliases(settings.model_map)))


@bp.get("/v1/models/<path:model_id>")
@bp.get("/models/<path:model_id>")
def retrieve_model(model_id):
    protocol = protocol_of_models_request(request.headers)
    is_alias = model_id in aliases(bridge().settings.model_map)
    model = {"id": model_id} if is_alias else _upstream_model(protocol, model_id)
    return json_response(to_anthropic_model(model) if protocol == ANTHROPIC else to_openai_model(model))


def _upstream_models_url(protocol):
    """The models URL of the upstream that serves clients of `protocol`, and its headers."""
    settings = bridge().settings
    if protocol == ANTHROPIC:
        return f"{settings.openai_base_url}/models", auth.openai_headers(settings, request.headers)
    return f"{settings.anthropic_base_url}/v1/models", auth.anthropic_headers(settings, request.headers)


def _upstream_list(protocol):
    url, headers = _upstream_models_url(protocol)
    query = "?limit=1000" if protocol == OPENAI else ""  # Anthropic pages, 20 by default
    listed = read_json(bridge().upstream.request("GET", url + query, headers))
    if not isinstance(listed, dict) or not isinstance(listed.get("data", []), list):
        raise BridgeError(
            "api_error",
            "upstream answered its model list with JSON that is not an object with a data array",
            status=502,
        )
    return listed


def _upstream_model(protocol, model_id):
    """The upstream's model object for `model_id`, from its retrieve endpoint or its list."""
    if "/" not in model_id and model_id not in (".", ".."):
        url, headers = _upstream_models_url(protocol)
        try:
            model = read_json(bridge().upstream.request("GET", f"{url}/{quote(model_id, safe='')}", headers))
        except BridgeError as error:
            if error.upstream_status != 404:
                raise
        else:
            if isinstance(model, dict) and isinstance(model.get("id"), str):
                return model
            raise BridgeError(
                "api_error", f"the upstream's answer for model {model_id!r} is not a model object", status=502
            )
    listed = _upstream_list(protocol)
    for model in listed.get("data", []) if isinstance(listed, dict) else []:
        if isinstance(model, dict) and model.get("id") == model_id:
            return model
    raise BridgeError(
        "not_found",
        f"model {model_id!r} not found: it is neither an exact name in BRIDGE_MODEL_MAP nor listed by the upstream",
    )
