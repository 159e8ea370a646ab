"""An answer of known length goes to its client in the write that carries its head
(bridge/serve/handover.py), with the bytes gunicorn itself would send in two."""

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

from bridge.serve.handover import JOINED_BODY, Answer


class _Writes:
    """A connected socket's stand-in that keeps each write."""

    def __init__(self):
        self.writes = []

    def sendall(self, data):
        self.writes.append(bytes(data))


class _Framed(wsgi.Response):
    """A Response that writes its head through framing of its own, not its socket, as gunicorn's
    HTTP/2 one does through its connection."""

    def send_headers(self):
        if not self.headers_sent:
            self.sock.sendall(b"[framed head]")
            self.headers_sent = True


def _served(body, headers, method="POST", joined=True, response_class=None):
    """The writes gunicorn's gthread makes of an app's answer: its loop over the body, then close()."""
    cfg = Config()
    request = next(RequestParser(cfg, iter([f"{method} /v1/messages HTTP/1.1\r\nHost: b\r\n\r\n".encode()]), None))
    sock = _Writes()
    response, _ = wsgi.create(request, sock, ("127.0.0.1", 1), ("127.0.0.1", 2), cfg, response_class)
    response.start_response("200 OK", headers)
    freed = []
    answer = Answer(body, lambda: freed.append(True), response) if joined else iter(body)
    for item in answer:
        response.write(item)
    response.close()
    assert freed or not joined
    return [write.replace(_date(write), b"") for write in sock.writes]


def _date(write):
    start = write.find(b"Date: ")
    return write[start : write.index(b"\r\n", start)] if start >= 0 else b"\0"


@pytest.mark.parametrize(
    ("body", "headers", "method", "writes"),
    [
        ([b'{"type":"message"}'], [("Content-Length", "18")], "POST", 1),
        ([b"x" * JOINED_BODY], [("Content-Length", str(JOINED_BODY))], "POST", 1),
        ([b"x" * (JOINED_BODY + 1)], [("Content-Length", str(JOINED_BODY + 1))], "POST", 2),  # not copied
        ([b'{"type":', b'"message"}'], [("Content-Length", "18")], "POST", 3),  # in parts: as gunicorn
        ([b"event: ping\n\n"], [("Content-Type", "text/event-stream")], "POST", 3),  # no length: chunked
        ([b'{"data":[]}'], [("Content-Length", "11")], "HEAD", 1),  # a head only
        ([], [("Content-Length", "0")], "POST", 1),
    ],
)
def test_an_answer_of_known_length_goes_out_with_its_head(body, headers, method, writes):
    ours = _served(body, headers, method)
    theirs = _served(body, headers, method, joined=False)
    assert len(ours) == writes
    assert b"".join(ours) == b"".join(theirs)


def test_a_response_that_frames_its_own_head_is_left_to_write_it():
    body, headers = [b'{"type":"message"}'], [("Content-Length", "18")]
    ours = _served(body, headers, response_class=_Framed)
    assert ours == _served(body, headers, joined=False, response_class=_Framed)
    assert ours == [b"[framed head]", b'{"type":"message"}']
