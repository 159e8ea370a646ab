"""validate_chat: what the Anthropic upstream cannot take is refused with a 400 naming the field."""

import pytest

from bridge.protocols.errors import BridgeError
from bridge.protocols.schemas.openai import validate_chat
from tests.helpers.refused import BAD_CHAT_REQUESTS, TOOL, USER, call, chat


@pytest.mark.parametrize("body, field, words", BAD_CHAT_REQUESTS.values(), ids=BAD_CHAT_REQUESTS.keys())
def test_bad_request_names_the_field(body, field, words):
    with pytest.raises(BridgeError) as caught:
        validate_chat(body)
    error = caught.value
    assert error.status == 400 and error.kind == "invalid_request"
    assert error.param == field
    assert f"{field}: " in error.message
    assert words in error.message


def test_every_bad_field_is_named_not_only_the_first():
    with pytest.raises(BridgeError) as caught:
        validate_chat(chat(n=3, logprobs=True))
    assert "n: " in caught.value.message and "logprobs: " in caught.value.message


def test_a_conversation_with_nothing_to_answer_and_an_unknown_chosen_tool_are_both_named():
    with pytest.raises(BridgeError) as caught:
        validate_chat(
            chat(
                {"role": "system", "content": "be brief"},
                tools=[TOOL],
                tool_choice={"type": "function", "function": {"name": "missing"}},
            )
        )
    assert "messages: " in caught.value.message and "tool_choice.function.name: " in caught.value.message


def test_tool_call_arguments_are_loaded_once_as_the_object_with_exact_integers():
    arguments = '{"id": 123456789012345678901234567890, "path": "a.txt"}'
    body = validate_chat(
        chat(
            USER,
            {"role": "assistant", "tool_calls": [call(arguments=arguments)]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        )
    )
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == {
        "id": 123456789012345678901234567890,
        "path": "a.txt",
    }


def test_echoed_response_message_is_accepted():
    """What the openai SDK sends when a client appends response.choices[0].message to its history."""
    echoed = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "reasoning_content": "thought",
        "parsed": None,
        "thinking_blocks": [
            {"index": 0, "type": "thinking", "thinking": "t", "signature": "sig"},
            {"index": 1, "type": "redacted_thinking", "data": "opaque"},
        ],
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": "{}", "parsed_arguments": None},
            }
        ],
    }
    body = validate_chat(chat(USER, echoed, {"role": "tool", "tool_call_id": "toolu_1", "content": "42"}))
    assert body["messages"][1]["thinking_blocks"][0] == {"type": "thinking", "thinking": "t", "signature": "sig"}


def test_harmless_defaults_are_accepted():
    validate_chat(
        chat(
            n=1,
            logprobs=False,
            modalities=["text"],
            audio=None,
            functions=None,
            stream_options={"include_usage": True},
            response_format={"type": "text"},
        )
    )


def test_unknown_top_level_fields_are_kept_for_the_translator_to_report():
    assert validate_chat(chat(verbosity="low", brand_new_param=1))["brand_new_param"] == 1
