"""Every setting, read once from the environment at start-up and validated.

A bad value stops start-up with a SettingsError naming the variable, so an
operator finds the typo in the journal instead of in a 3 a.m. incident.
Values may also come from a KEY=VALUE file named by BRIDGE_SETTINGS_FILE;
the environment wins over the file.
"""

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
from urllib.parse import urlsplit

from .translate.capabilities import parse_overrides

# Anthropic's prompt cache lifetimes, or off (BRIDGE_PROMPT_CACHE, a deployment's prompt_cache).
PROMPT_CACHE_TTLS = ("off", "5m", "1h")


class SettingsError(Exception):
    """A setting is missing, malformed or unsafe."""


@dataclasses.dataclass(frozen=True)
class ClientKey:
    name: str
    digest: bytes  # sha256 of the key: the key itself is never kept
    team: str = ""  # its team, whose spend and budgets it counts in ("": the key's name)
    user: str = ""  # its user ("": none, or the x-bridge-user a trusted key's client names)
    trusted: bool = False  # its client may name the user with x-bridge-user
    # A file's key has no rules of its own (BRIDGE_CLIENT_LIMITS and BRIDGE_BUDGETS apply); a key
    # held in Redis (policy/keys.py) may have both, read the same way.
    limits: object = None
    budget: object = None


@dataclasses.dataclass(frozen=True)
class Budget:
    """Dollars one key, team or user may spend per UTC day and calendar month (0: no budget);
    a soft one only logs and counts when passed (usage.py)."""

    scope: str  # key, team or user
    name: str  # its name, or * for every one of its scope without a line of its own
    day: float = 0.0
    month: float = 0.0
    soft: bool = False


@dataclasses.dataclass(frozen=True)
class Limits:
    """One client's limits (usage.py); 0 is no limit."""

    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    tokens_per_day: int = 0


@dataclasses.dataclass(frozen=True)
class Settings:
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str | None = None
    anthropic_version: str = "2023-06-01"
    model_map: tuple = ()
    routes_file: str = ""  # BRIDGE_ROUTES, read by routes.load()
    client_keys: tuple = ()
    allow_open_relay: bool = False
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    max_body_bytes: int = 32 * 1024 * 1024
    default_max_tokens: int = 8192
    responses_default_max_tokens: int = 32000
    openai_max_tokens_param: str = "max_completion_tokens"
    openai_max_tokens_cap: int = 0
    openai_stream_usage: bool = True
    openai_reasoning_effort: bool = False
    openai_reasoning_history: bool = False
    prompt_cache: str = "5m"  # off, 5m or 1h: cache breakpoints for OpenAI clients on Anthropic
    capabilities: tuple = ()  # ((upstream model pattern, {capability: value}), ...): capabilities.py
    web_search: bool = False  # OpenAI clients' web search as Anthropic's web search tool (costs per search)
    web_search_max_uses: int = 5  # searches one request may run
    ping_interval: float = 10.0
    max_event_bytes: int = 16 * 1024 * 1024
    max_json_values: int = 1_000_000
    max_messages: int = 50_000
    max_content_blocks: int = 100_000
    max_tools: int = 5_000
    large_body_bytes: int = 256 * 1024
    large_body_slots: int = 2
    large_body_wait: float = 10.0
    client_stall_timeout: float = 60.0
    client_header_timeout: float = 10.0
    client_body_timeout: float = 60.0
    queue_timeout: float = 2.0  # a request finding every thread busy waits this long for one (serve/thread_queue.py)
    max_requests_per_client: int | None = (
        None  # None: half of BRIDGE_THREADS with several client keys (policy/admission.py)
    )
    client_limits: tuple = ()  # (client name or "*", Limits) pairs
    budgets: tuple = ()  # Budget, one per scope and name (BRIDGE_BUDGETS)
    redis_url: str = ""
    max_users_per_key: int = 1000  # distinct users one key's spend names per UTC day; more count as `other`
    redis_keys: bool = False  # client keys also held in Redis, managed with `bridge keys` (policy/keys.py)
    redis_timeout: float = 0.25
    redis_failure: str = "open"
    admit_ahead: float = 0.0  # a client under this share of its limits is admitted before Redis answers (usage.py)
    reserve_output_tokens: int = 8192  # of a call's max output, what admission reserves at most (usage.py)
    # A non-streamed answer is at most max_tokens of output: 128,000 tokens of text are 0.5-1 MB of JSON.
    max_upstream_body_bytes: int = 8 * 1024 * 1024
    retries: int = 2
    retry_backoff: float = 0.5
    retry_max_wait: float = 10.0
    pool_size: int = 1280
    streams_per_worker: int = 1000
    log_level: str = "INFO"
    access_log_flush: float = 0.2  # seconds access lines are held and written together (0: each at once)
    traces: bool = False  # the OTEL_* variables ask for OTLP traces (serve/tracing.py)
    otlp_metrics: bool = False  # they ask for OTLP metrics (serve/otlp_metrics.py)
    # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: prompts and answers in spans (serve/span_content.py)
    trace_content: bool = False
    trace_content_limit: int = 16384  # characters per content attribute

    @property
    def checks_keys(self):
        """Clients must present a key: BRIDGE_CLIENT_KEYS names some, or keys are held in Redis."""
        return bool(self.client_keys) or self.redis_keys

    def __repr__(self):
        # Keys never reach a log line, even through a debug print of settings.
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for secret in ("openai_api_key", "anthropic_api_key"):
            shown[secret] = "<set>" if shown[secret] else None
        shown["client_keys"] = [k.name for k in self.client_keys]
        shown["redis_url"] = masked_url(self.redis_url)
        if self.routes_file and not named_file(self.routes_file):
            shown["routes_file"] = "<inline JSON>"  # a deployment's header values are in it
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def read_text(name, path):
    """The text of a file a setting names, or a SettingsError naming both: a reload checks
    every file before a worker reads it (deploy/gunicorn.conf.py), so none may fail otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise SettingsError(f"{name}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{name}: {path} is not UTF-8 text") from None


def named_file(value):
    """The path a setting that is a file or its inline text names, or None for inline text
    (a JSON object, or entries that are no absolute path)."""
    text = value.strip()
    return text if text.startswith("/") or text and not text.startswith("{") and os.path.isfile(text) else None


def _read_file(path):
    values = {}
    for number, line in enumerate(read_text("BRIDGE_SETTINGS_FILE", path).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SettingsError(f"BRIDGE_SETTINGS_FILE {path}:{number}: expected KEY=VALUE")
        values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def _split_url(name, value):
    """urlsplit, its errors as SettingsErrors that quote nothing of the URL (it may hold a password)."""
    try:
        parts = urlsplit(value)
    except ValueError:  # an IPv6 address's [ without its ], a host name unicode cannot normalize
        raise SettingsError(f"{name}: not a valid URL (its host?)") from None
    try:
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError:
        raise SettingsError(f"{name}: the port is not a number from 0 to 65535") from None
    return parts


def _url(name, value):
    parts = _split_url(name, value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SettingsError(f"{name}: must be an http(s) URL, got {masked_url(value)!r}")
    if parts.query or parts.fragment:
        raise SettingsError(f"{name}: must not carry a query or fragment")
    if parts.username is not None or parts.password is not None:
        # A URL is logged (a retry names it); a key in it would be too.
        raise SettingsError(f"{name}: must not carry credentials; put the key in the _API_KEY setting")
    return value.rstrip("/")


def _redis_url(name, value):
    """redis://, rediss:// (TLS) or unix://; never echoed back, as it may carry the password."""
    value = value.strip()
    if not value:
        return ""
    parts = _split_url(name, value)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise SettingsError(f"{name}: must be a redis://, rediss:// or unix:// URL, got scheme {parts.scheme!r}")
    if parts.scheme == "unix" and not parts.path or parts.scheme != "unix" and not parts.hostname:
        raise SettingsError(f"{name}: names no host (or, for unix://, no socket path)")
    return value


# Query parameters whose values are credentials: redis-py's `password`, Azure's SAS `sig`, `api_key`...
_CREDENTIAL_NAME = re.compile(r"pass|pwd|secret|key|token|sig|auth|cred", re.IGNORECASE)


def masked_url(url, every_value=False):
    """A URL fit to print: its user information (a password, or a user name alone, which may be
    one) and the values of its query parameters named like credentials (or of them all) as ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<not a URL>"
    login, at, host = parts.netloc.rpartition("@")
    if at:
        user, colon, _ = login.partition(":")
        url = url.replace(parts.netloc, f"{user}:***@{host}" if colon else f"***@{host}", 1)
    query = "&".join(
        f"{name}=***" if sep and (every_value or _CREDENTIAL_NAME.search(name)) else f"{name}{sep}{value}"
        for name, sep, value in (pair.partition("=") for pair in parts.query.split("&"))
    )
    return url.replace(f"?{parts.query}", f"?{query}", 1) if parts.query else url


_LIMIT_NAMES = {"rpm": "requests_per_minute", "tpm": "tokens_per_minute", "tpd": "tokens_per_day"}


def _client_limits(name, value):
    """Lines `client rpm=N tpm=N tpd=N` (any of the three; `*` for every client without a line of
    its own), from a file (an absolute path), or the same entries separated by commas."""
    entries, entry = _entries(name, value)
    limits = {}
    for number, line in entries:
        words = line.split("#")[0].split()
        if not words:
            continue
        client, *fields = words
        where = f"{entry} {number} ({client})"
        if client in limits:
            raise SettingsError(f"{entry} {number}: client {client!r} has two lines")
        values = {}
        for field in fields:
            key, sep, raw = field.partition("=")
            if not sep or key not in _LIMIT_NAMES:
                raise SettingsError(f"{where}: {field!r} is not rpm=N, tpm=N or tpd=N")
            values[_LIMIT_NAMES[key]] = _number(f"{where} {key}", raw, int, 1)
        if not values:
            raise SettingsError(f"{where}: no limit given (rpm=N, tpm=N or tpd=N)")
        limits[client] = Limits(**values)
    return tuple(limits.items())


def _entries(name, value):
    """([(number, text)], how an error names entry `number`) of a setting that is a file of one entry
    per line (numbered as an editor does) or the entries themselves, separated by commas."""
    path = named_file(value)
    if path:
        return enumerate(read_text(name, path).splitlines(), 1), f"{name} {path} line"
    return enumerate(value.split(","), 1), f"{name}: entry"


def _number(name, value, kind=float, minimum=0):
    try:
        number = kind(value)
    except ValueError:
        raise SettingsError(f"{name}: must be a {kind.__name__}, got {value!r}") from None
    if number < minimum:
        raise SettingsError(f"{name}: must be at least {minimum}, got {value!r}")
    return number


def _share(name, value, most):
    """A share from 0 to `most`: not nan, which every comparison would let through."""
    share = _number(name, value)
    if not share <= most:
        raise SettingsError(f"{name}: must be from 0 to {most}, got {value!r}")
    return share


def _flush_interval(name, value):
    """0, or seconds a writer thread may sleep between writes: not so short that it spins."""
    seconds = _number(name, value)
    if seconds and not 0.01 <= seconds <= 60:
        raise SettingsError(f"{name}: must be 0 or from 0.01 to 60 seconds, got {value!r}")
    return seconds


def _flag(name, value):
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{name}: must be true or false, got {value!r}")


def _choice(name, value, choices):
    if value not in choices:
        raise SettingsError(f"{name}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def json_setting(name, value):
    """A setting that is a JSON object, given inline or as the path of a file holding it ({} if empty)."""
    text = value.strip()
    if text and not text.startswith("{"):
        text, name = read_text(name, text), f"{name} {text}"
    try:
        return json.loads(text or "{}")
    except ValueError as exc:
        raise SettingsError(f"{name}: invalid JSON: {exc}") from None


def _model_map(name, value):
    mapping = json_setting(name, value)
    where = f"{name} {named_file(value)}" if named_file(value) else name
    if not isinstance(mapping, dict):
        raise SettingsError(f"{where}: must be a JSON object of model names")
    for client, upstream in mapping.items():
        if not (client and isinstance(upstream, str) and upstream):
            raise SettingsError(f"{where}: {client!r} must map to a non-empty model name")
    return tuple(mapping.items())


def _capabilities(name, value):
    """Upstream model pattern -> capabilities (capabilities.py), inline or in a file."""
    try:
        return parse_overrides(json_setting(name, value), name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _client_keys(name, value):
    """Entries are `key`, `name:key` or `name:sha256:<hex>`, each maybe followed by `team=T`,
    `user=U` and `trusted=true` (x-bridge-user names the user), comma-separated or one per line
    of a file."""
    entries, entry = _entries(name, value)
    keys = []
    for number, line in entries:
        words = line.strip().split()
        if not words or words[0].startswith("#"):
            continue
        parts = words[0].split(":")
        where = f"{entry} {number} ({parts[0] if len(parts) > 1 else 'key'})"
        fields = _fields(where, words[1:], {"team": _label, "user": _label, "trusted": _flag})
        if len(parts) == 3 and parts[1] == "sha256":
            try:
                digest = bytes.fromhex(parts[2])
            except ValueError:
                digest = b""
            if len(digest) != 32:
                raise SettingsError(f"{where}: sha256 must be 64 hex digits")
            keys.append(ClientKey(parts[0], digest, **fields))
        elif len(parts) in (1, 2) and parts[-1]:
            label = parts[0] if len(parts) == 2 else f"key{len(keys) + 1}"
            keys.append(ClientKey(label, hashlib.sha256(parts[-1].encode()).digest(), **fields))
        else:
            raise SettingsError(f"{entry} {number} is not `key`, `name:key` or `name:sha256:<hex>`")
    return tuple(keys)


# A team's or user's name: a label in metrics and a part of Redis keys (bounded, no separators).
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")


def _label(name, value):
    if not LABEL.match(value):
        raise SettingsError(
            f"{name}: {value!r} must be 1 to 64 letters, digits or ._@+- (starting with one of the first two)"
        )
    return value


def _fields(where, words, parsers):
    """`field=value` words, each parsed by its parser in `parsers`."""
    fields = {}
    for word in words:
        field, sep, raw = word.partition("=")
        if not sep or field not in parsers or field in fields:
            raise SettingsError(f"{where}: {word!r} is not one of {', '.join(f + '=...' for f in parsers)} (once each)")
        fields[field] = parsers[field](f"{where} {field}", raw)
    return fields


_SCOPES = ("key", "team", "user")


def _budgets(name, value):
    """Lines `key:NAME day=D month=M [soft]` (team:, user: likewise; NAME * for every one of the
    scope without a line of its own), dollars, from a file (an absolute path) or comma-separated."""
    entries, entry = _entries(name, value)
    budgets = {}
    for number, line in entries:
        words = line.split("#")[0].split()
        if not words:
            continue
        scope, sep, owner = words[0].partition(":")
        where = f"{entry} {number} ({words[0]})"
        if not sep or scope not in _SCOPES or not (owner == "*" or LABEL.match(owner)):
            raise SettingsError(f"{where}: must start with key:NAME, team:NAME or user:NAME (NAME may be *)")
        if (scope, owner) in budgets:
            raise SettingsError(f"{where}: {words[0]} has two lines")
        soft = "soft" in words[1:]
        dollars = lambda n, v: _number(n, v, float, 0.000001)  # noqa: E731
        amounts = _fields(where, [w for w in words[1:] if w != "soft"], {"day": dollars, "month": dollars})
        if not amounts:
            raise SettingsError(f"{where}: no budget given (day=DOLLARS or month=DOLLARS)")
        budgets[scope, owner] = Budget(scope, owner, soft=soft, **amounts)
    return tuple(budgets.values())


# variable -> (field, parser)
_PARSERS = {
    "BRIDGE_OPENAI_BASE_URL": ("openai_base_url", _url),
    "BRIDGE_OPENAI_API_KEY": ("openai_api_key", lambda n, v: v or None),
    "BRIDGE_ANTHROPIC_BASE_URL": ("anthropic_base_url", _url),
    "BRIDGE_ANTHROPIC_API_KEY": ("anthropic_api_key", lambda n, v: v or None),
    "BRIDGE_ANTHROPIC_VERSION": ("anthropic_version", lambda n, v: v),
    "BRIDGE_MODEL_MAP": ("model_map", _model_map),
    "BRIDGE_ROUTES": ("routes_file", lambda n, v: v.strip()),
    "BRIDGE_CLIENT_KEYS": ("client_keys", _client_keys),
    "BRIDGE_ALLOW_OPEN_RELAY": ("allow_open_relay", _flag),
    "BRIDGE_CONNECT_TIMEOUT": ("connect_timeout", lambda n, v: _number(n, v, float, 0.1)),
    "BRIDGE_READ_TIMEOUT": ("read_timeout", lambda n, v: _number(n, v, float, 1)),
    "BRIDGE_MAX_BODY_BYTES": ("max_body_bytes", lambda n, v: _number(n, v, int, 1024)),
    "BRIDGE_DEFAULT_MAX_TOKENS": ("default_max_tokens", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_RESPONSES_DEFAULT_MAX_TOKENS": ("responses_default_max_tokens", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_OPENAI_MAX_TOKENS_PARAM": (
        "openai_max_tokens_param",
        lambda n, v: _choice(n, v, ("max_completion_tokens", "max_tokens")),
    ),
    "BRIDGE_OPENAI_MAX_TOKENS_CAP": ("openai_max_tokens_cap", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_OPENAI_STREAM_USAGE": ("openai_stream_usage", _flag),
    "BRIDGE_OPENAI_REASONING_EFFORT": ("openai_reasoning_effort", _flag),
    "BRIDGE_OPENAI_REASONING_HISTORY": ("openai_reasoning_history", _flag),
    "BRIDGE_PROMPT_CACHE": ("prompt_cache", lambda n, v: _choice(n, v.strip().lower(), PROMPT_CACHE_TTLS)),
    "BRIDGE_MODEL_CAPABILITIES": ("capabilities", _capabilities),
    "BRIDGE_WEB_SEARCH": ("web_search", _flag),
    "BRIDGE_WEB_SEARCH_MAX_USES": ("web_search_max_uses", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_PING_INTERVAL": ("ping_interval", lambda n, v: _number(n, v, float, 0.05)),
    "BRIDGE_MAX_EVENT_BYTES": ("max_event_bytes", lambda n, v: _number(n, v, int, 1024)),
    "BRIDGE_MAX_JSON_VALUES": ("max_json_values", lambda n, v: _number(n, v, int, 1000)),
    "BRIDGE_MAX_MESSAGES": ("max_messages", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_MAX_CONTENT_BLOCKS": ("max_content_blocks", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_MAX_TOOLS": ("max_tools", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_LARGE_BODY_BYTES": ("large_body_bytes", lambda n, v: _number(n, v, int, 1024)),
    "BRIDGE_LARGE_BODY_SLOTS": ("large_body_slots", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_LARGE_BODY_WAIT": ("large_body_wait", lambda n, v: _number(n, v, float, 0)),
    "BRIDGE_CLIENT_STALL_TIMEOUT": ("client_stall_timeout", lambda n, v: _number(n, v, float, 1)),
    "BRIDGE_CLIENT_HEADER_TIMEOUT": ("client_header_timeout", lambda n, v: _number(n, v, float, 1)),
    "BRIDGE_CLIENT_BODY_TIMEOUT": ("client_body_timeout", lambda n, v: _number(n, v, float, 1)),
    "BRIDGE_QUEUE_TIMEOUT": ("queue_timeout", lambda n, v: _number(n, v, float, 0)),
    "BRIDGE_MAX_REQUESTS_PER_CLIENT": ("max_requests_per_client", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_CLIENT_LIMITS": ("client_limits", _client_limits),
    "BRIDGE_BUDGETS": ("budgets", _budgets),
    "BRIDGE_REDIS_URL": ("redis_url", _redis_url),
    "BRIDGE_REDIS_KEYS": ("redis_keys", _flag),
    "BRIDGE_MAX_USERS_PER_KEY": ("max_users_per_key", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_REDIS_TIMEOUT": ("redis_timeout", lambda n, v: _number(n, v, float, 0.01)),
    "BRIDGE_REDIS_FAILURE": ("redis_failure", lambda n, v: _choice(n, v.strip().lower(), ("open", "closed"))),
    "BRIDGE_ADMIT_AHEAD": ("admit_ahead", lambda n, v: _share(n, v, 0.9)),
    "BRIDGE_RESERVE_OUTPUT_TOKENS": ("reserve_output_tokens", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_MAX_UPSTREAM_BODY_BYTES": ("max_upstream_body_bytes", lambda n, v: _number(n, v, int, 1024)),
    "BRIDGE_RETRIES": ("retries", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_RETRY_BACKOFF": ("retry_backoff", lambda n, v: _number(n, v, float, 0)),
    "BRIDGE_RETRY_MAX_WAIT": ("retry_max_wait", lambda n, v: _number(n, v, float, 0)),
    "BRIDGE_POOL_SIZE": ("pool_size", lambda n, v: _number(n, v, int, 1)),
    "BRIDGE_STREAMS_PER_WORKER": ("streams_per_worker", lambda n, v: _number(n, v, int, 0)),
    "BRIDGE_LOG_LEVEL": ("log_level", lambda n, v: _choice(n, v.upper(), ("DEBUG", "INFO", "WARNING", "ERROR"))),
    "BRIDGE_ACCESS_LOG_FLUSH": ("access_log_flush", _flush_interval),
    "BRIDGE_TRACE_CONTENT_LIMIT": ("trace_content_limit", lambda n, v: _number(n, v, int, 100)),
}


# Read by deploy/gunicorn.conf.py (process model), not by the app.
_READ_ELSEWHERE = {
    "BRIDGE_SETTINGS_FILE",
    "BRIDGE_BIND",
    "BRIDGE_WORKERS",
    "BRIDGE_THREADS",
    "BRIDGE_GRACEFUL_TIMEOUT",
    "BRIDGE_KEEPALIVE",
}

# Every BRIDGE_* variable the service reads (docs/operator.md and docs/deploy.md document each once).
VARIABLES = frozenset(_PARSERS) | _READ_ELSEWHERE


def variables(environ=None):
    """The variables the service sees: BRIDGE_SETTINGS_FILE's lines, the environment over them.

    A line that is no BRIDGE_* setting is a variable for the routes file, which names the
    variables holding its deployments' keys: the same file serves systemd's EnvironmentFile
    and `bridge check`.
    """
    environ = os.environ if environ is None else environ
    values = {}
    if environ.get("BRIDGE_SETTINGS_FILE"):
        values.update(_read_file(environ["BRIDGE_SETTINGS_FILE"]))
    values.update(environ)
    return values


def load(environ=None):
    """Build Settings from the environment (and BRIDGE_SETTINGS_FILE), or raise SettingsError."""
    values = {k: v for k, v in variables(environ).items() if k.startswith("BRIDGE_")}
    unknown = sorted(k for k in values if k not in _PARSERS and k not in _READ_ELSEWHERE)
    if unknown:
        raise SettingsError(f"unknown setting {unknown[0]} (known: {', '.join(sorted(_PARSERS))})")
    fields = {}
    for variable, raw in values.items():
        if variable in _PARSERS:
            field, parse = _PARSERS[variable]
            fields[field] = parse(variable, raw)
    environ = os.environ if environ is None else environ
    fields["traces"] = _otlp(environ, "TRACES")
    fields["otlp_metrics"] = _otlp(environ, "METRICS")
    capture = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    fields["trace_content"] = _flag(capture, environ.get(capture, ""))
    settings = Settings(**fields)
    holds_key = settings.openai_api_key or settings.anthropic_api_key
    if holds_key and not settings.checks_keys and not settings.allow_open_relay:
        raise SettingsError(
            "an upstream API key is set but BRIDGE_CLIENT_KEYS is empty: anyone who can reach "
            "the bridge could spend that key. Set BRIDGE_CLIENT_KEYS, or BRIDGE_ALLOW_OPEN_RELAY=true "
            "if the network in front of the bridge already restricts who can call it."
        )
    if settings.max_requests_per_client and not settings.checks_keys:
        raise SettingsError(
            "BRIDGE_MAX_REQUESTS_PER_CLIENT counts requests by client key, but BRIDGE_CLIENT_KEYS is empty: "
            "without client keys the bridge cannot tell clients apart. Set BRIDGE_CLIENT_KEYS, or leave it at 0."
        )
    _check_limits(settings)
    return settings


# Each signal's batching variables, checked when it is on.
_OTLP_NUMBERS = {
    "TRACES": (
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_EXPORT_TIMEOUT",
    ),
    "METRICS": ("OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT"),
}


def _otlp(environ, signal):
    """Whether the standard OpenTelemetry variables ask for a signal (TRACES, METRICS) over OTLP:
    OTEL_<signal>_EXPORTER=otlp, or an OTLP endpoint with no exporter named (OTEL_SDK_DISABLED=true
    and `none` turn it off); only what bridge can do: OTLP over HTTP, with the SDK installed."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    what = signal.lower()
    named = f"OTEL_{signal}_EXPORTER"
    exporters = {name.strip() for name in environ.get(named, "").split(",") if name.strip()}
    endpoint = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if exporters - {"otlp", "none"}:
        raise SettingsError(f"{named}: bridge exports {what} with otlp only, got {', '.join(exporters)}")
    if "otlp" not in exporters and (exporters or not endpoint):
        return False
    for variable in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable)
        if protocol:
            if protocol != "http/protobuf":
                raise SettingsError(f"{variable}: bridge exports {what} over http/protobuf only, got {protocol!r}")
            break
    for variable in _OTLP_NUMBERS[signal]:
        if environ.get(variable):
            _number(variable, environ[variable], int, 1)
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        raise SettingsError(
            f"the OTEL_* variables ask for {what}, but the OpenTelemetry SDK is not installed: "
            "pip install 'bridge[otel]'"
        )
    return True


def _check_limits(settings):
    if settings.redis_keys and not settings.redis_url:
        raise SettingsError("BRIDGE_REDIS_KEYS holds client keys in Redis: set BRIDGE_REDIS_URL")
    if settings.budgets and not settings.redis_url:
        raise SettingsError(
            "BRIDGE_BUDGETS needs Redis: set BRIDGE_REDIS_URL. Spend is shared by every worker and VM only "
            "through a shared store."
        )
    if not settings.client_limits:
        return
    if not settings.redis_url:
        raise SettingsError(
            "BRIDGE_CLIENT_LIMITS needs Redis: set BRIDGE_REDIS_URL. The limits hold across gunicorn's "
            "workers and across VMs only through a shared store; the bridge keeps no per-worker ones."
        )
    if not settings.checks_keys:
        raise SettingsError(
            "BRIDGE_CLIENT_LIMITS counts by client key, but BRIDGE_CLIENT_KEYS is empty: "
            "without client keys the bridge cannot tell clients apart."
        )
    names = {key.name for key in settings.client_keys}
    for client, _ in settings.client_limits if not settings.redis_keys else ():
        if client != "*" and client not in names:
            known = ", ".join(sorted(names)) or "none: BRIDGE_CLIENT_KEYS is empty"
            raise SettingsError(f"BRIDGE_CLIENT_LIMITS: client {client!r} is no client key name (known: {known})")
