"""marshmallow schemas for Anthropic Messages requests."""


def validate_messages(body):
    raise NotImplementedError


def validate_count_tokens(body):
    raise NotImplementedError
