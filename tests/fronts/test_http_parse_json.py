"""bridge.fronts.http.parse_json: the lone-surrogate check skips its walk only when no surrogate can be there.

The walk over a parsed body is skipped when the raw bytes show no way in for a
surrogate; each case below is a way in that the shortcut must still catch.
"""

import json

import pytest

from bridge.fronts.http import parse_json
from bridge.protocols.errors import BridgeError


@pytest.mark.parametrize(
    "raw, where",
    [
        (b'{"messages": [{"content": "cut emoji \\ud83d"}]}', "messages.0.content"),
        (b'{"a": "\\uDE00 low half, upper-case escape"}', "a"),
        (b'{"a": "\xed\xa0\xbd UTF-8 form of a surrogate"}', "a"),
        ('{"a": "\\ud83d in a UTF-16 body"}'.encode("utf-16"), "a"),
        (b'{"\\ud83d": "in a key"}', "\ud83d"),
    ],
)
def test_a_lone_surrogate_is_a_400_naming_the_field(raw, where):
    with pytest.raises(BridgeError) as caught:
        parse_json(raw)
    assert caught.value.status == 400
    assert caught.value.param == where


@pytest.mark.parametrize("text", ["😀 paired surrogates", "한국어: U+D55C is not a surrogate", "plain"])
def test_text_without_a_lone_surrogate_parses(text):
    for raw in (json.dumps({"a": text}).encode(), json.dumps({"a": text}, ensure_ascii=False).encode()):
        assert parse_json(raw) == {"a": text}
