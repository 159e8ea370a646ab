"""What the test modules share, so that none of them imports another.

Recorded fixtures are named by their path under tests/fixtures ("anthropic/text.json"),
as `fake_upstream.fixture` names them.
"""
import json

from bridge.chat_to_messages.request import Context as ChatToMessagesContext
from bridge.messages_to_chat.request import Context as MessagesToChatContext
from tests.fake_upstream import FIXTURES

# -- recorded fixtures ----------------------------------------------------------------------------

def recorded(name):
    """A recorded JSON body."""
    return json.loads((FIXTURES / name).read_text())


# -- translator contexts ----------------------------------------------------------------------------

def chat_to_messages_context(**overrides):
    """What the chat_to_messages translators know of a plain request for gpt-4o."""
    return ChatToMessagesContext(**{"stream": False, "model": "gpt-4o", "created": 1700000000, **overrides})


def messages_to_chat_context(**overrides):
    """What the messages_to_chat translators know of a plain request, with an input estimate of 42."""
    return MessagesToChatContext(**{"model": "claude-sonnet-4-5", "stream": False, "dropped": [],
                                    "tool_names": {}, "stop_sequences": (), "input_tokens": 42, **overrides})
