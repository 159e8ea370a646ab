"""Claude through Amazon Bedrock: an `anthropic` deployment with `"cloud": "bedrock"`.

What differs from Anthropic's own API, all of it here:
- the URL: POST /model/{model id or inference-profile ARN}/invoke, /invoke-with-response-stream
  or /count-tokens on bedrock-runtime.{region}.amazonaws.com (or the deployment's endpoint_url,
  a VPC endpoint);
- the body: no `model` nor `stream` (the path says both), `anthropic_version` bedrock-2023-05-31,
  and the client's `anthropic-beta` header values as the body's `anthropic_beta` list (only
  those of the deployment's `betas`, when it names them: Bedrock refuses a whole call for one
  flag it does not know, and which it knows differs by model);
  count_tokens wraps that body, base64, in CountTokens' {"input": {"invokeModel": {"body"}}}
  and answers {"inputTokens"}, given back as Anthropic's {"input_tokens"};
- the credential: AWS Signature V4 by botocore's signer over the exact bytes sent, with the
  credentials of botocore's default chain (environment, shared files and `aws_profile`,
  web identity, the instance role), which refreshes them before they expire;
- a stream: application/vnd.amazon.eventstream frames, read by protocols/eventstream.py, whose
  `chunk` frames carry one Anthropic event each (base64 JSON, passed on as its bytes) and whose
  exception frames are the stream's failure, in the kinds the bridge's other upstreams fail with;
- an error answer: {"message"} with its type in x-amzn-ErrorType (upstream.answer_error reads it).

botocore is an optional extra (`pip install 'bridge[bedrock]'`), imported when a route names
a Bedrock deployment.
"""

import base64
import functools
from binascii import a2b_base64
from urllib.parse import quote

import orjson

from ..protocols import MESSAGES_COUNT_TOKENS, eventstream, json_codec
from ..protocols.errors import BridgeError
from ..protocols.sse import Event
from ..settings import SettingsError
from .cloud import Cloud, endpoint_of, require_model

ANTHROPIC_VERSION = "bedrock-2023-05-31"
_SHARED = 96  # base64 characters (72 bytes, whole groups) a chunk's event usually shares with the last
_new_event = tuple.__new__  # Event(None, data) without the namedtuple's __new__, a Python function
FIELDS = ("region", "endpoint_url", "aws_profile", "betas")
# Exception frames of a stream: the kind of error each is, and the status a
# client is told.
_EXCEPTIONS = {
    "throttlingException": ("rate_limit", 429),
    "serviceUnavailableException": ("overloaded", 529),
    "modelStreamErrorException": ("api_error", 502),
    "internalServerException": ("api_error", 500),
    "validationException": ("invalid_request", 400),
    "modelTimeoutException": ("timeout", 504),
}


def _botocore():
    try:
        import botocore.auth
        import botocore.session
    except ImportError:
        raise SettingsError("a Bedrock deployment needs botocore: pip install 'bridge[bedrock]'") from None
    return botocore


@functools.cache
def _signing():
    """(Signer, Request), made on first use (botocore is optional).

    Signer is botocore's SigV4 signer, which reads the headers to sign twice a request (the
    canonical request, then the Authorization header): botocore's answer for the same headers
    is kept. One signer a request: sign() makes it. Its signing key, four HMACs of botocore's
    from the secret, the day, the region and the service, is the same all day: botocore's
    HMACs of it are kept, the signature's own is made each time. Request is what SigV4Auth.add_auth reads
    and writes of a request: botocore's AWSRequest keeps its headers in an email message and
    prepares itself anew at each read of its body, which cost more than the signature.
    """

    class Signer(_botocore().auth.SigV4Auth):
        _signed = (None, None)  # the headers' items and botocore's headers_to_sign of them

        _keys = {}  # (key, message) -> botocore's HMAC digest, for the signing key's steps

        def _sign(self, key, msg, hex=False):
            if hex:  # the signature
                return super()._sign(key, msg, hex)
            digest = Signer._keys.get((key, msg))
            if digest is None:
                if len(Signer._keys) >= 64:  # days, regions and rotated secrets gone by
                    Signer._keys.clear()
                digest = Signer._keys[key, msg] = super()._sign(key, msg)
            return digest

        def headers_to_sign(self, request):
            items = tuple(request.headers.items())
            if self._signed[0] != items:
                self._signed = (items, super().headers_to_sign(request))
            return self._signed[1]

    class Request:
        __slots__ = ("method", "url", "headers", "body", "params", "context")

        def __init__(self, method, url, headers, body):
            self.method, self.url, self.body = method, url, body
            self.headers = _Headers(headers)
            self.params, self.context = {}, {}

    return Signer, Request


class _Headers:
    """A request's headers as add_auth reads and writes them: by their names in any case, each
    name in the case it was last set in (X-Amz-Date, Authorization)."""

    __slots__ = ("_by_lower",)

    def __init__(self, headers):
        self._by_lower = {name.lower(): (name, value) for name, value in headers.items()}

    def __contains__(self, name):
        return name.lower() in self._by_lower

    def __getitem__(self, name):
        return self._by_lower[name.lower()][1]

    def __setitem__(self, name, value):
        self._by_lower[name.lower()] = (name, value)

    def __delitem__(self, name):
        del self._by_lower[name.lower()]

    def items(self):
        return self._by_lower.values()


class Bedrock(Cloud):
    """One Bedrock deployment's region, endpoint and credentials."""

    kind = "bedrock"
    provider = "aws.bedrock"  # gen_ai.provider.name

    def __init__(self, region, endpoint_url=None, aws_profile=None, betas=None):
        super().__init__(endpoint_url or f"https://bedrock-runtime.{region}.amazonaws.com")
        self.region = region
        self.aws_profile = aws_profile
        self.betas = betas  # the beta flags passed on; None: all the client sends
        self._host = None  # botocore's Host header for base_url, once it signed

    @classmethod
    def from_entry(cls, item, where):
        """From a routes-file deployment, or SettingsError naming the field."""
        region = item.get("region")
        if not isinstance(region, str) or not region:
            raise SettingsError(f"{where}: region is required for a Bedrock deployment (us-east-1, ...)")
        endpoint = endpoint_of(item, where)
        profile = item.get("aws_profile")
        if profile is not None and (not isinstance(profile, str) or not profile):
            raise SettingsError(f"{where}: aws_profile must name a profile of the shared AWS files")
        betas = item.get("betas")
        if betas is not None and (not isinstance(betas, list) or not all(isinstance(b, str) and b for b in betas)):
            raise SettingsError(f"{where}: betas must be an array of beta flags (interleaved-thinking-2025-05-14, ...)")
        require_model(item, where, "the Bedrock model id or inference-profile ARN")
        cloud = cls(region, endpoint, profile, None if betas is None else frozenset(betas))
        cloud.credentials(where)  # found now, or the configuration is refused
        return cloud

    def describe(self):
        """Where the credentials come from, for an operator's log line: never a key."""
        profile = f", profile {self.aws_profile}" if self.aws_profile else ""
        return f"AWS credentials (botocore's default chain{profile})"

    def credentials(self, where="Bedrock"):
        """botocore's credentials (refreshable ones refresh themselves), or SettingsError."""
        if self._credentials is not None:  # found: no lock to take
            return self._credentials
        with self._lock:
            if self._credentials is None:
                botocore = _botocore()
                try:
                    found = botocore.session.Session(profile=self.aws_profile).get_credentials()
                except Exception as error:  # a profile that is not there, a broken file
                    raise SettingsError(f"{where}: AWS credentials: {type(error).__name__}: {error}") from None
                if found is None:
                    raise SettingsError(
                        f"{where}: no AWS credentials found (environment, shared files, web identity or instance role)"
                    )
                self._credentials = found
            return self._credentials

    def request(self, path, body, headers, stream):
        """(URL, body, headers) of an Anthropic call `path` (/v1/messages, its count_tokens) on Bedrock."""
        body = dict(body)
        model = quote(str(body.pop("model", "")), safe=":")
        body.pop("stream", None)
        body.setdefault("anthropic_version", ANTHROPIC_VERSION)
        betas = [beta.strip() for beta in headers.get("anthropic-beta", "").split(",") if beta.strip()]
        betas = [beta for beta in betas if self.betas is None or beta in self.betas]
        headers = {k: v for k, v in headers.items() if k not in ("anthropic-version", "anthropic-beta")}
        if betas:
            body.setdefault("anthropic_beta", betas)
        if path == MESSAGES_COUNT_TOKENS:
            # An InvokeModel body needs max_tokens, and more of them than a thinking budget.
            thinking = body.get("thinking")
            budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
            invoke = json_codec.dumps({"max_tokens": budget + 1 if isinstance(budget, int) else 1, **body})
            body = {"input": {"invokeModel": {"body": base64.b64encode(invoke).decode()}}}
            return f"{self.base_url}/model/{model}/count-tokens", body, headers
        action = "invoke-with-response-stream" if stream else "invoke"
        return f"{self.base_url}/model/{model}/{action}", body, headers

    def sign(self, method, url, headers, data):
        """`headers` and the SigV4 ones for these exact bytes."""
        try:
            frozen = self.credentials().get_frozen_credentials()
        except Exception as error:  # a refresh that failed: STS or the metadata service unreachable
            raise BridgeError(
                "api_error", f"the bridge could not get its AWS credentials: {type(error).__name__}", status=502
            ) from None
        signer, request_type = _signing()
        request = request_type(method, url, headers, data)
        # The Host header botocore signs, which requests sends: botocore's, found once (a URL parse)
        found = "host" not in request.headers and url.startswith(self.base_url + "/")
        if found:
            if self._host is None:
                bare = request_type(method, self.base_url, {}, b"")
                self._host = signer(frozen, "bedrock", self.region).headers_to_sign(bare)["host"]
            request.headers["host"] = self._host
        signer(frozen, "bedrock", self.region).add_auth(request)
        if found:
            del request.headers["host"]
        return dict(request.headers.items())

    def decoder(self, max_event_bytes):
        return EventStreamDecoder(max_event_bytes)

    def answer(self, payload):
        """A non-streamed answer in Anthropic's shape: CountTokens' {"inputTokens"} renamed."""
        if isinstance(payload, dict) and set(payload) == {"inputTokens"}:
            return {"input_tokens": payload["inputTokens"]}
        return payload

    def probe(self, model):
        """(method, URL, body) of a call that costs nothing: count the tokens of one word."""
        url, body, _ = self.request(
            MESSAGES_COUNT_TOKENS, {"model": model, "messages": [{"role": "user", "content": "hi"}]}, {}, False
        )
        return "POST", url, body


class EventStreamDecoder:
    """sse.Decoder's interface over AWS event-stream bytes: feed(bytes) -> events, close().

    A frame larger than `max_event_bytes` is refused as the SSE decoder refuses an event that
    large (protocols/eventstream.py checks each frame's lengths and CRC32s). A chunk's Anthropic
    event goes on as the bytes it came as, which the relay reads as it reads an SSE event's data.
    """

    def __init__(self, max_event_bytes):
        self._frames = eventstream.Reader(max_event_bytes)
        self._failure = None  # an exception frame's error, or a broken frame's, raised at the next feed
        self._chunk_headers = None  # the last chunk frame's headers
        # The first _SHARED base64 characters of the last chunk longer than that, and their bytes:
        # a stream's chunks mostly begin alike (a text delta's type, index and delta type).
        self._head, self._head_bytes = "\0", b""  # no chunk's base64 begins with it

    def feed(self, data):
        """The events of the frames `data` completes. A failure (an exception frame, a broken
        one) is raised once the events before it, which came in the same read, went to the client."""
        if self._failure is not None:
            raise self._failure
        if not data:
            return []
        events = []
        try:
            for headers, payload in self._frames.feed(data):
                if headers is not self._chunk_headers:  # the reader hands equal headers as the same dict
                    if headers.get(":message-type") != "event":
                        raise _exception(headers, payload)
                    if headers.get(":event-type") != "chunk":
                        continue
                    self._chunk_headers = headers
                try:  # the usual chunk, read here: a call fewer a frame
                    encoded = orjson.loads(payload)["bytes"]
                    if encoded.startswith(self._head):  # what the last chunk began with, decoded once
                        event = self._head_bytes + a2b_base64(encoded[_SHARED:], strict_mode=True)
                    else:
                        event = a2b_base64(encoded, strict_mode=True)
                        if len(encoded) > _SHARED:
                            self._head, self._head_bytes = encoded[:_SHARED], event[: _SHARED // 4 * 3]
                except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: "bytes" not a string
                    event = _chunk(payload)  # the JSON orjson refuses, or the chunk's error
                events.append(_new_event(Event, (None, event)))
        except BridgeError as error:
            if not events:
                raise
            self._failure = error
        return events

    def close(self):
        if self._failure is not None:
            raise self._failure
        self._frames.close()
        return []


def _chunk(payload):
    """The Anthropic event's JSON bytes a chunk frame's {"bytes": base64} carries."""
    try:
        try:
            member = orjson.loads(payload)["bytes"]
        except orjson.JSONDecodeError:
            member = json_codec.loads(payload)["bytes"]  # what orjson refuses, read as the relay reads it
        return a2b_base64(member, strict_mode=True)
    except (ValueError, KeyError, TypeError):  # binascii.Error and orjson's are ValueErrors
        raise BridgeError("api_error", "upstream sent a chunk frame without its base64 bytes", status=502) from None


def _exception(headers, payload):
    """The BridgeError an exception (or error) frame is."""
    name = headers.get(":exception-type") or headers.get(":error-code") or "unknown"
    try:
        payload = json_codec.loads(payload) if payload else {}
    except ValueError:
        payload = {}
    text = payload.get("message") if isinstance(payload, dict) else None
    text = text if isinstance(text, str) else headers.get(":error-message", "no message")
    return stream_error(name, text)


def stream_error(name, message):
    """A Bedrock exception (a stream's frame) as the bridge's error of the same kind."""
    kind, status = _EXCEPTIONS.get(name[:1].lower() + name[1:], ("api_error", 502))
    return BridgeError(kind, f"Bedrock {name}: {message[:1000]}", status=status, upstream_status=status)
