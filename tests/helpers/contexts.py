"""The translators' contexts, built as the fronts build them, for unit tests of a pair."""

from bridge.translate.chat_to_messages.request import Context as ChatToMessagesContext
from bridge.translate.chat_to_responses.request import Context as ChatToResponsesContext
from bridge.translate.messages_to_chat.request import Context as MessagesToChatContext
from bridge.translate.messages_to_responses.request import Context as MessagesToResponsesContext
from bridge.translate.responses_to_chat.request import Context as ResponsesToChatContext
from bridge.translate.responses_to_messages.request import Context as ResponsesToMessagesContext


def chat_to_messages_context(**overrides):
    """What the chat_to_messages translators know of a plain request for gpt-4o."""
    return ChatToMessagesContext(**{"stream": False, "model": "gpt-4o", "created": 1700000000, **overrides})


def chat_to_responses_context(**overrides):
    """What the chat_to_responses translators know of a plain request for gpt-5-codex."""
    return ChatToResponsesContext(**{"stream": False, "model": "gpt-5-codex", "created": 1700000000, **overrides})


RESPONSE_ID = "resp_" + "0123456789abcdef" * 2
# What a Response repeats of a request, as the request translator fills Context.echo for a plain request.
RESPONSES_ECHO = {
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_output_tokens": None,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {"format": {"type": "text"}},
    "metadata": {},
    "store": False,
    "truncation": "disabled",
    "user": None,
}


def responses_to_messages_context(**overrides):
    """What the responses_to_messages translators know of a plain request for gpt-5.5."""
    values = {
        "model": "gpt-5.5",
        "stream": False,
        "response_id": RESPONSE_ID,
        "created_at": 1700000000,
        "echo": RESPONSES_ECHO,
        "tools": {},
    }
    return ResponsesToMessagesContext(**{**values, **overrides})


def responses_to_chat_context(**overrides):
    """What the responses_to_chat translators know of a plain request for qwen3, with an input estimate of 42."""
    values = {
        "model": "qwen3",
        "stream": False,
        "response_id": RESPONSE_ID,
        "created_at": 1700000000,
        "echo": RESPONSES_ECHO,
        "tools": {},
        "input_tokens": 42,
    }
    return ResponsesToChatContext(**{**values, **overrides})


def messages_to_chat_context(**overrides):
    """What the messages_to_chat translators know of a plain request, with an input estimate of 42."""
    return MessagesToChatContext(
        **{
            "model": "claude-sonnet-4-5",
            "stream": False,
            "dropped": [],
            "tool_names": {},
            "stop_sequences": (),
            "input_tokens": 42,
            **overrides,
        }
    )


def messages_to_responses_context(**overrides):
    """What the messages_to_responses translators know of a plain request, with an input estimate of 42."""
    values = {"model": "claude-sonnet-4-5", "stream": False, "dropped": [], "tool_names": {}, "input_tokens": 42}
    return MessagesToResponsesContext(**{**values, **overrides})


def translated(translator, events, eof=True):
    """What a stream translator makes of (event name, payload) pairs, and of the end of the body."""
    out = [item for name, payload in events for item in translator.feed(name, payload)]
    return out + (translator.finish() if eof else [])
