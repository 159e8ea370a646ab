"""Claude on Amazon Bedrock and on Google Vertex AI, faked for the benchmark: one asyncio process.

It answers what bench/upstream.py answers a Messages client, the same message and the same
stream events, the way each cloud sends them:
- Bedrock: POST /model/{model}/invoke answers the message; /invoke-with-response-stream
  answers application/vnd.amazon.eventstream, each Anthropic event (compact JSON, base64) in
  the `bytes` of a `chunk` frame (prelude, headers, payload, CRC32s: botocore's parser checks
  them), one frame per HTTP chunk.
- Vertex: POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}
  :rawPredict answers the message, :streamRawPredict the Anthropic server-sent events; POST
  /token is the service account's token endpoint and answers a token valid for an hour.
The model in the path shapes the answer as bench/upstream.py's model names do (`bench-n50`:
50 text events). Unpaced streams only. No credential is checked: the bridge's signing (SigV4,
the token) is its own cost, and the reference relay, which signs nothing, gets the same answers.

start() runs it and gives the environment a bridge in front of it needs (BENCH_CLOUDS, which
bench/directions.py's bridge_routes reads; AWS credentials; a service-account key file).
Run alone: python -m bench.clouds PORT
"""

import asyncio
import base64
import binascii
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import urllib.parse

from .upstream import ANTHROPIC_BODY, AnthropicStream, chunked, listen, response_head, unpaced_body

EVENTSTREAM = "application/vnd.amazon.eventstream"
_SHAPE = re.compile(r"-n(\d+)")
_MESSAGE = json.dumps(ANTHROPIC_BODY).encode()
_TOKEN = json.dumps({"access_token": "ya29.bench", "expires_in": 3600, "token_type": "Bearer"}).encode()
_STREAM = AnthropicStream()


def frame(headers, payload):
    """One event-stream message of string headers (type 7) and `payload` (framed)."""
    encoded = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in headers.items()
    )
    return framed(encoded, payload)


def framed(encoded_headers, payload):
    """One event-stream message of headers already encoded: prelude (total and headers lengths,
    their CRC32), the headers, the payload, and the CRC32 of all before it."""
    prelude = struct.pack(">II", 12 + len(encoded_headers) + len(payload) + 4, len(encoded_headers))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded_headers + payload
    return message + struct.pack(">I", binascii.crc32(message))


def chunk(event_json):
    """A `chunk` frame carrying one Anthropic event's JSON, base64 in its `bytes`."""
    payload = json.dumps({"bytes": base64.b64encode(event_json.encode()).decode()}).encode()
    return frame({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, payload)


def _events(sse):
    """The JSON of each server-sent event in `sse`."""
    return [line[6:] for line in sse.splitlines() if line.startswith("data: ")]


_eventstream_cache = {}


def eventstream_body(events):
    """A whole Bedrock stream of `events` text events as one chunked body, built once per length."""
    if events not in _eventstream_cache:
        texts = [_STREAM.head] + [_STREAM.event(" token", number) for number in range(events)]
        texts.append(_STREAM.end(" token" * events, events))
        frames = [chunk(event) for text in texts for event in _events(text)]
        _eventstream_cache[events] = b"".join(chunked(f) for f in frames) + b"0\r\n\r\n"
    return _eventstream_cache[events]


def _answer(path):
    """(content type, body, chunked) for a request to `path`, or None for a path no cloud has."""
    route = urllib.parse.unquote(path.split("?")[0])
    if route == "/token":
        return "application/json", _TOKEN, False
    if route.startswith("/model/"):  # Bedrock
        model, _, action = route[len("/model/") :].rpartition("/")
        stream = action == "invoke-with-response-stream"
    elif route.startswith("/v1/projects/") and "/publishers/anthropic/models/" in route:  # Vertex
        model, _, action = route.rpartition("/")[2].partition(":")
        stream = action == "streamRawPredict"
    else:
        return None
    if not stream:
        return "application/json", _MESSAGE, False
    shape = _SHAPE.search(model)
    events = int(shape.group(1)) if shape else 50
    if route.startswith("/model/"):
        return EVENTSTREAM, eventstream_body(events), True
    return "text/event-stream", unpaced_body("anthropic", events), True


async def _reply(writer, path, _body):
    answer = _answer(path)
    if answer is None:
        writer.write(response_head("404 Not Found", "application/json", 2) + b"{}")
    else:
        content_type, body, is_chunked = answer
        writer.write(response_head("200 OK", content_type, None if is_chunked else len(body)) + body)


class Clouds:
    """The fake in its own process, and `env`: what a bridge in front of it needs."""

    def __init__(self):
        from . import servers

        self._scratch = tempfile.mkdtemp(prefix="bench-clouds-")
        key_file = os.path.join(self._scratch, "service-account.json")
        self.server = servers.Server(
            "clouds",
            [sys.executable, "-m", "bench.clouds", str(port := servers.free_port())],
            dict(os.environ),
            port,
        )
        self.url = self.server.url
        service_account(key_file, f"{self.url}/token")
        self.env = {
            "BENCH_CLOUDS": self.url,
            "BENCH_VERTEX_KEY": key_file,
            # botocore's chain finds these first; no file nor instance role of the machine's
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLEBENCH",
            "AWS_SECRET_ACCESS_KEY": "bench-secret-access-key",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.path.join(self._scratch, "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self._scratch, "aws-credentials"),
        }

    def stop(self):
        self.server.stop()
        shutil.rmtree(self._scratch, ignore_errors=True)


def start():
    return Clouds()


def service_account(path, token_uri):
    """Write a service-account key file whose token_uri is the fake's (this one, or the tests'
    FakeTokenEndpoint); its public key, with which a fake can check the tokens asked for."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "bench",
        "private_key_id": "bench-key",
        "private_key": pem,
        "client_email": "bench@bench.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    with open(path, "w") as fh:
        json.dump(info, fh)
    return key.public_key()


if __name__ == "__main__":
    asyncio.run(listen(int(sys.argv[1]), _reply, "bench clouds"))
