"""Access log and Prometheus metrics: what each request did, never what it said.

Every request gets a Record as it enters the WSGI app. Whoever learns
something fills it in: the before-request hook (request id, client key
name), the body reader (the model asked for), the after-request hook
(route, status), the JSON response helper (a body's usage or error type),
the upstream call (which deployment and model it went to, how the upstream answered)
and the stream relay (first event, usage, a mid-stream error, its translator's estimate of
the tokens the upstream did not report). The record is
written when the server closes the response - for a stream, when it ends or
the client leaves - as one JSON line on the `bridge.access` logger and as
Prometheus metrics. Only metadata is kept: ids, model names, statuses,
timings, token counts; never message content, never a key.

GET /metrics needs no client key (nginx restricts who may reach it). Under
gunicorn the workers share their metrics through PROMETHEUS_MULTIPROC_DIR
(deploy/gunicorn.conf.py prepares it), so a scrape answered by any worker
reports the whole service.
"""

import collections
import contextvars
import functools
import glob
import logging
import os
import re
import select
import sys
import threading
import time

from flask import Response, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

from ..protocols import json_codec
from ..protocols.errors import KINDS
from ..protocols.shapes import is_count
from . import meters as metric_values
from . import span_content, tracing
from .environ import CLOSES_ANSWERS

access_log = logging.getLogger("bridge.access")


# Set before the first metric is made (a module that makes metrics imports this one first), so
# that every value of this process writes through one set of files.
metric_values.install()

_DIRECTIONS = ("chat_to_messages", "messages_to_chat", "responses_to_messages")  # the blueprints
# Pass-through pairs (http.pass_through) set their own direction on the record.
_PASSED_THROUGH = ("chat_passthrough", "messages_passthrough", "responses_passthrough")
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
# What the GenAI conventions advise for a token count per request (gen_ai.client.token.usage).
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_PER_TOKEN = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 1, 2.5)

REQUESTS = Counter("bridge_requests", "Requests answered, by direction and HTTP status.", ["direction", "status"])
DURATION = Histogram(
    "bridge_request_duration_seconds",
    "From request to the end of the response (a stream's whole length).",
    ["direction", "stream"],
    buckets=_SECONDS,
)
FIRST_BYTE = Histogram(
    "bridge_time_to_first_byte_seconds",
    "From request to the first translated event (the whole body when not streamed).",
    ["direction", "stream"],
    buckets=_SECONDS,
)
TOKENS = Counter(
    "bridge_tokens", "Tokens counted (reported or estimated); input includes cached tokens.", ["direction", "kind"]
)
ESTIMATED_TOKENS = Counter(
    "bridge_estimated_tokens",
    "The part of bridge_tokens that bridge estimated: a stream whose upstream reported no usage, or "
    "stopped (the client left, the upstream broke off) before it did.",
    ["direction", "kind"],
)
WEB_SEARCHES = Counter(
    "bridge_web_searches", "Web searches the upstream ran for OpenAI clients (billed per search).", ["direction"]
)
UPSTREAM_ERRORS = Counter(
    "bridge_upstream_errors", "Upstream calls or streams that failed, by error kind.", ["direction", "type"]
)
DEPLOYMENT_CALLS = Counter(
    "bridge_deployment_calls",
    "Upstream generation calls by deployment (routes.py) and outcome: its HTTP status, or "
    "connection or timeout when none came. A call that failed over counts once per deployment tried.",
    ["deployment", "outcome"],
)
OPEN_STREAMS = Gauge(
    "bridge_open_streams", "Streams being relayed right now.", ["direction"], multiprocess_mode="livesum"
)
QUEUED = Gauge(
    "bridge_queued_requests",
    "Requests waiting for a request thread right now (BRIDGE_QUEUE_TIMEOUT).",
    multiprocess_mode="livesum",
)
MODEL_REQUESTS = Counter(
    "bridge_model_requests",
    "Requests that named a model, by the model asked for and sent upstream (names the routes and "
    "BRIDGE_MODEL_MAP define, `other` beyond), the deployment that answered or was tried last "
    "(`none` when none was), the client key's name, its team (its name when it has none) and the "
    "answer's status class.",
    ["model", "upstream_model", "deployment", "client", "team", "status_class"],
)
FAILOVER_REASONS = ("rate_limit", "server_error", "connection", "timeout")
FAILOVERS = Counter(
    "bridge_failovers",
    "Calls moved from a deployment to the next (failover.py), by the deployment left and why: "
    "rate_limit (429), server_error (5xx), connection or timeout.",
    ["deployment", "reason"],
)
COOLING_UNTIL = Gauge(
    "bridge_deployment_cooling_until_seconds",
    "Unix time a deployment's cool-down ends in the worker that put it there last (0: never); "
    "bridge_deployment_cooling says whether that is still to come.",
    ["deployment"],
    multiprocess_mode="livemax",
)
# The OpenTelemetry GenAI semantic conventions' metrics, in their Prometheus form (dots as
# underscores, seconds as the unit), per model and deployment: gen_ai_request_model is the
# model asked for, gen_ai_response_model the one sent upstream, both bounded as above.
_GEN_AI = [
    "gen_ai_operation_name",
    "gen_ai_provider_name",
    "gen_ai_request_model",
    "gen_ai_response_model",
    "deployment",
]
GEN_AI_DURATION = Histogram(
    "gen_ai_server_request_duration_seconds",
    "GenAI conventions: from request to the end of its answer (a stream's whole length).",
    _GEN_AI,
    buckets=_SECONDS,
)
GEN_AI_FIRST_TOKEN = Histogram(
    "gen_ai_server_time_to_first_token_seconds",
    "GenAI conventions: from request to a stream's first event for the client (streams only).",
    _GEN_AI,
    buckets=_SECONDS,
)
GEN_AI_PER_TOKEN = Histogram(
    "gen_ai_server_time_per_output_token_seconds",
    "GenAI conventions: a stream's time after its first event, per output token after the first.",
    _GEN_AI,
    buckets=_PER_TOKEN,
)
GEN_AI_TOKENS = Histogram(
    "gen_ai_client_token_usage",
    "GenAI conventions: tokens per request, by gen_ai_token_type: input (cached included) or output.",
    [*_GEN_AI, "gen_ai_token_type"],
    buckets=_TOKEN_BUCKETS,
)
QUEUE_WAIT = Histogram(
    "bridge_queue_wait_seconds",
    "How long requests that found every request thread busy waited for one (BRIDGE_QUEUE_TIMEOUT), "
    "by outcome: served once a thread came free, or refused (503) when none did in time.",
    ["outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)

_current = contextvars.ContextVar("bridge_access_record")


class Record:
    """What one request did: filled in as it goes, written once when its response is closed."""

    meters = None  # the app's otlp_metrics.Meters, set on each record only when OTLP metrics are on

    def __init__(self, method=None, quiet=False):
        self.start = time.monotonic()
        self.time = time.time()
        self.method = method
        self.quiet = quiet
        self.request_id = self.route = self.direction = self.client = None
        self.key = None  # the client key (settings.ClientKey, policy/keys.StoredKey)
        self.team = self.user = self.session = None  # the key's team, the user (policy/auth.py), a session id
        self.cost = None  # dollars, once written (None: no price for what was used, policy/prices.py)
        self.model = self.upstream_model = None
        self.deployment = None  # the last deployment called: the one that answered, if any did
        self.status = self.upstream_status = None
        self.first_byte = None
        self.stream = False
        self.usage = {}  # as the client was told it
        self.upstream_usage = {}  # as an upstream stream reported it (heard)
        self.translator = None  # a stream's (streaming.relay): its estimate counts what the upstream did not report
        self.tokens = (None, None)  # (input, output) as counted, once written
        self.estimated = ()  # which of them ("input", "output") are bridge's estimate
        self.error = None
        self.upstream_error = None
        self.labels = _NO_LABELS  # the app's (install): what the model and deployment labels may be
        self.tracing = self.span = None  # the app's tracing.Tracing and this request's span, when traced
        self.stop_reason = None  # why the answer ended, as the upstream or the client was told: for its span
        self.admitted = False  # past admission (bridge/policy/admission.py): it counts as a client's request
        self.reserved = None  # the tokens admission reserved for it (usage.Reservation), settled at its end
        self.asking = None  # its admission, sent to Redis, its verdict not read yet (usage.Accounts.ask)

    @property
    def label(self):
        return self.direction or "none"

    def saw(self, item):
        """A translated stream item goes to the client; usage rides on some events."""
        if self.first_byte is None:
            self.first_byte = time.monotonic()
        # The keys usage can be in (_usage_in); most events have none: not even the call below.
        # Three `in` tests cost less than a frozenset's isdisjoint, which iterates every key.
        if "usage" in item or "message" in item or "response" in item:
            usage = _usage_in(item)
            if usage is not None:
                self.count(usage)
            if self.span is not None:
                self.stop_reason = _stop_reason_in(item) or self.stop_reason

    def asked(self, body):
        """The request's body: only a traced request that records content keeps what it says (_Said)."""

    def heard(self, payload):
        """An upstream's answer or stream event, before translation: what it reports is what client limits
        count (usage.py), also when the client's stream carries no usage (a Chat client that
        did not ask for it) or the client left before the translated stream reached it."""
        if isinstance(payload, dict) and ("usage" in payload or "message" in payload or "response" in payload):
            usage = _usage_in(payload)
            if usage is not None:
                self.count(usage, self.upstream_usage)
            if self.span is not None:
                self.stop_reason = _stop_reason_in(payload) or self.stop_reason

    def answered(self, body):
        """A JSON answer's usage, or the error type the client was told."""
        if isinstance(body.get("usage"), dict):
            self.count(body["usage"])
        if isinstance(body.get("error"), dict):
            self.error = body["error"].get("type")
        if self.span is not None:
            self.stop_reason = _stop_reason_in(body) or self.stop_reason

    def count(self, usage, into=None):
        """Merge usage fields into self.usage (or `into`): later events refine earlier ones,
        missing fields keep their value. OpenAI's cached input tokens (`prompt_tokens_details`,
        `input_tokens_details`) are kept as `cached_tokens`.

        Only sane counts: a metric cannot take 10**400, and an exception here, as the server
        closes the response, is one it does not expect (gunicorn's count of open connections
        went wrong with it).
        """
        into = self.usage if into is None else into
        into.update((k, v) for k, v in usage.items() if is_count(v))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        if isinstance(details, dict) and is_count(details.get("cached_tokens")):
            into["cached_tokens"] = details["cached_tokens"]
        written = usage.get("cache_creation")  # Anthropic's cache writes by lifetime, priced apart
        if isinstance(written, dict) and is_count(written.get("ephemeral_1h_input_tokens")):
            into["ephemeral_1h_input_tokens"] = written["ephemeral_1h_input_tokens"]
        server_tools = usage.get("server_tool_use")  # Anthropic's searches, and the bridge's report of them
        if isinstance(server_tools, dict) and is_count(server_tools.get("web_search_requests")):
            into["web_search_requests"] = server_tools["web_search_requests"]

    def upstream_failed(self, error):
        self.upstream_status = error.upstream_status
        if error.upstream_status is None and error.kind != "timeout":
            self.upstream_error = "connection"
        else:
            self.upstream_error = error.kind

    def failed_mid_stream(self, error, protocol):
        self.error = error.body_for(protocol)["error"]["type"]
        self.upstream_error = error.kind

    def finish(self, ended=True, then=None, priced=None):
        """Write the access line and the metrics, then call `then` with the record (the app's
        usage.Accounts.finished); `ended` is false when the client left early. `priced(record)`
        says what the tokens counted cost (usage.Accounts.priced), for the line."""
        if self.quiet:
            return
        if not ended and self.error is None:
            self.error = "client_closed"
        self.written = metric_values.Batch()  # the metrics below and then's, written at once
        duration = time.monotonic() - self.start
        first_byte = self.first_byte - self.start if self.first_byte is not None else None
        tokens = self.tokens = self._counted()
        if priced is not None:
            self.cost = priced(self)
        if access_log.isEnabledFor(logging.INFO):
            # Logger.info() less its search for the caller's file and line, which an access line
            # has no use for; with emit() below, most of what the line cost.
            line = json_codec.dumps_text(self._line(duration, first_byte, tokens))
            access_log.handle(access_log.makeRecord(access_log.name, logging.INFO, "", 0, line, None, None))
        self._measure(duration, first_byte, tokens)
        if self.span is not None:
            self._traced(tokens)
        try:
            if then is not None:
                then(self)
        finally:
            self.written.write()

    def _line(self, duration, first_byte, tokens):
        return {
            "time": _utc_time(self.time),
            "request_id": self.request_id,
            "method": self.method,
            "route": self.route,
            "direction": self.direction,
            "client": self.client,
            "team": self.team,
            "user": self.user,
            "session": self.session,
            "model": _capped(self.model),
            "upstream_model": _capped(self.upstream_model),
            "deployment": self.deployment,
            "status": self.status,
            "upstream_status": self.upstream_status,
            "duration_ms": round(duration * 1000),
            "ttfb_ms": round(first_byte * 1000) if first_byte is not None else None,
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "usage": ("estimated" if self.estimated else "reported") if tokens != (None, None) else None,
            "cost_usd": round(self.cost, 6) if self.cost is not None else None,
            "stream": self.stream,
            "error": self.error,
        }

    def _counted(self):
        """(input, output) tokens: as the upstream reported them; for a stream, what its upstream had
        not reported when it stopped is its translator's estimate (self.estimated says which). An
        output count before the stream's end (Anthropic's message_start says 1) is only a floor:
        the output streamed counts when it is more."""
        if self.translator is None:
            return _tokens(self.upstream_usage or self.usage)
        reported = _tokens(self.upstream_usage)
        final = self.translator.done
        if final and None not in reported:
            return reported
        estimate = self.translator.estimate()
        input_tokens, output_tokens = reported
        estimated = []
        if input_tokens is None and estimate[0] is not None:
            input_tokens = estimate[0]
            estimated.append("input")
        if output_tokens is None or (not final and estimate[1] > output_tokens):
            output_tokens = estimate[1]
            estimated.append("output")
        self.estimated = tuple(estimated)
        return input_tokens, output_tokens

    def _measure(self, duration, first_byte, tokens):
        written = self.written
        stream = "true" if self.stream else "false"
        written.inc(_series(REQUESTS, self.label, str(self.status)))
        written.observe(_series(DURATION, self.label, stream), duration)
        if first_byte is not None:
            written.observe(_series(FIRST_BYTE, self.label, stream), first_byte)
        for kind, count in zip(("input", "output"), tokens, strict=True):
            if count:
                written.inc(_series(TOKENS, self.label, kind), count)
                if kind in self.estimated:
                    written.inc(_series(ESTIMATED_TOKENS, self.label, kind), count)
        if self.model is not None:
            self._measure_model(duration, first_byte, tokens)
        searches = (self.upstream_usage or self.usage).get("web_search_requests")
        if searches:
            written.inc(_series(WEB_SEARCHES, self.label), searches)
        if self.upstream_error:
            written.inc(_series(UPSTREAM_ERRORS, self.label, self.upstream_error))

    def attempt(self, deployment, provider, body, headers):
        """The span of a call to `deployment` (failover.py), its context added to `headers` for the
        upstream; None when the request is not traced."""
        if self.span is None:
            return None
        model = _capped(body.get("model")) if isinstance(body.get("model"), str) else None
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "bridge.deployment": deployment,
        }
        if model is not None:
            attributes["gen_ai.request.model"] = model
        return self.tracing.attempt(self.span, f"chat {model}" if model else "chat", attributes, headers)

    def attempted(self, deployment, outcome, span=None, failover=None):
        """One call to a deployment and how it went: its HTTP status, or connection, timeout or
        client_closed; `failover` names why the call then moved to the next (FAILOVER_REASONS)."""
        _series(DEPLOYMENT_CALLS, deployment, outcome).inc()
        if failover is not None:
            _series(FAILOVERS, deployment, failover).inc()
        if span is not None:
            status = int(outcome) if outcome.isdigit() else None
            failed = status is None or status >= 400
            attributes = {"http.response.status_code": status, "bridge.failover.reason": failover}
            self.tracing.ended(span, attributes, error=outcome if failed else None)

    def _traced(self, tokens):
        """The request's span, named and attributed as the GenAI conventions say, ended."""
        attributes = {
            "http.request.method": self.method,
            "http.route": self.route,
            "http.response.status_code": self.status,
            "bridge.request_id": self.request_id,
            "bridge.client": self.client,
            "bridge.team": self.team,
            "bridge.direction": self.direction,
            "bridge.deployment": self.deployment,
        }
        name = f"{self.method} {self.route}" if self.route else self.method
        if self.model is not None:
            name = f"chat {_capped(self.model)}"
            usage = self.upstream_usage or self.usage
            attributes.update(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": self.labels.provider(self.deployment) if self.deployment else None,
                    "gen_ai.request.model": _capped(self.model),
                    "gen_ai.response.model": _capped(self.upstream_model),
                    "gen_ai.usage.input_tokens": tokens[0],
                    "gen_ai.usage.output_tokens": tokens[1],
                    "gen_ai.usage.cache_read.input_tokens": usage.get(
                        "cache_read_input_tokens", usage.get("cached_tokens")
                    ),
                    "gen_ai.usage.cache_creation.input_tokens": usage.get("cache_creation_input_tokens"),
                    "gen_ai.response.finish_reasons": (self.stop_reason,) if self.stop_reason else None,
                }
            )
        self.span.update_name(name)
        failed = self.status is None or self.status >= 500
        self.tracing.ended(self.span, attributes, error=(self.error or str(self.status)) if failed else None)

    def _measure_model(self, duration, first_byte, tokens):
        """The per-model counter, and the GenAI histograms of a call that went upstream."""
        labels, written = self.labels, self.written
        model, upstream_model = labels.model(self.model), labels.upstream_model(self.upstream_model)
        deployment = self.deployment or "none"
        status_class = f"{self.status // 100}xx" if self.status else "none"
        client = self.client or "none"
        team = self.team or client
        written.inc(_series(MODEL_REQUESTS, model, upstream_model, deployment, client, team, status_class))
        if self.deployment is None:
            return
        provider = labels.provider(deployment)
        series = _gen_ai_series(model, upstream_model, deployment, provider)
        written.observe(series.duration, duration)
        if tokens[0]:
            written.observe(series.input_tokens, tokens[0])
        if tokens[1]:
            written.observe(series.output_tokens, tokens[1])
        first_token = per_token = None
        if self.stream and first_byte is not None:
            first_token = first_byte
            written.observe(series.first_token, first_token)
            if tokens[1] and tokens[1] > 1:
                per_token = (duration - first_byte) / (tokens[1] - 1)
                written.observe(series.per_token, per_token)
        if self.meters is not None:
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.response.model": upstream_model,
                "bridge.deployment": deployment,
            }
            self.meters.record(attributes, duration, first_token, per_token, tokens)


class _Said(Record):
    """A traced request's record that also keeps what the client asked and was answered, for
    its span's content attributes (span_content.py): the prompt as JSON cut at `limit`
    characters, the answer's text no longer than that."""

    def __init__(self, method, limit):
        super().__init__(method)
        self._limit = limit
        self._asked = {}
        self._text = []
        self._length = 0

    def asked(self, body):
        system = span_content.system_instructions(body)
        if system:
            self._asked["gen_ai.system_instructions"] = span_content.attribute(system, self._limit)
        messages = span_content.input_messages(body)
        self._asked["gen_ai.input.messages"] = span_content.attribute(messages, self._limit)

    def saw(self, item):
        super().saw(item)
        self._said(span_content.output_text(item))

    def answered(self, body):
        super().answered(body)
        self._said(span_content.output_text(body))

    def _said(self, text):
        if text and self._length <= self._limit:
            self._text.append(text)
            self._length += len(text)

    def _traced(self, tokens):
        if self.model is not None:
            said = {**self._asked}
            if self._text or self.stop_reason:
                answer = span_content.output_messages("".join(self._text), self.stop_reason)
                said["gen_ai.output.messages"] = span_content.attribute(answer, self._limit)
            self.span.set_attributes(said)
        super()._traced(tokens)


class Labels:
    """The values the model and deployment labels may take, fixed when the app is built, so that
    no client can grow a label set: names beyond them are `other`."""

    def __init__(self, models=(), upstream_models=(), providers=None):
        self.models = frozenset(models)
        self.upstream_models = frozenset(upstream_models)
        self.providers = dict(providers or {})  # deployment name -> its gen_ai.provider.name

    def model(self, name):
        return name if name in self.models else "other"

    def upstream_model(self, name):
        return name if name in self.upstream_models else "other"

    def provider(self, deployment):
        return self.providers.get(deployment, "other")


_NO_LABELS = Labels()

_GenAISeries = collections.namedtuple("_GenAISeries", "duration first_token per_token input_tokens output_tokens")


@functools.lru_cache(maxsize=None)
def _gen_ai_series(model, upstream_model, deployment, provider):
    """The GenAI histograms' children for one model, upstream model and deployment, looked up once."""
    labels = ("chat", provider, model, upstream_model, deployment)
    return _GenAISeries(
        GEN_AI_DURATION.labels(*labels),
        GEN_AI_FIRST_TOKEN.labels(*labels),
        GEN_AI_PER_TOKEN.labels(*labels),
        GEN_AI_TOKENS.labels(*labels, "input"),
        GEN_AI_TOKENS.labels(*labels, "output"),
    )


def _usage_in(item):
    """The usage an event or answer carries: top level (Anthropic message_delta, an OpenAI usage
    chunk), or in the message or response it carries (message_start, a Responses event)."""
    usage = item.get("usage")
    if usage is None:
        envelope = item.get("message") or item.get("response")
        usage = envelope.get("usage") if isinstance(envelope, dict) else None
    return usage if isinstance(usage, dict) else None


def _stop_reason_in(item):
    """Why an answer ended, where an answer or event says: Anthropic's stop_reason (a message's,
    a message_delta's) or a Chat choice's finish_reason."""
    reason = item.get("stop_reason")
    if reason is None:
        delta = item.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
    if reason is None:
        choices = item.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            reason = choices[0].get("finish_reason")
    return reason if isinstance(reason, str) else None


def _utc_time(timestamp):
    """ISO 8601 in UTC to the millisecond: 2026-11-26T15:34:48.046Z."""
    return f"{_utc_second(int(timestamp))}.{int(timestamp * 1000) % 1000:03d}Z"


@functools.lru_cache(maxsize=2)
def _utc_second(whole):
    """Formatting a time was the dearest of the access line's fields (through datetime); the
    lines of one second share it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


# Control characters (C0, DEL, C1, the Unicode line and paragraph separators) and the backslash
# that escapes them.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\\]")


def escaped(text, limit=500):
    """Text from outside the bridge (an upstream's message, a header value) fit for a log line:
    control characters backslash-escaped, so a newline in it cannot forge a line of its own,
    and cut at `limit` characters."""
    text = str(text)
    if len(text) > limit:
        text = text[:limit] + "…"
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], text)


def _capped(name, limit=200):
    """A model name as the client wrote it, cut short: any string is accepted there, and one
    line of the log must not grow with it."""
    return name[:limit] + "…" if name is not None and len(name) > limit else name


@functools.lru_cache(maxsize=None)
def _series(metric, *labels):
    """The metric's child for these label values, kept: labels() locks and validates every call."""
    return metric.labels(*labels)


def _tokens(usage):
    """(input, output) from either protocol's usage; input counts cached tokens too."""
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return usage.get("prompt_tokens"), usage.get("completion_tokens")
    parts = [usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens") if k in usage]
    return (sum(parts) if parts else None), usage.get("output_tokens")


def cooling(deployment, until):
    """`deployment` cools down in this worker until `until` (Unix time)."""
    _series(COOLING_UNTIL, deployment).set(until)


def _at_zero(labels):
    """Every counter whose label values are known at start, at zero: an alert can then tell
    none from a metric not there."""
    for direction in (*_DIRECTIONS, *_PASSED_THROUGH):
        for kind in (*KINDS, "connection"):
            _series(UPSTREAM_ERRORS, direction, kind)
        for kind in ("input", "output"):
            _series(TOKENS, direction, kind)
            _series(ESTIMATED_TOKENS, direction, kind)
        _series(WEB_SEARCHES, direction)
    for deployment in labels.providers:
        for reason in FAILOVER_REASONS:
            _series(FAILOVERS, deployment, reason)
        _series(COOLING_UNTIL, deployment)


def current():
    """The record of the request this thread is serving (a throwaway one outside requests)."""
    return _current.get(None) or Record()


def session_of(headers):
    """A client's session id (Claude Code's header), fit for a log line."""
    session = headers.get("x-claude-code-session-id")
    return escaped(session, 100) if session else None


def install(app, settings, finished=None, priced=None, labels=_NO_LABELS, untraced=()):
    """Log and measure every request `app` serves, and serve GET /metrics; `finished(record)`
    is called with each request's record once it is written, `priced(record)` before (Record.finish);
    `labels` bounds its metrics' labels. With settings.traces, every request but those to the
    `untraced` paths has a span.

    Access lines are INFO records: BRIDGE_LOG_LEVEL=WARNING turns them off.
    """
    _stderr_lines().every = settings.access_log_flush
    access_log.setLevel(settings.log_level)
    app.after_request(_note_response)
    app.add_url_rule("/metrics", "metrics", metrics)
    traced = tracing.Tracing() if settings.traces else None
    said = settings.trace_content_limit if traced is not None and settings.trace_content else None
    meters = None
    if settings.otlp_metrics:
        from .otlp_metrics import Meters

        meters = Meters(list(_SECONDS), list(_PER_TOKEN), list(_TOKEN_BUCKETS))
    app.wsgi_app = _Observed(app.wsgi_app, finished, priced, labels, traced, untraced, said, meters)
    _at_zero(labels)


class _SharedMetrics(multiprocess.MultiProcessCollector):
    """The workers' metric files, less those still empty.

    A worker creates its file empty and sizes it a moment later; prometheus_client
    (up to 0.26 at least, client_python#1199) fails the whole scrape on a file read
    in that moment, and for good on one left by a worker killed in it. Files only
    grow, so one seen empty has nothing to count yet.
    """

    def collect(self):
        files = [path for path in glob.glob(os.path.join(self._path, "*.db")) if _has_data(path)]
        return self.merge(files, accumulate=True)


def _has_data(path):
    try:
        return os.path.getsize(path) > 0
    except FileNotFoundError:  # a dead worker's live gauge, removed by child_exit
        return False


def metrics():
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _SharedMetrics(registry)
    return Response(generate_latest(_WithCooling(registry)), headers={"Content-Type": CONTENT_TYPE_LATEST})


class _WithCooling:
    """A registry's metrics, and bridge_deployment_cooling read from the cool-downs' ends at the
    scrape: no worker has to wake up to say a cool-down ended."""

    def __init__(self, registry):
        self._registry = registry

    def collect(self):
        now = time.time()
        for family in self._registry.collect():
            yield family
            if family.name == "bridge_deployment_cooling_until_seconds":
                state = GaugeMetricFamily(
                    "bridge_deployment_cooling",
                    "1 while a deployment cools down in some worker (tried only after the others), else 0.",
                    labels=["deployment"],
                )
                for sample in family.samples:
                    state.add_metric([sample.labels["deployment"]], 1.0 if sample.value > now else 0.0)
                yield state


def _note_response(response):
    record = current()
    asked = request._get_current_object()  # one lookup of the request, not one per attribute
    record.route = asked.url_rule.rule if asked.url_rule else None
    if record.direction is None:
        record.direction = asked.blueprint if asked.blueprint in _DIRECTIONS else None
    record.status = response.status_code
    record.stream = response.mimetype == "text/event-stream"
    if not record.stream:
        record.first_byte = time.monotonic()
    return response


class _Observed:
    """WSGI middleware: start a Record per request; closing the response writes it."""

    def __init__(self, wsgi_app, finished, priced, labels, traced, untraced, said=None, meters=None):
        self.wsgi_app = wsgi_app
        self.said = said  # the content attributes' limit, when traced requests record what they say
        self.meters = meters
        self.finished = finished
        self.priced = priced
        self.labels = labels
        self.tracing = traced
        self.untraced = untraced

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO")
        traced = self.tracing is not None and path not in self.untraced
        if traced and self.said is not None:
            record = _Said(environ.get("REQUEST_METHOD"), self.said)
        else:
            record = Record(environ.get("REQUEST_METHOD"), quiet=path == "/metrics")
        record.labels = self.labels
        if traced:
            record.tracing, record.span = self.tracing, self.tracing.request(environ)
        if self.meters is not None:
            record.meters = self.meters
        _current.set(record)
        answer = self.wsgi_app(environ, start_response)
        return _Body(answer, record, self.finished, self.priced, write_at_end=not environ.get(CLOSES_ANSWERS))


class _Body:
    """The response body as the server iterates it; the record is written once, when the server
    closes it, or with `write_at_end` when the body ends, whichever comes first.

    PEP 3333 says the server always calls close, but werkzeug's server (the tests' and `flask
    run`'s) skips it when the client hangs up while it drains the request socket after the
    last chunk: a complete answer would go unlogged and uncounted. gunicorn (bridge/serve/worker.py)
    always closes, and its stream loop closes an ended stream off the loop's thread, so the
    record's work stays there (usage only queues its count for Redis: usage.py's writer).
    """

    def __init__(self, iterable, record, finished, priced=None, write_at_end=True):
        self._iterable = iterable
        self._finished = finished
        self._priced = priced
        self._chunks = iter(iterable)
        self._record = record
        self._write_at_end = write_at_end
        self._ended = False  # the body was iterated to its end (or to an error), not cut short
        self._written = False
        if record.stream:
            _series(OPEN_STREAMS, record.label).inc()

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._chunks)
        except StopIteration:
            self._ended = True
            if self._write_at_end:
                self._write()
            raise
        except Exception:
            self._record.error = self._record.error or "internal_error"
            self._ended = True
            self._write()
            raise

    def close(self):
        try:
            if hasattr(self._iterable, "close"):
                self._iterable.close()
        finally:
            self._write()

    def _write(self):
        if self._written:
            return
        self._written = True
        if self._record.stream:
            _series(OPEN_STREAMS, self._record.label).dec()
        self._record.finish(ended=self._ended, then=self._finished, priced=self._priced)


class _StderrLines(logging.Handler):
    """Bare JSON lines on whatever sys.stderr is when they are written (test runners swap it),
    without a Formatter's pass over records that have nothing to add to their message.

    Lines are held and written together every `every` seconds (BRIDGE_ACCESS_LOG_FLUSH; 0
    writes each at once), as nginx's `buffer=` and Envoy's access logs do: a write of its own
    costs each request a system call and a hand-over of the GIL. Each write is of whole lines
    and at most PIPE_BUF bytes, which the kernel keeps whole in a pipe every worker writes to.
    HELD_BYTES bounds what waits. A worker that begins to stop writes them at once from then
    on (write_access_lines_at_once), and logging.shutdown writes what is left at exit.
    """

    HELD_BYTES = 256 * 1024

    def __init__(self):
        super().__init__()
        self._every = 0.0
        self._forked()
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self):
        """A child holds none of its parent's lines, and has no thread writing them yet."""
        self._held, self._size, self._writer = [], 0, None
        self._wake = threading.Event()  # the writer's wait, cut short when `every` changes

    @property
    def every(self):
        return self._every

    @every.setter
    def every(self, seconds):
        self._every = seconds
        self._wake.set()

    def emit(self, record):
        try:
            line = record.getMessage() + "\n"
            if not self._every and not self._held:
                sys.stderr.write(line)
                return
            self._held.append(line)  # those held before `every` became 0 go first
            self._size += _encoded_size(line)
            if not self._every or self._size > self.HELD_BYTES:
                self.flush()
            elif self._writer is None:
                self._wake = threading.Event()  # not one set before the writer was there
                writer = threading.Thread(target=self._write_every, name="access-lines", daemon=True)
                writer.start()
                self._writer = writer
        except Exception:
            self.handleError(record)

    def flush(self):
        with self.lock:  # emit holds it too: lines go out whole and in order
            held, self._held, self._size = self._held, [], 0
            for chunk in _pipe_writes(held):
                sys.stderr.write(chunk)

    def _write_every(self):
        while True:
            self._wake.wait(self._every or None)  # at 0, until `every` is set again
            self._wake.clear()
            try:
                self.flush()
            except (OSError, ValueError):  # stderr closed or broken: nowhere left to say so
                pass


def _pipe_writes(lines):
    """`lines` joined into writes of whole lines of at most PIPE_BUF bytes (a longer line alone)."""
    chunk, size = [], 0
    for line in lines:
        length = _encoded_size(line)
        if chunk and size + length > select.PIPE_BUF:
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += length
    if chunk:
        yield "".join(chunk)


def _encoded_size(line):
    """Its bytes as stderr writes them (UTF-8: a line names what a client sent, in any script)."""
    return len(line) if line.isascii() else len(line.encode())


def write_access_lines_at_once():
    """Each access line written as it comes from now on, and those held now soon after: this
    worker is stopping, and the master's SIGKILL at the end of its graceful_timeout must find
    none held (serve/worker.py)."""
    _stderr_lines().every = 0


def _stderr_lines():
    """The access log's own handler, added once per process."""
    for handler in access_log.handlers:
        if isinstance(handler, _StderrLines):
            return handler
    handler = _StderrLines()
    access_log.addHandler(handler)
    access_log.propagate = False
    return handler
