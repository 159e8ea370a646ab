"""The reference relay: the floor of the bridge's own stack.

A minimal Flask app, served by gunicorn with the bridge's own
deploy/gunicorn.conf.py, that forwards the request body unchanged to the
same upstream (bench/upstream.py, or bench/clouds.py, unsigned) over one
shared requests.Session (`trust_env` off, a pool as large as the bridge's)
and streams the upstream bytes back as they arrive.
No validation, no translation, no keep-alive pings: whatever the bridge
costs beyond this is the cost of its own work.

Upstream base URL: BENCH_UPSTREAM (e.g. http://127.0.0.1:9000).
"""

import os

import requests
from flask import Flask, Response, request
from requests.adapters import HTTPAdapter

UPSTREAM = os.environ["BENCH_UPSTREAM"].rstrip("/")

STREAMS = ("text/event-stream", "application/vnd.amazon.eventstream")  # Bedrock's binary one

app = Flask(__name__)
session = requests.Session()
session.trust_env = False
session.mount("http://", HTTPAdapter(pool_connections=4, pool_maxsize=256, max_retries=0))


@app.post("/<path:path>")
def forward(path):
    upstream = session.post(
        f"{UPSTREAM}/{path}", data=request.get_data(), headers={"content-type": "application/json"}, stream=True
    )
    content_type = upstream.headers.get("content-type", "application/json")
    if not content_type.startswith(STREAMS):
        return Response(upstream.content, status=upstream.status_code, content_type=content_type)

    def chunks():
        try:
            while chunk := upstream.raw.read1(65536):
                yield chunk
        finally:
            upstream.close()

    return Response(chunks(), status=upstream.status_code, content_type=content_type, direct_passthrough=True)
