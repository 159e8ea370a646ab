"""Which of a route's deployments takes a call, and moving on when one fails before answering.

Deployments are picked by smooth weighted round-robin (nginx's: weights 5, 1, 1 give
a a b a c a a, never five a in a row). A deployment that refused the connection, timed
out connecting, or answered 429 or 5xx cools down for the routes file's
`cooldown_seconds`: it is tried only after every other deployment, until the time is up.
A backup (`tier` 2 and up) takes no share of the rotation: it is picked only when every
deployment of the tiers before it is cooling down, and tried within a call only after them
(weights can only make a fallback rare, 1000:1 still sends it one call in 1,001).
This state is per worker process (gunicorn's workers do not share it): each worker
finds out for itself, at the cost of one failed attempt.

What moves a call to the next deployment is only what cannot have started an answer:
the failures upstream.py would retry (a refused connection, a failed lookup, a connect
timeout, a reset right after the send) and an upstream's 429 or 5xx status line, which
is an answer of its own and not a generation. A read timeout is not: on a non-streamed
call the status line comes after the whole generation, so a timeout may follow one the
upstream ran and billed; it goes to the client as a 504. Nothing is sent twice once a
2xx status line came: the answer has started, and the client gets whatever follows. Nor
when the client left while a deployment was working on it (upstream.ClientLeft): that call
is closed, and nobody is left to answer.

The retry budget is BRIDGE_RETRIES: a call tries at most 1 + BRIDGE_RETRIES deployments,
each once, at once. A route of one deployment keeps upstream.py's own retries of it.
"""

import logging
import threading
import time

from flask import request

from ..policy import auth
from ..protocols.errors import BridgeError
from ..serve import observability
from .caps import cap_max_tokens
from .routes import GENERATE
from .upstream import ClientLeft, Unanswered

log = logging.getLogger(__name__)

# Where gunicorn and werkzeug's server hand the app its client's connection: watched while a
# deployment works on the call (upstream.py).
_CLIENT_SOCKETS = ("gunicorn.socket", "werkzeug.socket")


class Balancer:
    """Weighted round-robin and cool-downs over deployments, by name, in one process."""

    def __init__(self, cooldown, clock=time.monotonic):
        self.cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self._current = {}  # deployment name -> its smooth round-robin weight
        self._cool_until = {}  # deployment name -> clock time its cool-down ends

    def order(self, route):
        """The route's deployments in the order to try them: the next weighted pick among those
        of the first tier with any not cooling down, the others of them, those of the later
        tiers not cooling down (tier by tier), then those cooling down, soonest back first."""
        deployments = route.deployments
        if len(deployments) == 1:
            return list(deployments)
        with self._lock:
            now = self._clock()
            ready = sorted((d for d in deployments if self._cool_until.get(d.name, 0) <= now), key=_tier)
            cooling = sorted((d for d in deployments if d not in ready), key=lambda d: self._cool_until[d.name])
            if not ready:
                return cooling
            first = self._pick([d for d in ready if d.tier == ready[0].tier])
        return [first, *(d for d in ready if d is not first), *cooling]

    def _pick(self, ready):
        total = 0
        for deployment in ready:
            self._current[deployment.name] = self._current.get(deployment.name, 0) + deployment.weight
            total += deployment.weight
        best = max(ready, key=lambda d: self._current[d.name])
        self._current[best.name] -= total
        return best

    def cool_down(self, deployment):
        with self._lock:
            self._cool_until[deployment.name] = self._clock() + self.cooldown
        observability.cooling(deployment.name, time.time() + self.cooldown)


def _tier(deployment):
    return deployment.tier


def moves_on(error):
    """Whether a failed call may go to another deployment: nothing of an answer has begun."""
    status = error.upstream_status
    return isinstance(error, Unanswered) or status == 429 or (status is not None and status >= 500)


def send(state, route, prepare, passthrough=False, path=None):
    """(deployment, 2xx response, context) from the first deployment of `route` that answers.

    `prepare(deployment)` gives the upstream body and the context of the answer's
    translation for that deployment (its model name, caps and switches differ). `path` is
    the protocol's generation endpoint unless given.
    """
    record = observability.current()
    asked = request._get_current_object()  # one lookup of the request, not one per attribute
    environ = asked.environ
    client = next((environ[key] for key in _CLIENT_SOCKETS if key in environ), None)
    order = state.balancer.order(route)
    several = len(order) > 1
    attempts = order[: 1 + state.settings.retries] if several else order
    for number, deployment in enumerate(attempts, 1):
        body, context = prepare(deployment)
        body = cap_max_tokens(body, deployment.protocol, deployment.max_tokens)
        headers = auth.upstream_headers(state.settings, deployment, asked.headers, passthrough)
        state.accounts.decide(record)  # its client's limits (admission.admit_body): asked while it was translated
        record.deployment = deployment.name
        url = deployment.url(path or GENERATE[deployment.protocol])
        cloud = deployment.cloud  # Bedrock, Vertex: their own URL, body and signature
        if cloud is not None:
            record.upstream_model = body.get("model")
            url, body, headers = cloud.request(path or GENERATE[deployment.protocol], body, headers, context.stream)
        span = record.attempt(deployment.name, deployment.provider, body, headers)
        try:
            response = state.upstream.request(
                "POST",
                url,
                headers,
                body,
                stream=context.stream,
                retries=0 if several else None,
                held=auth.held_credential(state.settings, deployment),
                client=client,
                sign=cloud.sign if cloud is not None else None,
            )
        except BridgeError as error:
            moving_on = several and moves_on(error) and number < len(attempts)
            record.attempted(deployment.name, _outcome(error), span, _reason(error) if moving_on else None)
            if not several or not moves_on(error):
                raise
            state.balancer.cool_down(deployment)
            if not moving_on:
                raise
            log.warning(
                "request %s: deployment %s failed before answering (%s); trying %s",
                record.request_id,
                deployment.name,
                error.message,
                attempts[number].name,
            )
            continue
        record.attempted(deployment.name, str(response.status_code), span)
        record.upstream_error = None  # a deployment tried before is not this call's failure
        return deployment, response, context


def _reason(error):
    """Why a call left a deployment (observability.FAILOVER_REASONS)."""
    status = error.upstream_status
    if status is not None:
        return "rate_limit" if status == 429 else "server_error"
    return "timeout" if error.kind == "timeout" else "connection"


def _outcome(error):
    if isinstance(error, ClientLeft):
        return "client_closed"
    if error.upstream_status is not None:
        return str(error.upstream_status)
    return "timeout" if error.kind == "timeout" else "connection"
