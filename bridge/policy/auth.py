"""Who may call the bridge, and which credential goes upstream.

Client keys are compared as sha256 digests with hmac.compare_digest against
every configured key, so neither timing nor early exit tells an attacker
how close a guess was. Each deployment (routes.py) holds its own key, sent in
its auth style; the client's own credential is forwarded upstream only when the
deployment holds none and no client keys are set.
"""

import hashlib
import hmac

from ..protocols import UPSTREAM_MESSAGES
from ..protocols.errors import BridgeError


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


def held_credential(settings, deployment):
    """What the credential sent to `deployment` is, when it is the bridge's and not the
    client's: a key the deployment holds, or none where the bridge checks client keys. An
    upstream's 401/403 is then the operator's problem (upstream.refused_credentials); None
    when the credential, or its lack, is the client's own."""
    if deployment.key or deployment.cloud is not None:
        return deployment.key_source
    if settings.client_keys:
        return f"{deployment.key_source} (no key held)"
    return None


def upstream_headers(settings, deployment, headers, passthrough=False):
    """Headers for a call to `deployment`, with its credential in its auth style.

    Toward Anthropic a client's `anthropic-beta` list is passed on, and in pass-through its
    `anthropic-version` too: the body is the client's, written for that version. The
    deployment's own headers come last but for the credential, which no header may carry.
    """
    out = {"content-type": "application/json", "accept-encoding": "identity"}
    if deployment.protocol == UPSTREAM_MESSAGES:
        out["anthropic-version"] = (passthrough and headers.get("anthropic-version")) or settings.anthropic_version
        beta = headers.get("anthropic-beta")
        if beta:
            out["anthropic-beta"] = beta
    out.update(deployment.headers)
    key = _forwarded(settings, headers, deployment.key)
    if key and deployment.auth != "none":
        name, value = _CREDENTIAL[deployment.auth](key)
        out[name] = value
    return out


_CREDENTIAL = {
    "bearer": lambda key: ("authorization", f"Bearer {key}"),
    "api-key": lambda key: ("api-key", key),  # Azure OpenAI
    "x-api-key": lambda key: ("x-api-key", key),
}
