"""Routes: which upstream deployments serve a client's model name (BRIDGE_ROUTES).

The routes file is JSON, read and validated once per worker (at start-up and on each
reload, which the gunicorn master checks first), every error naming the file and its entry
(`BRIDGE_ROUTES /etc/bridge/routes.json: routes[1] ("gpt-4.1").deployments[0] ("azure-east")`):

    {"cooldown_seconds": 30, "default_routes": true,
     "routes": [{"models": ["gpt-4.1", "gpt-4.1-*"],
                 "deployments": [{"name": "azure-east", "protocol": "openai-chat",
                                  "base_url": "https://east.openai.azure.com/openai/v1",
                                  "auth": "api-key", "api_key_env": "AZURE_EAST_KEY",
                                  "model": "gpt-41-prod", "max_tokens": 32768}]}]}

A route's names are exact model names or `*` patterns, matched as BRIDGE_MODEL_MAP's are:
exact names of every route first, then patterns in file order. A name no route matches
goes to its front's default route, built from today's settings: BRIDGE_OPENAI_* for
Anthropic clients, BRIDGE_ANTHROPIC_* for OpenAI clients, BRIDGE_MODEL_MAP naming the
upstream model; `"default_routes": false` turns them off, and such a name is then a 404.

An `anthropic` deployment may be Claude in a company's cloud account instead: `"cloud":
"bedrock"` (with `region`, and `endpoint_url`, `aws_profile`; bedrock.py) or `"cloud": "vertex"`
(with `project`, `region`, and `endpoint_url`, `credentials_file`; vertex.py), its `model`
the cloud's model id, its credentials the cloud library's own, in place of `base_url` and a key.

A key is never in the file nor in a URL: a deployment names the environment variable or
the file that holds it, and it is read here, kept out of every repr and log line. All the
deployments of a route speak one protocol, so that a request is validated once for it.
"""

import dataclasses
import fnmatch
from urllib.parse import quote

from .. import settings as settings_module
from ..policy import prices as price_table
from ..protocols import UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES, errors
from ..protocols.errors import BridgeError
from ..settings import PROMPT_CACHE_TTLS, SettingsError, _url, json_setting, named_file, read_text
from ..translate.capabilities import check_fields
from . import bedrock, vertex

PROTOCOLS = (UPSTREAM_CHAT, UPSTREAM_MESSAGES, UPSTREAM_RESPONSES)
# Each protocol's generation and model-list paths, after the base URL (OpenAI's two share a
# base URL: https://api.openai.com/v1, Azure's .../openai/v1 or .../openai with an api-version).
GENERATE = {UPSTREAM_CHAT: "/chat/completions", UPSTREAM_MESSAGES: "/v1/messages", UPSTREAM_RESPONSES: "/responses"}
MODELS = {UPSTREAM_CHAT: "/models", UPSTREAM_MESSAGES: "/v1/models", UPSTREAM_RESPONSES: "/models"}
_PROVIDERS = {UPSTREAM_CHAT: "openai", UPSTREAM_MESSAGES: "anthropic", UPSTREAM_RESPONSES: "openai"}
_AUTH_STYLES = ("bearer", "api-key", "x-api-key", "none")
_DEFAULT_AUTH = {UPSTREAM_CHAT: "bearer", UPSTREAM_MESSAGES: "x-api-key", UPSTREAM_RESPONSES: "bearer"}
_UNRESERVED = "-._~"  # characters a query value keeps unquoted
# Where a credential goes: no extra header may carry one, since the file never holds keys.
_CREDENTIAL_HEADERS = {"authorization", "api-key", "x-api-key", "proxy-authorization", "cookie"}
_DEPLOYMENT_FIELDS = {
    "name",
    "protocol",
    "base_url",
    "api_key_env",
    "api_key_file",
    "auth",
    "headers",
    "query",
    "model",
    "max_tokens",
    "max_tokens_param",
    "stream_usage",
    "reasoning_effort",
    "reasoning_history",
    "prompt_cache",
    "capabilities",
    "web_search",
    "weight",
    "tier",
    "prices",
    "cloud",
    *bedrock.FIELDS,
    *vertex.FIELDS,
}
CLOUDS = {"bedrock": bedrock.Bedrock, "vertex": vertex.Vertex}
# Per-deployment switches that are global settings for the default routes.
_OPENAI_SWITCHES = {
    "max_tokens_param": "openai_max_tokens_param",
    "stream_usage": "openai_stream_usage",
    "reasoning_effort": "openai_reasoning_effort",
    "reasoning_history": "openai_reasoning_history",
}


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One upstream that can serve a route: where, how to authenticate, and its own limits."""

    name: str
    protocol: str
    base_url: str
    key: str | None = dataclasses.field(default=None, repr=False)  # never printed
    auth: str = "bearer"
    headers: tuple = ()
    query: str = ""  # encoded, without the `?`
    max_tokens: int = 0  # cap on the upstream body's max_tokens; 0: none
    weight: int = 1
    tier: int = 1  # 2 and up: a backup, called only while every deployment of the tiers before fails
    key_source: str = ""  # where the key comes from, for an operator's log line: never the key
    prices: price_table.Price | None = None  # its own (`prices`), else the shipped table's by upstream model
    cloud: object = dataclasses.field(default=None, repr=False, compare=False)  # bedrock.py, vertex.py
    # The settings its translation reads: the model map naming its upstream model, and the
    # per-upstream switches (openai_max_tokens_param, ...).
    settings: object = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def provider(self):
        """Its gen_ai.provider.name (the OpenTelemetry GenAI conventions' name for who serves it)."""
        return self.cloud.provider if self.cloud is not None else _PROVIDERS.get(self.protocol, self.protocol)

    def url(self, path, query=""):
        """The URL of `path` (`/chat/completions`, `/v1/messages`, ...) on this deployment,
        its own query (Azure's api-version) and then `query`."""
        query = f"{self.query}&{query}" if self.query and query else self.query or query
        return f"{self.base_url}{path}?{query}" if query else f"{self.base_url}{path}"


@dataclasses.dataclass(frozen=True)
class Route:
    name: str
    models: tuple
    protocol: str
    deployments: tuple


@dataclasses.dataclass(frozen=True)
class Table:
    """The routes, and each front's default route (none when turned off)."""

    routes: tuple = ()
    defaults: dict = dataclasses.field(default_factory=dict)  # client protocol -> Route
    cooldown: float = 30.0

    def route_for(self, client_protocol, model):
        """The route that serves `model` for a client of `client_protocol`, or a 404."""
        for route in self.routes:
            if model in route.models:
                return route
        for route in self.routes:
            if any("*" in pattern and fnmatch.fnmatchcase(model, pattern) for pattern in route.models):
                return route
        default = self.defaults.get(client_protocol)
        if default is None:
            raise BridgeError(
                "not_found",
                f"model {model[:200]!r} has no route: it matches no entry of BRIDGE_ROUTES and the default "
                "routes are off",
                param="model",
                code="model_not_found",
            )
        return default

    def names(self):
        """Client-facing model ids the routes define (patterns are not model ids)."""
        return [name for route in self.routes for name in route.models if "*" not in name]

    def upstream_models(self):
        """Upstream model names the routes and model maps name (a name passed through is not one)."""
        maps = (deployment.settings.model_map for deployment in self.deployments() if deployment.settings)
        return {target for model_map in maps for _, target in model_map}

    def deployments(self):
        """Every deployment once, the default routes' first."""
        seen = {}
        for route in (*self.defaults.values(), *self.routes):
            for deployment in route.deployments:
                seen.setdefault(deployment.name, deployment)
        return list(seen.values())


def configuration(environ=None):
    """(settings, routing table): every setting and every file they name, read and checked.

    The one validation of a configuration: what a worker serves, what `bridge check` prints,
    and what the gunicorn master runs (as `bridge check --offline`) before a reload replaces
    any worker (deploy/gunicorn.conf.py). Raises SettingsError naming the file and the entry.
    """
    settings = settings_module.load(environ)
    return settings, load(settings, settings_module.variables(environ))


def load(settings, environ=None):
    """The routing table for these settings (BRIDGE_ROUTES and the defaults), or SettingsError.

    Key variables are looked up in `environ`, by default the service's (settings.variables).
    """
    environ = settings_module.variables() if environ is None else environ
    document = _document(settings.routes_file) if settings.routes_file else {}
    path = named_file(settings.routes_file)
    where = f"BRIDGE_ROUTES {path}" if path else "BRIDGE_ROUTES"
    _known(document, {"routes", "cooldown_seconds", "default_routes"}, where)
    cooldown = _seconds(document.get("cooldown_seconds", 30), f"{where}: cooldown_seconds")
    keep_defaults = document.get("default_routes", True)
    if not isinstance(keep_defaults, bool):
        raise SettingsError(f"{where}: default_routes must be true or false")
    defaults = _default_routes(settings) if keep_defaults else {}
    entries = document.get("routes", [])
    if not isinstance(entries, list):
        raise SettingsError(f"{where}: routes must be an array")
    routes = tuple(
        _route(entry, f"{where}: routes[{number}]", settings, environ) for number, entry in enumerate(entries)
    )
    table = Table(routes, defaults, cooldown)
    _check_unique(table, where)
    _check_relay(table, settings)
    return table


def _document(value):
    document = json_setting("BRIDGE_ROUTES", value)
    if not isinstance(document, dict):
        raise SettingsError("BRIDGE_ROUTES: must be a JSON object with a `routes` array")
    return document


def _default_routes(settings):
    """Today's two upstreams as routes: each front's, for every name no route claims."""
    openai = Deployment(
        "openai",
        UPSTREAM_CHAT,
        settings.openai_base_url,
        key=settings.openai_api_key,
        auth="bearer",
        key_source="BRIDGE_OPENAI_API_KEY",
        max_tokens=settings.openai_max_tokens_cap,
        settings=settings,
    )
    anthropic = Deployment(
        "anthropic",
        UPSTREAM_MESSAGES,
        settings.anthropic_base_url,
        key=settings.anthropic_api_key,
        auth="x-api-key",
        key_source="BRIDGE_ANTHROPIC_API_KEY",
        settings=settings,
    )
    return {
        errors.ANTHROPIC: Route("default (BRIDGE_OPENAI_*)", (), UPSTREAM_CHAT, (openai,)),
        errors.OPENAI: Route("default (BRIDGE_ANTHROPIC_*)", (), UPSTREAM_MESSAGES, (anthropic,)),
    }


def _route(entry, where, settings, environ):
    if not isinstance(entry, dict):
        raise SettingsError(f"{where}: must be an object with `models` and `deployments`")
    _known(entry, {"name", "models", "deployments"}, where)
    models = entry.get("models")
    if isinstance(models, str):
        models = [models]
    if not models or not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise SettingsError(f"{where}: models must be a non-empty array of model names or `*` patterns")
    name = entry.get("name", models[0])
    where = f'{where} ("{name}")'
    deployments = entry.get("deployments")
    if not deployments or not isinstance(deployments, list):
        raise SettingsError(f"{where}: deployments must be a non-empty array")
    built = tuple(
        _deployment(item, f"{where}.deployments[{number}]", settings, environ)
        for number, item in enumerate(deployments)
    )
    protocols = {deployment.protocol for deployment in built}
    if len(protocols) > 1:
        raise SettingsError(
            f"{where}: all deployments of a route must speak one protocol, got {', '.join(sorted(protocols))}"
        )
    return Route(name, tuple(models), built[0].protocol, built)


def _deployment(item, where, settings, environ):
    if not isinstance(item, dict):
        raise SettingsError(f"{where}: must be an object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise SettingsError(f"{where}: name is required (it names the deployment in logs and metrics)")
    where = f'{where} ("{name}")'
    _known(item, _DEPLOYMENT_FIELDS, where)
    cloud = _cloud(item, where)
    protocol = item.get("protocol", UPSTREAM_MESSAGES if cloud else None)
    if protocol not in PROTOCOLS:
        raise SettingsError(f"{where}: protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if cloud and protocol != UPSTREAM_MESSAGES:
        raise SettingsError(f"{where}: a {cloud.kind} deployment speaks anthropic, not {protocol}")
    base_url = cloud.base_url if cloud else _url(f"{where}: base_url", _text(item, "base_url", where, required=True))
    auth = "none" if cloud else item.get("auth", _DEFAULT_AUTH[protocol])  # a cloud's own: sign()
    if auth not in _AUTH_STYLES:
        raise SettingsError(f"{where}: auth must be one of {', '.join(_AUTH_STYLES)}, got {auth!r}")
    key = _key(item, where, environ)
    if key and auth == "none":
        raise SettingsError(f"{where}: a key is named but auth is none")
    headers = _pairs(item, "headers", where)
    for header, _ in headers:
        if header.lower() in _CREDENTIAL_HEADERS:
            raise SettingsError(
                f"{where}: headers must not carry {header}: name the key with api_key_env or api_key_file"
            )
    query = _pairs(item, "query", where)
    for parameter, _ in query:
        if "key" in parameter.lower() or "token" in parameter.lower():
            raise SettingsError(f"{where}: query must not carry a key ({parameter}): URLs are logged")
    switches = {}
    for field, setting in _OPENAI_SWITCHES.items():
        if field not in item:
            continue
        if protocol != UPSTREAM_CHAT:
            raise SettingsError(f"{where}: {field} applies to openai-chat deployments only")
        value = item[field]
        if field == "max_tokens_param":
            if value not in ("max_completion_tokens", "max_tokens"):
                raise SettingsError(f"{where}: max_tokens_param must be max_completion_tokens or max_tokens")
        elif not isinstance(value, bool):
            raise SettingsError(f"{where}: {field} must be true or false")
        switches[setting] = value
    if "prompt_cache" in item:
        if protocol != UPSTREAM_MESSAGES:
            raise SettingsError(f"{where}: prompt_cache applies to anthropic deployments only")
        if item["prompt_cache"] not in PROMPT_CACHE_TTLS:
            raise SettingsError(f"{where}: prompt_cache must be one of {', '.join(PROMPT_CACHE_TTLS)}")
        switches["prompt_cache"] = item["prompt_cache"]
    if "capabilities" in item:
        if protocol == UPSTREAM_CHAT:
            raise SettingsError(f"{where}: capabilities applies to anthropic and openai-responses deployments only")
        if not isinstance(item["capabilities"], dict):
            raise SettingsError(f"{where}: capabilities must be an object")
        try:
            fields = check_fields(item["capabilities"], f"{where}: capabilities")
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        switches["capabilities"] = (("*", fields), *settings.capabilities)
    if "web_search" in item:
        if protocol != UPSTREAM_MESSAGES:
            raise SettingsError(f"{where}: web_search applies to anthropic deployments only")
        if not isinstance(item["web_search"], bool):
            raise SettingsError(f"{where}: web_search must be true or false")
        switches["web_search"] = item["web_search"]
    model = _text(item, "model", where)
    own = dataclasses.replace(settings, model_map=(("*", model),) if model else (), **switches)
    return Deployment(
        name,
        protocol,
        base_url,
        key=key,
        auth=auth,
        headers=headers,
        query="&".join(f"{quote(k, safe=_UNRESERVED)}={quote(v, safe=_UNRESERVED)}" for k, v in query),
        max_tokens=_whole(item, "max_tokens", where, 0),
        weight=_whole(item, "weight", where, 1, minimum=1),
        tier=_whole(item, "tier", where, 1, minimum=1),
        prices=price_table.parse(item["prices"], where) if "prices" in item else None,
        key_source=f"the {cloud.describe()} of deployment {name}" if cloud else _key_source(name, item),
        cloud=cloud,
        settings=own,
    )


def _cloud(item, where):
    """The deployment's cloud (bedrock.py, vertex.py), None for an API with a base URL and a key."""
    kind = item.get("cloud")
    fields = sorted(field for field in (*bedrock.FIELDS, *vertex.FIELDS) if field in item)
    if kind is None:
        if fields:
            raise SettingsError(f"{where}: {fields[0]} applies to a cloud deployment only (cloud: bedrock or vertex)")
        return None
    if kind not in CLOUDS:
        raise SettingsError(f"{where}: cloud must be one of {', '.join(CLOUDS)}, got {kind!r}")
    kind_fields = bedrock.FIELDS if kind == "bedrock" else vertex.FIELDS
    for field in ("base_url", "api_key_env", "api_key_file", "auth", *fields):
        if field in item and field not in kind_fields:
            raise SettingsError(f"{where}: a {kind} deployment takes no {field} (its credentials are the cloud's)")
    return CLOUDS[kind].from_entry(item, where)


def _key(item, where, environ):
    """The deployment's key, from the variable or file it names; None when it names none."""
    variable, path = item.get("api_key_env"), item.get("api_key_file")
    if variable is not None and path is not None:
        raise SettingsError(f"{where}: name the key with api_key_env or api_key_file, not both")
    if variable is not None:
        if not isinstance(variable, str) or not variable:
            raise SettingsError(f"{where}: api_key_env must name an environment variable")
        key = environ.get(variable, "").strip()
        if not key:
            raise SettingsError(f"{where}: api_key_env names {variable}, which is not set")
        return key
    if path is not None:
        if not isinstance(path, str) or not path:
            raise SettingsError(f"{where}: api_key_file must be a path")
        key = read_text(f"{where}: api_key_file", path).strip()
        if not key:
            raise SettingsError(f"{where}: api_key_file {path} is empty")
        return key
    return None


def _key_source(name, item):
    for field in ("api_key_env", "api_key_file"):
        if item.get(field):
            return f"the key of deployment {name} ({field} {item[field]})"
    return f"deployment {name}, which names no key"


def _text(item, field, where, required=False):
    value = item.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise SettingsError(f"{where}: {field} must be a non-empty string")
    return value


def _whole(item, field, where, default, minimum=0):
    value = item.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SettingsError(f"{where}: {field} must be a whole number of at least {minimum}, got {value!r}")
    return value


def _seconds(value, where):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise SettingsError(f"{where}: must be a number of seconds, got {value!r}")
    return float(value)


def _pairs(item, field, where):
    value = item.get(field, {})
    if not isinstance(value, dict) or not all(k and isinstance(v, str) for k, v in value.items()):
        raise SettingsError(f"{where}: {field} must be an object of strings")
    for key, text in value.items():
        if any(c in key + text for c in "\r\n"):
            raise SettingsError(f"{where}: {field} {key!r} holds a line break")
    return tuple(value.items())


def _known(document, fields, where):
    unknown = sorted(set(document) - fields)
    if unknown:
        raise SettingsError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(fields))})")


def _check_unique(table, where):
    """Deployment names key cool-downs and metrics; one name, one deployment."""
    seen = {deployment.name for route in table.defaults.values() for deployment in route.deployments}
    for number, route in enumerate(table.routes):
        for deployment in route.deployments:
            if deployment.name in seen:
                raise SettingsError(
                    f'{where}: routes[{number}] ("{route.name}"): deployment name {deployment.name!r} is used twice '
                    "(the default routes are named openai and anthropic)"
                )
            seen.add(deployment.name)


def _check_relay(table, settings):
    """A key held with no client keys is an open relay, as settings.load says for the defaults."""
    holding = [d.name for route in table.routes for d in route.deployments if d.key or d.cloud]
    if holding and not settings.checks_keys and not settings.allow_open_relay:
        raise SettingsError(
            f"BRIDGE_ROUTES: deployment {holding[0]} holds an upstream key or cloud credentials "
            "but BRIDGE_CLIENT_KEYS is empty: "
            "anyone who can reach the bridge could spend that key. Set BRIDGE_CLIENT_KEYS, or "
            "BRIDGE_ALLOW_OPEN_RELAY=true if the network in front of the bridge already restricts who can call it."
        )
