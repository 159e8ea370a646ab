"""Amazon Bedrock and Google Vertex AI played on loopback, over tests/fake_upstream.py's server.

FakeBedrock checks each request's AWS Signature V4 with botocore's signer, from the test's own
credentials, and refuses a wrong one as Bedrock does (403 InvalidSignatureException); it
answers a queued Anthropic stream (a Reply of SSE events: fixture(...), messages_stream(...))
in AWS event-stream framing, each event in a `chunk` frame, built as the format defines it
(prelude, headers, payload, CRC32s; botocore's parser checks them). FakeVertex takes only a
bearer token its FakeTokenEndpoint issued and that has not expired; the token endpoint checks
the service account's JWT with its public key and issues tokens of a lifetime the test sets,
so google-auth's own flow runs, refresh included.
"""

import base64
import hmac
import itertools
import json
import re
import time
import urllib.parse

from bench.clouds import EVENTSTREAM, frame
from tests.fake_upstream import FakeUpstream, Reply, json_reply

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = "AKIDEXAMPLEBRIDGE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "session-tok"
REGION = "us-east-1"
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/bedrock/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def chunk(event):
    """A `chunk` frame carrying one Anthropic event (a dict), base64 in its `bytes`."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    payload = json.dumps({"bytes": data, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"}).encode()
    return frame({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, payload)


def exception(name, message):
    """An exception frame, as Bedrock ends a stream that failed."""
    headers = {":exception-type": name, ":content-type": "application/json", ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode())


def sse_data(event):
    """The JSON of one SSE event's bytes (its data lines)."""
    lines = event.decode().splitlines()
    return json.loads("\n".join(line[6:] for line in lines if line.startswith("data: ")))


def as_eventstream(reply, then=()):
    """A Reply of SSE events as Bedrock writes it: each event a chunk frame, then the frames `then`."""
    frames = [chunk(sse_data(event)) for event in reply.events if sse_data(event).get("type") != "ping"]
    return Reply(headers={"content-type": EVENTSTREAM}, events=[*frames, *then])


def bedrock_error(status, kind, message):
    """An HTTP error as Bedrock answers one: {"message"}, its type in x-amzn-ErrorType."""
    return json_reply({"message": message}, status, {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/"})


class FakeBedrock:
    """bedrock-runtime on loopback: `requests`, each with `.raw`; `reply()` queues answers."""

    def __init__(self, access_key=ACCESS_KEY, secret_key=SECRET_KEY, token=SESSION_TOKEN, region=REGION):
        self.credentials = (access_key, secret_key, token)
        self.betas = None  # the beta flags the model takes (None: any); another is a 400, as Bedrock's
        self.region = region
        self.server = FakeUpstream()
        self.server.default = self._answer
        self.url = self.server.url
        self.requests = self.server.requests
        self.default = None  # a function of the Recorded request giving a Reply, once the queue is empty
        self._queue = []

    def reply(self, *replies):
        self._queue.extend(replies)

    def reset(self):
        self.server.reset()
        self.server.default = self._answer
        self.default = self.betas = None
        self._queue.clear()

    def close(self):
        self.server.close()

    def _answer(self, recorded):
        refusal = self.refusal(recorded)
        if refusal:
            return bedrock_error(403, "InvalidSignatureException", refusal)
        unknown = set((recorded.body or {}).get("anthropic_beta", ())) - set(self.betas or ())
        if self.betas is not None and isinstance(recorded.body, dict) and unknown:
            return bedrock_error(400, "ValidationException", "invalid beta flag")
        if self._queue:
            reply = self._queue.pop(0)
        elif self.default is not None:
            reply = self.default(recorded)
        else:
            reply = bedrock_error(500, "InternalServerException", "none queued")
        if recorded.path.endswith("/invoke-with-response-stream") and reply.events and reply.status == 200:
            if not reply.headers.get("content-type", "").startswith(EVENTSTREAM):
                return as_eventstream(reply)
        return reply

    def refusal(self, recorded):
        """Why the request's signature is not this fake's credentials' over its bytes, or None."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        match = _AUTHORIZATION.match(recorded.headers.get("authorization", ""))
        access_key, secret_key, token = self.credentials
        if not match or match["key"] != access_key or match["region"] != self.region:
            return "The security token included in the request is invalid."
        signed = match["signed"].split(";")
        if token and ("x-amz-security-token" not in signed or recorded.headers["x-amz-security-token"] != token):
            return "The security token included in the request is invalid."
        request = AWSRequest(
            method=recorded.method,
            url=f"http://{recorded.headers['host']}{recorded.path}",
            headers={name: recorded.headers.get(name, "") for name in signed},
            data=recorded.raw,
        )
        request.context["timestamp"] = recorded.headers.get("x-amz-date", "")
        signer = SigV4Auth(Credentials(access_key, secret_key, token), "bedrock", self.region)
        expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        if not hmac.compare_digest(expected, match["signature"]):
            return (
                "The request signature we calculated does not match the signature you provided. Check your "
                "AWS Secret Access Key and signing method."
            )
        return None


class FakeTokenEndpoint:
    """Google's OAuth token endpoint for a service account: a JWT-bearer grant, checked with the
    account's public key, answered with a token valid `lifetime` seconds."""

    def __init__(self, public_key, lifetime=3600):
        self.public_key = public_key
        self.lifetime = lifetime
        self.issued = {}  # token -> the time.time() it expires
        self._numbers = itertools.count(1)
        self.server = FakeUpstream()
        self.server.default = self._answer
        self.url = f"{self.server.url}/token"

    def close(self):
        self.server.close()

    def _answer(self, recorded):
        form = urllib.parse.parse_qs(recorded.raw.decode())
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"] or not self._signed(
            form.get("assertion", [""])[0]
        ):
            return json_reply({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, 400)
        token = f"ya29.fake-{next(self._numbers)}"
        self.issued[token] = time.time() + self.lifetime
        return json_reply({"access_token": token, "expires_in": self.lifetime, "token_type": "Bearer"})

    def _signed(self, assertion):
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        def unb64(part):
            return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

        try:
            head, claims, signature = assertion.split(".")
            self.public_key.verify(unb64(signature), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, InvalidSignature):
            return False
        return "https://www.googleapis.com/auth/cloud-platform" in json.loads(unb64(claims)).get("scope", "")


class FakeVertex:
    """aiplatform on loopback: takes a live token of `tokens` (FakeTokenEndpoint) or answers 401;
    then the queued replies, or `answer(recorded)` once none is queued."""

    def __init__(self, tokens, answer=None):
        self.tokens = tokens
        self.answer = answer
        self.server = FakeUpstream()
        self.server.default = self._answer
        self.url = self.server.url
        self.requests = self.server.requests
        self._queue = []

    def reply(self, *replies):
        self._queue.extend(replies)

    def reset(self):
        self.server.reset()
        self.server.default = self._answer
        self._queue.clear()

    def close(self):
        self.server.close()

    def _answer(self, recorded):
        scheme, _, token = recorded.headers.get("authorization", "").partition(" ")
        if scheme != "Bearer" or self.tokens.issued.get(token, 0) <= time.time():
            return vertex_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        if self._queue:
            return self._queue.pop(0)
        return self.answer(recorded) if self.answer else vertex_error(500, "INTERNAL", "none queued")


def vertex_error(status, name, message, listed=False):
    """An error as Vertex answers one: {"error": {code, message, status}}, or that in a list."""
    body = {"error": {"code": status, "message": message, "status": name}}
    return json_reply([body] if listed else body, status)
