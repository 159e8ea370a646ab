"""Anthropic Messages request -> Chat Completions request (pure functions)."""


def to_chat_request(body, settings):
    raise NotImplementedError
