"""The one error type, rendered in whichever protocol the client speaks.

Every failure - bad input, auth, an upstream answer, a broken connection -
becomes a BridgeError carrying a protocol-neutral *kind*; the route renders
it as an OpenAI or Anthropic body (or stream event) at the edge. KINDS is the
one table every status and type is derived from, both ways: what a client is
told, and what an upstream's status or error type means.
"""

import dataclasses

ANTHROPIC = "anthropic"
OPENAI = "openai"


@dataclasses.dataclass(frozen=True)
class Kind:
    status: int  # the HTTP status a client gets, unless an upstream's says more
    anthropic: str  # Anthropic's error type
    openai: str  # OpenAI's error type
    read_as: tuple = ()  # other names upstreams give it: read, never written


KINDS = {
    "invalid_request": Kind(400, "invalid_request_error", "invalid_request_error"),
    "authentication": Kind(401, "authentication_error", "authentication_error"),
    "permission": Kind(403, "permission_error", "permission_error"),
    "not_found": Kind(404, "not_found_error", "not_found_error"),
    "request_too_large": Kind(413, "request_too_large", "invalid_request_error"),
    "rate_limit": Kind(429, "rate_limit_error", "rate_limit_error", ("rate_limit_exceeded",)),
    "api_error": Kind(500, "api_error", "server_error"),
    "overloaded": Kind(529, "overloaded_error", "server_error", ("server_overloaded",)),
    "timeout": Kind(504, "api_error", "timeout", ("timeout_error",)),
}
# An error type, in either protocol, -> its kind; the first kind to name a type keeps it.
_KIND_OF_TYPE = {
    name: kind for kind, spec in reversed(KINDS.items()) for name in (spec.anthropic, spec.openai, *spec.read_as)
}
# An upstream status -> its kind: the table's own, and what the other statuses mean.
_KIND_OF_STATUS = {**{spec.status: kind for kind, spec in KINDS.items()}, 503: "overloaded", 422: "invalid_request"}
# Upstream statuses a client is told as they are: they mean the same in both protocols.
# 408 and 409 too: both SDKs retry them, and the retries are theirs (upstream.py).
_KEPT_STATUSES = {*(spec.status for spec in KINDS.values())} - {500} | {408, 409, 422, 502}

# Anthropic clients know 529 as "overloaded"; the openai SDK only maps 5xx
# generically, and 503 is what OpenAI-side tooling expects for the same thing.
_OPENAI_STATUS = {529: 503}


# The longest upstream error message a client is shown: an error object's message is a line or
# two, and what an upstream sends past this is noise (or an attack on the client's screen and log).
MAX_RELAYED_MESSAGE = 4000


def relayed_message(message):
    """An upstream's error message as a client gets it: cut at MAX_RELAYED_MESSAGE characters, marked."""
    if len(message) <= MAX_RELAYED_MESSAGE:
        return message
    return f"{message[:MAX_RELAYED_MESSAGE]}… [cut by the bridge: {len(message) - MAX_RELAYED_MESSAGE} more characters]"


class BridgeError(Exception):
    """A failure to report to the client, in the client's own protocol."""

    def __init__(
        self,
        kind,
        message,
        *,
        status=None,
        param=None,
        code=None,
        upstream_status=None,
        upstream_headers=None,
        upstream_detail=None,
        details=None,
    ):
        if kind not in KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status or KINDS[kind].status
        self.param = param
        self.code = code
        self.upstream_status = upstream_status
        # The upstream answer's headers: its retry and rate-limit ones go on to the client (ratelimit.py).
        self.upstream_headers = upstream_headers
        # The upstream's own error object, for rules that read more than its message (overflow.py).
        self.upstream_detail = upstream_detail
        self.details = details  # Anthropic's machine-readable `error.details` (its SDKs act on error_code)

    def replaced(self, **changes):
        """This error with some fields changed: a rule rewords an upstream's error and keeps the rest."""
        fields = {
            "kind": self.kind,
            "message": self.message,
            "status": self.status,
            "param": self.param,
            "code": self.code,
            "upstream_status": self.upstream_status,
            "upstream_headers": self.upstream_headers,
            "upstream_detail": self.upstream_detail,
            "details": self.details,
            **changes,
        }
        return BridgeError(fields.pop("kind"), fields.pop("message"), **fields)

    def status_for(self, protocol):
        if protocol == OPENAI:
            return _OPENAI_STATUS.get(self.status, self.status)
        return self.status

    def body_for(self, protocol):
        kind = KINDS[self.kind]
        if protocol == OPENAI:
            return {"error": {"message": self.message, "type": kind.openai, "param": self.param, "code": self.code}}
        error = {"type": kind.anthropic, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"type": "error", "error": error}


def invalid(message, param=None):
    """Shorthand for the most common error: a 400 naming the field."""
    return BridgeError("invalid_request", message, param=param)


def from_anthropic(payload):
    """An Anthropic error object (`{"type": "error", "error": {...}}`: an `event: error`, or a
    200 body) as the BridgeError it names, its message cut to what a client is shown."""
    error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
    message = error.get("message") if isinstance(error.get("message"), str) else None
    return BridgeError(
        kind_for_type(error.get("type")),
        relayed_message(message or "the upstream reported an error without a message"),
        upstream_detail=error,
    )


def from_openai(payload):
    """An OpenAI error an upstream sent inside a 200 (`{"error": ...}`: a body or a Chat stream's
    chunk) as a BridgeError; a known kind keeps its own status (429 for a rate limit)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        message = error.get("message") or "no message"
        if isinstance(error.get("code"), str):
            message = f"{message} ({error['code']})"
        kind = kind_for_type(error.get("type"))
    else:
        message, kind = str(error or payload)[:500], "api_error"
    detail = error if isinstance(error, dict) else {"message": error} if isinstance(error, str) else None
    return BridgeError(
        kind,
        relayed_message(f"upstream failed: {message}"),
        status=502 if kind == "api_error" else None,
        upstream_detail=detail,
    )


def kind_for_status(status):
    """The error kind an upstream HTTP status stands for."""
    return _KIND_OF_STATUS.get(status) or ("api_error" if status >= 500 else "invalid_request")


def kind_for_type(error_type):
    """The error kind an upstream's error type (either protocol's) stands for; unknown is api_error."""
    return _KIND_OF_TYPE.get(error_type, "api_error") if isinstance(error_type, str) else "api_error"


def status_for_upstream(status, kind):
    """What a client is told for an upstream's error status: the same where it means the same in
    both protocols, the kind's own otherwise (a 503 is Anthropic's overloaded 529), and a bad
    gateway for a server error the upstream had no name for."""
    if status in _KEPT_STATUSES:
        return status
    if kind == "api_error":
        return 500 if status == 500 else 502
    return None
