"""Who used what, and how much they may: usage per client, and limits shared through Redis.

Usage: every request with a direction counts in Prometheus by client key name and by the
model asked for (names the routes and BRIDGE_MODEL_MAP define; `other` beyond, so that a
client cannot grow the label set). With BRIDGE_REDIS_URL, each day's counts per client are
also kept in Redis, which `bridge usage` prints.

Limits (BRIDGE_CLIENT_LIMITS): requests per minute, tokens per minute and tokens per day per
client key, in fixed windows (the UTC minute, the UTC day) whose counters are Redis keys that
expire, shared by every worker and every VM. A request is admitted when its client is under
every limit at its start: its tokens are known only when the upstream has reported them, and
they count then, at the end of the answer, of the stream, or of a stream the client
abandoned (what the upstream had reported by then, and bridge's estimate of the rest:
observability.Record). So a client may go over a token limit by the requests it had in
flight; the next one waits.
Admission is one round trip (a Lua script), counting tokens another, after the answer.

A refusal is a 429 `rate_limit` in the client's protocol, never a 403 (Claude Code takes
403 as a login problem), with `retry-after` and the rate-limit headers of the limit hit.
Redis slow or down (BRIDGE_REDIS_TIMEOUT): BRIDGE_REDIS_FAILURE=open serves the request and
counts the failure in bridge_redis_errors, `closed` answers 503. Neither waits longer than
the timeout, and neither is a stack trace.
"""

import logging
import math
import time

import redis
from prometheus_client import Counter
from redis.backoff import NoBackoff
from redis.retry import Retry
from requests.structures import CaseInsensitiveDict

from ..protocols.errors import BridgeError
from ..serve.observability import _series, _tokens
from ..translate import model_map
from .admission import refusal

log = logging.getLogger("bridge.usage")

KINDS = ("input", "output", "cache_read", "cache_write")
_DAY_KEPT = 35 * 86400  # `bridge usage` reads today's counts; a month stays for whoever asks Redis

CLIENT_REQUESTS = Counter(
    "bridge_client_requests", "Requests by client key name and model asked for.", ["client", "model"]
)
CLIENT_TOKENS = Counter(
    "bridge_client_tokens",
    "Tokens counted (as reported, or estimated: bridge_estimated_tokens), by client key name, model asked "
    "for and kind: input (cached included), output, cache_read and cache_write (parts of input).",
    ["client", "model", "kind"],
)
LIMITED = Counter("bridge_client_limited", "Requests refused by a client limit.", ["client", "limit"])
REDIS_ERRORS = Counter(
    "bridge_redis_errors", "Redis calls that failed or timed out, by what they were for.", ["operation"]
)

# KEYS: this minute's requests, this minute's tokens, today's tokens; ARGV: their limits (0: none).
# Refused: {limit name, its count}; admitted: {"", requests, tokens this minute, tokens today}.
_ADMIT = """
local tpd = tonumber(redis.call('GET', KEYS[3]) or '0')
if ARGV[3] ~= '0' and tpd >= tonumber(ARGV[3]) then return {'tokens_per_day', tpd} end
local tpm = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] ~= '0' and tpm >= tonumber(ARGV[2]) then return {'tokens_per_minute', tpm} end
local requests = redis.call('INCR', KEYS[1])
if requests == 1 then redis.call('EXPIRE', KEYS[1], 120) end
if ARGV[1] ~= '0' and requests > tonumber(ARGV[1]) then
    redis.call('DECR', KEYS[1])
    return {'requests_per_minute', requests - 1}
end
return {'', requests, tpm, tpd}
"""


def connect(settings):
    """A client with its own connection pool (one per worker: redis-py starts a new pool in a
    forked process), every call bounded by BRIDGE_REDIS_TIMEOUT and never retried."""
    return redis.Redis.from_url(
        settings.redis_url,
        socket_timeout=settings.redis_timeout,
        socket_connect_timeout=settings.redis_timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


def day(now):
    return time.strftime("%Y-%m-%d", time.gmtime(now))


def usage_key(client, when):
    return f"bridge:usage:{day(when)}:{client}"


def model_labels(settings, table):
    """The model names a label may take: those the routes and the model map define."""
    return frozenset(table.names()) | frozenset(model_map.aliases(settings.model_map))


def kinds(usage, tokens=None):
    """{kind: tokens} from a record's usage, in either protocol's fields (observability.Record.count),
    and its (input, output) as counted when given (Record.tokens: some may be estimated)."""
    input_tokens, output_tokens = _tokens(usage) if tokens is None else tokens
    return {
        "input": input_tokens or 0,
        "output": output_tokens or 0,
        "cache_read": usage.get("cache_read_input_tokens", usage.get("cached_tokens", 0)),
        "cache_write": usage.get("cache_creation_input_tokens", 0),
    }


class Accounts:
    """Per-client usage and limits for one app; `redis` is None without BRIDGE_REDIS_URL."""

    def __init__(self, settings, table):
        self.models = model_labels(settings, table)
        self.limits = dict(settings.client_limits)
        self.fail_closed = settings.redis_failure == "closed"
        self.redis = connect(settings) if settings.redis_url else None
        self._admit = self.redis.register_script(_ADMIT) if self.limits else None

    def admit(self, client, now=None):
        """Raise a 429 when `client` is over one of its limits, a 503 when Redis cannot say and
        the bridge fails closed."""
        limits = self.limits.get(client) or self.limits.get("*")
        if limits is None or client is None:
            return
        now = time.time() if now is None else now
        minute = int(now // 60)
        keys = (f"bridge:rpm:{client}:{minute}", f"bridge:tpm:{client}:{minute}", f"bridge:tpd:{client}:{day(now)}")
        try:
            verdict = self._admit(keys, (limits.requests_per_minute, limits.tokens_per_minute, limits.tokens_per_day))
        except redis.RedisError as error:
            self._failed("admit", error)
            if self.fail_closed:
                raise refusal(
                    "overloaded", "the bridge cannot check this client's limits: its Redis does not answer"
                ) from None
            return
        if verdict[0]:
            _series(LIMITED, client, verdict[0]).inc()
            raise over_limit(verdict[0], getattr(limits, verdict[0]), now)

    def finished(self, record):
        """Count what the request used: in Prometheus always, in Redis when it is set."""
        if record.direction is None or record.quiet:
            return
        client = record.client or "none"
        model = record.model if record.model in self.models else "other"
        _series(CLIENT_REQUESTS, client, model).inc()
        used = kinds(record.upstream_usage or record.usage, record.tokens)
        for kind, count in used.items():
            if count:
                _series(CLIENT_TOKENS, client, model, kind).inc(count)
        if self.redis is not None:
            self._store(client, used, time.time())  # tokens count in the window where they were reported

    def _store(self, client, used, when):
        """One transaction: the token windows the limits read, and the day's usage per kind."""
        tokens = used["input"] + used["output"]
        per_minute, per_day = f"bridge:tpm:{client}:{int(when // 60)}", f"bridge:tpd:{client}:{day(when)}"
        key = usage_key(client, when)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                if tokens:
                    pipe.incrby(per_minute, tokens).expire(per_minute, 120)
                    pipe.incrby(per_day, tokens).expire(per_day, 2 * 86400)
                pipe.hincrby(key, "requests", 1)
                for kind, count in used.items():
                    if count:
                        pipe.hincrby(key, kind, count)
                pipe.expire(key, _DAY_KEPT).execute()
        except redis.RedisError as error:
            self._failed("count", error)

    def _failed(self, operation, error):
        _series(REDIS_ERRORS, operation).inc()
        # The error names host and port, never the password.
        mode = "closed" if self.fail_closed else "open"
        log.warning("redis %s failed (BRIDGE_REDIS_FAILURE=%s): %s", operation, mode, error)


_RESOURCE = {"requests_per_minute": "requests", "tokens_per_minute": "tokens", "tokens_per_day": "tokens"}


def over_limit(limit, allowed, now):
    """The 429 for a limit reached: `retry-after` until its window ends, and the rate-limit
    headers in Anthropic's names (ratelimit.client_headers renames them for OpenAI clients)."""
    reset = (now // 60 + 1) * 60 if limit != "tokens_per_day" else (now // 86400 + 1) * 86400
    resource = _RESOURCE[limit]
    headers = CaseInsensitiveDict(
        {
            "retry-after": str(max(1, math.ceil(reset - now))),
            f"anthropic-ratelimit-{resource}-limit": str(allowed),
            f"anthropic-ratelimit-{resource}-remaining": "0",
            f"anthropic-ratelimit-{resource}-reset": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset)),
        }
    )
    unit = limit.replace("_", " ")
    return BridgeError(
        "rate_limit",
        f"this client key has reached its limit of {allowed} {unit} (BRIDGE_CLIENT_LIMITS); "
        f"retry after {headers['retry-after']} s",
        upstream_headers=headers,
    )


def today(settings, client=None, now=None):
    """{client: {field: count}} of today's usage in Redis (`bridge usage`)."""
    store = connect(settings)
    now = time.time() if now is None else now
    prefix = usage_key("", now)
    keys = [usage_key(client, now)] if client else sorted(store.scan_iter(match=prefix + "*", count=1000))
    counts = {key[len(prefix) :]: store.hgetall(key) for key in keys}
    return {name: row for name, row in counts.items() if row}
