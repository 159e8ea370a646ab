"""The directions the benchmark measures: what a client sends the bridge, and what the
upstream is sent for it, per client protocol -> upstream protocol pair."""

import dataclasses
import json

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


# The bench bridge's routes (bridge_routes): a model named `<upstream protocol>/...` goes to the
# bench upstream in that protocol; any other name to each front's default route (a Messages client
# to openai-chat, a Chat one to anthropic), as the first two directions want.
ROUTED = ("openai-responses", "openai-chat")


def _routed(upstream, make):
    """make(model, stream), its model named so that the bridge routes it to `upstream`."""
    return lambda model, stream: make(f"{upstream}/{model}", stream)


def bridge_routes(upstream_url):
    """BRIDGE_ROUTES for a bridge in front of the bench upstream at `upstream_url`."""
    return json.dumps(
        {
            "routes": [
                {
                    "models": [f"{protocol}/*"],
                    "deployments": [
                        {"name": f"bench-{protocol}", "protocol": protocol, "base_url": f"{upstream_url}/v1"}
                    ],
                }
                for protocol in ROUTED
            ]
        }
    )


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
