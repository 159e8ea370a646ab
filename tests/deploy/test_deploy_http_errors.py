"""What gunicorn answers itself, before the app sees a request (a request line or a header it
cannot parse, an `Expect` it cannot meet), is a JSON error like every other (bridge/serve/worker.py)."""

import socket

import pytest
import requests

from tests.helpers.servers import gunicorn, parsed


@pytest.fixture(scope="module")
def server(tmp_path_factory, fake):
    started = gunicorn(tmp_path_factory.mktemp("gunicorn"), fake, BRIDGE_WORKERS="1")
    yield started
    started.stop()


def exchange(server, head):
    """Send a raw request head; what the bridge answered before closing the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "head, status, message",
    [
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\nExpect: 100-continue-x\r\nContent-Length: 2\r\n\r\n{}",
            417,
            "Unable to comply with expectation: '100-continue-x'",
        ),
        (b"GARBAGE\r\n\r\n", 400, "Invalid HTTP request line: 'GARBAGE'"),
        (
            b"GET /v1/models HTTP/1.1\r\nHost: bridge\r\nBad Header: x\r\n\r\n",
            400,
            "Invalid HTTP header name: 'Bad Header'",
        ),
    ],
    ids=["417 unmet expectation", "400 request line", "400 header name"],
)
def test_gunicorns_own_refusals_are_openai_errors_when_the_path_says_nothing_else(server, head, status, message):
    answered, headers, body = parsed(exchange(server, head))
    assert (answered, headers["content-type"], headers["connection"]) == (status, "application/json", "close")
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"].startswith(message)
    assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 200


def test_a_header_gunicorn_refuses_on_the_messages_path_is_an_anthropic_error(server):
    head = b"POST /v1/messages HTTP/1.1\r\nHost: bridge\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"
    status, _, body = parsed(exchange(server, head))
    assert status == 400 and body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "Invalid HTTP Header: 'CONTENT-LENGTH'"},
    }
