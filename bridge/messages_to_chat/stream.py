"""Chat Completions chunks -> Anthropic Messages stream events (a small state machine)."""


class StreamTranslator:
    def __init__(self, context):
        raise NotImplementedError
