"""GET /v1/models[/{id}]: the routes' names, the operator's aliases (model_map.py), and the
models of the default route's upstream (routes.py; none when the default routes are off).

A model id is one of those names or one the upstream lists, as in the list.
Retrieving one: an alias is answered here without asking the upstream (like the list, which
has no upstream entry for it); any other id is asked of the upstream's own retrieve endpoint,
and if that answers 404 (vLLM and llama.cpp have none; OpenAI's 404 may only mean "unknown"),
looked up in the upstream's list, so an unknown id costs two upstream calls. An id with a `/`
(`meta-llama/Llama-3-8B` on vLLM) or a bare `.`/`..` is only looked up in the list: in the
upstream's URL path it would name another path, one the bridge's key must not be sent to.
"""

from urllib.parse import quote

from flask import Blueprint, request

from ..gateway.routes import MODELS
from ..gateway.upstream import read_json
from ..policy import auth
from ..protocols import UPSTREAM_MESSAGES
from ..protocols.errors import ANTHROPIC, OPENAI, BridgeError
from ..protocols.schemas.anthropic import validate_model_list_query
from ..translate.chat_to_messages.response import to_openai_model, to_openai_model_list
from ..translate.messages_to_chat.response import to_anthropic_model, to_anthropic_model_list
from ..translate.model_map import aliases
from .http import bridge, json_response

bp = Blueprint("models", __name__)


def protocol_of_models_request(headers):
    return ANTHROPIC if headers.get("anthropic-version") else OPENAI


@bp.get("/v1/models")
@bp.get("/models")
def list_models():
    if protocol_of_models_request(request.headers) == ANTHROPIC:
        page = validate_model_list_query(request.args.to_dict())
        return json_response(to_anthropic_model_list(_upstream_list(ANTHROPIC), _own_names(), *page))
    return json_response(to_openai_model_list(_upstream_list(OPENAI), _own_names()))


@bp.get("/v1/models/<path:model_id>")
@bp.get("/models/<path:model_id>")
def retrieve_model(model_id):
    protocol = protocol_of_models_request(request.headers)
    model = {"id": model_id} if model_id in _own_names() else _upstream_model(protocol, model_id)
    return json_response(to_anthropic_model(model) if protocol == ANTHROPIC else to_openai_model(model))


def _own_names():
    """The names the bridge answers for itself: every route's exact names, then the model map's."""
    state = bridge()
    return list(dict.fromkeys([*state.routes.names(), *aliases(state.settings.model_map)]))


def _upstream_list(protocol):
    """The model list of the default route serving clients of `protocol` (none without one)."""
    default = bridge().routes.defaults.get(protocol)
    if default is None:
        return {"data": []}
    deployment = default.deployments[0]
    query = "limit=1000" if deployment.protocol == UPSTREAM_MESSAGES else ""  # Anthropic pages, 20 by default
    url = deployment.url(MODELS[deployment.protocol], query)
    listed = read_json(_get(url, deployment))
    if not isinstance(listed, dict) or not isinstance(listed.get("data", []), list):
        raise BridgeError(
            "api_error",
            "upstream answered its model list with JSON that is not an object with a data array",
            status=502,
        )
    return listed


def _get(url, deployment):
    state = bridge()
    headers = auth.upstream_headers(state.settings, deployment, request.headers)
    return state.upstream.request("GET", url, headers, held=auth.held_credential(state.settings, deployment))


def _upstream_model(protocol, model_id):
    """The upstream's model object for `model_id`, from its retrieve endpoint or its list."""
    default = bridge().routes.defaults.get(protocol)
    if default is not None and "/" not in model_id and model_id not in (".", ".."):
        deployment = default.deployments[0]
        url = deployment.url(f"{MODELS[deployment.protocol]}/{quote(model_id, safe='')}")
        try:
            model = read_json(_get(url, deployment))
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
        f"model {model_id!r} not found: it is neither an exact name in BRIDGE_ROUTES or BRIDGE_MODEL_MAP "
        "nor listed by the upstream",
    )
