"""The directions the benchmark measures: what a client sends the bridge, and what the
upstream is sent for it, per client protocol -> upstream protocol pair."""

import dataclasses

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


_ANTHROPIC_HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
_OPENAI_HEADERS = {"authorization": "Bearer sk-bench"}

DIRECTIONS = {
    "messages_to_chat": Direction(
        "messages_to_chat",
        "messages → chat: Anthropic client, OpenAI-compatible upstream",
        "/v1/messages",
        "/v1/chat/completions",
        corpus.anthropic_small,
        corpus.openai_small,
        _ANTHROPIC_HEADERS,
        _OPENAI_HEADERS,
        b"message_stop",
        b"[DONE]",
    ),
    "chat_to_messages": Direction(
        "chat_to_messages",
        "chat → messages: OpenAI client, Anthropic upstream",
        "/v1/chat/completions",
        "/v1/messages",
        corpus.openai_small,
        corpus.anthropic_small,
        _OPENAI_HEADERS,
        _ANTHROPIC_HEADERS,
        b"[DONE]",
        b"message_stop",
    ),
}
