"""The one error type, rendered in whichever protocol the client speaks.

Every failure - bad input, auth, an upstream answer, a broken connection -
becomes a BridgeError carrying a protocol-neutral *kind*; the route renders
it as an OpenAI or Anthropic body (or stream event) at the edge.
"""

ANTHROPIC = "anthropic"
OPENAI = "openai"

# kind -> (default HTTP status, Anthropic error type, OpenAI error type)
_KINDS = {
    "invalid_request": (400, "invalid_request_error", "invalid_request_error"),
    "authentication": (401, "authentication_error", "authentication_error"),
    "permission": (403, "permission_error", "permission_error"),
    "not_found": (404, "not_found_error", "not_found_error"),
    "request_too_large": (413, "request_too_large", "invalid_request_error"),
    "rate_limit": (429, "rate_limit_error", "rate_limit_error"),
    "api_error": (500, "api_error", "server_error"),
    "overloaded": (529, "overloaded_error", "server_error"),
    "timeout": (504, "api_error", "timeout"),
}

# Anthropic clients know 529 as "overloaded"; the openai SDK only maps 5xx
# generically, and 503 is what OpenAI-side tooling expects for the same thing.
_OPENAI_STATUS = {529: 503}


class BridgeError(Exception):
    """A failure to report to the client, in the client's own protocol."""

    def __init__(self, kind, message, *, status=None, param=None, code=None,
                 upstream_status=None, upstream_headers=None, upstream_detail=None, details=None):
        if kind not in _KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status or _KINDS[kind][0]
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
        fields = {"kind": self.kind, "message": self.message, "status": self.status, "param": self.param,
                  "code": self.code, "upstream_status": self.upstream_status,
                  "upstream_headers": self.upstream_headers, "upstream_detail": self.upstream_detail,
                  "details": self.details, **changes}
        return BridgeError(fields.pop("kind"), fields.pop("message"), **fields)

    def status_for(self, protocol):
        if protocol == OPENAI:
            return _OPENAI_STATUS.get(self.status, self.status)
        return self.status

    def body_for(self, protocol):
        _, anthropic_type, openai_type = _KINDS[self.kind]
        if protocol == OPENAI:
            return {"error": {"message": self.message, "type": openai_type,
                              "param": self.param, "code": self.code}}
        error = {"type": anthropic_type, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"type": "error", "error": error}


def invalid(message, param=None):
    """Shorthand for the most common error: a 400 naming the field."""
    return BridgeError("invalid_request", message, param=param)


def kind_for_status(status):
    """The error kind an upstream HTTP status stands for."""
    if status == 529 or status == 503:
        return "overloaded"
    if status == 504:
        return "timeout"
    by_status = {400: "invalid_request", 401: "authentication", 403: "permission",
                 404: "not_found", 413: "request_too_large", 422: "invalid_request",
                 429: "rate_limit"}
    if status in by_status:
        return by_status[status]
    return "api_error" if status >= 500 else "invalid_request"
