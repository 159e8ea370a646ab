"""deploy/nginx/bridge.conf run for real in front of gunicorn: streams pass event by event over TLS."""

import json

import pytest
import requests

from bench.processes import free_port, wait_for
from bridge import settings as settings_module
from tests.fake_upstream import fixture
from tests.helpers.programs import program
from tests.helpers.servers import Nginx, TextStream, gunicorn, next_text, nginx_binary, openai_client
from tests.helpers.upstream_requests import foreign_reasoning_session

nginx_binary()
program("openssl")  # for a test certificate


@pytest.fixture(scope="module")
def stack(tmp_path_factory, fake, installed_bridge):
    """gunicorn from the shipped config serving the installed package, nginx from the shipped site file
    in front of it."""
    tmp = tmp_path_factory.mktemp("stack")
    server = gunicorn(tmp, fake, site=installed_bridge)
    proxy = Nginx(tmp, server.port)
    yield server, proxy
    proxy.stop()
    server.stop()


def test_stream_events_reach_the_client_one_by_one_as_the_upstream_sends_them(stack, fake):
    _, proxy = stack
    upstream = TextStream(fake)
    try:
        upstream.release_until_text(0)
        chunks = iter(
            openai_client(proxy.url, proxy.cert).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
        for number, (position, text) in enumerate(upstream.texts):
            # The upstream holds every later event until the client has this one.
            assert next_text(chunks) == text
            assert upstream.gate.sent == position + 1
            if number + 1 < len(upstream.texts):
                upstream.release_until_text(number + 1)
        upstream.release_rest()
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    finally:
        upstream.release_rest()
    assert finish == ["stop"]


def test_the_request_id_goes_through_and_nginx_makes_one_when_the_client_sent_none(stack):
    server, proxy = stack
    sent = requests.get(f"{proxy.url}/healthz", headers={"x-request-id": "client-chosen-id"}, verify=proxy.cert)
    assert sent.headers["x-request-id"] == "client-chosen-id"
    made = requests.get(f"{proxy.url}/healthz", verify=proxy.cert).headers["x-request-id"]
    assert len(made) == 32 and int(made, 16) >= 0  # nginx's $request_id, not the bridge's own
    # Each side writes its log line once the response has gone: the client may see it first.
    wait_for(lambda: f"request_id={made}" in proxy.access_log(), "nginx's access line with its id")
    server.wait_for(
        lambda: made in [line["request_id"] for line in server.access_lines()],
        "the bridge's access line with nginx's id",
    )


def test_plain_http_is_redirected_to_tls_keeping_the_method(stack):
    _, proxy = stack
    answer = requests.post(f"{proxy.http_url}/v1/messages?beta=true", allow_redirects=False)
    assert answer.status_code == 308
    assert answer.headers["location"].startswith("https://") and answer.headers["location"].endswith(
        "/v1/messages?beta=true"
    )


def test_metrics_are_served_to_loopback(stack):
    _, proxy = stack
    assert "bridge_requests_total" in requests.get(f"{proxy.url}/metrics", verify=proxy.cert).text


def test_when_the_bridge_is_down_nginx_answers_json_both_sdks_read(tmp_path, fake):
    proxy = Nginx(tmp_path, free_port())  # nothing listens there
    try:
        with pytest.raises(Exception) as raised:
            openai_client(proxy.url, proxy.cert).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        answer = requests.get(f"{proxy.url}/healthz", verify=proxy.cert)
    finally:
        proxy.stop()
    assert raised.value.status_code == 502 and "not answering" in raised.value.message
    assert answer.headers["content-type"] == "application/json"
    assert json.loads(answer.text)["error"]["type"] == "api_error"


def test_nginx_takes_bodies_up_to_the_bridges_limit_and_refuses_larger_ones_as_json(stack):
    _, proxy = stack
    limit = settings_module.Settings().max_body_bytes

    def post(size):
        return requests.post(
            f"{proxy.url}/v1/messages",
            data=b" " * size,
            verify=proxy.cert,
            headers={"content-type": "application/json"},
        )

    at_limit = post(limit)  # reaches the bridge, which finds no JSON in it
    assert at_limit.status_code == 400 and "empty" in at_limit.json()["error"]["message"]
    over = post(limit + 1)
    assert over.status_code == 413 and over.json()["error"]["type"] == "request_too_large"
    assert "nginx" in over.json()["error"]["message"]


def test_a_codex_session_begun_on_another_model_is_answered_through_nginx(stack, fake):
    """150 reasoning items bridge cannot send on, each named in x-bridge-dropped-params: a header
    larger than nginx's buffer for the answer's head is a 502 after the upstream call ran."""
    _, proxy = stack
    fake.reply(fixture("anthropic/text.json"))
    raw = openai_client(proxy.url, proxy.cert).responses.with_raw_response.create(
        model="claude-sonnet-4-5", input=foreign_reasoning_session(150)
    )
    assert raw.status_code == 200 and raw.parse().status == "completed"
    assert raw.headers["x-bridge-dropped-params"].startswith("input.1.encrypted_content, input.4.encrypted_content")
    assert len(fake.requests) == 1
