"""Client keys held in Redis (BRIDGE_REDIS_KEYS), managed live with `bridge keys`.

Only a key's sha256 digest is stored: the hash `bridge:keys` maps each digest (hex) to its
record (JSON: name, team, user, model allow and deny globs, expiry, state, limits, budget), and
`bridge:keys:names` each name to its current digest. Every change also increments
`bridge:keys:version`. Each worker keeps a copy of the records and a thread that reads the
version every POLL_SECONDS and the records when it moved: a key created, rotated, disabled or
revoked on any VM is seen by every worker within a second, with no Redis call on a request's
path. Keys of BRIDGE_CLIENT_KEYS work as before, and `bridge keys import` copies them in.

Rotation keeps the old key valid for a grace period (`until`); a revoked or disabled key, or
one past its expiry or its grace, is a 401 saying so.
"""

import dataclasses
import fnmatch
import hashlib
import json
import logging
import os
import secrets
import threading
import time

import redis

from ..protocols.errors import BridgeError
from ..settings import Budget, Limits

log = logging.getLogger("bridge.keys")

RECORDS = "bridge:keys"
NAMES = "bridge:keys:names"
VERSION = "bridge:keys:version"
POLL_SECONDS = 0.5
PREFIX = "sk-bridge-"


@dataclasses.dataclass(frozen=True)
class StoredKey:
    """A client key held in Redis, as settings.ClientKey is one of the file's, with its own rules."""

    name: str
    digest: str  # hex sha256
    team: str = ""
    user: str = ""
    trusted: bool = False
    models: tuple = ()  # globs the key may call ((): any)
    deny: tuple = ()  # globs it may not
    expires: float | None = None  # epoch seconds
    until: float | None = None  # a rotated-away key's end of grace
    state: str = "active"  # active, disabled or revoked
    limits: Limits | None = None
    budget: Budget | None = None
    created: float = 0.0

    def refusal(self, now):
        """Why this key may not call now (a 401's message), or None."""
        if self.state != "active":
            return f"this API key ({self.name}) was {self.state}"
        if self.expires is not None and now >= self.expires:
            return f"this API key ({self.name}) expired at {_iso(self.expires)}"
        if self.until is not None and now >= self.until:
            return f"this API key ({self.name}) was rotated and its grace period ended at {_iso(self.until)}"
        return None

    def check_model(self, model):
        """A 403 permission_error naming `model` when the key's allow or deny globs exclude it."""
        allowed = not self.models or any(fnmatch.fnmatchcase(model, glob) for glob in self.models)
        if not allowed or any(fnmatch.fnmatchcase(model, glob) for glob in self.deny):
            raise BridgeError("permission", f"this API key ({self.name}) may not use model {model[:200]!r}")

    def as_json(self):
        fields = dataclasses.asdict(self)
        del fields["digest"]
        return json.dumps(fields)


def from_json(digest, text):
    fields = json.loads(text)
    limits = Limits(**fields.pop("limits")) if fields.get("limits") else None
    budget = Budget(**fields.pop("budget")) if fields.get("budget") else None
    fields.pop("limits", None), fields.pop("budget", None)
    for name in ("models", "deny"):
        fields[name] = tuple(fields.get(name) or ())
    return StoredKey(digest=digest, limits=limits, budget=budget, **fields)


def _iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def digest_of(key):
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    """One worker's copy of the keys in Redis, kept fresh by a thread (started in the process
    that reads first: a worker, not the gunicorn master it was forked from)."""

    def __init__(self, client):
        self._redis = client
        self._keys = {}
        self._version = None
        self._pid = None
        self._lock = threading.Lock()

    def find(self, digest):
        if self._pid != os.getpid():
            self._start()
        return self._keys.get(digest)

    def _start(self):
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self.refresh()  # before the first request is answered
            threading.Thread(target=self._poll, name="key-poller", daemon=True).start()

    def _poll(self):
        while True:
            time.sleep(POLL_SECONDS)
            self.refresh()

    def refresh(self):
        try:
            version = self._redis.get(VERSION)
            if version == self._version:
                return
            records = self._redis.hgetall(RECORDS)
        except redis.RedisError as error:
            log.warning("redis: cannot read the client keys (the last ones read still hold): %s", error)
            return
        self._keys = {digest: from_json(digest, text) for digest, text in records.items()}
        self._version = version


# -- managing keys (`bridge keys`) -----------------------------------------------------------------


def _write(client, *records, name=None, current=None):
    with client.pipeline(transaction=True) as pipe:
        for record in records:
            pipe.hset(RECORDS, record.digest, record.as_json())
        if name is not None:
            pipe.hset(NAMES, name, current)
        pipe.incr(VERSION)
        pipe.execute()


def current(client, name):
    """The current record of key `name`, or LookupError."""
    digest = client.hget(NAMES, name)
    if digest is None:
        raise LookupError(f"no key named {name!r}")
    return from_json(digest, client.hget(RECORDS, digest))


def create(client, name, now=None, **fields):
    """A new key named `name`: returns the key itself, which is never stored (only its digest)."""
    if client.hexists(NAMES, name):
        raise LookupError(f"a key named {name!r} exists: rotate it, or revoke it and choose another name")
    key = PREFIX + secrets.token_urlsafe(32)
    record = StoredKey(name=name, digest=digest_of(key), created=now or time.time(), **fields)
    _write(client, record, name=name, current=record.digest)
    return key


def imported(client, file_key):
    """A key of BRIDGE_CLIENT_KEYS (settings.ClientKey: its digest) copied into Redis."""
    if client.hexists(NAMES, file_key.name):
        raise LookupError(f"a key named {file_key.name!r} exists")
    record = StoredKey(
        name=file_key.name,
        digest=file_key.digest.hex(),
        team=file_key.team,
        user=file_key.user,
        trusted=file_key.trusted,
        created=time.time(),
    )
    _write(client, record, name=record.name, current=record.digest)


def rotate(client, name, grace, now=None):
    """A new key for `name`, the old one valid `grace` seconds more: returns the new key."""
    now = time.time() if now is None else now
    old = current(client, name)
    key = PREFIX + secrets.token_urlsafe(32)
    new = dataclasses.replace(old, digest=digest_of(key), until=None, created=now)
    _write(client, dataclasses.replace(old, until=now + grace), new, name=name, current=new.digest)
    return key


def set_state(client, name, state):
    """Disable, enable (active) or revoke key `name`; revoking also ends any rotated-away key of it."""
    records = [from_json(d, text) for d, text in client.hgetall(RECORDS).items()]
    mine = [r for r in records if r.name == name and (state == "revoked" or r.digest == client.hget(NAMES, name))]
    if not mine:
        raise LookupError(f"no key named {name!r}")
    _write(client, *(dataclasses.replace(record, state=state) for record in mine))


def listed(client):
    """Every current key's record, by name."""
    names = client.hgetall(NAMES)
    records = client.hgetall(RECORDS)
    return [from_json(digest, records[digest]) for _, digest in sorted(names.items()) if digest in records]
