"""count_tokens for an upstream that has no counter of its own."""


def count_tokens(body):
    raise NotImplementedError
