"""GET /v1/usage: the calling key's own spend, tokens and budgets (policy/spend.py), for a key
presented either protocol's way; errors in Anthropic's shape when the request carries
`anthropic-version` or `x-api-key`, else in OpenAI's (app.client_protocol)."""

from flask import Blueprint

from ..policy import spend
from ..serve import observability
from .http import bridge, json_response

bp = Blueprint("usage", __name__)


@bp.get("/v1/usage")
@bp.get("/usage")
def own_usage():
    return json_response(spend.statement(bridge().accounts, observability.current()))
