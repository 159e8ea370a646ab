"""Nobody in: client keys, credentials that never leak upstream, headers and addresses that
only settings decide, through the real endpoints of both directions.

The unit tests of settings parsing are in test_settings.py and the first service-level checks
in test_service.py; these go through /v1/messages, /v1/messages/count_tokens,
/v1/chat/completions and /v1/models with the official SDKs where a client would.
"""

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys

import anthropic
import openai
import pytest
import requests

from bench.processes import GUNICORN_CONF, ROOT, free_port, wait_for
from bridge import settings as settings_module
from bridge.policy import auth
from tests.fake_upstream import Reply, fixture
from tests.helpers.directions import (
    CHAT_TO_MESSAGES,
    EACH,
    MESSAGES_TO_CHAT,
    STREAMED_OR_NOT,
    SlammingDoor,
    drain,
    recorded_stream,
)

CLIENT_KEY = "sk-bridge-client-0123456789"
UPSTREAM_KEY = "sk-upstream-held-9876543210"


def answer(direction, stream):
    """The fake upstream's recorded answer for one call in this direction."""
    return recorded_stream(direction) if stream else fixture(f"{direction.upstream}/text.json")


def call(direction, url, key, stream=False, **headers):
    """One call through the direction's SDK with `key`; a stream is read to its end."""
    if direction.sdk is anthropic:
        client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, default_headers=headers)
        result = client.messages.create(stream=stream, **direction.body)
    else:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, default_headers=headers)
        result = client.chat.completions.create(stream=stream, **direction.body)
    if stream:
        items, error = drain(result)
        if error:
            raise error
        return items
    return result


# --- client keys -------------------------------------------------------------------------------


@EACH
@pytest.mark.parametrize(
    "presented",
    [
        None,
        "",
        "sk-wrong",
        CLIENT_KEY[:-1],
        CLIENT_KEY + "x",
        CLIENT_KEY.upper(),
        hashlib.sha256(CLIENT_KEY.encode()).hexdigest(),
    ],
    ids=["none", "empty", "wrong", "prefix", "longer", "other-case", "its-digest"],
)
def test_anything_but_a_configured_key_is_a_401_in_the_clients_protocol(start_bridge, fake, direction, presented):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    headers = {} if presented is None else {"x-api-key": presented, "authorization": f"Bearer {presented}"}
    response = requests.post(
        live.url + direction.path, json=direction.body, headers={"anthropic-version": "2023-06-01", **headers}
    )
    assert direction.is_error(response, 401, "authentication_error")
    assert not fake.requests


@EACH
def test_the_sdks_raise_their_authentication_error(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    with pytest.raises(direction.sdk.AuthenticationError):
        call(direction, live.url, "sk-wrong")
    fake.reply(answer(direction, stream=True))
    assert direction.text_of(call(direction, live.url, CLIENT_KEY, stream=True))


def test_count_tokens_and_models_need_the_key_too(start_bridge, fake):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    client = anthropic.Anthropic(base_url=live.url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        client.messages.count_tokens(model="claude-x", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.AuthenticationError):
        client.models.list()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-wrong", max_retries=0).models.list()
    assert not fake.requests
    for path in ("/healthz", "/readyz", "/metrics"):
        assert requests.get(live.url + path).status_code == 200


def test_either_header_style_is_accepted_on_either_front(start_bridge, fake):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    for direction in (MESSAGES_TO_CHAT, CHAT_TO_MESSAGES):
        for headers in (
            {"x-api-key": CLIENT_KEY},
            {"authorization": f"Bearer {CLIENT_KEY}"},
            {"authorization": f"bearer  {CLIENT_KEY} "},
        ):
            fake.reply(answer(direction, stream=False))
            response = requests.post(
                live.url + direction.path, json=direction.body, headers={"anthropic-version": "2023-06-01", **headers}
            )
            assert response.status_code == 200, (direction.name, headers, response.text)


def test_keys_may_be_stored_hashed_and_read_from_a_file(start_bridge, fake, tmp_path):
    keys = tmp_path / "client-keys"
    keys.write_text(f"# team keys\nalice:{CLIENT_KEY}\nbob:sha256:{hashlib.sha256(b'sk-bob-secret').hexdigest()}\n")
    live = start_bridge(BRIDGE_CLIENT_KEYS=str(keys))
    for key in (CLIENT_KEY, "sk-bob-secret"):
        fake.reply(answer(CHAT_TO_MESSAGES, stream=False))
        assert call(CHAT_TO_MESSAGES, live.url, key).choices
    with pytest.raises(openai.AuthenticationError):
        call(CHAT_TO_MESSAGES, live.url, "bob")
    held = repr(settings_module.load({"BRIDGE_CLIENT_KEYS": str(keys)}))
    assert CLIENT_KEY not in held and "sk-bob-secret" not in held and "alice" in held


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def access_lines():
    """bridge.access lines (that logger does not propagate to pytest's capture)."""
    handler = Lines()
    logging.getLogger("bridge.access").addHandler(handler)
    yield handler.lines
    logging.getLogger("bridge.access").removeHandler(handler)


def test_the_key_name_is_logged_and_no_key_ever_is(start_bridge, fake, caplog, access_lines):
    caplog.set_level(logging.DEBUG)
    live = start_bridge(
        BRIDGE_CLIENT_KEYS=f"alice:{CLIENT_KEY}", BRIDGE_LOG_LEVEL="DEBUG", BRIDGE_ANTHROPIC_API_KEY=UPSTREAM_KEY
    )
    fake.reply(answer(CHAT_TO_MESSAGES, stream=False))  # werkzeug may skip closing a stream the client
    call(CHAT_TO_MESSAGES, live.url, CLIENT_KEY)  # reset, and the access line is written on close
    with pytest.raises(openai.AuthenticationError):
        call(CHAT_TO_MESSAGES, live.url, "sk-a-wrong-guess")
    wait_for(lambda: len(access_lines) == 2, "both access lines (written when a response closes)")
    assert sorted(json.loads(line)["client"] or "" for line in access_lines) == ["", "alice"]
    logged = "\n".join(access_lines + [r.getMessage() for r in caplog.records])
    for secret in (CLIENT_KEY, "sk-a-wrong-guess", UPSTREAM_KEY):
        assert secret not in logged


class CountingDigest:
    """Stands in for hmac.compare_digest to see how keys are compared (not how fast)."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, a, b):
        self.calls.append((len(a), len(b)))
        return self.real(a, b)


@pytest.mark.parametrize("presented", ["sk-first", "sk-last", "sk-nobody", "x", "y" * 5000])
def test_every_configured_key_is_compared_as_a_fixed_size_digest_whatever_is_presented(monkeypatch, presented):
    """No early exit on a match, no comparison of the raw guess: the work done does not
    depend on which key matched, how long the guess is or how close it came."""
    configured = settings_module.load({"BRIDGE_CLIENT_KEYS": "a:sk-first, b:sk-middle, c:sk-last"})
    counting = CountingDigest(auth.hmac.compare_digest)
    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    try:
        auth.authenticate(configured, {"x-api-key": presented})
    except auth.BridgeError as error:
        assert error.status == 401
    assert counting.calls == [(32, 32)] * 3


# --- credentials never forwarded ----------------------------------------------------------------


@EACH
@STREAMED_OR_NOT
def test_with_a_held_upstream_key_the_clients_credentials_never_go_upstream(start_bridge, fake, direction, stream):
    held = {"BRIDGE_OPENAI_API_KEY" if direction.upstream == "openai" else "BRIDGE_ANTHROPIC_API_KEY": UPSTREAM_KEY}
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}", **held)
    fake.reply(answer(direction, stream))
    # the SDK sends the key in its own style; the other style rides along as an extra header
    other = {"authorization": f"Bearer {CLIENT_KEY}"} if direction.sdk is anthropic else {"x-api-key": CLIENT_KEY}
    call(direction, live.url, CLIENT_KEY, stream, **other)
    sent = fake.last
    assert CLIENT_KEY not in json.dumps(sent.headers) + json.dumps(sent.body)
    if direction.upstream == "openai":
        assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-api-key" not in sent.headers
    else:
        assert sent.headers["x-api-key"] == UPSTREAM_KEY and "authorization" not in sent.headers


@EACH
def test_with_client_keys_and_no_upstream_key_no_credential_goes_upstream(start_bridge, fake, direction):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    fake.reply(answer(direction, stream=True))
    call(direction, live.url, CLIENT_KEY, stream=True)
    assert not {"authorization", "x-api-key"} & set(fake.last.headers)


def run_gunicorn_until_it_exits(env, timeout=60):
    """Start gunicorn from the shipped config; return (exit code, output) once it gives up."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    environ.update(env, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF), "--bind", f"127.0.0.1:{free_port()}"],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate()
        return None, output
    return process.returncode, output


def test_start_up_refuses_an_open_relay_and_does_not_print_the_key():
    code, output = run_gunicorn_until_it_exits({"BRIDGE_ANTHROPIC_API_KEY": UPSTREAM_KEY})
    assert code not in (None, 0), output
    assert "BRIDGE_CLIENT_KEYS" in output and "BRIDGE_ALLOW_OPEN_RELAY" in output
    assert UPSTREAM_KEY not in output


def test_an_open_relay_starts_when_the_operator_says_so(start_bridge, fake):
    live = start_bridge(BRIDGE_OPENAI_API_KEY=UPSTREAM_KEY, BRIDGE_ALLOW_OPEN_RELAY="true")
    fake.reply(answer(MESSAGES_TO_CHAT, stream=False))
    call(MESSAGES_TO_CHAT, live.url, "sk-anything")
    assert fake.last.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


# --- only an allow-list of headers goes upstream ----------------------------------------------------

HOSTILE_HEADERS = {
    "cookie": "session=marker-cookie",
    "connection": "keep-alive, x-marker-hop",
    "x-marker-hop": "marker-hop",
    "keep-alive": "timeout=marker-5",
    "te": "trailers, marker-te",
    "trailer": "x-marker-trailer",
    "proxy-authorization": "Basic marker-proxy-auth",
    "proxy-connection": "marker-proxy-conn",
    "x-forwarded-for": "10.0.0.1, marker-xff",
    "x-forwarded-host": "marker-xfh.example",
    "x-forwarded-proto": "marker-xfp",
    "forwarded": "for=marker-fwd;host=evil.example",
    "via": "1.1 marker-via",
    "x-real-ip": "marker-real-ip",
    "origin": "https://marker-origin.example",
    "referer": "https://marker-ref.example",
    "user-agent": "marker-user-agent/1.0",
    "openai-organization": "org-marker",
    "openai-project": "proj-marker",
    "x-stainless-os": "marker-os",
    "x-claude-code-session-id": "marker-session",
    "anthropic-dangerous-direct-browser-access": "marker-browser",
    "x-request-id": "marker-request-id",
    "x-custom-secret": "marker-custom",
}
ALLOWED_UPSTREAM = {
    "host",
    "content-type",
    "content-length",
    "accept",
    "accept-encoding",
    "connection",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
}


@EACH
@STREAMED_OR_NOT
def test_only_allow_listed_headers_go_upstream_and_no_client_value_does(start_bridge, fake, direction, stream):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    fake.reply(answer(direction, stream))
    call(direction, live.url, CLIENT_KEY, stream, **HOSTILE_HEADERS)
    sent = fake.last.headers
    assert set(sent) <= ALLOWED_UPSTREAM, set(sent) - ALLOWED_UPSTREAM
    assert "marker" not in json.dumps(sent)


def test_models_forwards_only_allow_listed_headers_in_both_shapes(start_bridge, fake):
    live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}")
    for extra in ({}, {"anthropic-version": "2023-06-01"}):
        fake.reply(fixture("anthropic/text.json", body=b'{"data": []}', status=200))
        requests.get(f"{live.url}/v1/models", headers={"x-api-key": CLIENT_KEY, **HOSTILE_HEADERS, **extra})
        assert set(fake.last.headers) <= ALLOWED_UPSTREAM and "marker" not in json.dumps(fake.last.headers)


# --- the upstream address comes only from settings ------------------------------------------------


def raw_request(url, request_line, headers, body):
    """Send one request exactly as written (an absolute URI, an odd Host) and read the answer."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(url)
    head = request_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    payload = json.dumps(body).encode()
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(f"{head}content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode() + payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@EACH
def test_host_headers_and_absolute_uris_pointing_elsewhere_change_nothing(bridge, fake, direction):
    evil = SlammingDoor()
    try:
        elsewhere = f"127.0.0.1:{evil.port}"
        for request_line, host in (
            (f"POST {direction.path}?base_url=http://{elsewhere}/ HTTP/1.1", elsewhere),
            (f"POST http://{elsewhere}{direction.path} HTTP/1.1", elsewhere),
        ):
            fake.reply(answer(direction, stream=False))
            received = raw_request(
                bridge.url,
                request_line,
                {
                    "host": host,
                    "x-forwarded-host": elsewhere,
                    "forwarded": f"host={elsewhere}",
                    "x-original-url": f"http://{elsewhere}/",
                    "content-type": "application/json",
                    "anthropic-version": "2023-06-01",
                },
                {**direction.body, "model": f"http://{elsewhere}/../../v1/steal?x="},
            )
            assert received.startswith(b"HTTP/1.1 200"), received[:300]
            upstream_path = "/v1/chat/completions" if direction.upstream == "openai" else "/v1/messages"
            assert fake.last.path == upstream_path
            assert fake.last.headers["host"] == fake.url.split("//")[1]
        assert evil.accepted == 0
    finally:
        evil.close()


@EACH
@STREAMED_OR_NOT
def test_an_upstream_redirect_is_not_followed(start_bridge, fake, direction, stream):
    """Following it would send the request, and a held key, wherever the redirect says."""
    evil = SlammingDoor()
    try:
        held = {"BRIDGE_OPENAI_API_KEY" if direction.upstream == "openai" else "BRIDGE_ANTHROPIC_API_KEY": UPSTREAM_KEY}
        live = start_bridge(BRIDGE_CLIENT_KEYS=f"ci:{CLIENT_KEY}", BRIDGE_RETRIES=2, **held)
        fake.reply(Reply(status=307, headers={"location": f"http://127.0.0.1:{evil.port}/steal"}))
        with pytest.raises(direction.sdk.APIStatusError) as caught:
            call(direction, live.url, CLIENT_KEY, stream)
        assert direction.is_error(caught.value.response, 502, "api_error")
        assert "redirect" in caught.value.message
        assert evil.accepted == 0 and len(fake.requests) == 1
    finally:
        evil.close()


def test_proxy_variables_in_the_environment_are_ignored(start_bridge, fake, monkeypatch):
    """A proxy set for other tools on the host must not see the bridge's traffic or its key."""
    proxy = SlammingDoor()
    try:
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        live = start_bridge()
        fake.reply(answer(MESSAGES_TO_CHAT, stream=False))
        with requests.Session() as client:
            client.trust_env = False  # the test's own client must not use the proxy either
            response = client.post(
                live.url + MESSAGES_TO_CHAT.path, json=MESSAGES_TO_CHAT.body, headers={"x-api-key": "sk-client"}
            )
        assert response.status_code == 200 and fake.requests and proxy.accepted == 0
    finally:
        proxy.close()
