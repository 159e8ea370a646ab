"""The `bridge` command: `bridge check` tells an operator whether the service can run;
`bridge usage` prints today's usage per client from Redis: the requests admitted (one refused by
a client limit does not count) and their tokens, or with --from/--to/--by/--format exports spend
for chargeback (policy/spend.py); `bridge keys` manages the client keys held in
Redis (policy/keys.py), each change seen by every worker within a second.

It loads the settings and the routes exactly as the service will (environment,
then BRIDGE_SETTINGS_FILE, then BRIDGE_ROUTES), prints them with every key shown
only as set or unset (a URL's password and a route's header and query values as ***),
and asks every deployment for its model list, naming those
that fail, and pings Redis when BRIDGE_REDIS_URL is set (its password masked). Exit status:
0 when all is well, 1 when a deployment or Redis is unreachable, or a deployment refuses a
key the bridge holds or answers an error, 2 when a setting is invalid.

`bridge check --offline` only loads and checks, calling no upstream and no Redis, and prints
one line: what the systemd unit runs before it asks for a reload. `--pickle` writes what it
loaded, keys included, to stdout (never a terminal): what the gunicorn master runs to hold
a checked configuration for its workers (deploy/gunicorn.conf.py).
"""

import argparse
import calendar
import csv
import dataclasses
import json
import pickle
import sys
import time

import redis
import requests

from . import settings as settings_module
from .gateway import routes
from .gateway.upstream import transport_error
from .policy import auth, keys, spend, usage
from .protocols.errors import BridgeError
from .translate.model_map import map_model

_SECRETS = ("openai_api_key", "anthropic_api_key")
_TIMEOUT = 5.0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bridge", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    checking = commands.add_parser("check", help="validate the settings and try each upstream and Redis")
    checking.add_argument("--offline", action="store_true", help="only validate the settings and every file they name")
    checking.add_argument("--pickle", action="store_true", help="--offline, and the configuration to stdout, pickled")
    used = commands.add_parser(
        "usage",
        help="print today's (UTC) requests admitted (not those refused) and tokens per client from Redis; with "
        "--from, --to, --by or --format, export spend for chargeback",
    )
    used.add_argument("--client", help="only this client key name")
    used.add_argument("--from", dest="first", metavar="DATE", help="first UTC day (YYYY-MM-DD) exported; default today")
    used.add_argument(
        "--to", dest="last", metavar="DATE", help="last UTC day (YYYY-MM-DD) exported, included; default --from"
    )
    used.add_argument("--by", help=f"comma-separated columns to group by, of {','.join(spend.DIMENSIONS)}")
    used.add_argument("--format", choices=("csv", "json"), help="export as CSV (default) or a JSON list")
    _key_commands(commands)
    args = parser.parse_args(argv)
    if args.command == "usage":
        if args.first or args.last or args.by or args.format:
            return export_usage(args)
        return print_usage(args.client)
    if args.command == "keys":
        return manage_keys(args)
    if args.pickle and sys.stdout.isatty():
        parser.error("--pickle writes keys: not to a terminal")
    return check(args.offline, args.pickle)


def in_redis(held, act):
    """`act(settings)` on what bridge holds in Redis (`held` says what, when Redis is not set),
    with every such command's exit status: 2 for a bad setting or argument, 1 when Redis fails."""
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as error:
        print(f"bridge: invalid setting: {error}", file=sys.stderr)
        return 2
    if not settings.redis_url:
        print(f"bridge: {held} in Redis: set BRIDGE_REDIS_URL", file=sys.stderr)
        return 2
    try:
        return act(settings)
    except (LookupError, ValueError) as error:
        print(f"bridge: {error}", file=sys.stderr)
        return 2
    except redis.RedisError as error:
        print(f"bridge: redis at {settings_module.masked_url(settings.redis_url)}: {error}", file=sys.stderr)
        return 1


def print_usage(client):
    return in_redis("usage is kept", lambda settings: _usage_table(usage.today(settings, client)))


def _usage_table(counts):
    fields = ("requests", *usage.KINDS)
    print("client".ljust(24) + "".join(field.rjust(14) for field in fields))
    for name, row in counts.items():
        print(name.ljust(24) + "".join(row.get(field, "0").rjust(14) for field in fields))
    return 0


def export_usage(args):
    """Spend and tokens from --from to --to (UTC days), summed by the --by columns (default
    client), as CSV or JSON on stdout: what chargeback needs, read from Redis's spend hashes."""
    by = tuple(name.strip() for name in (args.by or "client").split(",") if name.strip())
    unknown = [name for name in by if name not in spend.DIMENSIONS] or [name for name in by if by.count(name) > 1]
    first = args.first or usage.day(time.time())
    try:
        if unknown or not by:
            raise ValueError(f"--by takes some of {','.join(spend.DIMENSIONS)}, once each, got {args.by!r}")
        dates = spend.days(first, args.last or first)
    except ValueError as error:
        print(f"bridge: {error}", file=sys.stderr)
        return 2
    return in_redis("usage is kept", lambda settings: _export(settings, dates, by, args))


def _export(settings, dates, by, args):
    rows = spend.export(usage.connect(settings), dates, by, args.client)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    writer = csv.DictWriter(sys.stdout, fieldnames=[*by, *spend.COLUMNS], lineterminator="\n")
    writer.writeheader()
    writer.writerows({**row, "cost_usd": f"{row['cost_usd']:.6f}"} for row in rows)
    return 0


def _key_commands(commands):
    managing = commands.add_parser("keys", help="client keys held in Redis (BRIDGE_REDIS_KEYS), changed live")
    actions = managing.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="a new key, printed once (only its digest is stored)")
    create.add_argument("name")
    create.add_argument("--team", default="")
    create.add_argument("--user", default="")
    create.add_argument("--trusted", action="store_true", help="its client may name the user with x-bridge-user")
    create.add_argument("--models", default="", help="comma-separated globs the key may call (default: any)")
    create.add_argument("--deny", default="", help="comma-separated globs it may not call")
    create.add_argument("--expires", help="UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ) it stops working")
    create.add_argument("--rpm", type=int, default=0)
    create.add_argument("--tpm", type=int, default=0)
    create.add_argument("--tpd", type=int, default=0)
    create.add_argument("--budget", type=float, default=0.0, help="dollars per calendar month (UTC)")
    create.add_argument("--budget-day", type=float, default=0.0, help="dollars per UTC day")
    rotate = actions.add_parser("rotate", help="a new key for NAME; the old one stays valid --grace seconds")
    rotate.add_argument("name")
    rotate.add_argument("--grace", type=float, default=86400.0)
    for action, text in (
        ("show", "one key's settings"),
        ("revoke", "end the key (and any rotated-away one of it) at once"),
        ("disable", "turn the key off until `enable`"),
        ("enable", "turn a disabled key back on"),
    ):
        actions.add_parser(action, help=text).add_argument("name")
    actions.add_parser("list", help="every key's name, team and state")
    actions.add_parser("import", help="copy BRIDGE_CLIENT_KEYS (their digests) into Redis")


def manage_keys(args):
    return in_redis("keys are held", lambda settings: _key_action(usage.connect(settings), settings, args))


def _key_action(store, settings, args):
    if args.action == "create":
        print(keys.create(store, args.name, **_key_fields(args)))
    elif args.action == "rotate":
        print(keys.rotate(store, args.name, args.grace))
    elif args.action in ("revoke", "disable", "enable"):
        keys.set_state(store, args.name, {"revoke": "revoked", "disable": "disabled", "enable": "active"}[args.action])
    elif args.action == "show":
        record = keys.current(store, args.name)
        print(json.dumps({"digest": record.digest[:12], **json.loads(record.as_json())}, indent=2))
    elif args.action == "list":
        for record in keys.listed(store):
            print(f"{record.name:<24} {record.team or record.name:<20} {record.state}")
    elif args.action == "import":
        for key in settings.client_keys:
            keys.imported(store, key)
        print(f"imported {len(settings.client_keys)} keys")
    return 0


def _key_fields(args):
    """A new key's fields from `bridge keys create`'s options, checked as BRIDGE_CLIENT_KEYS' are."""
    for label in (args.name, args.team, args.user):
        if label and not settings_module.LABEL.match(label):
            raise ValueError(f"{label!r} must be 1 to 64 letters, digits or ._@+-")
    expires = None
    if args.expires:
        shape = "%Y-%m-%d" if len(args.expires) == 10 else "%Y-%m-%dT%H:%M:%SZ"
        expires = calendar.timegm(time.strptime(args.expires, shape))
    limits = settings_module.Limits(args.rpm, args.tpm, args.tpd)
    budget = None
    if args.budget or args.budget_day:
        budget = settings_module.Budget("key", args.name, day=args.budget_day, month=args.budget)
    return {
        "team": args.team,
        "user": args.user,
        "trusted": args.trusted,
        "models": tuple(glob.strip() for glob in args.models.split(",") if glob.strip()),
        "deny": tuple(glob.strip() for glob in args.deny.split(",") if glob.strip()),
        "expires": expires,
        "limits": limits if any(dataclasses.astuple(limits)) else None,
        "budget": budget,
    }


def check(offline=False, pickled=False):
    try:
        settings, table = routes.configuration()
    except settings_module.SettingsError as error:
        print(f"bridge: invalid setting: {error}", file=sys.stderr)
        return 2
    if pickled:
        sys.stdout.buffer.write(pickle.dumps((settings, table)))
        return 0
    if offline:
        print(f"bridge: configuration valid ({len(table.routes)} routes, {len(table.deployments())} deployments)")
        return 0
    print("settings:")
    for name, value in shown(settings):
        print(f"  {name} = {value}")
    print("routes:")
    for client, route in table.defaults.items():
        print(f"  {client} clients, any other model -> {route.name}: {route.deployments[0].name}")
    for route in table.routes:
        print(f"  {', '.join(route.models)} -> {', '.join(d.name for d in route.deployments)}")
    print("upstreams:")
    failing = []
    for deployment in table.deployments():
        if deployment.cloud is not None:
            ok, verdict, url = probe_cloud(settings, deployment)
            failing += [] if ok else [deployment.name]
            print(f"  {deployment.name} ({deployment.cloud.kind}): POST {url} -> {verdict}")
            continue
        url = deployment.url(routes.MODELS[deployment.protocol])
        ok, verdict = probe(url, auth.upstream_headers(settings, deployment, {}), bool(deployment.key))
        if not ok:
            failing.append(deployment.name)
        key = "none" if deployment.auth == "none" else "set" if deployment.key else "unset"
        headers = "".join(f", header {name}" for name, _ in deployment.headers)  # a value may be a key
        shown_url = settings_module.masked_url(url, every_value=True)
        print(f"  {deployment.name} ({deployment.protocol}, key {key}{headers}): GET {shown_url} -> {verdict}")
    if settings.redis_url:
        verdict = redis_verdict(settings)
        print(f"redis:\n  {settings_module.masked_url(settings.redis_url)} -> {verdict}")
        if verdict != "reachable":
            failing.append("redis")
    if failing:
        print(f"failing: {', '.join(failing)}")
    return 1 if failing else 0


def redis_verdict(settings):
    """`reachable`, or why not (the error names host and port, never the password)."""
    try:
        usage.connect(settings).ping()
    except redis.RedisError as error:
        return f"unreachable ({error})"
    return "reachable"


def shown(settings):
    """(name, printable value) for every setting; keys only as set/unset, client keys by name."""
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name in _SECRETS:
            value = "set" if value else "unset"
        elif field.name == "client_keys":
            value = ", ".join(key.name for key in value) or "none"
        elif field.name == "redis_url":
            value = settings_module.masked_url(value) or "unset"
        elif field.name == "routes_file":  # inline JSON may hold a deployment's header values
            value = value if settings_module.named_file(value) else "inline JSON" if value else "unset"
        elif field.name == "client_limits":
            value = "; ".join(f"{name}: {limits}" for name, limits in value) or "none"
        elif field.name == "model_map":
            value = json.dumps(dict(value))
        yield field.name, value


def probe_cloud(settings, deployment):
    """(ok, verdict, URL) of a Bedrock or Vertex deployment: its credentials, then a token count
    (free) of one word on its model, signed as a call is. Neither a key nor a token is printed."""
    method, url, body = deployment.cloud.probe(map_model(deployment.settings.model_map, "probe"))
    data = json.dumps(body).encode()
    try:
        headers = deployment.cloud.sign(method, url, {"content-type": "application/json"}, data)
    except (BridgeError, settings_module.SettingsError) as error:
        return False, f"credentials failed ({error})", url
    session = requests.Session()
    session.trust_env = False
    try:
        response = session.post(url, data=data, headers=headers, timeout=_TIMEOUT, allow_redirects=False)
    except requests.RequestException as exc:
        return False, f"unreachable ({transport_error(exc).message})", url
    finally:
        session.close()
    status = response.status_code
    if status < 300:
        return True, f"reachable, HTTP {status}, credentials accepted", url
    refused = " (the credentials were refused, or lack the permission)" if status in (401, 403) else ""
    return False, f"reachable but HTTP {status}{refused}", url


def probe(url, headers, holds_key):
    """(ok, verdict): any HTTP answer means reachable; a refused key only matters if it is ours."""
    session = requests.Session()
    session.trust_env = False  # as the service: no proxy variables
    try:
        # Only the status matters: the body is left unread (closing the session drops it).
        response = session.get(url, headers=headers, timeout=_TIMEOUT, allow_redirects=False, stream=True)
    except requests.RequestException as exc:
        return False, f"unreachable ({transport_error(exc).message})"
    finally:
        session.close()
    status = response.status_code
    if status < 300:
        return True, f"reachable, HTTP {status}"
    if status == 404:  # an Azure deployment URL has no model list below it
        return True, "reachable, HTTP 404 (no model list at this URL)"
    if status in (401, 403) and not holds_key:
        return True, f"reachable, HTTP {status} (no key held: clients bring their own)"
    return False, f"reachable but HTTP {status}" + (" (the key was refused)" if status in (401, 403) else "")


if __name__ == "__main__":
    sys.exit(main())
