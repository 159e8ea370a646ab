"""Anthropic Messages stream events -> Chat Completions chunks (a small state machine)."""


class StreamTranslator:
    def __init__(self, context):
        raise NotImplementedError
