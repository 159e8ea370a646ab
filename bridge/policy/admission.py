"""Admission: requests turned away before anything goes upstream for them, and before any work
is done for them where that can be, so that a busy bridge answers at once instead of making a
client wait for a stream to end.

Both refusals are errors in the client's protocol with `retry-after`, which both SDKs honour:

- Over capacity: gunicorn's worker (bridge/serve/worker.py) found every request thread busy (a
  stream gives its thread back once its worker's stream loop takes it over, unless the loop
  is full), let the request wait BRIDGE_QUEUE_TIMEOUT for one in vain, and served it on a
  spare thread, marking its environ. Anything but the exempt paths (/healthz, /readyz,
  /metrics, which the worker never makes wait) is a 503 of the `overloaded` kind (see `refusal`).
- Per client: a client key with BRIDGE_MAX_REQUESTS_PER_CLIENT requests holding a request
  thread (a non-streamed one until its answer ends, a stream until the worker's stream loop
  takes it over) gets a 429 for the next one, before anything goes upstream, so that one key
  cannot hold every thread. By default the cap is half of the worker's BRIDGE_THREADS when
  BRIDGE_CLIENT_KEYS names several keys (with one, a cap would only idle threads its only
  client could use). The count is per worker process: gunicorn's workers share nothing, and
  an in-flight count is left there (a Redis count would need a release that survives a
  killed worker).
- Client limits (usage.py): requests and tokens per minute and per day, shared by every
  worker and VM through Redis; a client over one gets a 429 before anything goes upstream.
  A request with a body (a POST) is checked once its body is read and parsed (admit_body),
  so that a call that may generate reserves what it may cost in the same round trip; any
  other request at its start. A call that may generate has its verdict read only once it is
  translated, before it goes upstream: a call over a limit is refused after its translation,
  and one found invalid meanwhile gets its 400 (release_when_answered reads the verdict).

A request past all of them is admitted (its record says so): it counts as its client's
request, in rpm, in `bridge usage` and in bridge_client_requests_total alike, whatever its
answer. A request refused here counts in none of them.
"""

import threading

from flask import request
from requests.structures import CaseInsensitiveDict

from ..protocols.errors import BridgeError
from ..serve import observability
from ..serve.environ import OVER_CAPACITY, THREADS
from ..serve.stream_loop import Parking

# Seconds a refused client is asked to wait: a thread frees when some stream ends, which the
# bridge cannot foresee; both SDKs retry twice by default, Claude Code ten times.
RETRY_AFTER = "5"
_HELD = "bridge.held"  # environ: this request's place in its client's count


def install(app, settings, exempt, accounts):
    """Refuse requests beyond capacity, beyond a client's limits (usage.Accounts, shared through
    Redis) and beyond the per-client cap; `exempt` paths are always answered. Register after
    the hook that authenticates: the cap and the limits count by its client."""
    in_flight = _InFlight()

    @app.before_request
    def admit():
        asked = request._get_current_object()  # one lookup of the request, not one per attribute
        if asked.path in exempt:
            return
        environ = asked.environ
        waited = environ.get(OVER_CAPACITY)
        if waited is not None:
            raise refusal(
                "overloaded",
                "every request thread of this bridge worker is busy"
                + (f" and none came free within {round(waited, 1):g}s" if waited else "")
                + " (BRIDGE_QUEUE_TIMEOUT; BRIDGE_THREADS; a stream holds one once its worker's stream loop"
                " is full, BRIDGE_STREAMS_PER_WORKER)",
            )
        record = observability.current()
        limit = _cap(settings, environ)
        if limit and record.client is not None:
            environ[_HELD] = in_flight.take(record.client, limit, settings.max_requests_per_client is None)
        if asked.method != "POST":  # else once its body is read (admit_body)
            accounts.admit(record)

    @app.after_request
    def release_when_answered(response):
        """The client's count drops when the server has taken the answer's last byte, before it
        tells the client the answer is over: the client's next request must find it dropped.
        Or when a stream's relay hands it to the worker's stream loop, or when the server closes
        the answer early. A call answered before its limits' verdict was read (a 400 found in
        its body) has it read now, on its thread, without a refusal: it counts as Redis said."""
        accounts.decide(observability.current(), refuse=False)
        held = request._get_current_object().environ.pop(_HELD, None)
        if held is not None:
            response.response = _released_at_end(response.response, held)
            response.call_on_close(held.release)  # an answer closed before it was iterated
        return response


def _cap(settings, environ):
    """BRIDGE_MAX_REQUESTS_PER_CLIENT, or by default half of the worker's request threads when
    several client keys share them; 0: no cap (nor by default under a server with no fixed
    number of threads)."""
    if settings.max_requests_per_client is not None:
        return settings.max_requests_per_client
    threads = environ.get(THREADS)
    return max(1, threads // 2) if threads and (len(settings.client_keys) > 1 or settings.redis_keys) else 0


def admit_body(bridge, raw, body, generates):
    """Check the client's limits for a request whose body `raw` is read and parsed (`body`),
    reserving what a call that `generates` may cost (usage.estimate). Such a call goes upstream
    only through the gateway, which reads the verdict before it sends (failover.send): Redis's round
    trip overlaps the call's translation. Any other request may be answered here, so it waits
    for its verdict now."""
    if generates:
        bridge.accounts.ask(observability.current(), (raw, body))
    else:
        bridge.accounts.admit(observability.current())


class _InFlight:
    """Requests holding a request thread per client key, in this process."""

    def __init__(self):
        self._counts = {}
        self._lock = threading.Lock()

    def take(self, client, limit, by_default):
        with self._lock:
            count = self._counts.get(client, 0)
            if count >= limit:
                raise refusal(
                    "rate_limit",
                    f"this client key already has {limit} requests in flight on this bridge worker, the most "
                    "one key may have (BRIDGE_MAX_REQUESTS_PER_CLIENT"
                    + (", by default half of BRIDGE_THREADS" if by_default else "")
                    + "); retry when one has ended",
                )
            self._counts[client] = count + 1
        return _Held(self, client)

    def release(self, client):
        with self._lock:
            count = self._counts.pop(client) - 1
            if count:
                self._counts[client] = count


class _Held:
    """One request's place in its client's count, given back once."""

    def __init__(self, in_flight, client):
        self._in_flight = in_flight
        self._client = client
        self._held = True

    def release(self):
        if self._held:
            self._held = False
            self._in_flight.release(self._client)


def _released_at_end(body, held):
    try:
        for chunk in body:
            if chunk.__class__ is Parking:  # the worker's stream loop takes the stream over: its thread is free
                held.release()
            yield chunk
    finally:
        held.release()
        if hasattr(body, "close"):  # as `yield from` would: the relay closes its upstream
            body.close()


def refusal(kind, message, retry_after=RETRY_AFTER):
    """The bridge turning a request away for its own lack of room, with `retry-after` (rendered
    as an upstream's is, ratelimit.client_headers, in either protocol).

    Overloaded is a 503 to Anthropic clients too, with their `overloaded_error` type, not
    Anthropic's own 529: that says the model is overloaded, and Claude Code counts it towards
    switching the session to its fallback model, which a busy bridge is no reason for.
    """
    status = 503 if kind == "overloaded" else None
    return BridgeError(kind, message, status=status, upstream_headers=CaseInsensitiveDict({"retry-after": retry_after}))
