"""Who may call the bridge, and which credential goes upstream.

Client keys are compared as sha256 digests with hmac.compare_digest against
every configured key, so neither timing nor early exit tells an attacker
how close a guess was. The client's own credential is forwarded upstream
only in pass-through mode: no upstream key held and no client keys set.
"""

import hashlib
import hmac

from .errors import BridgeError


def client_credential(headers):
    """The key a client presented, as `x-api-key` or `Authorization: Bearer`."""
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def authenticate(settings, headers):
    """Return the client key's name ('' when no keys are configured), or raise a 401."""
    if not settings.client_keys:
        return ""
    credential = client_credential(headers)
    if credential is None:
        raise BridgeError("authentication", "missing API key: send it as `x-api-key` or `Authorization: Bearer`")
    digest = hashlib.sha256(credential.encode()).digest()
    name = None
    for key in settings.client_keys:
        if hmac.compare_digest(digest, key.digest) and name is None:
            name = key.name
    if name is None:
        raise BridgeError("authentication", "invalid API key")
    return name


def _forwarded(settings, headers, own_key):
    if own_key:
        return own_key
    if settings.client_keys:
        return None  # the client's key is the bridge's, never the upstream's
    return client_credential(headers)


def is_clients_credential(settings, upstream_headers):
    """Whether the credential in headers built below is the client's own, or the lack of one
    (pass-through): only then is an upstream's 401 or 403 the client's business. A key the
    bridge holds, or no key where the bridge checks client keys, is the bridge's."""
    if settings.client_keys:
        return False
    key = client_credential(upstream_headers)
    return key is None or key not in (settings.openai_api_key, settings.anthropic_api_key)


def openai_headers(settings, headers):
    """Headers for a Chat Completions upstream."""
    out = {"content-type": "application/json", "accept-encoding": "identity"}
    key = _forwarded(settings, headers, settings.openai_api_key)
    if key:
        out["authorization"] = f"Bearer {key}"
    return out


def anthropic_headers(settings, headers):
    """Headers for a Messages upstream; a client's `anthropic-beta` list is passed on."""
    out = {
        "content-type": "application/json",
        "accept-encoding": "identity",
        "anthropic-version": settings.anthropic_version,
    }
    beta = headers.get("anthropic-beta")
    if beta:
        out["anthropic-beta"] = beta
    key = _forwarded(settings, headers, settings.anthropic_api_key)
    if key:
        out["x-api-key"] = key
    return out
