"""Who used what, and how much they may: usage per client, and limits shared through Redis.

Usage: every request admitted (admission.py: past the bridge's capacity and the client's limits
and cap) counts in Prometheus by client key name and by the model asked for (names the routes
and BRIDGE_MODEL_MAP define; `other` beyond, so that a client cannot grow the label set), as
its tokens do. With BRIDGE_REDIS_URL, each day's counts per client are also kept in Redis,
which `bridge usage` prints, and their spend, which spend.py reads back (GET /v1/usage, `bridge
usage --from`); a key's users past BRIDGE_MAX_USERS_PER_KEY a day count there as `other`. A
refused request counts only in bridge_client_limited_total.

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
reservation. Admission is one round trip (a Lua script); a call's overlaps its translation
(Accounts.ask, Accounts.decide).

Admitted ahead (BRIDGE_ADMIT_AHEAD, a share; 0, the default: never): each verdict says what
share of its tightest limit or hard budget the client has used. A client that Redis said within
FRESH_SECONDS used under that share, with what this worker sent for it since (this call
included: _Standing), is admitted at once, and its admission script goes to Redis from the
writer's thread, pipelined with the counts and before its own (its reservation is made before
it is settled), so that a call no longer waits for Redis, nor its thread for the answer. At
most AHEAD_MOST calls of a client go ahead unjudged per worker; a call near a limit waits for
those to be judged, then for its own verdict, so one worker admits exactly to a limit. Across
workers a client may pass one by the calls others let go ahead that Redis then refuses (served
all the same, counted in bridge_client_admitted_ahead_total under the limit): only a client
that went from under the share to past the limit before their verdicts came back.

Budgets (BRIDGE_BUDGETS): dollars per key, team and user per UTC day and calendar month, checked
in the same script: the spend counted (prices.py prices each call at its end) plus what calls
in flight reserved (`estimated` input and output at the dearest prices that may serve the
model), each budget with its own sorted set of reservations, settled as the tokens' are.

Counting goes off every request's path: the end of a request puts its counts on its worker's
queue, and one writer thread per worker waits GATHER_SECONDS after the first for more, then
sends them all in one script call, summed by key (_Tally: one wake-up and one round trip per
batch, not per request). A full queue drops and counts (bridge_usage_dropped_total), as does a
write Redis did not confirm (it may still have applied it: never sent twice). While Redis is
away, counts wait in the queue and the writer asks every AWAY_RETRY_SECONDS whether it is back;
at the worker's exit it writes what is left.

A refusal is a 429 `rate_limit` in the client's protocol, never a 403 (Claude Code takes
403 as a login problem), with `retry-after` and the rate-limit headers of the limit hit.
Redis slow or down (BRIDGE_REDIS_TIMEOUT): BRIDGE_REDIS_FAILURE=open serves the request and
counts the failure in bridge_redis_errors, `closed` answers 503 (a call found invalid before
its verdict is read: its 400). Neither waits longer than the timeout, and neither is a stack
trace.
"""

import atexit
import calendar
import collections
import functools
import hashlib
import logging
import math
import os
import queue
import select
import socket
import threading
import time

import redis
from prometheus_client import Counter
from redis.backoff import NoBackoff
from redis.retry import Retry
from requests.structures import CaseInsensitiveDict

from ..protocols import ids
from ..protocols.errors import BridgeError
from ..protocols.shapes import is_count
from ..serve.deadlines import timeval
from ..serve.observability import _series, _tokens
from ..serve.worker import polled
from ..settings import Limits
from ..translate import model_map
from ..translate.tokens import CHARS_PER_TOKEN, IMAGE_TOKENS
from . import prices
from .admission import RETRY_AFTER, refusal

log = logging.getLogger("bridge.usage")

KINDS = ("input", "output", "cache_read", "cache_write")
_DAY_KEPT = 35 * 86400  # `bridge usage` reads today's counts; a month stays for whoever asks Redis
_SPEND_KEPT = 400 * 86400  # spend per day by key, team, user and model: a year of chargeback
RESERVATION_SECONDS = 900  # a reservation never settled (its worker killed mid-call) lapses then
QUEUED = 10_000  # usage counts a worker keeps for Redis at most
_BATCH = 500  # counts the writer sends in one script call at most
GATHER_SECONDS = 0.05  # the writer's wait for more counts to send with the first: one write per batch, not per request
AWAY_RETRY_SECONDS = 5.0  # how often the writer asks a Redis that failed whether it is back
FRESH_SECONDS = 1.0  # how old Redis's word on a client may be for its calls to go ahead on it
AHEAD_MOST = 64  # calls of one client a worker lets go ahead while Redis has not judged them
AHEAD_GATHER_SECONDS = 0.01  # the writer's gather once a call went ahead: its verdict is awaited
RESERVE_PRICES_KEPT = 1000  # models whose reserve price a worker keeps (matching the routes' globs is dear)

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
CLIENT_COST = Counter(
    "bridge_client_cost",
    "US dollars spent (the upstream's usage by kind times prices: policy/prices.py), by client key name, its team "
    "and model asked for; a call with no price counts in bridge_unpriced_requests instead.",
    ["client", "team", "model"],
)
UNPRICED = Counter(
    "bridge_unpriced_requests",
    "Requests that used tokens of a model with no price (a deployment's `prices`, or the shipped table): their "
    "cost is unknown, not $0.",
    ["deployment"],
)
SOFT_BUDGETS = Counter(
    "bridge_soft_budget_exceeded",
    "Requests admitted past a soft budget (BRIDGE_BUDGETS), by its scope and window.",
    ["scope", "window"],
)
LIMITED = Counter("bridge_client_limited", "Requests refused by a client limit.", ["client", "limit"])
ADMITTED_AHEAD = Counter(
    "bridge_client_admitted_ahead",
    "Requests admitted before Redis's verdict (BRIDGE_ADMIT_AHEAD), by client key name and that verdict when it "
    "came: admitted, or the limit (or budget) Redis then found the client over.",
    ["client", "verdict"],
)
REDIS_ERRORS = Counter(
    "bridge_redis_errors", "Redis calls that failed or timed out, by what they were for.", ["operation"]
)
DROPPED = Counter(
    "bridge_usage_dropped",
    "Requests' usage counts not stored in Redis: the worker's queue was full (queue_full), or Redis did not "
    "confirm the write within BRIDGE_REDIS_TIMEOUT (redis; it may have applied it late), or a count could not "
    "be written (error, logged).",
    ["reason"],
)

# KEYS: this minute's requests, this minute's tokens, today's tokens, the client's reservations
# (a sorted set of "id:tokens" by expiry) and their sum; then per budget its reservations ("id:micros")
# and their sum, today's and this month's spend (micro-dollars). ARGV, few and short (redis-py packs
# each one on the request's thread): the three limits as "rpm tpm tpd" (0: none), now, the
# reservations' expiry, their id, their tokens and micro-dollars (0: none); then per budget
# "day month soft label": its limits (0: none), 1 when soft, its label. The reservations' keys live
# RESERVATION_SECONDS. Refused: {limit name, its count, held} or {"budget", label, window, spent,
# held, limit}; admitted: {"", the largest share of a limit or hard budget now used or held, in
# thousandths, soft budgets passed as "label window"...}. Numbers go to redis.call as strings: Redis
# prints a Lua number with printf on every call.
_ADMIT = """
local rpm, tpm, tpd = string.match(ARGV[1], '^(%d+) (%d+) (%d+)$')
local most = 0
local function share(used, limit)
    if limit > 0 then most = math.max(most, used / limit) end
end
local function held(set, sum)
    local lapsed = redis.call('ZRANGEBYSCORE', set, '-inf', ARGV[2])
    if #lapsed > 0 then
        local amount = 0
        for _, member in ipairs(lapsed) do amount = amount + tonumber(string.match(member, '%d+$')) end
        redis.call('ZREMRANGEBYSCORE', set, '-inf', ARGV[2])
        redis.call('DECRBY', sum, amount)
        if redis.call('ZCARD', set) == 0 then redis.call('DEL', sum) end
    end
    return math.max(0, tonumber(redis.call('GET', sum) or '0'))
end
local soft, windows = {'', 0}, {'day', 'month'}
for first = 6, #KEYS, 4 do
    local day_limit, month_limit, is_soft, label = string.match(ARGV[7 + (first - 6) / 4], '^(%d+) (%d+) (%d) (.*)$')
    local holding = held(KEYS[first], KEYS[first + 1])
    for offset, limit in ipairs({tonumber(day_limit), tonumber(month_limit)}) do
        local window = windows[offset]
        local spent = tonumber(redis.call('GET', KEYS[first + 1 + offset]) or '0')
        if limit > 0 and spent + holding >= limit then
            if is_soft ~= '1' then return {'budget', label, window, spent, holding, limit} end
            table.insert(soft, label .. ' ' .. window)
        elseif is_soft ~= '1' then
            share(spent + holding + tonumber(ARGV[6]), limit)
        end
    end
end
local tokens_held = held(KEYS[4], KEYS[5])
local tpd_count = tonumber(redis.call('GET', KEYS[3]) or '0')
if tpd ~= '0' and tpd_count + tokens_held >= tonumber(tpd) then return {'tokens_per_day', tpd_count, tokens_held} end
local tpm_count = tonumber(redis.call('GET', KEYS[2]) or '0')
if tpm ~= '0' and tpm_count + tokens_held >= tonumber(tpm) then
    return {'tokens_per_minute', tpm_count, tokens_held}
end
local requests = redis.call('INCR', KEYS[1])
if requests == 1 then redis.call('EXPIRE', KEYS[1], '120') end
if rpm ~= '0' and requests > tonumber(rpm) then
    redis.call('DECR', KEYS[1])
    return {'requests_per_minute', requests - 1, 0}
end
share(requests, tonumber(rpm))
share(tpm_count + tokens_held + tonumber(ARGV[5]), tonumber(tpm))
share(tpd_count + tokens_held + tonumber(ARGV[5]), tonumber(tpd))
soft[2] = math.floor(most * 1000)
if ARGV[5] ~= '0' then
    redis.call('ZADD', KEYS[4], ARGV[3], ARGV[4] .. ':' .. ARGV[5])
    redis.call('INCRBY', KEYS[5], ARGV[5])
    redis.call('EXPIRE', KEYS[4], 'RESERVATION_SECONDS')
    redis.call('EXPIRE', KEYS[5], 'RESERVATION_SECONDS')
end
if ARGV[6] ~= '0' then
    local member = ARGV[4] .. ':' .. ARGV[6]
    for first = 6, #KEYS, 4 do
        redis.call('ZADD', KEYS[first], ARGV[3], member)
        redis.call('INCRBY', KEYS[first + 1], ARGV[6])
        redis.call('EXPIRE', KEYS[first], 'RESERVATION_SECONDS')
        redis.call('EXPIRE', KEYS[first + 1], 'RESERVATION_SECONDS')
    end
end
return soft
""".replace("RESERVATION_SECONDS", str(RESERVATION_SECONDS))
_ADMIT_SHA = hashlib.sha1(_ADMIT.encode()).hexdigest()

# One batch of counts (_Tally), summed by key. KEYS: every key the batch writes; ARGV: the most
# users a key may have in a day (further ones count as `other`, so that a trusted client cannot
# grow the spend hash without bound), then four runs, each its number of entries first, a key
# named by its index in KEYS:
#   reservations settled: set, sum, member, amount (released once: only while the set holds it);
#   counters: key, amount, the seconds it lives;
#   hashes: key, the seconds it lives, n, then n field and amount pairs;
#   spend by user: the day's spend hash, the client's users of the day, `client|team|`, the user
#   (- for none), n, then n `model|kind` and amount pairs.
_COUNT = """
local at = 2
local function count()
    at = at + 1
    return tonumber(ARGV[at - 1])
end
local function key(offset) return KEYS[tonumber(ARGV[at + offset])] end
for _ = 1, count() do
    local set, sum = key(0), key(1)
    if redis.call('ZREM', set, ARGV[at + 2]) == 1 then
        redis.call('DECRBY', sum, ARGV[at + 3])
        if redis.call('ZCARD', set) == 0 then redis.call('DEL', sum) end
    end
    at = at + 4
end
for _ = 1, count() do
    redis.call('INCRBY', key(0), ARGV[at + 1])
    redis.call('EXPIRE', key(0), ARGV[at + 2])
    at = at + 3
end
for _ = 1, count() do
    local hash, seconds = key(0), ARGV[at + 1]
    at = at + 2
    for _ = 1, count() do
        redis.call('HINCRBY', hash, ARGV[at], ARGV[at + 1])
        at = at + 2
    end
    redis.call('EXPIRE', hash, seconds)
end
for _ = 1, count() do
    local hash, users, prefix, user = key(0), key(1), ARGV[at + 2], ARGV[at + 3]
    at = at + 4
    if user ~= '-' and redis.call('SISMEMBER', users, user) == 0 then
        if redis.call('SCARD', users) < tonumber(ARGV[1]) then
            redis.call('SADD', users, user)
            redis.call('EXPIRE', users, 2 * 86400)
        else
            user = 'other'
        end
    end
    for _ = 1, count() do
        redis.call('HINCRBY', hash, prefix .. user .. '|' .. ARGV[at], ARGV[at + 1])
        at = at + 2
    end
    redis.call('EXPIRE', hash, SPEND_KEPT)
end
""".replace("SPEND_KEPT", str(_SPEND_KEPT))
_COUNT_SHA = hashlib.sha1(_COUNT.encode()).hexdigest()

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
    return _dates(int(now // 86400))[0]


@functools.lru_cache(maxsize=4)
def _dates(days):
    """The UTC day and month (YYYY-MM-DD, YYYY-MM) of a day since the epoch: every request's keys name them."""
    moment = time.gmtime(days * 86400)
    return time.strftime("%Y-%m-%d", moment), time.strftime("%Y-%m", moment)


def usage_key(client, when):
    return f"bridge:usage:{day(when)}:{client}"


def held_keys(client):
    """The client's reservations (a sorted set by expiry) and the sum of their tokens."""
    return f"bridge:held:{client}", f"bridge:held:{client}:tokens"


def estimate(raw, body, output_cap):
    """Tokens a call may cost, reserved while it runs (`estimated`'s input and output)."""
    return sum(estimated(raw, body, output_cap))


def estimated(raw, body, output_cap):
    """(input, output) tokens a call may cost: its body's bytes as count_tokens counts text
    (CHARS_PER_TOKEN a token; the JSON's keys and punctuation make it err high, as count_tokens
    does), a base64 run (an image, a file) a fixed IMAGE_TOKENS; and the output it asks for at
    most, or `output_cap` (BRIDGE_RESERVE_OUTPUT_TOKENS) when it asks for more or names none."""
    size, runs = len(raw), 0
    marked = raw.translate(_AS_RUNS)
    start = marked.find(_DATA_RUN)
    while start >= 0:
        end = marked.find(b" ", start + len(_DATA_RUN))
        end = len(marked) if end < 0 else end
        size -= end - start
        runs += 1
        start = marked.find(_DATA_RUN, end)
    asked = output_cap
    for name in _MAX_OUTPUT:  # a loop, not next() over a generator: this runs for every call
        if is_count(body.get(name)):
            asked = min(body[name], output_cap)
            break
    return -(-size // CHARS_PER_TOKEN) + runs * IMAGE_TOKENS, asked


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


# What admission reserved for one call: tokens (member in the client's sorted set) and money
# (member in each budget's, `budgets` naming their keys).
Reservation = collections.namedtuple("Reservation", "member tokens money micros budgets")
# An admission sent and not yet read (Accounts.ask): what its verdict is read and judged with.
# With BRIDGE_ADMIT_AHEAD, `standing` is its client's _Standing, `share` what it uses of the
# client's tightest limit and `before` what the worker had sent then (_Standing.sending).
_Asked = collections.namedtuple("_Asked", "connection keys arguments limits now reserved standing share before")

# A call admitted before Redis's verdict, its admission on its way to Redis with the counts
# (Accounts.store); `standing`, `share` and `before` as _Asked's.
_Ahead = collections.namedtuple("_Ahead", "client request_id keys arguments share standing before")

# One admitted (or reserved) request's counts on their way to Redis (Accounts.store).
Counted = collections.namedtuple("Counted", "client team user model used spent micros when admitted reserved")

# Where a batch's counts of one client, team, user and model in one minute go (_Tally): its token
# windows' counters, its day's usage hash, its spend hashes (the key's day and month, the day's by
# user) and its budgets' spend counters (today's, this month's), and its `model|kind` fields.
_Places = collections.namedtuple("_Places", "windows usage spends fields budgets")


def budget_keys(scope, name, when):
    """A budget's reservations, their sum, and today's and this month's spend (micro-dollars)."""
    held = f"bridge:held$:{scope}:{name}"
    spent = f"bridge:spent:{scope}:{name}:"
    return held, held + ":micros", spent + day(when), spent + month(when)


def month(now):
    return _dates(int(now // 86400))[1]


def spend_key(when):
    """One UTC day's spend and tokens, a hash by `client|team|user|model|kind` (`bridge usage`)."""
    return f"bridge:spend:{day(when)}"


def key_spend_keys(client, when):
    """One key's spend and tokens of the UTC day and of the month, hashes by `model|kind` (GET /v1/usage)."""
    own = f"bridge:spend:key:{client}:"
    return own + day(when), own + month(when)


class Accounts:
    """Per-client usage, limits and budgets for one app; `redis` is None without BRIDGE_REDIS_URL."""

    def __init__(self, settings, table):
        self.models = model_labels(settings, table)
        self.limits = dict(settings.client_limits)
        self.budgets = {(budget.scope, budget.name): budget for budget in settings.budgets}
        self.table = table
        self.prices = {deployment.name: deployment.prices for deployment in table.deployments()}
        self._reserve_prices = {}
        self.fail_closed = settings.redis_failure == "closed"
        self.output_cap = settings.reserve_output_tokens
        self.redis = connect(settings) if settings.redis_url else None
        self._connections = _Connections(self.redis.connection_pool) if self.redis is not None else None
        self.users_per_key = settings.max_users_per_key
        self.writer = _Writer(self, settings.redis_timeout) if self.redis is not None else None
        self.ahead = settings.admit_ahead if self.redis is not None else 0.0
        self._standings = {}  # client: _Standing, while calls go ahead
        self._ahead_lock = threading.Condition(threading.Lock())  # its waiters: calls waiting for those gone ahead
        self._waits_ahead = 2 * settings.redis_timeout + AHEAD_GATHER_SECONDS  # a batch's write and read
        for operation in ("admit", "count", "usage"):  # at zero, so that an alert tells none from absent
            _series(REDIS_ERRORS, operation)
        for name in {key.name for key in settings.client_keys}:
            if name in self.limits or "*" in self.limits:
                for limit in _RESOURCE:
                    _series(LIMITED, name, limit)
                if self.ahead:
                    _series(ADMITTED_AHEAD, name, "admitted")

    def admit(self, record, call=None, now=None):
        """Admit the request of `record` (its client's), or raise a 429 when its client is over
        one of its limits, or its key, team or user over a budget, its calls in flight counted
        by what they hold, or a 503 when Redis cannot say and the bridge fails closed. Reserve
        what a `call` (its body: raw bytes, parsed) may cost, to settle at the request's end."""
        self.ask(record, call, now)
        self.decide(record)

    def ask(self, record, call=None, now=None):
        """admit()'s question, sent: decide() reads the verdict. A call read in between, once
        translated, has had Redis's round trip overlap its translation, where admit() would
        wait for it (a thread asleep, and woken, once more a request). A request answered
        before decide() (admission.py) is decided without a refusal: it counts as admitted, or
        not, as Redis says."""
        client = record.client
        own = record.key.limits if record.key is not None else None
        limits = own or self.limits.get(client) or self.limits.get("*")
        budgets = self.budgets_of(record) if client is not None else ()
        if (limits is None and not budgets) or client is None:
            record.admitted = True
            return
        limits = limits or Limits()
        now = time.time() if now is None else now
        minute = int(now // 60)
        tokens = micros = 0
        if call is not None and (limits.tokens_per_minute or limits.tokens_per_day or budgets):
            input_tokens, output_tokens = estimated(*call, self.output_cap)
            if limits.tokens_per_minute or limits.tokens_per_day:
                tokens = input_tokens + output_tokens
            price = self.reserve_price(record.model) if budgets else None
            if price is not None:
                micros = prices.micros((input_tokens * price.input + output_tokens * price.output) / prices.MILLION)
        hexid = ids.random_hex()[:16]
        keys = [
            f"bridge:rpm:{client}:{minute}",
            f"bridge:tpm:{client}:{minute}",
            f"bridge:tpd:{client}:{day(now)}",
            *held_keys(client),
        ]
        arguments = [
            f"{limits.requests_per_minute} {limits.tokens_per_minute} {limits.tokens_per_day}",
            now,
            now + RESERVATION_SECONDS,
            hexid,
            tokens,
            micros,
        ]
        held = []
        shares = [0.0]  # of each hard limit, what this call uses (for going ahead)
        for budget, name in budgets:
            own = budget_keys(budget.scope, name, now)
            keys.extend(own)
            held.append(own[:2])
            day_limit, month_limit = prices.micros(budget.day), prices.micros(budget.month)
            arguments.append(f"{day_limit} {month_limit} {int(budget.soft)} {budget.scope} {name}")
            if self.ahead and not budget.soft:
                shares += (_share(micros, day_limit), _share(micros, month_limit))
        reserved = None
        if tokens or micros:
            reserved = Reservation(f"{hexid}:{tokens}", tokens, f"{hexid}:{micros}", micros, tuple(held))
        standing = share = before = None
        if self.ahead:
            shares += (
                _share(1, limits.requests_per_minute),
                _share(tokens, limits.tokens_per_minute),
                _share(tokens, limits.tokens_per_day),
            )
            share = max(shares)
            standing = self._standings.get(client) or self._standings.setdefault(client, _Standing())
            before = self._goes_ahead(standing, share)
            if before is not None:
                ahead = _Ahead(client, record.request_id, keys, arguments, share, standing, before)
                if self.writer.put(ahead, hurry=True):
                    record.admitted, record.reserved = True, reserved
                    return
                self._landed(ahead, None)  # the writer's queue is full: it waits for its verdict instead
            with self._ahead_lock:
                before = standing.sending(share)
            if standing.bound(0) >= self.ahead:  # near a limit
                self._judged_first(standing)
        try:
            connection = self._sent(_ADMIT_SHA, keys, arguments)
        except redis.RedisError as error:
            self._read(standing, share, before, None)
            self._unconfirmed(record, reserved, error, refuse=True)
            return
        record.asking = _Asked(connection, keys, arguments, limits, now, reserved, standing, share, before)

    def decide(self, record, refuse=True):
        """Read the verdict of ask(), if one is waiting: a refusal is raised (see admit), or only
        counted when not `refuse` (the request has had its answer)."""
        asked = record.asking
        if asked is None:
            return
        record.asking = None
        try:
            verdict = self._answer(asked.connection, _ADMIT_SHA, _ADMIT, asked.keys, asked.arguments)
        except redis.RedisError as error:
            self._read(asked.standing, asked.share, asked.before, None)
            self._unconfirmed(record, asked.reserved, error, refuse)
            return
        self._read(asked.standing, asked.share, asked.before, verdict)
        client, now = record.client, asked.now
        if verdict[0] == "budget":
            label, window = verdict[1], verdict[2]
            _series(LIMITED, client, f"{label.split()[0]}_{window}_budget").inc()
            if refuse:
                raise over_budget(label, window, now, *verdict[3:])
            return
        if verdict[0]:
            _series(LIMITED, client, verdict[0]).inc()
            if refuse:
                raise over_limit(verdict[0], getattr(asked.limits, verdict[0]), now, *verdict[1:])
            return
        _passed_soft(record.request_id, verdict[2:])
        record.admitted, record.reserved = True, asked.reserved

    def _goes_ahead(self, standing, share):
        """What the worker had sent (_Standing.sending) when a call that uses `share` of its
        client's tightest limit is admitted without waiting for Redis, or None: Redis said within
        FRESH_SECONDS what the client used, and with what the worker sent since, this call
        included, that is under BRIDGE_ADMIT_AHEAD of every limit; and fewer than AHEAD_MOST of
        its calls gone ahead wait for their verdicts."""
        if time.monotonic() - standing.at > FRESH_SECONDS or self.writer.queued() > _BATCH:
            return None  # a call gone ahead is to be judged in the writer's next batch
        with self._ahead_lock:
            if standing.calls >= AHEAD_MOST or standing.bound(share) >= self.ahead:
                return None
            standing.calls += 1
            return standing.sending(share)

    def _judged_first(self, standing):
        """Wait until Redis has judged the client's calls gone ahead (a gather and
        BRIDGE_REDIS_TIMEOUT at most), so that a call near a limit is judged after them,
        counting them: without, it could take what is left of the limit from those gone ahead."""
        if standing.calls:  # read unlocked: wait_for reads it again under the lock
            with self._ahead_lock:
                if not self._ahead_lock.wait_for(lambda: not standing.calls, self._waits_ahead):
                    standing.forget()  # Redis is slow: nothing more goes ahead until it says more

    def _read(self, standing, share, before, verdict):
        """A waiting admission's verdict read, or None when Redis gave none."""
        if standing is not None:
            with self._ahead_lock:
                standing.judged(share, before, verdict)

    def _landed(self, ahead, verdict):
        """A call gone ahead, judged by Redis (`verdict`), or never to be (None: not sent, or
        Redis did not answer): it no longer counts as waiting for its verdict."""
        standing = ahead.standing
        with self._ahead_lock:
            standing.calls -= 1
            standing.judged(ahead.share, ahead.before, verdict)
            if not standing.calls:
                self._ahead_lock.notify_all()
        if verdict is None:
            return
        outcome = f"{verdict[1].split()[0]}_{verdict[2]}_budget" if verdict[0] == "budget" else verdict[0]
        _series(ADMITTED_AHEAD, ahead.client, outcome or "admitted").inc()
        if not verdict[0]:
            _passed_soft(ahead.request_id, verdict[2:])

    def _stale(self, client=None):
        """Nothing goes ahead on what Redis said before it failed (of `client`, or of any),
        until it says more."""
        with self._ahead_lock:
            for standing in [self._standings.get(client)] if client else list(self._standings.values()):
                if standing is not None:
                    standing.forget()

    def _unconfirmed(self, record, reserved, error, refuse):
        """Redis did not answer the admission: served (open) or refused (closed), counted."""
        self._failed("admit", error)
        self._stale()
        record.reserved = reserved  # Redis may still make it, late: released at the end all the same
        if not self.fail_closed:
            record.admitted = True
        elif refuse:
            raise refusal(
                "overloaded", "the bridge cannot check this client's limits: its Redis does not answer"
            ) from None

    def _sent(self, sha, keys, arguments):
        """The connection a script call went out on, taken for this one call (_Connections),
        without redis-py's command path (its Script wrapper, retry wrapper and observability
        hooks cost the request's thread, and the writer's, more CPU than sending and reading).
        A connection that failed is closed by redis-py, so that no late answer reaches the
        next call."""
        connection = self._connections.take()
        try:
            connection.send_command("EVALSHA", sha, len(keys), *keys, *arguments)
        except BaseException:
            self._connections.give_back(connection)
            raise
        return connection

    def _answer(self, connection, sha, script, keys, arguments):
        """The answer to the call _sent on `connection`, which goes back to the idle ones."""
        try:
            try:
                return connection.read_response()
            except redis.exceptions.NoScriptError:  # Redis restarted, or its scripts were flushed
                connection.send_command("SCRIPT", "LOAD", script)
                connection.read_response()
            connection.send_command("EVALSHA", sha, len(keys), *keys, *arguments)
            return connection.read_response()
        finally:
            self._connections.give_back(connection)

    def budgets_of(self, record):
        """(Budget, name) of each budget the request counts in: its key's, team's and user's."""
        found = []
        own = record.key.budget if record.key is not None else None
        for scope, name in (("key", record.client), ("team", record.team), ("user", record.user)):
            budget = self.budgets.get((scope, name)) or self.budgets.get((scope, "*")) if name else None
            budget = own if scope == "key" and own is not None else budget
            if budget is not None:
                found.append((budget, name))
        return found

    def reserve_price(self, model):
        """_reserve_price, kept for the first RESERVE_PRICES_KEPT models asked for (a client
        names the model: what is kept has a bound)."""
        if model in self._reserve_prices:
            return self._reserve_prices[model]
        price = self._reserve_price(model)
        if len(self._reserve_prices) < RESERVE_PRICES_KEPT:
            self._reserve_prices[model] = price
        return price

    def _reserve_price(self, model):
        """The dearest input and output prices of the deployments that may serve `model`, to
        reserve what a call may cost; None when none has a price."""
        candidates = []
        for protocol in self.table.defaults or (None,):
            try:
                route = self.table.route_for(protocol, model or "")
            except BridgeError:
                continue
            for deployment in route.deployments:
                upstream = model_map.map_model(deployment.settings.model_map, model or "")
                candidates.append(deployment.prices or prices.default_price(upstream))
        candidates.append(prices.default_price(model))
        priced = [price for price in candidates if price is not None]
        if not priced:
            return None
        return prices.Price(max(p.input for p in priced), max(p.output for p in priced))

    def priced(self, record):
        """Dollars the tokens counted for `record` cost (Record.finish puts them in the access
        line), or None, counted, when what it used has no price; None for a call that used none
        (a health check, a refused request)."""
        if record.tokens == (None, None):
            return None
        counts = prices.split(record.upstream_usage or record.usage, record.tokens)
        price = self.prices.get(record.deployment) or prices.default_price(record.upstream_model)
        cost = prices.cost(price, counts)
        if cost is None:
            record.written.inc(_series(UNPRICED, record.deployment or "none"))
        return cost

    def finished(self, record):
        """Count what an admitted request used and cost: in Prometheus at once, in Redis through
        the writer, which also settles the request's reservation (admitted or not)."""
        client = record.client or "none"
        used = kinds(record.upstream_usage or record.usage, record.tokens)
        model = record.model if record.model in self.models else "other"
        if record.admitted:
            written = record.written  # Record.finish writes them with its own
            written.inc(_series(CLIENT_REQUESTS, client, model))
            for kind, count in used.items():
                if count:
                    written.inc(_series(CLIENT_TOKENS, client, model, kind), count)
            if record.cost:
                written.inc(_series(CLIENT_COST, client, record.team or client, model), record.cost)
        if self.writer is not None and (record.admitted or record.reserved is not None):
            spent = prices.split(record.upstream_usage or record.usage, record.tokens)
            # A call that used nothing (a model list) costs nothing; one that used tokens without a price is unpriced.
            micros = None if record.cost is None and any(spent.values()) else prices.micros(record.cost or 0)
            if self.ahead and _beyond(record.reserved, used, micros):
                self._stale(record.client)  # its standing does not know of what it used beyond
            # Tokens count in the window where they were reported.
            self.writer.put(
                Counted(
                    client,
                    record.team or client,
                    record.user,
                    model,
                    used,
                    spent,
                    micros,
                    time.time(),
                    record.admitted,
                    record.reserved,
                )
            )

    def store(self, batch):
        """Write a batch of requests' counts (those admitted): the token windows the limits read,
        the day's usage per kind, the spend for the budgets and per key, team, user and model;
        and their reservations released. One script call, its counts summed by key (_Tally),
        sent after the admissions of the calls in the batch that went ahead (_Ahead), in order:
        a call's reservation is made before its count settles it."""
        ahead = [item for item in batch if type(item) is _Ahead]
        judged = 0
        try:
            tally = _Tally()
            for item in batch:
                if type(item) is not _Ahead:
                    tally.count(item)
            commands = [("EVALSHA", _ADMIT_SHA, len(item.keys), *item.keys, *item.arguments) for item in ahead]
            if tally.keys:
                keys = list(tally.keys)
                commands.append(("EVALSHA", _COUNT_SHA, len(keys), *keys, self.users_per_key, *tally.arguments()))
            replies = self._pipelined(commands)
            for item, reply in zip(ahead, replies[: len(ahead)], strict=True):
                if isinstance(reply, redis.RedisError):
                    self._failed("admit", reply)
                    reply = None
                judged += 1
                self._landed(item, reply)
        except redis.RedisError:
            self._stale()
            raise
        finally:
            for item in ahead[judged:]:  # not judged, nor to be: the batch failed
                self._landed(item, None)
        if tally.keys and isinstance(replies[-1], redis.RedisError):
            raise replies[-1]

    def _pipelined(self, commands):
        """The replies to script calls sent together on one connection, an error reply as its
        exception. Those Redis had no script for (a restart, SCRIPT FLUSH) did not run: they
        are sent again once it has both scripts."""
        connection = self._connections.take()
        try:
            replies = _exchanged(connection, commands)
            again = [at for at, reply in enumerate(replies) if isinstance(reply, redis.exceptions.NoScriptError)]
            if again:
                _exchanged(connection, [("SCRIPT", "LOAD", _ADMIT), ("SCRIPT", "LOAD", _COUNT)])
                for at, reply in zip(again, _exchanged(connection, [commands[at] for at in again]), strict=True):
                    replies[at] = reply
            return replies
        finally:
            self._connections.give_back(connection)

    def _failed(self, operation, error):
        _series(REDIS_ERRORS, operation).inc()
        # The error names host and port, never the password.
        mode = "closed" if self.fail_closed else "open"
        log.warning("redis %s failed (BRIDGE_REDIS_FAILURE=%s): %s", operation, mode, error)


def _exchanged(connection, commands):
    """`commands` sent in one write, and their replies read, an error reply as its exception
    (the connection's own failures raise)."""
    connection.send_packed_command(connection.pack_commands(commands))
    replies = []
    for _ in commands:
        try:
            replies.append(connection.read_response())
        except redis.exceptions.ResponseError as error:
            replies.append(error)
    return replies


def _beyond(reserved, used, micros):
    """Whether a call used more tokens or money than its admission reserved."""
    if reserved is None:
        return False
    tokens = used["input"] + used["output"]
    return bool(reserved.tokens and tokens > reserved.tokens or reserved.micros and (micros or 0) > reserved.micros)


def _share(amount, limit):
    """What `amount` is of `limit` (0: no limit)."""
    return amount / limit if limit else 0.0


def _passed_soft(request_id, passed):
    """Count and log the soft budgets ("label window") an admitted request is over."""
    for budget in passed:
        label, _, window = budget.rpartition(" ")
        _series(SOFT_BUDGETS, label.split()[0], window).inc()
        log.warning("request %s: %s is over its soft %s budget (BRIDGE_BUDGETS)", request_id, label, window)


class _Standing:
    """What one worker knows of how much a client has used of its tightest limit: a bound above
    it, from the last verdict read and what the worker sent since.

    A verdict's share counts every admission Redis ran before it. Of the worker's own calls,
    those it ran later were sent after it, or before it and not judged yet when it was sent:
    `base` is the verdict's share less what the worker had sent by then (`sent`, a running sum
    of shares) plus what was then waiting for its verdict (`waiting`), so that `base + sent`
    stays above what the client used as Redis counted it then plus what the worker sent since,
    whatever order Redis ran them in. Other workers' calls since the verdict are not in it.
    `at` is when that verdict's admission was sent (0: forgotten since), `since` when what Redis
    said was last forgotten, `calls` the calls gone ahead that wait for theirs. Read and written
    under Accounts._ahead_lock."""

    __slots__ = ("at", "base", "sent", "waiting", "calls", "since")

    def __init__(self):
        self.at, self.base, self.sent, self.waiting, self.calls, self.since = 0.0, 1.0, 0.0, 0.0, 0, 0.0

    def forget(self):
        """Nothing goes ahead on what Redis said so far (it failed, or a call used more than it
        reserved): only on a verdict sent from now on."""
        self.at, self.since = 0.0, time.monotonic()

    def bound(self, share):
        """What the client would have used with one more call that uses `share`, at most."""
        return self.base + self.sent + share

    def sending(self, share):
        """A call that uses `share` is about to be sent: (sent, waiting) before it, and when."""
        before = self.sent, self.waiting, time.monotonic()
        self.sent += share
        self.waiting += share
        return before

    def judged(self, share, before, verdict):
        """A call's verdict, read (None: none came): it waits no more, and its share bounds."""
        self.waiting -= share
        if verdict is not None and before[2] > self.since:
            sent, waiting, self.at = before
            self.base = (1.0 if verdict[0] else verdict[1] / 1000) + waiting - sent - share


class _Connections:
    """A worker's idle connections to Redis for its scripts (admission, the writer's counts),
    one taken per call. redis-py's pool takes a lock, checks the process twice and runs its
    observability hooks on every checkout and release; this keeps what matters of it: a forked
    process starts with none of its parent's, and a connection taken with data or a close
    waiting (a late answer, a Redis restarted) is made again before the call, so that neither
    reaches it.

    Their sockets block, and the kernel bounds each send and receive by BRIDGE_REDIS_TIMEOUT
    (SO_SNDTIMEO, SO_RCVTIMEO), where redis-py gives them a Python timeout, before which CPython
    polls at every send and receive: a call makes the idle check's poll, a send and a receive,
    each letting go of the GIL, not five. The idle check is this class's own poll, not
    redis-py's can_read, which in some redis-py versions sets the socket's Python timeout again.
    Redis stalling past the timeout fails the call as redis-py's ConnectionError instead of its
    TimeoutError: the same RedisError to the bridge. Written against redis-py 5 and later: its
    connection's `_sock`, which connect() sets and disconnect() clears, and which its parser
    reads from."""

    def __init__(self, pool):
        self._pool = pool  # redis-py's, for its connection class and settings
        self._idle = []
        self._pid = os.getpid()
        self._timeout = timeval(pool.connection_kwargs["socket_timeout"])

    def take(self):
        if self._pid != os.getpid():
            self._idle, self._pid = [], os.getpid()
        try:
            connection = self._idle.pop()  # pop and append are atomic: no lock
        except IndexError:
            connection = self._pool.connection_class(**self._pool.connection_kwargs)
        sock = connection._sock
        if sock is not None and polled(sock, select.POLLIN):  # data or a close waiting
            connection.disconnect()
            sock = None
        if sock is None:
            connection.connect()
            sock = connection._sock
            sock.settimeout(None)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, self._timeout)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, self._timeout)
        return connection

    def give_back(self, connection):
        self._idle.append(connection)


class _Tally:
    """A batch's counts summed by Redis key, as the arguments of the _COUNT script."""

    def __init__(self):
        self.keys = {}  # each key written: its index in KEYS, from 1
        self.released = []
        self.counters = {}  # index: [amount, seconds it lives]
        self.hashes = collections.defaultdict(collections.Counter)  # (index, seconds it lives): {field: amount}
        self.spends = collections.defaultdict(collections.Counter)  # (hash, users, prefix, user): {model|kind: amount}
        self._places = {}  # (client, team, user, model, minute): _Places, the batch's requests mostly share one
        self._held = {}  # client: the indices of its reservations' keys

    def key(self, name):
        return self.keys.setdefault(name, len(self.keys) + 1)

    def count(self, counted):
        client, reserved = counted.client, counted.reserved
        if reserved is not None:
            if reserved.tokens:
                held = self._held.get(client) or self._held.setdefault(client, tuple(map(self.key, held_keys(client))))
                self.released += (*held, reserved.member, reserved.tokens)
            if reserved.micros:
                for held in reserved.budgets:
                    self.released += (*map(self.key, held), reserved.money, reserved.micros)
        if not counted.admitted:
            return
        minute = int(counted.when // 60)
        found = (client, counted.team, counted.user, counted.model, minute)
        places = self._places.get(found) or self._placed(found)
        used = counted.used
        tokens = used["input"] + used["output"]
        if tokens:
            for counter in places.windows:
                counter[0] += tokens
        usage = places.usage
        usage["requests"] += 1
        for kind, count in used.items():
            if count:
                usage[kind] += count
        fields = places.fields
        counts = {fields["requests"]: 1}
        for kind, count in counted.spent.items():
            if count:
                counts[fields.get(kind) or fields.setdefault(kind, f"{counted.model}|{kind}")] = count
        if counted.micros is None:
            counts[fields["unpriced"]] = 1
        elif counted.micros:
            counts[fields["micros"]] = counted.micros
        for spend in places.spends:
            for field, count in counts.items():
                spend[field] += count
        if counted.micros:
            for counter in places.budgets:
                counter[0] += counted.micros

    def _placed(self, found):
        """Where the counts of a client's requests in one minute go (their keys named once a batch,
        not once a request)."""
        client, team, user, model, minute = found
        when = minute * 60  # the minute's day and month are the request's
        today, this_month = key_spend_keys(client, when)
        users = self.key(f"bridge:users:{day(when)}:{client}")
        budgets = []
        for scope, name in (("key", client), ("team", team), ("user", user)):
            if name:
                _, _, today_key, month_key = budget_keys(scope, name, when)
                budgets += (self.counter(today_key, 2 * 86400), self.counter(month_key, 63 * 86400))
        places = self._places[found] = _Places(
            windows=(
                self.counter(f"bridge:tpm:{client}:{minute}", 120),
                self.counter(f"bridge:tpd:{client}:{day(when)}", 2 * 86400),
            ),
            usage=self.hashes[self.key(usage_key(client, when)), _DAY_KEPT],
            spends=(
                self.hashes[self.key(today), 2 * 86400],
                self.hashes[self.key(this_month), 63 * 86400],
                self.spends[self.key(spend_key(when)), users, f"{client}|{team}|", user or "-"],
            ),
            fields={kind: f"{model}|{kind}" for kind in ("requests", "unpriced", "micros")},
            budgets=budgets,
        )
        return places

    def counter(self, name, seconds):
        """[amount, seconds it lives] of a counter key: one left at 0 is not written."""
        return self.counters.setdefault(self.key(name), [0, seconds])

    def arguments(self):
        """Every run after the users' cap: its number of entries, then its entries (_COUNT)."""
        counters = [(index, amount, seconds) for index, (amount, seconds) in self.counters.items() if amount]
        arguments = [len(self.released) // 4, *self.released, len(counters)]
        for counter in counters:
            arguments += counter
        arguments.append(len(self.hashes))
        for (index, seconds), fields in self.hashes.items():
            pairs = [item for field, amount in fields.items() if amount for item in (field, amount)]
            arguments += (index, seconds, len(pairs) // 2, *pairs)
        arguments.append(len(self.spends))
        for (hash, users, prefix, user), fields in self.spends.items():
            pairs = [item for field, amount in fields.items() if amount for item in (field, amount)]
            arguments += (hash, users, prefix, user, len(pairs) // 2, *pairs)
        return arguments


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
        self._hurry = threading.Event()  # a call went ahead: the gather is cut to AHEAD_GATHER_SECONDS
        self._away = False  # the last write failed: ask Redis before the next one
        for reason in ("queue_full", "redis", "error"):
            _series(DROPPED, reason)  # at zero, before anything is dropped

    def put(self, counts, hurry=False):
        """Queue `counts` (an admission gone ahead, with `hurry`); False when the queue is full."""
        if self._pid != os.getpid():
            self._start()
        try:
            self._queue.put_nowait(counts)
        except queue.Full:
            _series(DROPPED, "queue_full").inc()
            return False
        if hurry:
            self._hurry.set()
        return True

    def queued(self):
        """How many counts and admissions wait for the writer."""
        return self._queue.qsize()

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
        if self._thread is None:  # nothing was ever queued
            return
        self._stop.set()
        self._hurry.set()  # ends a gather
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
                if self._queue.qsize() < _BATCH:  # the counts arriving meanwhile go in the same write
                    if type(batch[0]) is _Ahead or self._hurry.wait(GATHER_SECONDS):
                        self._stop.wait(AHEAD_GATHER_SECONDS)  # an admission waits in it: a shorter gather
                self._hurry.clear()
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
        """Up to `most` counts from the queue, without waiting: all under its lock at once (a
        get_nowait each, with its lock and notify, cost the writer as much as counting them).
        Nothing waits for room (put_nowait drops), so none is told of it."""
        waiting = self._queue
        with waiting.mutex:
            counts = waiting.queue
            return [counts.popleft() for _ in range(min(most, len(counts)))]

    def _answers(self):
        try:
            self._accounts.redis.ping()
        except redis.RedisError:
            _series(REDIS_ERRORS, "count").inc()
            return False
        self._away = False
        return True

    def _write(self, batch):
        """One script call for the batch; a failure drops it, counted, never to be sent again:
        Redis may have applied it all the same."""
        try:
            self._accounts.store(batch)
        except redis.RedisError as error:
            self._away = True
            _series(DROPPED, "redis").inc(len(batch))
            self._accounts._failed("count", error)
        except Exception:  # a bad count must not stop the counting of every later request
            _series(DROPPED, "error").inc(len(batch))
            log.exception("usage counts of %d requests not stored", len(batch))


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


def over_budget(label, window, now, spent, held, limit):
    """The 429 for a budget reached (never a 403: Claude Code takes that for a login problem):
    `retry-after` until its window resets (the next UTC day or month), or when the calls in
    flight made it, a few seconds, by when one may have ended."""
    if spent < limit:
        reset = now + int(RETRY_AFTER)
        reached = f"with ${held / prices.MILLION:.2f} its calls in flight may still cost, {label} has reached"
        wait = "retry when one has ended"
    else:
        reset = _next_window(now, window)
        reached = f"{label} has spent ${spent / prices.MILLION:.2f}, reaching"
        wait = f"it resets at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(reset))}"
    headers = CaseInsensitiveDict({"retry-after": str(max(1, math.ceil(reset - now)))})
    per = "daily" if window == "day" else "monthly"
    return BridgeError(
        "rate_limit",
        f"{reached} its {per} budget of ${limit / prices.MILLION:.2f} (BRIDGE_BUDGETS); {wait}",
        upstream_headers=headers,
    )


def _next_window(now, window):
    """The start of the next UTC day, or of the next calendar month."""
    if window == "day":
        return (now // 86400 + 1) * 86400
    moment = time.gmtime(now)
    year, next_month = (moment.tm_year + 1, 1) if moment.tm_mon == 12 else (moment.tm_year, moment.tm_mon + 1)
    return calendar.timegm((year, next_month, 1, 0, 0, 0))


def today(settings, client=None, now=None):
    """{client: {field: count}} of today's usage in Redis (`bridge usage`)."""
    store = connect(settings)
    now = time.time() if now is None else now
    prefix = usage_key("", now)
    keys = [usage_key(client, now)] if client else sorted(store.scan_iter(match=prefix + "*", count=1000))
    counts = {key[len(prefix) :]: store.hgetall(key) for key in keys}
    return {name: row for name, row in counts.items() if row}
