"""bridge.protocols.json_codec: orjson's speed, and the json module's answers for what orjson refuses."""

import json

import jiter
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.protocols import json_codec


def test_values_round_trip_as_compact_utf8():
    value = {"text": "héllo 数据 😀", "n": [1, -2.5, None, True], "nested": {"a": {}}}
    assert json_codec.dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert json_codec.loads(json_codec.dumps(value)) == value
    assert json_codec.dumps_text(value) == json_codec.dumps(value).decode()


def test_a_lone_surrogate_is_read_and_written_back_as_the_escape_it_came_as():
    value = json_codec.loads('{"t": "cut \\ud83d"}')
    assert value == {"t": "cut \ud83d"}
    assert json_codec.dumps(value) == b'{"t": "cut \\ud83d"}'
    assert json_codec.dumps_text(value) == '{"t": "cut \\ud83d"}'  # valid Unicode text, same JSON value


def test_integers_beyond_64_bits_are_written_exactly():
    assert json_codec.dumps({"n": 2**70}) == b'{"n": 1180591620717411303424}'


def test_what_neither_parser_takes_raises_the_json_modules_value_error():
    with pytest.raises(ValueError, match="Expecting value"):
        json_codec.loads(b'{"a": }')


def test_the_fallback_sees_what_orjson_refused():
    seen = []
    assert json_codec.loads(b'{"a": NaN}', fallback=lambda raw: seen.append(raw) or "fallback") == "fallback"
    assert seen == [b'{"a": NaN}']


# JSON as a model writes tool input: objects of strings (with escapes, emoji), numbers, literals, arrays.
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


@given(
    document=st.dictionaries(st.text(max_size=6), _DOCUMENTS, max_size=4),
    separators=st.sampled_from([(", ", ": "), (",", ":"), (",\n", " : ")]),
    ensure_ascii=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_a_cut_off_document_reads_as_jiters_partial_mode_the_anthropic_sdks_fold_reads_it(
    document, separators, ensure_ascii
):
    text = json.dumps(document, separators=separators, ensure_ascii=ensure_ascii)
    for end in range(1, len(text) + 1):
        expected = jiter.from_json(text[:end].encode(), partial_mode=True)
        assert json_codec.loads_partial(text[:end]) == expected, text[:end]


def test_a_finished_document_is_read_exactly_and_text_that_is_not_json_raises():
    assert json_codec.loads_partial('{"n": 123456789012345678901234567890}') == {"n": 123456789012345678901234567890}
    for text in ['{"a": 1,}', '{"a" 1', "", "nope", '{"a": "x"} trailing']:
        with pytest.raises(ValueError):
            json_codec.loads_partial(text)
