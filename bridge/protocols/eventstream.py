"""AWS event-stream framing (application/vnd.amazon.eventstream), Bedrock's stream, read by
the bridge itself: botocore's parser builds several objects per frame, and a frame is one
upstream event.

A frame: a prelude (total length and headers length, big-endian uint32, then the CRC32 of
those 8 bytes), the headers, the payload, and the CRC32 of all before it. A header: its name's
length (one byte), the name, a value type (one byte) and the value, typed. Every length the
upstream sends is bounded: a whole frame by the reader's `max_frame_bytes` (the bridge's
BRIDGE_MAX_EVENT_BYTES), the headers by MAX_HEADERS_BYTES, a name and a value by their
length fields' widths.
"""

import struct
import zlib

from .errors import BridgeError

# Most bytes of a frame's headers: AWS's own limit (botocore's too).
MAX_HEADERS_BYTES = 128 * 1024
_PRELUDE = struct.Struct(">III")  # total length, headers length, prelude CRC32
_UINT16 = struct.Struct(">H")
_UINT32 = struct.Struct(">I")
_SMALLEST = 16  # a frame of no headers and no payload: the prelude and the message CRC32
# The value types of a fixed size (bytes), skipped: 0 true, 1 false (no value), 2 byte, 3 short,
# 4 integer, 5 long, 8 timestamp, 9 UUID. Types 6 (bytes) and 7 (a string) have a uint16 length.
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_BYTES, _STRING = 6, 7


class Reader:
    """The frames of an event stream, from its bytes as they come: feed(bytes), close()."""

    def __init__(self, max_frame_bytes):
        self._max = max_frame_bytes
        self._rest = b""  # the bytes of the frame not complete yet
        self._last = (None, None)  # the last headers' bytes and what they say: a stream repeats them

    def feed(self, data):
        """Yield (headers, payload) for each frame `data` completes: headers a dict of the string
        headers (the others are skipped), payload bytes. A frame that breaks the rules is
        BridgeError (502), after the frames before it were yielded."""
        buffer = self._rest + data if self._rest else data
        size = len(buffer)
        start = 0
        while size - start >= 12:
            total, headers_length, prelude_crc = _PRELUDE.unpack_from(buffer, start)
            if zlib.crc32(buffer[start : start + 8]) != prelude_crc:
                raise _malformed("its prelude's CRC32 does not match")
            if total > self._max:
                raise BridgeError(
                    "api_error",
                    f"upstream sent a stream event larger than {self._max} bytes (BRIDGE_MAX_EVENT_BYTES)",
                    status=502,
                )
            if headers_length > MAX_HEADERS_BYTES:
                raise _malformed(f"headers longer than {MAX_HEADERS_BYTES} bytes")
            if total < _SMALLEST + headers_length:
                raise _malformed("a total length shorter than its headers")
            end = start + total
            if end > size:
                break
            if zlib.crc32(buffer[start : end - 4]) != _UINT32.unpack_from(buffer, end - 4)[0]:
                raise _malformed("its CRC32 does not match")
            raw = buffer[start + 12 : start + 12 + headers_length]
            if raw == self._last[0]:
                headers = self._last[1]
            else:
                headers = _headers(raw)
                self._last = (raw, headers)
            payload = buffer[start + 12 + headers_length : end - 4]
            start = end
            yield headers, payload
        self._rest = buffer[start:]

    def close(self):
        """At the stream's end: BridgeError if it ended inside a frame."""
        if self._rest:
            raise _malformed(f"the stream ended inside a frame ({len(self._rest)} bytes of it)")


def _headers(raw):
    """The string headers of a frame's header bytes `raw`; the other types skipped by their size."""
    headers = {}
    at, end = 0, len(raw)
    try:
        while at < end:
            name_end = at + 1 + raw[at]
            name = raw[at + 1 : name_end].decode()
            kind = raw[name_end]
            at = name_end + 1
            if kind == _STRING or kind == _BYTES:
                value_end = at + 2 + _UINT16.unpack_from(raw, at)[0]
                if kind == _STRING:
                    headers[name] = raw[at + 2 : value_end].decode()
                at = value_end
            elif kind in _FIXED:
                at += _FIXED[kind]
            else:
                raise _malformed(f"a header of unknown value type {kind}")
    except (IndexError, struct.error, UnicodeDecodeError):
        raise _malformed("headers cut short or not UTF-8") from None
    if at != end:
        raise _malformed("headers cut short")
    return headers


def _malformed(why):
    return BridgeError("api_error", f"upstream sent a malformed event-stream frame: {why}", status=502)
