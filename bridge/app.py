"""create_app(): settings, one upstream session, the blueprints, and error handling.

Every error leaves as JSON in the protocol of the client that asked: the
path says which (`/v1/messages*` is Anthropic, `/v1/chat/completions` and
`/v1/responses*` are OpenAI, `/v1/models` and `/v1/models/{id}` follow `anthropic-version`; the
same without `/v1`), never as an HTML page.
"""

import logging
import re
import threading
import time
import types

from flask import Flask, request
from flask.sessions import NullSession, SessionInterface
from werkzeug.exceptions import HTTPException

from .fronts import models
from .fronts.chat import bp as chat_to_messages_bp
from .fronts.http import json_response
from .fronts.messages import bp as messages_to_chat_bp
from .fronts.responses import bp as responses_to_messages_bp
from .fronts.usage import bp as usage_bp
from .gateway import routes
from .gateway.failover import Balancer
from .gateway.upstream import Upstream
from .policy import admission, auth, keys, usage
from .protocols import ids, ratelimit
from .protocols.errors import ANTHROPIC, OPENAI, BridgeError, invalid
from .serve import observability

log = logging.getLogger("bridge")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# The bridge's own ids: one a client sends is replaced, or one request could pass as another in the log.
_OWN_ID = "req_bridge_"
_UNAUTHENTICATED = ("/healthz", "/readyz", "/metrics")


def new_request_id():
    return _OWN_ID + ids.random_hex()


class _NoSessions(SessionInterface):
    """The bridge keeps no sessions: every request gets the same empty, read-only session,
    where Flask's default looks for a cookie signer and builds a null session per request."""

    _none = NullSession()

    def open_session(self, app, request):
        return self._none

    def save_session(self, app, session, response):
        """Never called: Flask saves no null session."""


class _Flask(Flask):
    """Flask asks `inspect` whether each hook and view is a coroutine function, on every call of
    each, to run it in an event loop if so. The bridge's are all plain functions, served by
    gunicorn's threads: they are called as they are. And it keeps no sessions (_NoSessions)."""

    session_interface = _NoSessions()

    def ensure_sync(self, func):
        return func


def create_app(settings=None, table=None):
    """The app for `settings` and routing `table` as routes.configuration() loads them (now, by
    default; the gunicorn master hands its workers the ones it checked)."""
    if settings is None:
        settings, table = routes.configuration()
    table = table or routes.load(settings)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = _Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    accounts = usage.Accounts(settings, table)
    key_store = keys.KeyStore(accounts.redis) if settings.redis_keys else None
    app.extensions["bridge"] = types.SimpleNamespace(
        settings=settings,
        routes=table,
        balancer=Balancer(table.cooldown),
        upstream=Upstream(settings),
        accounts=accounts,  # usage.Accounts: admission.admit_body checks a body's limits
        large_body_slots=threading.BoundedSemaphore(settings.large_body_slots),  # http.large_body_slot
        always_answered=_UNAUTHENTICATED,  # admission's exempt paths: the worker never queues them
    )

    app.register_blueprint(messages_to_chat_bp)
    app.register_blueprint(chat_to_messages_bp)
    app.register_blueprint(responses_to_messages_bp)
    app.register_blueprint(models.bp)
    app.register_blueprint(usage_bp)
    labels = observability.Labels(
        models=usage.model_labels(settings, table),
        upstream_models=table.upstream_models(),
        providers={deployment.name: deployment.provider for deployment in table.deployments()},
    )
    observability.install(app, settings, accounts.finished, accounts.priced, labels, untraced=_UNAUTHENTICATED)

    @app.get("/healthz")
    def healthz():
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz():
        return json_response({"status": "ready"})

    @app.before_request
    def identify_and_authenticate():
        record = observability.current()
        asked = request._get_current_object()  # one lookup of the request, not one per attribute
        headers = asked.headers
        incoming = headers.get("x-request-id", "")
        kept = _REQUEST_ID.match(incoming) and not incoming.lower().startswith(_OWN_ID)
        record.request_id = incoming if kept else new_request_id()
        if asked.path not in _UNAUTHENTICATED:
            key = auth.authenticate(settings, headers, key_store)
            if key is not None:
                auth.identify(record, key, headers)
            record.session = observability.session_of(headers)

    admission.install(app, settings, _UNAUTHENTICATED, accounts)

    @app.after_request
    def add_request_id(response):
        request_id = observability.current().request_id
        if request_id:
            response.headers["request-id"] = request_id
            response.headers["x-request-id"] = request_id
        return response

    register_error_handlers(app)
    return app


def register_error_handlers(app):
    """Every failure as JSON in the client's protocol (client_protocol), never an HTML page."""
    max_body_bytes = app.config["MAX_CONTENT_LENGTH"]

    @app.errorhandler(BridgeError)
    def bridge_error(error):
        return _render(error)

    @app.errorhandler(HTTPException)
    def http_error(exc):
        if exc.code == 413:
            return _render(
                BridgeError(
                    "request_too_large", f"request body is larger than {max_body_bytes} bytes (BRIDGE_MAX_BODY_BYTES)"
                )
            )
        if exc.code == 404:
            return _render(BridgeError("not_found", f"no route {request.method} {request.path}"))
        if exc.code == 405:
            return _render(
                BridgeError("invalid_request", f"method {request.method} is not allowed on {request.path}", status=405)
            )
        return _render(BridgeError("invalid_request", exc.description or exc.name, status=exc.code))

    @app.errorhandler(RecursionError)
    def too_deep(exc):
        """JSON orjson reads (1,024 levels) that the json module, which writes what orjson cannot
        (over 255 levels), has no stack for: a client's body before the upstream answered."""
        if observability.current().upstream_status is None:
            return _render(invalid("request body is nested too deeply"))
        return _render(BridgeError("api_error", "upstream answer is nested too deeply", status=502))

    @app.errorhandler(Exception)
    def unexpected(exc):
        log.exception("unhandled error on %s %s", request.method, observability.escaped(request.path))
        return _render(
            BridgeError(
                "api_error",
                "internal error in the bridge; see its log for "
                f"request id {observability.current().request_id or 'unknown'}",
            )
        )


def client_protocol():
    """Which protocol the current client speaks, for rendering errors; every route is served
    with and without /v1, as clients differ on whether the base URL carries it."""
    path = request.path.removeprefix("/v1")
    if path.startswith("/messages"):
        return ANTHROPIC
    if path.startswith("/chat/") or path == "/responses" or path.startswith("/responses/"):
        return OPENAI
    if path == "/models" or path.startswith("/models/"):  # in the shape the same request gets on success
        return models.protocol_of_models_request(request.headers)
    if request.headers.get("anthropic-version") or request.headers.get("x-api-key"):
        return ANTHROPIC
    return OPENAI


def _render(error):
    protocol = client_protocol()
    headers = ratelimit.client_headers(protocol, error.upstream_headers, time.time())
    return json_response(error.body_for(protocol), error.status_for(protocol), headers)
