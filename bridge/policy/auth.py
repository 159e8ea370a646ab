"""Who may call the bridge, and which credential goes upstream.

Client keys are compared as sha256 digests with hmac.compare_digest against
every configured key, so neither timing nor early exit tells an attacker
how close a guess was. Each deployment (routes.py) holds its own key, sent in
its auth style; the client's own credential is forwarded upstream only when the
deployment holds none and no client keys are set.
"""

import hashlib
import hmac
import time

from ..protocols import UPSTREAM_MESSAGES
from ..protocols.errors import BridgeError, invalid
from ..settings import LABEL
from .keys import StoredKey

USER_HEADER = "x-bridge-user"  # the user a trusted key's client names (settings.ClientKey.trusted)


def client_credential(headers):
    """The key a client presented, as `x-api-key` or `Authorization: Bearer`."""
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def authenticate(settings, headers, store=None, now=None):
    """Return the client key (settings.ClientKey, or keys.StoredKey from Redis's `store`; None
    when no keys are configured), or raise a 401: also for a key revoked, disabled or expired."""
    if not settings.checks_keys:
        return None
    credential = client_credential(headers)
    if credential is None:
        raise BridgeError("authentication", "missing API key: send it as `x-api-key` or `Authorization: Bearer`")
    digest = hashlib.sha256(credential.encode()).digest()
    found = None
    for key in settings.client_keys:
        if hmac.compare_digest(digest, key.digest) and found is None:
            found = key
    if found is None and store is not None:
        found = store.find(digest.hex())
        refused = found.refusal(time.time() if now is None else now) if found is not None else None
        if refused:
            raise BridgeError("authentication", refused)
    if found is None:
        raise BridgeError("authentication", "invalid API key")
    return found


def check_model(record, model):
    """A 403 when the request's key (from Redis) may not use `model`."""
    if isinstance(record.key, StoredKey) and isinstance(model, str):
        record.key.check_model(model)


def identify(record, key, headers):
    """Fill in the record's client, team and user from its key; a trusted key's client may name
    the user with `x-bridge-user` (a 400 when it is no name: it becomes a Redis key's part)."""
    record.client, record.key = key.name, key
    record.team = key.team or key.name
    record.user = key.user or None
    named = headers.get(USER_HEADER)
    if named is not None and key.trusted:
        if not LABEL.match(named):
            raise invalid(
                f"{USER_HEADER} must be 1 to 64 letters, digits or ._@+- (starting with one of the first two)"
            )
        record.user = named


def _forwarded(settings, headers, own_key):
    if own_key:
        return own_key
    if settings.checks_keys:
        return None  # the client's key is the bridge's, never the upstream's
    return client_credential(headers)


def held_credential(settings, deployment):
    """What the credential sent to `deployment` is, when it is the bridge's and not the
    client's: a key the deployment holds, or none where the bridge checks client keys. An
    upstream's 401/403 is then the operator's problem (upstream.refused_credentials); None
    when the credential, or its lack, is the client's own."""
    if deployment.key or deployment.cloud is not None:
        return deployment.key_source
    if settings.checks_keys:
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
