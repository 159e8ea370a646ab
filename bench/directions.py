"""The directions the benchmark measures: what a client sends the bridge, and what the
upstream is sent for it, per client protocol -> upstream protocol pair."""

import base64
import dataclasses
import json
import os

from . import corpus


@dataclasses.dataclass(frozen=True)
class Direction:
    name: str
    title: str
    client_path: str
    upstream_path: str
    client_body: object  # (model, stream) -> dict, in the client's protocol
    upstream_body: object  # (model, stream) -> dict, in the upstream's protocol
    client_headers: dict
    upstream_headers: dict
    client_end: bytes  # the last event of a complete stream, per protocol
    upstream_end: bytes
    upstream_route: object = None  # (model, stream) -> path, where the path names them (the clouds)

    def upstream_at(self, model, stream):
        """The upstream path the relay and the direct client are sent `model`, `stream` to."""
        return self.upstream_route(model, stream) if self.upstream_route else self.upstream_path


# The bench bridge's routes (bridge_routes): a model named `<upstream protocol>/...` goes to the
# bench upstream in that protocol; any other name to each front's default route (a Messages client
# to openai-chat, a Chat one to anthropic), as the first two directions want.
ROUTED = ("openai-responses", "openai-chat")


def _routed(upstream, make):
    """make(model, stream), its model named so that the bridge routes it to `upstream`."""
    return lambda model, stream: make(f"{upstream}/{model}", stream)


# The bench's one client key: its clients send sk-bench, and a bridge with cloud credentials in its
# routes does not start without client keys (it would be an open relay).
CLIENT_KEYS = "bench:sk-bench"


def bridge_routes(upstream_url, environ=os.environ):
    """BRIDGE_ROUTES for a bridge in front of the bench upstream at `upstream_url`, and of the
    fake clouds (bench/clouds.py) when `environ` names them (BENCH_CLOUDS)."""
    routes = [
        {
            "models": [f"{protocol}/*"],
            "deployments": [{"name": f"bench-{protocol}", "protocol": protocol, "base_url": f"{upstream_url}/v1"}],
        }
        for protocol in ROUTED
    ]
    if environ.get("BENCH_CLOUDS"):
        routes += cloud_routes(environ["BENCH_CLOUDS"], environ["BENCH_VERTEX_KEY"])
    return json.dumps({"routes": routes})


# The stream lengths the clouds' routes serve. A cloud deployment names its model, so each
# shape of answer (bench/upstream.py's model names) is a route of its own: `bedrock/bench-n50`
# goes to the Bedrock deployment of model `bench-n50`. bench.instructions uses the last two.
CLOUD_EVENTS = (5, 50, 500, 3000)
_CLOUD_FIELDS = {
    "bedrock": lambda url, key_file: {"region": "us-east-1"},
    "vertex": lambda url, key_file: {"project": "bench", "region": "us-east5", "credentials_file": key_file},
}


def cloud_routes(clouds_url, key_file):
    """Routes to the fake clouds at `clouds_url`, for each cloud and answer shape."""
    return [
        {
            "models": [f"{cloud}/bench-n{events}"],
            "deployments": [
                {
                    "name": f"bench-{cloud}-n{events}",
                    "cloud": cloud,
                    "endpoint_url": clouds_url,
                    "model": f"bench-n{events}",
                    **fields(clouds_url, key_file),
                }
            ],
        }
        for cloud, fields in _CLOUD_FIELDS.items()
        for events in CLOUD_EVENTS
    ]


_ANTHROPIC_HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
_OPENAI_HEADERS = {"authorization": "Bearer sk-bench"}
_MESSAGES = ("/v1/messages", corpus.anthropic_small, _ANTHROPIC_HEADERS, b"message_stop")
_CHAT = ("/v1/chat/completions", corpus.openai_small, _OPENAI_HEADERS, b"[DONE]")
_RESPONSES = ("/v1/responses", corpus.responses_small, _OPENAI_HEADERS, b"response.completed")


def _direction(name, title, client, upstream, route=None):
    """A Direction from its client's and its upstream's (path, body, headers, last event)."""
    client_path, client_body, client_headers, client_end = client
    upstream_path, upstream_body, upstream_headers, upstream_end = upstream
    if route:
        client_body = _routed(route, client_body)
    return Direction(
        name,
        title,
        client_path,
        upstream_path,
        client_body,
        upstream_body,
        client_headers,
        upstream_headers,
        client_end,
        upstream_end,
    )


DIRECTIONS = {
    direction.name: direction
    for direction in (
        _direction(
            "messages_to_chat", "messages → chat: Anthropic client, OpenAI-compatible upstream", _MESSAGES, _CHAT
        ),
        _direction("chat_to_messages", "chat → messages: OpenAI client, Anthropic upstream", _CHAT, _MESSAGES),
        _direction(
            "responses_passthrough",
            "responses → responses: Responses client, Responses upstream (passed through)",
            _RESPONSES,
            _RESPONSES,
            "openai-responses",
        ),
        _direction(
            "messages_to_responses",
            "messages → responses: Anthropic client, Responses upstream",
            _MESSAGES,
            _RESPONSES,
            "openai-responses",
        ),
        _direction(
            "chat_to_responses",
            "chat → responses: Chat client, Responses upstream",
            _CHAT,
            _RESPONSES,
            "openai-responses",
        ),
        _direction(
            "responses_to_chat",
            "responses → chat: Responses client, OpenAI-compatible upstream",
            _RESPONSES,
            _CHAT,
            "openai-chat",
        ),
    )
}


def _bedrock_path(model, stream):
    return f"/model/{model}/{'invoke-with-response-stream' if stream else 'invoke'}"


def _vertex_path(model, stream):
    models = "/v1/projects/bench/locations/us-east5/publishers/anthropic/models"
    return f"{models}/{model}:{'streamRawPredict' if stream else 'rawPredict'}"


def _bedrock_body(model, stream):
    """The Messages request as Bedrock takes it: the path names model and stream."""
    body = {k: v for k, v in corpus.anthropic_small(model, stream).items() if k not in ("model", "stream")}
    return {**body, "anthropic_version": "bedrock-2023-05-31"}


def _vertex_body(model, stream):
    """The Messages request as Vertex takes it: the path names the model."""
    body = {k: v for k, v in corpus.anthropic_small(model, stream).items() if k != "model"}
    return {**body, "anthropic_version": "vertex-2023-10-16"}


# A Bedrock stream's last frame carries message_stop as base64 JSON (bench/clouds.py).
_BEDROCK_END = base64.b64encode(b'{"type":"message_stop"}')

# A Messages client to Claude on a cloud (bench/clouds.py's fake, its own process): counted by
# bench.instructions; the relay is sent what the bridge sends the cloud, unsigned.
CLOUD_DIRECTIONS = {
    direction.name: direction
    for direction in (
        dataclasses.replace(
            _direction(
                "messages_to_bedrock",
                "messages → bedrock: Anthropic client, Claude on Amazon Bedrock",
                _MESSAGES,
                ("/model", _bedrock_body, {}, _BEDROCK_END),
                "bedrock",
            ),
            upstream_route=_bedrock_path,
        ),
        dataclasses.replace(
            _direction(
                "messages_to_vertex",
                "messages → vertex: Anthropic client, Claude on Google Vertex AI",
                _MESSAGES,
                ("/v1/projects", _vertex_body, {}, b"message_stop"),
                "vertex",
            ),
            upstream_route=_vertex_path,
        ),
    )
}
