"""The one pooled HTTP client for upstream calls.

One requests HTTPAdapter (a urllib3 pool per upstream host) per process:
keep-alive connections are reused across requests and threads. Requests go
to the adapter directly, not through a Session: a Session would consult
proxy variables and netrc, keep upstream cookies and hand them to the next
client, and merge settings and hooks on every call. Nor are they prepared
by requests.Request.prepare(), which parses the URL, looks for credentials
in it and builds a cookie jar on every call: the few upstream URLs, fixed by
the settings, are prepared once. The adapter itself is told (through the
methods requests offers subclasses) that no proxy is ever used and no cookie
ever kept. Every transport failure becomes a BridgeError before it can reach
a client as a stack trace. Each call notes on the request's access record
which model went upstream and how the upstream answered.

One retry budget per user call, and the client's SDK owns it: both official
SDKs repeat a 429/5xx twice by default, so a bridge that retried them too
would multiply every call (3 x 3 upstream calls). The bridge retries only
what no client can see and what cannot have started a generation: a
refused connection, a failed DNS lookup, a connect timeout, and a
connection closed or reset before any byte of an answer and soon after the
send (a pooled keep-alive connection the upstream had just closed), with capped doubling
backoff. Once a status line came it never asks again: a 429/5xx goes back
at once with the headers the SDK needs to retry well (ratelimit.py), and a
body that breaks mid-read or a read timeout is an error, since the upstream
may have generated, and billed, the answer. A route of several deployments
(failover.py) sends a 429/5xx or a failure raised as Unanswered to another
deployment instead, once each: never the same upstream again.

What an upstream sends is bounded like what a client sends: a non-streamed
body by BRIDGE_MAX_UPSTREAM_BODY_BYTES (refused unread when its length says
so, cut where it passes the limit), an error body by ERROR_BODY_BYTES (its
message relayed cut, errors.relayed_message), and its connection closed
rather than pooled half-read. An upstream 401/403 for a credential the bridge
sent on its own account (a deployment's key: auth.held_credential) is the
operator's problem, never the client's 401.

A generation call watches its client while it waits for the upstream's answer to begin: for a
non-streamed answer that is the whole generation, minutes of a thread. The request thread waits
in poll() on the upstream socket and on the client's (its end of the connection closed: nginx
closing it when its own client left, an SDK giving up), instead of in a blocking read of the
upstream, and a client that leaves closes the upstream call at once (ClientLeft): the upstream
stops generating, and the thread is free. A call whose client has already left is not sent.
Once the answer's head came, a stream's relay notices a departed client itself (streaming.py),
and a non-streamed body is read whole as it comes.
"""

import contextlib
import datetime
import functools
import http.client
import json
import logging
import select
import threading
import time

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from ..protocols import json_codec
from ..protocols.errors import BridgeError, kind_for_status, relayed_message, status_for_upstream
from ..serve import observability
from ..serve.handover import JOINED_BODY
from ..serve.observability import escaped
from ..serve.worker import peer_closed
from ..settings import masked_url

log = logging.getLogger(__name__)

# How much of an error answer is read: an error object is a few hundred bytes, and the
# message a client is shown is cut far shorter (errors.relayed_message).
ERROR_BODY_BYTES = 64 * 1024


class Upstream:
    def __init__(self, settings):
        self.settings = settings
        self.adapter = _Adapter(pool_connections=4, pool_maxsize=settings.pool_size, max_retries=0)
        # requests' own form of (connect, read): a tuple would be made into one on every call.
        self.timeout = urllib3.Timeout(connect=settings.connect_timeout, read=settings.read_timeout)

    def request(self, method, url, headers, body=None, stream=False, retries=None, held=None, client=None, sign=None):
        """Send and return a 2xx requests.Response, or raise BridgeError; the access record learns both.

        `retries` (BRIDGE_RETRIES by default) bounds the retries of this URL; a caller with
        another deployment to try instead passes 0 and moves on when Unanswered is raised.
        `held` names the credential in `headers` when it is the bridge's own, not the client's
        (auth.held_credential): a 401/403 for it is the operator's to fix. `client` is the
        client's socket, watched until the answer begins (ClientLeft). `sign(method, url,
        headers, body bytes)` gives the headers with a cloud deployment's credential, made for
        the exact bytes sent (bedrock.py, vertex.py).
        """
        record = observability.current()
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            record.upstream_model = body["model"]
        try:
            retries = self.settings.retries if retries is None else retries
            response = self._send(method, url, headers, body, stream, retries, held, client, sign)
        except ClientLeft:
            record.error = "client_closed"  # the access line's outcome, as for a stream the client left
            raise
        except BridgeError as error:
            record.upstream_failed(error)
            raise
        record.upstream_status = response.status_code
        return response

    def _send(self, method, url, headers, body, stream, retries, held, client, sign):
        data = json_codec.dumps(body) if body is not None else None
        if sign is not None:
            try:
                headers = sign(method, url, headers, data)
            except BridgeError as error:  # its credentials: nothing was sent, another deployment may answer
                raise Unanswered(error.kind, error.message, status=error.status) from None
        prepared = _prepare(method, url, headers, data)
        attempt = 0
        while True:
            if client is not None and peer_closed(client):  # while it waited for a slot, Redis, a retry
                raise ClientLeft()
            sent = time.monotonic()
            try:
                with _watching(client):
                    response = self.adapter.send(prepared, stream=stream, timeout=self.timeout)
                break
            except requests.RequestException as exc:
                if _left_meanwhile(exc):
                    raise ClientLeft() from None
                error = transport_error(exc)
                if not _before_any_answer(exc, time.monotonic() - sent, self.settings):
                    raise error from None
                if attempt >= retries:
                    raise Unanswered(error.kind, error.message, status=error.status) from None
            wait = min(self.settings.retry_backoff * (2**attempt), self.settings.retry_max_wait)
            log.info(
                "upstream %s failed (%s); retry %d in %.2fs", masked_url(url), escaped(error.message), attempt + 1, wait
            )
            time.sleep(wait)
            attempt += 1
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # The bridge asks for identity; inflating what it did not ask for is how a small
            # answer (a gzip bomb) becomes gigabytes in a worker.
            response.close()
            raise BridgeError(
                "api_error",
                f"upstream answered with content-encoding {encoding[:40]!r}, which the "
                "bridge did not ask for (it asks for identity)",
                status=502,
                upstream_status=response.status_code,
            )
        if response.status_code in (401, 403) and held is not None:
            raise refused_credentials(response, url, held)
        if response.status_code >= 300:
            raise answer_error(response)
        if not stream:
            # Read now, so a body that breaks is reported here.
            limit = self.settings.max_upstream_body_bytes
            if _read_at_most(response, limit) is None:
                raise BridgeError(
                    "api_error",
                    f"upstream answer is larger than {limit} bytes (BRIDGE_MAX_UPSTREAM_BODY_BYTES)",
                    status=502,
                    upstream_status=response.status_code,
                )
        return response


def _read_at_most(response, limit):
    """The body, kept as response.content, or None when it is longer than `limit` bytes.

    A body whose Content-Length is over the limit is not read at all; one that passes the
    limit is read no further. Either way its connection is closed, not given back to the pool
    with the rest of the body still coming.
    """
    try:
        declared = int(response.headers.get("content-length", ""))
    except ValueError:
        declared = None
    data = None
    if declared is None or declared <= limit:
        try:
            data = response.raw.read(limit + 1)
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            response.close()
            raise transport_error(exc) from None
    if data is None or len(data) > limit:
        response.close()
        return None
    if declared is not None and len(data) < declared:
        # A read for more than the body stops at the end of the connection: a body shorter than
        # it said it was is cut, however complete its JSON may look.
        response.close()
        raise transport_error(urllib3.exceptions.IncompleteRead(len(data), declared - len(data)))
    # What response.content reads into (the connection went back to the pool at the body's end).
    response._content, response._content_consumed = data, True
    return data


class Unanswered(BridgeError):
    """A transport failure that left the upstream no chance to begin an answer (see
    _before_any_answer): the same request may go to another deployment."""


class ClientLeft(BridgeError):
    """The client closed its connection before the upstream's answer began: the upstream call
    was closed (or never sent), and goes neither to another deployment nor to the same again."""

    def __init__(self):
        super().__init__("api_error", "the client closed its connection before the upstream answered", status=499)


class _Departed(OSError):
    """Raised inside urllib3 when the client leaves during the wait: urllib3 closes the
    upstream connection, as for any failed read, and reports it wrapped (_left_meanwhile)."""


class _Watched(threading.local):
    """The client socket the calling thread's upstream call watches (_watching), for its
    connection; None by default, so that reading it never raises and swallows an AttributeError."""

    client = None


_watched = _Watched()


@contextlib.contextmanager
def _watching(client):
    _watched.client = client
    try:
        yield
    finally:
        _watched.client = None


def _wait_for_answer(upstream, client, timeout):
    """Wait until the upstream socket is readable (the answer's head, or its end), as a blocking
    read of it would: in poll(), with the client's socket, raising _Departed if the client leaves
    first and socket.timeout (urllib3's read timeout) after `timeout` seconds of neither."""
    if getattr(upstream, "pending", None) is not None and upstream.pending():  # TLS bytes decrypted already
        return
    poller = select.poll()
    poller.register(upstream, select.POLLIN)
    poller.register(client, select.POLLRDHUP)  # as worker.peer_closed; hang-ups and errors always count
    ready = poller.poll(timeout * 1000 if isinstance(timeout, (int, float)) else None)
    if not ready:
        raise TimeoutError("timed out")
    if all(fd != upstream.fileno() for fd, _ in ready):
        raise _Departed()


def _left_meanwhile(exc):
    """Whether requests' exception is the client leaving during the wait: urllib3 reports the
    _Departed it met in a read as a ProtocolError, which requests wraps in a ConnectionError."""
    return _aborted_by(exc, _Departed)


def _aborted_by(exc, error):
    """Whether requests' exception is urllib3's ProtocolError around an `error` met mid-call."""
    cause = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
    return isinstance(cause, urllib3.exceptions.ProtocolError) and isinstance(cause.args[-1], error)


def _before_any_answer(exc, waited, settings):
    """Whether a failed send left the upstream no chance to begin an answer: worth one more try.

    A reset counts only when it came within the connect timeout of the send: a pooled
    connection the upstream had closed is reset at once, while a non-streamed answer's status
    line comes only after the whole generation, so a reset minutes later (a NAT or load
    balancer dropping an idle connection) may follow a generation the upstream ran and billed.

    requests reports a refused connection, a failed lookup or a connect timeout as a
    MaxRetryError around a NewConnectionError (a connect timeout as ConnectTimeout), and a
    connection the peer closed or reset before the status line as a ProtocolError around
    ConnectionResetError (RemoteDisconnected is one) or BrokenPipeError.
    """
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError) or not exc.args:
        return False
    cause = exc.args[0]
    if isinstance(cause, urllib3.exceptions.MaxRetryError):
        return isinstance(cause.reason, urllib3.exceptions.NewConnectionError)
    if isinstance(cause, urllib3.exceptions.ProtocolError) and cause.args:
        reset = isinstance(cause.args[-1], (ConnectionResetError, BrokenPipeError))
        return reset and waited <= settings.connect_timeout
    return False


class _Adapter(HTTPAdapter):
    """HTTPAdapter less what a client without proxies or cookies does on every call, and with
    connections that watch the calling thread's client (_Watching)."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        self._pools = {}  # (scheme and host, verify, cert): the pool get_connection_with_tls_context found

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
        """HTTPAdapter's pool for the request's host, found once per host and kept: finding it parses
        the URL twice and builds the pool's key, which cost more than the rest of a call's sending,
        and the pool manager keeps only pool_connections pools, dropping a host's pool (and its
        keep-alive connections) when more hosts are called. The hosts are the settings' few."""
        key = (_origin(request.url), verify, cert)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = super().get_connection_with_tls_context(request, verify, proxies, cert)
        return pool

    def request_url(self, request, proxies):
        """The path, as HTTPAdapter gives it for a request that goes through no proxy, without
        parsing the URL twice more to find out that it does not."""
        return request.path_url

    def build_response(self, req, resp):
        """HTTPAdapter's Response less the cookie jar (_Answer) and the text encoding (the bridge
        reads bytes)."""
        response = _Answer()
        response.status_code = resp.status
        response.headers = CaseInsensitiveDict(resp.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = req.url
        response.request = req
        response.connection = self
        return response


class _Answer(requests.Response):
    """requests' Response made without what its __init__ makes for every answer and the bridge
    never reads, most of what making one costs: a cookie jar (an upstream's cookies are nobody's
    business here; `cookies` is an empty jar made when asked) and an empty header dict (the
    adapter sets the answer's)."""

    def __init__(self):
        self._content = False
        self._content_consumed = False
        self._next = None
        self.encoding = None
        self.history = []
        self.elapsed = _NO_TIME

    @property
    def cookies(self):
        return requests.cookies.RequestsCookieJar()


_NO_TIME = datetime.timedelta(0)


class _Watching:
    """urllib3's connection, whose wait for the answer's head watches the calling thread's client
    (_watching) when it has one, and which sends a small body with its head. Written against
    urllib3 2: its pool's ConnectionCls; its connection's request(), which sends the head with
    one send() and a bytes body with one more, and getresponse(), which reads the status line
    from `sock` with `timeout`."""

    _held = None  # in request(): b"" until the head comes to send(), then the head until the body does

    def request(self, method, url, body=None, headers=None, **options):
        self._held = b"" if isinstance(body, bytes) and len(body) <= JOINED_BODY else None
        try:
            super().request(method, url, body, headers, **options)
            held = self._held
        finally:
            self._held = None
        if held:  # no body came to carry it (an empty one sends nothing)
            super().send(held)

    def send(self, data):
        held = self._held
        if held is not None:
            if not held:
                self._held = data
                return
            data, self._held = held + data, None
        super().send(data)

    def getresponse(self):
        client = _watched.client
        if client is not None:
            _wait_for_answer(self.sock, client, self.timeout)
        return super().getresponse()


class _HTTPConnection(_Watching, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_Watching, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


# User-Agent, Accept, Accept-Encoding, Connection: what a Session would add.
_DEFAULT_HEADERS = dict(requests.utils.default_headers())


def _prepare(method, url, headers, data):
    """The request as requests.Request.prepare() would build it for these arguments.

    The URL's part is done once per URL. The header checks are left to http.client, which
    refuses a line break in a value when it sends; none can come in through the server anyway.
    """
    prepared = requests.PreparedRequest()
    prepared.method = method
    prepared.url = _prepared_url(url)
    prepared.headers = CaseInsensitiveDict(_DEFAULT_HEADERS)
    prepared.headers.update(headers)
    if data is not None or method not in ("GET", "HEAD"):
        prepared.headers["Content-Length"] = str(len(data or b""))
    prepared.body = data
    return prepared


@functools.lru_cache(maxsize=64)
def _origin(url):
    """A prepared URL's scheme and host (with its port): which pool it goes to."""
    scheme, _, rest = url.partition("://")
    return scheme.lower(), rest.partition("/")[0].partition("?")[0]


@functools.lru_cache(maxsize=64)
def _prepared_url(url):
    """requests' form of a URL (host in IDNA, path percent-quoted): the settings fix the few there are."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return prepared.url


def transport_error(exc):
    """A requests exception, or the urllib3 one that reading a stream raises, as the 502/504
    a client should see."""
    # requests reports a read timeout inside a body as a ConnectionError around urllib3's
    if (
        isinstance(exc, requests.ConnectionError)
        and exc.args
        and isinstance(exc.args[0], urllib3.exceptions.ReadTimeoutError)
    ):
        exc = exc.args[0]
    if isinstance(exc, (requests.Timeout, urllib3.exceptions.TimeoutError)):
        return BridgeError("timeout", f"upstream did not answer in time ({type(exc).__name__})", status=504)
    if _aborted_by(exc, TimeoutError):  # urllib3 sends with the connect timeout
        return BridgeError(
            "timeout", "the upstream did not take the request in time (BRIDGE_CONNECT_TIMEOUT)", status=504
        )
    if isinstance(
        exc,
        (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError, urllib3.exceptions.IncompleteRead),
    ):
        return BridgeError(
            "api_error", f"the upstream closed the connection mid-response ({type(exc).__name__})", status=502
        )
    malformed = _malformed_head(exc)
    if malformed:
        return BridgeError("api_error", f"the upstream's answer was malformed: {malformed}", status=502)
    if isinstance(exc, requests.ConnectionError):
        return BridgeError("api_error", "could not connect to the upstream: " + _reason(exc), status=502)
    return BridgeError("api_error", f"upstream request failed: {type(exc).__name__}", status=502)


def _malformed_head(exc):
    """What was wrong with a status line or headers http.client refused, or None.

    requests reports those as a ConnectionError around urllib3's ProtocolError, like a refused
    connection; they are an answer, though, and a broken one. RemoteDisconnected is a
    BadStatusLine too, but it means the connection closed before any answer.
    """
    cause = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
    cause = cause.args[-1] if isinstance(cause, urllib3.exceptions.ProtocolError) and cause.args else None
    if not isinstance(cause, http.client.HTTPException) or isinstance(cause, ConnectionError):
        return None
    if isinstance(cause, http.client.BadStatusLine):
        return "its status line is not HTTP/1.x"
    # http.client's own words: "got more than 100 headers", "got more than 65536 bytes when reading header line"
    return escaped(str(cause))


def _reason(exc):
    text = str(exc)
    for marker in (
        "Name or service not known",
        "nodename nor servname",
        "Temporary failure in name resolution",
        "Connection refused",
        "Connection reset",
        "Remote end closed",
        "timed out",
    ):
        if marker in text:
            return marker.lower()
    return type(exc).__name__


def answer_error(response):
    """An upstream 3xx/4xx/5xx answer as a BridgeError that keeps its message, its own error
    object and its headers (the client's SDK retries by them)."""
    status = response.status_code
    if status < 400:
        response.close()
        # Following it would send the request, and a held key, wherever the answer says.
        return BridgeError(
            "api_error",
            f"upstream answered HTTP {status}, a redirect to "
            f"{response.headers.get('location', 'nowhere')!r}, which the bridge does not "
            "follow: check the upstream base URL setting",
            status=502,
            upstream_status=status,
        )
    try:
        body = _read_at_most(response, ERROR_BODY_BYTES)
    except BridgeError:  # broken off: what came is not a whole JSON body
        body = b""
    finally:
        response.close()
    try:
        payload = json_codec.loads(body, fallback=_lenient) if body else None
    except (ValueError, RecursionError):
        payload = None
    message = code = param = None
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]  # Vertex AI: [{"error": {"code", "message", "status"}}]
    inner = payload.get("error") if isinstance(payload, dict) else None
    if inner is None and isinstance(payload, dict) and isinstance(payload.get("message"), str):
        # Amazon Bedrock: {"message"}, its type in a header
        inner = {"message": payload["message"], "type": response.headers.get("x-amzn-errortype", "").split(":")[0]}
    if isinstance(inner, str) and inner:
        inner = {"message": inner}  # llama.cpp's and LM Studio's own servers, some gateways
    if isinstance(inner, dict):
        # OpenAI: {"error": {"message", "type", "param", "code"}}
        # Anthropic: {"type": "error", "error": {"type", "message"}}
        message = inner.get("message")
        code = inner.get("code") if isinstance(inner.get("code"), str) else None
        param = inner.get("param") if isinstance(inner.get("param"), str) else None
    if body is None:
        message = f"upstream answered HTTP {status} with an error body larger than {ERROR_BODY_BYTES} bytes, not read"
    elif not isinstance(message, str) or not message:
        content_type = response.headers.get("content-type", "unknown").split(";")[0]
        message = f"upstream answered HTTP {status} with a non-JSON body ({escaped(content_type)})"
    kind = kind_for_status(status)
    return BridgeError(
        kind,
        relayed_message(message),
        status=status_for_upstream(status, kind),
        code=code,
        param=param,
        upstream_status=status,
        upstream_headers=response.headers,
        upstream_detail=inner if isinstance(inner, dict) else None,
    )


def refused_credentials(response, url, held):
    """An upstream 401/403 for the bridge's own credential (a key it holds, or none when it holds
    none): a bad gateway, never the client's 401, which would send Claude Code to log in again.
    Nothing of the upstream's message goes on: it may quote the key, masked or not. The SDKs
    retry a 502 unless told not to, and a refused key stays refused until the operator acts."""
    response.close()
    status = response.status_code
    log.warning(
        "upstream %s refused the bridge's credentials (HTTP %d) on request %s: check %s",
        masked_url(url),
        status,
        observability.current().request_id,
        held,
    )
    return BridgeError(
        "api_error",
        f"the bridge's upstream credentials were refused (HTTP {status} from the upstream); "
        "the bridge's operator must check its upstream API key",
        status=502,
        upstream_status=status,
        upstream_headers=CaseInsensitiveDict({"x-should-retry": "false"}),
    )


def _lenient(raw):
    """What orjson refused, read as requests' response.json() did: bytes that are not UTF-8
    (a local server cutting a character at a token boundary) become U+FFFD, as in a stream."""
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        return json.loads(raw.decode("utf-8", "replace"))


def read_json(response):
    """The JSON body of a 2xx non-streamed answer, or a 502 saying why there is none; the access
    record hears its usage as the upstream reported it."""
    try:
        payload = json_codec.loads(response.content, fallback=_lenient)
    except ValueError:
        content_type = response.headers.get("content-type", "unknown").split(";")[0]
        raise BridgeError(
            "api_error",
            f"upstream answered HTTP {response.status_code} with a body that is not JSON ({content_type})",
            status=502,
        ) from None
    except requests.RequestException as exc:
        raise transport_error(exc) from None
    observability.current().heard(payload)
    return payload
