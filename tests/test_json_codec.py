"""bridge.json_codec: orjson's speed, and the json module's answers for what orjson refuses."""
import json

import pytest

from bridge import json_codec


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
    assert json_codec.dumps({"n": 2 ** 70}) == b'{"n": 1180591620717411303424}'


def test_what_neither_parser_takes_raises_the_json_modules_value_error():
    with pytest.raises(ValueError, match="Expecting value"):
        json_codec.loads(b'{"a": }')


def test_the_fallback_sees_what_orjson_refused():
    seen = []
    assert json_codec.loads(b'{"a": NaN}', fallback=lambda raw: seen.append(raw) or "fallback") == "fallback"
    assert seen == [b'{"a": NaN}']
