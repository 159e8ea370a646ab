"""What was spent, read back from Redis (usage.py writes it): one key's own statement, which
GET /v1/usage answers, and the export for chargeback that `bridge usage --from --to` prints.

Both read the counts the usage writer keeps, never the request path's: a key's own hashes of
the UTC day and month by `model|kind` (one round trip for a statement), and the day's spend
hash by `client|team|user|model|kind` (scanned a day at a time for an export).
"""

import calendar
import collections
import logging
import time

import redis

from ..protocols.errors import BridgeError
from ..serve.observability import _series
from . import prices
from .admission import refusal
from .usage import REDIS_ERRORS, _next_window, budget_keys, day, key_spend_keys, month, spend_key

log = logging.getLogger("bridge.usage")

TOKENS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
DIMENSIONS = ("client", "team", "user", "model", "day")
COLUMNS = ("requests", *TOKENS, "web_search", "unpriced", "cost_usd")
MOST_DAYS = 400  # an export's range at most: what the spend hashes are kept


def statement(accounts, record, now=None):
    """The calling key's spend, tokens and requests today and this month (UTC), in total and by
    model, and each budget it counts in (its key's, team's and user's) with what remains of it."""
    if accounts.redis is None:
        raise BridgeError("not_found", "usage is kept in Redis, and this bridge has none (BRIDGE_REDIS_URL)")
    if record.client is None:
        raise BridgeError(
            "not_found", "usage is per client key, and this bridge checks none (BRIDGE_CLIENT_KEYS, BRIDGE_REDIS_KEYS)"
        )
    now = time.time() if now is None else now
    budgets = accounts.budgets_of(record)
    try:
        with accounts.redis.pipeline(transaction=False) as pipe:
            for key in key_spend_keys(record.client, now):
                pipe.hgetall(key)
            for budget, name in budgets:
                pipe.mget(budget_keys(budget.scope, name, now)[2:])
            today, this_month, *spent = pipe.execute()
    except redis.RedisError as error:
        _series(REDIS_ERRORS, "usage").inc()
        log.warning("redis usage failed: %s", error)
        raise refusal("overloaded", "the bridge cannot read this key's usage: its Redis does not answer") from None
    return {
        "object": "usage",
        "key": record.client,
        "team": record.team,
        "user": record.user,
        "today": {"date": day(now), **_period(today)},
        "month": {"month": month(now), **_period(this_month)},
        "budgets": [
            _budget(budget, name, window, int(amount or 0), now)
            for (budget, name), amounts in zip(budgets, spent, strict=True)
            for window, amount in zip(("day", "month"), amounts, strict=True)
            if getattr(budget, window)
        ],
    }


def _period(counts):
    """A hash by `model|kind` as totals, and the same by model."""
    models = collections.defaultdict(collections.Counter)
    for field, value in counts.items():
        model, _, kind = field.rpartition("|")
        models[model][kind] += int(value)
    total = sum(models.values(), collections.Counter())
    return {**_totals(total), "models": {model: _totals(models[model]) for model in sorted(models)}}


def _totals(counts):
    return {
        "requests": counts["requests"],
        "cost_usd": counts["micros"] / prices.MILLION,
        "unpriced_requests": counts["unpriced"],
        "tokens": {kind: counts[kind] for kind in TOKENS},
        "web_searches": counts["web_search"],
    }


def _budget(budget, name, window, spent, now):
    limit = prices.micros(getattr(budget, window))
    return {
        "scope": budget.scope,
        "name": name,
        "window": window,
        "soft": budget.soft,
        "limit_usd": limit / prices.MILLION,
        "spent_usd": spent / prices.MILLION,
        "remaining_usd": max(0, limit - spent) / prices.MILLION,
        "resets_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_next_window(now, window))),
    }


def days(first, last):
    """The UTC dates (YYYY-MM-DD) from `first` to `last`, both included; a ValueError for a date
    that is none, a range backwards or longer than MOST_DAYS."""
    start, end = (calendar.timegm(time.strptime(date, "%Y-%m-%d")) for date in (first, last))
    count = (end - start) // 86400 + 1
    if not 1 <= count <= MOST_DAYS:
        raise ValueError(f"--from {first} --to {last}: from 1 to {MOST_DAYS} days, the first one first")
    return [day(start + number * 86400) for number in range(count)]


def export(store, dates, by, client=None):
    """Rows of counts summed over `dates` by each distinct value of the `by` DIMENSIONS (a user
    None for calls that named none), in order; only `client`'s when given. Each day's hash is
    scanned, never read whole at once: Redis serves others meanwhile."""
    rows = collections.defaultdict(collections.Counter)
    for date in dates:
        for field, value in store.hscan_iter(spend_key(calendar.timegm(time.strptime(date, "%Y-%m-%d"))), count=1000):
            owner, team, user, rest = field.split("|", 3)
            model, _, kind = rest.rpartition("|")
            if client is None or owner == client:
                user = None if user == "-" else user
                values = {"client": owner, "team": team, "user": user, "model": model, "day": date}
                rows[tuple(values[name] for name in by)][kind] += int(value)
    return [
        {
            **dict(zip(by, group, strict=True)),
            **{column: counts[column] for column in COLUMNS[:-1]},
            "cost_usd": counts["micros"] / prices.MILLION,
        }
        for group, counts in sorted(rows.items(), key=lambda item: tuple(value or "" for value in item[0]))
    ]
