"""The `bridge` command: `bridge check` tells an operator whether the service can run.

It loads the settings exactly as the service will (environment, then
BRIDGE_SETTINGS_FILE), prints them with every key shown only as set or
unset, and asks each upstream for its model list. Exit status: 0 when all
is well, 1 when an upstream is unreachable or refuses a key the bridge
holds, 2 when a setting is invalid.
"""

import argparse
import dataclasses
import json
import sys

import requests

from . import auth
from . import settings as settings_module
from .upstream import transport_error

_SECRETS = ("openai_api_key", "anthropic_api_key")
_TIMEOUT = 5.0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bridge", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="validate the settings and try each upstream")
    parser.parse_args(argv)
    return check()


def check():
    try:
        settings = settings_module.load()
    except settings_module.SettingsError as error:
        print(f"bridge: invalid setting: {error}", file=sys.stderr)
        return 2
    print("settings:")
    for name, value in shown(settings):
        print(f"  {name} = {value}")
    print("upstreams:")
    healthy = True
    for name, url, headers, holds_key in upstreams(settings):
        ok, verdict = probe(url, headers, holds_key)
        healthy = healthy and ok
        print(f"  {name}: GET {url} -> {verdict}")
    return 0 if healthy else 1


def shown(settings):
    """(name, printable value) for every setting; keys only as set/unset, client keys by name."""
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name in _SECRETS:
            value = "set" if value else "unset"
        elif field.name == "client_keys":
            value = ", ".join(key.name for key in value) or "none"
        elif field.name == "model_map":
            value = json.dumps(dict(value))
        yield field.name, value


def upstreams(settings):
    """Each upstream's model list, with the headers the bridge itself would send (no client)."""
    yield (
        "openai",
        f"{settings.openai_base_url}/models",
        auth.openai_headers(settings, {}),
        bool(settings.openai_api_key),
    )
    yield (
        "anthropic",
        f"{settings.anthropic_base_url}/v1/models",
        auth.anthropic_headers(settings, {}),
        bool(settings.anthropic_api_key),
    )


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
    if status in (401, 403) and not holds_key:
        return True, f"reachable, HTTP {status} (no key held: clients bring their own)"
    return False, f"reachable but HTTP {status}" + (" (the key was refused)" if status in (401, 403) else "")


if __name__ == "__main__":
    sys.exit(main())
