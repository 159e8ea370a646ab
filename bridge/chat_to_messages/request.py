"""Chat Completions request -> Anthropic Messages request (pure functions)."""


def to_messages_request(body, settings):
    raise NotImplementedError
