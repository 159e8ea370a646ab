"""An upstream's retry and rate-limit headers, in the protocol of the client that asked.

The bridge retries no 429/5xx (upstream.py): the client's SDK does, and it needs the
upstream's word on when and whether. `retry-after`, `retry-after-ms` and `x-should-retry`
mean the same in both protocols and pass as they came. Rate-limit headers are renamed:

| Anthropic                                  | OpenAI                           |
|--------------------------------------------|----------------------------------|
| `anthropic-ratelimit-requests-limit`       | `x-ratelimit-limit-requests`     |
| `anthropic-ratelimit-requests-remaining`   | `x-ratelimit-remaining-requests` |
| `anthropic-ratelimit-requests-reset`       | `x-ratelimit-reset-requests`     |
| `anthropic-ratelimit-tokens-*` (likewise)  | `x-ratelimit-*-tokens`           |

An Anthropic reset is the RFC 3339 time the bucket refills, an OpenAI reset the duration
until then (`1s`, `6m0s`, `20ms`). Anthropic's `tokens` headers are the most restrictive of
its input and output limits, so they are OpenAI's `tokens`; the `input-tokens` and
`output-tokens` ones have no OpenAI name and are left out, as is any header of the other
protocol. A reset that cannot be read is left out rather than guessed, and so is a header longer
than any real one (HEADER_CHARS, name and value), past the first MOST_HEADERS: what an
upstream sends cannot make an answer's headers larger than a proxy's buffer (deploy/nginx).

They go on every answer, successful or not: a client paces itself from `remaining` on the
answers that succeed. That is one pass over the upstream's headers per request: measured
2.5 µs when the upstream sends no such header (vLLM, llama.cpp), 10-18 µs with a full set
(OpenAI, Anthropic), against about 1 ms of CPU for the whole request (bench/RESULTS.md).
"""

import datetime
import functools
import math
import re
import time

from .errors import ANTHROPIC

_RETRY = frozenset(("retry-after", "retry-after-ms", "x-should-retry"))
_ANTHROPIC_PREFIX = "anthropic-ratelimit-"
_OPENAI_PREFIX = "x-ratelimit-"
_WANTED = (*_RETRY, _ANTHROPIC_PREFIX, _OPENAI_PREFIX)  # one startswith() per header rules out the rest
_RESOURCES = ("requests", "tokens")
_FIELDS = ("limit", "remaining", "reset")
HEADER_CHARS = 100  # anthropic-ratelimit-priority-output-tokens-remaining and its value: 70
MOST_HEADERS = 24  # Anthropic sends 19 at most, OpenAI 6
_LONGEST = 366 * 86400  # no rate-limit window is longer than a year; past that a number is nonsense
# Go's time.Duration text, which OpenAI sends: "1h2m3.5s", "6m0s", "20ms".
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
    r"(?:(\d+(?:\.\d+)?)ms)?"
)


def client_headers(protocol, upstream_headers, now):
    """The headers to add to the client's answer, from the upstream's (a requests
    CaseInsensitiveDict; None when no answer came)."""
    if not upstream_headers:
        return {}
    wanted = [
        (name, value)
        for name, value in upstream_headers.lower_items()
        if name.startswith(_WANTED) and len(name) + len(value) <= HEADER_CHARS
    ]
    if not wanted:
        return {}
    headers = _to_anthropic(wanted, now) if protocol == ANTHROPIC else _to_openai(wanted, now)
    return headers if len(headers) <= MOST_HEADERS else dict(list(headers.items())[:MOST_HEADERS])


def _to_anthropic(headers, now):
    out = {}
    for name, value in headers:
        if name.startswith(_OPENAI_PREFIX):
            field, _, resource = name[len(_OPENAI_PREFIX) :].partition("-")
            if resource in _RESOURCES and field in _FIELDS:
                if field == "reset":
                    seconds = duration_seconds(value)
                    value = None if seconds is None else rfc3339(now + seconds)
                if value is not None:
                    out.setdefault(f"{_ANTHROPIC_PREFIX}{resource}-{field}", value)
        elif name in _RETRY or name.startswith(_ANTHROPIC_PREFIX):
            out[name] = value
    return out


def _to_openai(headers, now):
    out = {}
    for name, value in headers:
        if name.startswith(_ANTHROPIC_PREFIX):
            resource, _, field = name[len(_ANTHROPIC_PREFIX) :].rpartition("-")
            if resource in _RESOURCES and field in _FIELDS:
                if field == "reset":
                    moment = rfc3339_seconds(value)
                    value = None if moment is None else duration(moment - now)
                if value is not None:
                    out.setdefault(f"{_OPENAI_PREFIX}{field}-{resource}", value)
        elif name in _RETRY or name.startswith(_OPENAI_PREFIX):
            out[name] = value
    return out


@functools.lru_cache(maxsize=256)  # a server sends few distinct texts: "1s", "6m0s", "20ms"
def duration_seconds(text):
    """Seconds in an OpenAI reset duration (a bare number is seconds), or None when it is not one."""
    text = text.strip()
    try:  # the common forms, "20ms" and "26.604s", without the regular expression
        seconds = float(text[:-2]) / 1000 if text.endswith("ms") else float(text.removesuffix("s"))
    except ValueError:
        match = _DURATION.fullmatch(text)
        if not text or match is None:
            return None
        hours, minutes, seconds, millis = (float(part) if part else 0.0 for part in match.groups())
        seconds = hours * 3600 + minutes * 60 + seconds + millis / 1000
    return seconds if 0 <= seconds <= _LONGEST else None  # float() also reads "nan" and "1e300"


def duration(seconds):
    """Seconds as OpenAI writes a reset: `20ms` under a second, else `1h2m3.5s` (never negative)."""
    millis = max(0, math.ceil(seconds * 1000))
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    text = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    return f"{hours}h{text}" if hours else text


def rfc3339(epoch):
    """An epoch time as Anthropic writes a reset, rounded up: a client that waits until then is not early."""
    return _utc_second(math.ceil(epoch))


@functools.lru_cache(maxsize=256)  # the resets of a busy second are a handful of seconds
def _utc_second(second):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


@functools.lru_cache(maxsize=256)  # Anthropic sends the same reset time on every answer until it comes
def rfc3339_seconds(text):
    """The epoch time of an Anthropic reset, or None when it is not RFC 3339."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()
