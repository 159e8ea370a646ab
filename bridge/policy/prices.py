"""What a call cost, in US dollars: the upstream's reported usage, split by kind, times prices.

A deployment's prices come from its `prices` in the routes file, or else from the shipped
table below, matched by the upstream model's name (its first matching pattern). A call to a
model with neither has no cost (None: `cost_usd: null` in the access line, and counted in
bridge_unpriced_requests_total), never a silent $0.

Kinds are priced apart, as the upstreams bill them:
- Anthropic: `input_tokens` (uncached), `cache_read_input_tokens`, and
  `cache_creation_input_tokens` split into 5-minute and 1-hour writes by `cache_creation`
  when the answer gives the split (else all at the 5-minute price, the default lifetime);
- OpenAI: `prompt_tokens` (or Responses' `input_tokens`) include `cached_tokens`, which are
  priced as cache reads and the rest as input;
- output tokens (reasoning included), and web searches per call.
"""

import dataclasses
import fnmatch
import functools

from ..settings import SettingsError

FIELDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h", "web_search")
MILLION = 1_000_000


@dataclasses.dataclass(frozen=True)
class Price:
    """US dollars per million tokens of each kind, and per web search."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write_5m: float = 0.0
    cache_write_1h: float = 0.0
    web_search: float = 0.0


def _anthropic(input_price, output_price):
    """Anthropic's cache multipliers: reads 0.1x input, 5-minute writes 1.25x, 1-hour writes 2x;
    web search $10 per 1,000 searches."""
    return Price(input_price, output_price, input_price / 10, input_price * 1.25, input_price * 2, 0.01)


def _openai(input_price, cached_price, output_price):
    return Price(input_price, output_price, cached_price)


# List prices, USD. Anthropic: https://platform.claude.com/docs/en/about-claude/pricing ("Model
# pricing"), OpenAI: https://platform.openai.com/docs/pricing (standard tier), both as read on
# 2026-11-28. Batch, priority and long-context tiers are not the bridge's calls. Upstream model
# names, most specific first: a dated snapshot (claude-sonnet-4-5-20250929) matches its family.
DEFAULT = (
    ("claude-opus-4-1*", _anthropic(15, 75)),
    ("claude-opus-4-0*", _anthropic(15, 75)),
    ("claude-opus-4-2025*", _anthropic(15, 75)),
    ("claude-opus-4", _anthropic(15, 75)),
    ("claude-opus-4-*", _anthropic(5, 25)),  # 4.5 and later
    ("claude-opus-5*", _anthropic(5, 25)),
    ("claude-3-opus*", _anthropic(15, 75)),
    ("claude-sonnet-4*", _anthropic(3, 15)),
    ("claude-3-7-sonnet*", _anthropic(3, 15)),
    ("claude-3-5-sonnet*", _anthropic(3, 15)),
    ("claude-haiku-4*", _anthropic(1, 5)),
    ("claude-3-5-haiku*", _anthropic(0.8, 4)),
    ("claude-3-haiku*", Price(0.25, 1.25, 0.03, 0.30, 0.50, 0.01)),
    ("gpt-5.5-pro*", _openai(30, 30, 180)),
    ("gpt-5.5*", _openai(5, 0.5, 30)),
    ("gpt-5.4-pro*", _openai(30, 30, 180)),
    ("gpt-5.4-mini*", _openai(0.75, 0.075, 4.5)),
    ("gpt-5.4-nano*", _openai(0.2, 0.02, 1.25)),
    ("gpt-5.4*", _openai(2.5, 0.25, 15)),
    ("gpt-5-pro*", _openai(15, 15, 120)),
    ("gpt-5-mini*", _openai(0.25, 0.025, 2)),
    ("gpt-5-nano*", _openai(0.05, 0.005, 0.4)),
    ("gpt-5*", _openai(1.25, 0.125, 10)),  # gpt-5, 5.1, 5.2, codex
    ("gpt-4.1-mini*", _openai(0.4, 0.1, 1.6)),
    ("gpt-4.1-nano*", _openai(0.1, 0.025, 0.4)),
    ("gpt-4.1*", _openai(2, 0.5, 8)),
    ("gpt-4o-mini*", _openai(0.15, 0.075, 0.6)),
    ("gpt-4o*", _openai(2.5, 1.25, 10)),
    ("o4-mini*", _openai(1.1, 0.275, 4.4)),
    ("o3-mini*", _openai(1.1, 0.55, 4.4)),
    ("o3*", _openai(2, 0.5, 8)),
)


@functools.lru_cache(maxsize=1024)
def default_price(model):
    """The shipped table's price for an upstream model name, or None. Kept per name (bounded:
    clients choose names): every request is priced, and the table is some thirty patterns."""
    if not model:
        return None
    return next((price for pattern, price in DEFAULT if fnmatch.fnmatchcase(model, pattern)), None)


def parse(value, where):
    """A deployment's `prices`: an object of FIELDS in dollars (input and output required)."""
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: prices must be an object of {', '.join(FIELDS)}")
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise SettingsError(f"{where}: prices has unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    for field, amount in value.items():
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
            raise SettingsError(f"{where}: prices.{field} must be a number of dollars, at least 0, got {amount!r}")
    missing = [field for field in ("input", "output") if field not in value]
    if missing:
        raise SettingsError(f"{where}: prices.{missing[0]} is required")
    return Price(**{field: float(amount) for field, amount in value.items()})


def split(usage, tokens):
    """{kind: count} of a call's usage (observability.Record.count's fields, either protocol's),
    its input and output as counted (`tokens`: Record.tokens, some maybe estimated)."""
    input_tokens, output_tokens = tokens
    cache_read = usage.get("cache_read_input_tokens", usage.get("cached_tokens", 0))
    written = usage.get("cache_creation_input_tokens", 0)
    hour = min(written, usage.get("ephemeral_1h_input_tokens", 0))
    return {
        "input": max(0, (input_tokens or 0) - cache_read - written),
        "output": output_tokens or 0,
        "cache_read": cache_read,
        "cache_write_5m": written - hour,
        "cache_write_1h": hour,
        "web_search": usage.get("web_search_requests", 0),
    }


def cost(price, counts):
    """Dollars for `counts` (split) at `price`; None without a price, unless nothing was used."""
    if price is None:
        return None if any(counts.values()) else 0.0
    tokens = sum(counts[kind] * getattr(price, kind) for kind in FIELDS if kind != "web_search")
    return tokens / MILLION + counts["web_search"] * price.web_search


def micros(dollars):
    """Whole millionths of a dollar, as Redis keeps spend (exact sums across workers)."""
    return round(dollars * MILLION)
