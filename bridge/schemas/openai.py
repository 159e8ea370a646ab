"""marshmallow schemas for OpenAI Chat Completions requests."""


def validate_chat(body):
    raise NotImplementedError
