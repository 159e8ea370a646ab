"""A client that leaves while the upstream works on its non-streamed call (an SDK that gave up,
nginx whose own client left): the bridge closes the upstream call within a second, sends the
call nowhere else, frees its thread for the next client, and logs it as the client's doing
(status 499, error client_closed), under werkzeug and under gunicorn as deployed."""

import json
import socket
import time

import openai
import pytest

from bench.processes import wait_for
from tests.fake_upstream import fixture
from tests.helpers.directions import CHAT_TO_MESSAGES, EACH, SlammingDoor
from tests.helpers.servers import Nginx, access_lines, gunicorn, metric, nginx_binary, openai_client

SILENT_FOR = 30  # seconds the upstream works on a call before it answers: longer than any test here


@pytest.fixture(scope="module")
def one_thread_gunicorn(fake, tmp_path_factory):
    """gunicorn from deploy/gunicorn.conf.py, one worker of one thread: a thread still held for a
    departed client would have the next client refused (a 503 after BRIDGE_QUEUE_TIMEOUT)."""
    server = gunicorn(
        tmp_path_factory.mktemp("gunicorn"), fake, BRIDGE_WORKERS="1", BRIDGE_THREADS="1", BRIDGE_LOG_LEVEL="INFO"
    )
    yield server
    server.stop()


def ask_and_leave(url, direction, arrived):
    """Send the direction's non-streamed call, wait until `arrived()` says the upstream has it,
    then close the connection as an SDK that gave up does: returns the moment the client left."""
    body = json.dumps(direction.body).encode()
    head = (
        f"POST {direction.path} HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as client:
        client.sendall(head + body)
        wait_for(arrived, "the call to reach the upstream")
    return time.monotonic()


def assert_closed_within_a_second(fake, left_at):
    wait_for(lambda: fake.closed_unanswered, "the fake upstream to see the bridge close the call")
    [(_, closed_at)] = fake.closed_unanswered
    assert closed_at - left_at < 1.0, "the issue's bound: closed within a second"


def assert_logged_as_left(line):
    assert (line["status"], line["error"], line["upstream_status"]) == (499, "client_closed", None), line


def slow_answer(direction):
    return fixture(f"{direction.upstream}/text.json", delay_headers=SILENT_FOR)


@EACH
def test_werkzeug_closes_a_plain_call_within_a_second_of_its_client_leaving(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_LOG_LEVEL="INFO")
    fake.reply(slow_answer(direction))
    with access_lines() as lines:
        left_at = ask_and_leave(live.url, direction, lambda: fake.requests)
        assert_closed_within_a_second(fake, left_at)
        wait_for(lambda: lines, "the access line")
    assert_logged_as_left(lines[0])
    assert len(fake.requests) == 1  # not sent again
    fake.reply(fixture(f"{direction.upstream}/text.json"))
    assert direction.ask(live.url)  # the next client is served


@EACH
def test_gunicorn_closes_a_plain_call_within_a_second_of_its_client_leaving_and_serves_the_next(
    one_thread_gunicorn, fake, direction
):
    server = one_thread_gunicorn
    fake.reply(slow_answer(direction), fixture(f"{direction.upstream}/text.json"))
    left_at = ask_and_leave(server.url, direction, lambda: fake.requests)
    assert_closed_within_a_second(fake, left_at)
    assert direction.ask(server.url)  # the one thread is free at once: not a 503
    assert len(fake.requests) == 2

    def left():
        return [line for line in server.access_lines() if line["direction"] == direction.name and line["status"] == 499]

    server.wait_for(left, "the access line of the call left")
    [line] = left()
    assert_logged_as_left(line)
    assert "Traceback" not in server.log()


@pytest.mark.slow
@pytest.mark.skipif(not nginx_binary(), reason="nginx is not installed (.ci/run installs it)")
def test_behind_nginx_an_sdk_that_gives_up_has_its_upstream_call_closed_within_a_second(
    one_thread_gunicorn, fake, tmp_path
):
    """nginx closes its connection to the bridge when its client leaves (the site leaves
    proxy_ignore_client_abort off): the bridge takes that for the client leaving."""
    proxy = Nginx(tmp_path, one_thread_gunicorn.port)
    try:
        fake.reply(slow_answer(CHAT_TO_MESSAGES), fixture("anthropic/text.json"))
        client = openai_client(proxy.url, proxy.cert)
        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=2).chat.completions.create(**CHAT_TO_MESSAGES.body)
        left_at = time.monotonic()
        assert len(fake.requests) == 1
        assert_closed_within_a_second(fake, left_at)
        assert client.chat.completions.create(**CHAT_TO_MESSAGES.body).choices[0].message.content
    finally:
        proxy.stop()


def test_a_departed_clients_call_goes_to_no_other_deployment(start_bridge, fake, other_fake):
    """The closed call is no failure of its deployment: nothing moves on, nothing cools down."""
    deployments = [
        {"name": name, "protocol": "anthropic", "base_url": upstream.url}
        for name, upstream in (("left-first", fake), ("left-second", other_fake))  # tried in this order
    ]
    routes = {"routes": [{"models": [CHAT_TO_MESSAGES.body["model"]], "deployments": deployments}]}
    live = start_bridge(BRIDGE_ROUTES=json.dumps(routes), BRIDGE_RETRIES="2", BRIDGE_LOG_LEVEL="INFO")
    fake.reply(slow_answer(CHAT_TO_MESSAGES))
    with access_lines() as lines:
        left_at = ask_and_leave(live.url, CHAT_TO_MESSAGES, lambda: fake.requests)
        assert_closed_within_a_second(fake, left_at)
        wait_for(lambda: lines, "the access line")
    assert_logged_as_left(lines[0])
    assert other_fake.requests == []
    assert metric(live, "bridge_deployment_calls_total", deployment="left-first", outcome="client_closed") == 1
    assert metric(live, "bridge_deployment_calls_total", deployment="left-second") == 0


def test_a_call_whose_client_left_during_the_retry_backoff_is_not_sent_again(start_bridge):
    """A connection closed before any answer is retried after BRIDGE_RETRY_BACKOFF; a client gone
    by then is worth no retry: the call ends there."""
    door = SlammingDoor()
    try:
        live = start_bridge(
            BRIDGE_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{door.port}",
            BRIDGE_RETRIES="2",
            BRIDGE_RETRY_BACKOFF="1",
            BRIDGE_LOG_LEVEL="INFO",
        )
        with access_lines() as lines:
            ask_and_leave(live.url, CHAT_TO_MESSAGES, lambda: door.accepted)
            wait_for(lambda: lines, "the access line")
        assert_logged_as_left(lines[0])
        assert door.accepted == 1
    finally:
        door.close()
