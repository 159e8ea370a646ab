"""Who used what, and how much they may: usage per client, and limits shared through Redis.

Usage: every request admitted (admission.py: past the bridge's capacity and the client's limits
and cap) counts in Prometheus by client key name and by the model asked for (names the routes
and BRIDGE_MODEL_MAP define; `other` beyond, so that a client cannot grow the label set), as
its tokens do. With BRIDGE_REDIS_URL, each day's counts per client are also kept in Redis,
which `bridge usage` prints. A refused request counts only in bridge_client_limited_total.

Limits (BRIDGE_CLIENT_LIMITS): requests per minute, tokens per minute and tokens per day per
client key, in fixed windows (the UTC minute, the UTC day) whose counters are Redis keys that
expire, shared by every worker and every VM. A call's tokens are known only when the upstream
has reported them, at the end of the answer, of the stream, or of a stream the client abandoned
(what the upstream had reported by then, and bridge's estimate of the rest:
observability.Record). So that concurrency cannot multiply a token limit,
admission also reserves what the call may cost (`estimate`: its input as count_tokens counts
text, plus its max output tokens up to BRIDGE_RESERVE_OUTPUT_TOKENS), and a client is admitted
while the tokens counted plus those its calls in flight hold are under every limit. The call's
end settles its reservation: the reported tokens replace it, in one step, or nothing does when
the call failed before generating. Reservations live in a sorted set per client by expiry: one
never settled (its worker killed) lapses after RESERVATION_SECONDS; one whose admission Redis
did not confirm in time (it may make it late) is released at the request's end all the same,
as settling never releases twice. A client may still pass a
token limit by the last call admitted under it, plus what each call in flight uses beyond its
reservation. Admission is one round trip (a Lua script).

Counting goes off every request's path: the end of a request puts its counts on its worker's
queue, and one writer thread per worker sends what is queued to Redis, in one transaction, as
soon as it is there. A full queue drops and counts (bridge_usage_dropped_total), as does a
write Redis did not confirm (it may still have applied it: never sent twice). While Redis is
away, counts wait in the queue and the writer asks every AWAY_RETRY_SECONDS whether it is back;
at the worker's exit it writes what is left.

A refusal is a 429 `rate_limit` in the client's protocol, never a 403 (Claude Code takes
403 as a login problem), with `retry-after` and the rate-limit headers of the limit hit.
Redis slow or down (BRIDGE_REDIS_TIMEOUT): BRIDGE_REDIS_FAILURE=open serves the request and
counts the failure in bridge_redis_errors, `closed` answers 503. Neither waits longer than
the timeout, and neither is a stack trace.
"""

import atexit
import collections
import logging
import math
import os
import queue
import secrets
import threading
import time

import redis
from prometheus_client import Counter
from redis.backoff import NoBackoff
from redis.retry import Retry
from requests.structures import CaseInsensitiveDict

from ..protocols.errors import BridgeError
from ..protocols.shapes import is_count
from ..serve.observability import _series, _tokens
from ..translate import model_map
from ..translate.tokens import CHARS_PER_TOKEN, IMAGE_TOKENS
from .admission import RETRY_AFTER, refusal

log = logging.getLogger("bridge.usage")

KINDS = ("input", "output", "cache_read", "cache_write")
_DAY_KEPT = 35 * 86400  # `bridge usage` reads today's counts; a month stays for whoever asks Redis
RESERVATION_SECONDS = 900  # a reservation never settled (its worker killed mid-call) lapses then
QUEUED = 10_000  # usage counts a worker keeps for Redis at most
_BATCH = 500  # counts the writer sends in one transaction at most
AWAY_RETRY_SECONDS = 5.0  # how often the writer asks a Redis that failed whether it is back

CLIENT_REQUESTS = Counter(
    "bridge_client_requests",
    "Requests admitted (one refused by a limit counts in bridge_client_limited only), by client key name "
    "and model asked for.",
    ["client", "model"],
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
DROPPED = Counter(
    "bridge_usage_dropped",
    "Requests' usage counts not stored in Redis: the worker's queue was full (queue_full), or Redis did not "
    "confirm the write within BRIDGE_REDIS_TIMEOUT (redis; it may have applied it late).",
    ["reason"],
)

# KEYS: this minute's requests, this minute's tokens, today's tokens, the client's reservations
# (a sorted set of "id:tokens" by expiry) and their sum. ARGV: the three limits (0: none), now,
# then the reservation: its member, its expiry, its tokens (0: none), the seconds its keys live.
# Refused: {limit name, its count, tokens held}; admitted: {""}.
_ADMIT = """
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[4])
if #lapsed > 0 then
    local tokens = 0
    for _, member in ipairs(lapsed) do tokens = tokens + tonumber(string.match(member, '%d+$')) end
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[4])
    redis.call('DECRBY', KEYS[5], tokens)
    if redis.call('ZCARD', KEYS[4]) == 0 then redis.call('DEL', KEYS[5]) end
end
local held = math.max(0, tonumber(redis.call('GET', KEYS[5]) or '0'))
local tpd = tonumber(redis.call('GET', KEYS[3]) or '0')
if ARGV[3] ~= '0' and tpd + held >= tonumber(ARGV[3]) then return {'tokens_per_day', tpd, held} end
local tpm = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] ~= '0' and tpm + held >= tonumber(ARGV[2]) then return {'tokens_per_minute', tpm, held} end
local requests = redis.call('INCR', KEYS[1])
if requests == 1 then redis.call('EXPIRE', KEYS[1], 120) end
if ARGV[1] ~= '0' and requests > tonumber(ARGV[1]) then
    redis.call('DECR', KEYS[1])
    return {'requests_per_minute', requests - 1, 0}
end
if ARGV[7] ~= '0' then
    redis.call('ZADD', KEYS[4], ARGV[6], ARGV[5])
    redis.call('INCRBY', KEYS[5], ARGV[7])
    redis.call('EXPIRE', KEYS[4], ARGV[8])
    redis.call('EXPIRE', KEYS[5], ARGV[8])
end
return {''}
"""

# KEYS: the client's reservations and their sum; ARGV: the reservation's member and tokens. A
# reservation that lapsed meanwhile is gone already: nothing to release twice.
_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
    redis.call('DECRBY', KEYS[2], ARGV[2])
    if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]) end
end
"""

# A run of base64 this long is data (an image, a file, encrypted reasoning), not text: found in
# a copy of the body where every base64 byte is `a` and any other a space (bytes.find runs at C
# speed; a regular expression took a millisecond for a 50 KB body).
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_AS_RUNS = bytes(ord("a") if byte in _BASE64 else ord(" ") for byte in range(256))
_DATA_RUN = b"a" * 1024
_MAX_OUTPUT = ("max_tokens", "max_completion_tokens", "max_output_tokens")  # Messages, Chat, Responses


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


def held_keys(client):
    """The client's reservations (a sorted set by expiry) and the sum of their tokens."""
    return f"bridge:held:{client}", f"bridge:held:{client}:tokens"


def estimate(raw, body, output_cap):
    """Tokens a call may cost, reserved while it runs: its body's bytes as count_tokens counts
    text (CHARS_PER_TOKEN a token; the JSON's keys and punctuation make it err high, as
    count_tokens does), a base64 run (an image, a file) a fixed IMAGE_TOKENS; plus the output
    it asks for at most, or `output_cap` (BRIDGE_RESERVE_OUTPUT_TOKENS) when it asks for more
    or names none."""
    size, runs = len(raw), 0
    marked = raw.translate(_AS_RUNS)
    start = marked.find(_DATA_RUN)
    while start >= 0:
        end = marked.find(b" ", start + len(_DATA_RUN))
        end = len(marked) if end < 0 else end
        size -= end - start
        runs += 1
        start = marked.find(_DATA_RUN, end)
    asked = next((body[name] for name in _MAX_OUTPUT if is_count(body.get(name))), output_cap)
    return -(-size // CHARS_PER_TOKEN) + runs * IMAGE_TOKENS + min(asked, output_cap)


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


# The tokens admission reserved for one call, and their member in the client's sorted set.
Reservation = collections.namedtuple("Reservation", "member tokens")


class Accounts:
    """Per-client usage and limits for one app; `redis` is None without BRIDGE_REDIS_URL."""

    def __init__(self, settings, table):
        self.models = model_labels(settings, table)
        self.limits = dict(settings.client_limits)
        self.fail_closed = settings.redis_failure == "closed"
        self.output_cap = settings.reserve_output_tokens
        self.redis = connect(settings) if settings.redis_url else None
        self._admit = self.redis.register_script(_ADMIT) if self.limits else None
        self._release = self.redis.register_script(_RELEASE) if self.limits else None
        self.writer = _Writer(self, settings.redis_timeout) if self.redis is not None else None
        for operation in ("admit", "count"):  # at zero, so that an alert tells none from absent
            _series(REDIS_ERRORS, operation)
        for name in {key.name for key in settings.client_keys}:
            if name in self.limits or "*" in self.limits:
                for limit in _RESOURCE:
                    _series(LIMITED, name, limit)

    def admit(self, record, call=None, now=None):
        """Admit the request of `record` (its client's), or raise a 429 when its client is over
        one of its limits, its calls in flight counted by what they hold, or a 503 when Redis
        cannot say and the bridge fails closed. Under a token limit, reserve what a `call` (its
        body: raw bytes, parsed) may cost, to settle at the request's end (finished)."""
        client = record.client
        limits = self.limits.get(client) or self.limits.get("*")
        if limits is None or client is None:
            record.admitted = True
            return
        now = time.time() if now is None else now
        minute = int(now // 60)
        tokens = 0
        if call is not None and (limits.tokens_per_minute or limits.tokens_per_day):
            tokens = estimate(*call, self.output_cap)
        reserved = Reservation(f"{secrets.token_hex(8)}:{tokens}", tokens) if tokens else None
        keys = (
            f"bridge:rpm:{client}:{minute}",
            f"bridge:tpm:{client}:{minute}",
            f"bridge:tpd:{client}:{day(now)}",
            *held_keys(client),
        )
        member = reserved.member if reserved else ""
        reservation = (now, member, now + RESERVATION_SECONDS, tokens, RESERVATION_SECONDS)
        try:
            verdict = self._admit(
                keys, (limits.requests_per_minute, limits.tokens_per_minute, limits.tokens_per_day, *reservation)
            )
        except redis.RedisError as error:
            self._failed("admit", error)
            record.reserved = reserved  # Redis may still make it, late: released at the end all the same
            if self.fail_closed:
                raise refusal(
                    "overloaded", "the bridge cannot check this client's limits: its Redis does not answer"
                ) from None
            record.admitted = True
            return
        if verdict[0]:
            _series(LIMITED, client, verdict[0]).inc()
            raise over_limit(verdict[0], getattr(limits, verdict[0]), now, *verdict[1:])
        record.admitted, record.reserved = True, reserved

    def finished(self, record):
        """Count what an admitted request used: in Prometheus at once, in Redis through the
        writer, which also settles the request's reservation (admitted or not)."""
        client = record.client or "none"
        used = kinds(record.upstream_usage or record.usage, record.tokens)
        if record.admitted:
            model = record.model if record.model in self.models else "other"
            _series(CLIENT_REQUESTS, client, model).inc()
            for kind, count in used.items():
                if count:
                    _series(CLIENT_TOKENS, client, model, kind).inc(count)
        if self.writer is not None and (record.admitted or record.reserved is not None):
            # Tokens count in the window where they were reported.
            self.writer.put((client, used, time.time(), record.admitted, record.reserved))

    def store(self, pipe, client, used, when, admitted, reserved):
        """Add to a transaction one request's counts (when it was admitted): the token windows
        the limits read and the day's usage per kind; and its reservation released."""
        if reserved is not None:
            self._release(held_keys(client), (reserved.member, reserved.tokens), client=pipe)
        if not admitted:
            return
        tokens = used["input"] + used["output"]
        per_minute, per_day = f"bridge:tpm:{client}:{int(when // 60)}", f"bridge:tpd:{client}:{day(when)}"
        key = usage_key(client, when)
        if tokens:
            pipe.incrby(per_minute, tokens).expire(per_minute, 120)
            pipe.incrby(per_day, tokens).expire(per_day, 2 * 86400)
        pipe.hincrby(key, "requests", 1)
        for kind, count in used.items():
            if count:
                pipe.hincrby(key, kind, count)
        pipe.expire(key, _DAY_KEPT)

    def _failed(self, operation, error):
        _series(REDIS_ERRORS, operation).inc()
        # The error names host and port, never the password.
        mode = "closed" if self.fail_closed else "open"
        log.warning("redis %s failed (BRIDGE_REDIS_FAILURE=%s): %s", operation, mode, error)


class _Writer:
    """One worker's usage counts on their way to Redis, off every request's path (module
    docstring): a bounded queue, and a thread that empties it, started in the process that
    puts first (a worker, not the gunicorn master it was forked from)."""

    def __init__(self, accounts, timeout):
        self._accounts = accounts
        self._timeout = timeout
        self._queue = queue.Queue(QUEUED)
        self._pid = self._thread = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._away = False  # the last write failed: ask Redis before the next one
        for reason in ("queue_full", "redis"):
            _series(DROPPED, reason)  # at zero, before anything is dropped

    def put(self, counts):
        if self._pid != os.getpid():
            self._start()
        try:
            self._queue.put_nowait(counts)
        except queue.Full:
            _series(DROPPED, "queue_full").inc()

    def _start(self):
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._queue = queue.Queue(QUEUED)  # a forked copy's, with its items, is the parent's business
            self._thread = threading.Thread(target=self._run, name="usage-writer", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def close(self):
        """Write what is queued (the worker is exiting), waiting a few Redis timeouts at most."""
        self._stop.set()
        try:
            self._queue.put_nowait(None)  # wakes the thread
        except queue.Full:
            pass  # it is busy, and sees the stop after this batch
        self._thread.join(timeout=4 * self._timeout + 1)  # a ping and a write, twice

    def _run(self):
        batch = []
        while True:
            if not batch:
                batch.append(self._queue.get())
            batch = [counts for counts in batch + self._taken(_BATCH - len(batch)) if counts is not None]
            stopping = self._stop.is_set()  # None in the queue: close() woke the thread
            if self._away and not self._answers():
                if stopping:  # nothing to write to: what is left goes
                    _series(DROPPED, "redis").inc(len(batch) + len(self._taken(QUEUED)))
                    return
                self._stop.wait(AWAY_RETRY_SECONDS)
                continue
            if batch:
                self._write(batch)
            batch = []
            if stopping and self._queue.empty():
                return

    def _taken(self, most):
        """Up to `most` counts from the queue, without waiting."""
        taken = []
        while len(taken) < most:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return taken

    def _answers(self):
        try:
            self._accounts.redis.ping()
        except redis.RedisError:
            _series(REDIS_ERRORS, "count").inc()
            return False
        self._away = False
        return True

    def _write(self, batch):
        """One transaction for the batch; a failure drops it, counted, never to be sent again:
        Redis may have applied it all the same."""
        try:
            with self._accounts.redis.pipeline(transaction=True) as pipe:
                for counts in batch:
                    self._accounts.store(pipe, *counts)
                pipe.execute()
        except redis.RedisError as error:
            self._away = True
            _series(DROPPED, "redis").inc(len(batch))
            self._accounts._failed("count", error)


_RESOURCE = {"requests_per_minute": "requests", "tokens_per_minute": "tokens", "tokens_per_day": "tokens"}


def over_limit(limit, allowed, now, counted=0, held=0):
    """The 429 for a limit reached: `retry-after` until its window ends, or when the client's
    calls in flight made it (their reservations), a few seconds, by when one may have ended;
    and the rate-limit headers in Anthropic's names (ratelimit.client_headers renames them for
    OpenAI clients)."""
    in_flight = counted < allowed  # the limit is reached only with what is reserved
    if in_flight:
        reset = now + int(RETRY_AFTER)
    else:
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
    if in_flight:
        reached = f"with the {held} tokens its calls in flight may still use, this client key has reached"
        wait = "retry when one has ended"
    else:
        reached, wait = "this client key has reached", f"retry after {headers['retry-after']} s"
    return BridgeError(
        "rate_limit",
        f"{reached} its limit of {allowed} {unit} (BRIDGE_CLIENT_LIMITS); {wait}",
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
