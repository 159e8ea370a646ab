"""Recognising a context overflow in each upstream's words, and nothing else: one case per wording."""

import pytest

from bridge.protocols.overflow import find
from tests.helpers.recorded import OVERFLOWS

NOT_OVERFLOWS = {
    "output cap": {
        "message": "max_tokens is too large: 128000. This model supports at most 16384 completion "
        "tokens, whereas you provided 128000.",
        "type": "invalid_request_error",
        "code": None,
    },
    "anthropic output cap": {
        "type": "invalid_request_error",
        "message": "max_tokens: 100000 > 64000, which is the "
        "maximum allowed number of output tokens for claude-sonnet-4-20250514",
    },
    "one string too long": {
        "message": "Invalid 'messages[3].content': string too long. Expected a string with "
        "maximum length 1048576, but got a string with length 2097152 instead.",
        "code": "string_above_max_length",
    },
    "tokens per minute": {
        "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
        "Limit 30000, Used 29000, Requested 5000.",
        "code": "rate_limit_exceeded",
    },
    "anthropic body bytes": {
        "type": "request_too_large",
        "message": "Request exceeds the maximum allowed number of bytes.",
    },
    "a tool without its result": {"message": "messages.3: `tool_use` ids were found without `tool_result` blocks"},
}


@pytest.mark.parametrize("detail, expected", OVERFLOWS.values(), ids=OVERFLOWS.keys())
def test_each_wording_of_an_overflow_is_found_with_the_numbers_it_gives(detail, expected):
    assert find(detail) == expected


@pytest.mark.parametrize("detail", NOT_OVERFLOWS.values(), ids=NOT_OVERFLOWS.keys())
def test_errors_that_only_look_like_an_overflow_are_not_one(detail):
    assert find(detail) is None


@pytest.mark.parametrize("detail", [None, "prompt is too long", {"message": 7}, {}])
def test_an_error_object_of_no_known_shape_is_no_overflow(detail):
    assert find(detail) is None
