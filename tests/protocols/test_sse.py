"""The SSE decoder: every line ending, comments, multi-line data, events split across reads."""

import pytest

from bridge.protocols import sse
from bridge.protocols.errors import BridgeError


def decode_all(chunks):
    decoder = sse.Decoder()
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events + decoder.close()


def test_lf_crlf_and_cr_line_endings_decode_the_same():
    body = "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n"
    expected = [sse.Event("a", "1"), sse.Event("b", "2")]
    for ending in ("\n", "\r\n", "\r"):
        assert decode_all([body.replace("\n", ending).encode()]) == expected


def test_events_split_at_every_byte_boundary_decode_the_same():
    body = 'event: message_start\r\ndata: {"a": "\xe9\xe8"}\r\n\r\ndata: [DONE]\r\n\r\n'.encode()
    whole = decode_all([body])
    assert whole == [sse.Event("message_start", '{"a": "\xe9\xe8"}'), sse.Event(None, "[DONE]")]
    for cut in range(1, len(body)):
        assert decode_all([body[:cut], body[cut:]]) == whole


def test_comments_are_skipped_and_data_lines_join_with_newlines():
    body = b": OPENROUTER PROCESSING\n\ndata: line1\ndata: line2\n\n"
    assert decode_all([body]) == [sse.Event(None, "line1\nline2")]


def test_a_stream_without_the_final_blank_line_still_yields_its_last_event():
    assert decode_all([b"event: message_stop\ndata: {}"]) == [sse.Event("message_stop", "{}")]


def test_space_after_colon_is_optional_and_trailing_padding_kept():
    assert decode_all([b"data:x\n\ndata:  y \n\n"]) == [sse.Event(None, "x"), sse.Event(None, " y ")]


def test_encode_frames_named_and_data_only_events():
    assert sse.encode('{"type":"ping"}', event="ping") == b'event: ping\ndata: {"type":"ping"}\n\n'
    assert sse.encode("[DONE]") == b"data: [DONE]\n\n"
    assert decode_all([sse.encode("x", event="e") + sse.comment()]) == [sse.Event("e", "x")]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_any_chunking_decodes_like_the_whole_body(ending):
    """Byte by byte, and in pieces of every small size: a chunk that ends nothing is only kept."""
    body = ("event: a\ndata: 1\n\n: comment\n\nevent: b\ndata: 2\ndata: 3\n\n" * 3).replace("\n", ending).encode()
    whole = decode_all([body])
    assert len(whole) == 6
    for size in range(1, 9):
        assert decode_all([body[i : i + size] for i in range(0, len(body), size)]) == whole


@pytest.mark.parametrize(
    ("first", "blank"),
    [(first, blank) for first in ("\n", "\r\n", "\r") for blank in ("\n", "\r\n", "\r") if first + blank != "\r\n"],
)
def test_the_read_that_completes_an_event_dispatches_it(first, blank):
    """Not at the next event or the end of the body: whatever the line ends, wherever the cut."""
    body = f"data: 1{first}{blank}".encode()
    for cut in range(1, len(body)):
        decoder = sse.Decoder()
        events = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        if body.endswith(b"\r"):  # a last "\r" may be the first half of "\r\n": the next byte tells
            events += decoder.feed(b"x")
        assert events == [sse.Event(None, "1")], (body, cut)


def test_the_usual_event_is_read_without_going_line_by_line(monkeypatch):
    """[a name and] one data line: what nearly every upstream event is, read by _event alone."""

    def line_by_line(block):
        raise AssertionError(f"went line by line: {block!r}")

    monkeypatch.setattr(sse, "_event_lines", line_by_line)
    events = sse.Decoder().feed(b"event: a\ndata: 1\n\ndata: 2\n\n")
    assert events == [sse.Event("a", "1"), sse.Event(None, "2")]


def test_reads_with_nothing_in_them_do_not_hide_an_event_end():
    """The relay feeds b"" after a wait in which nothing came."""
    decoder = sse.Decoder()
    assert decoder.feed(b"data: 1\n") + decoder.feed(b"") + decoder.feed(b"") + decoder.feed(b"") == []
    assert decoder.feed(b"\n") == [sse.Event(None, "1")]


def test_an_event_larger_than_the_limit_is_an_upstream_error():
    decoder = sse.Decoder(max_event=1024)
    assert decoder.feed(b"data: " + b"x" * 1000 + b"\n\n") == [sse.Event(None, "x" * 1000)]
    decoder.feed(b"data: " + b"y" * 1000)
    with pytest.raises(BridgeError) as caught:
        decoder.feed(b"y" * 100)
    assert caught.value.status == 502 and "BRIDGE_MAX_EVENT_BYTES" in caught.value.message
