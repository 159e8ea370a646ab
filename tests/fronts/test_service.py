"""The service itself over real HTTP: health, request ids, bad bodies, auth, upstream failures.

Each error must come back as JSON in the protocol of the client that asked.
"""

import json
import os
import re
import socket

import pytest
import requests

from bridge.app import new_request_id
from bridge.fronts import messages
from bridge.protocols import UPSTREAM_CHAT
from tests.fake_upstream import Reply, fixture, json_reply
from tests.helpers.directions import ANTHROPIC_HEADERS, is_anthropic_error, is_openai_error


def test_health_and_readiness(bridge):
    assert requests.get(f"{bridge.url}/healthz").json() == {"status": "ok"}
    assert requests.get(f"{bridge.url}/readyz").status_code == 200


def test_every_response_carries_a_request_id_and_a_sane_incoming_one_is_kept(bridge):
    generated = requests.get(f"{bridge.url}/healthz")
    assert generated.headers["request-id"] == generated.headers["x-request-id"]
    assert generated.headers["request-id"].startswith("req_bridge_")
    kept = requests.get(f"{bridge.url}/healthz", headers={"x-request-id": "nginx-abc123"})
    assert kept.headers["request-id"] == "nginx-abc123"
    hostile = requests.get(f"{bridge.url}/healthz", headers={"x-request-id": "a b<script>"})
    assert hostile.headers["request-id"].startswith("req_bridge_")
    ids = {requests.get(f"{bridge.url}/healthz").headers["request-id"] for _ in range(20)}
    assert len(ids) == 20 and all(re.fullmatch(r"req_bridge_[0-9a-f]{32}", i) for i in ids)


def test_a_forked_worker_makes_ids_of_its_own():
    """Workers are forked from one process: ids from a generator they shared unseeded would
    repeat from worker to worker."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(writing, new_request_id().encode())
        os._exit(0)
    os.waitpid(child, 0)
    os.close(writing)
    assert os.read(reading, 100).decode() != new_request_id()
    os.close(reading)


@pytest.mark.parametrize("forged", ["req_bridge_0123456789abcdef0123456789abcdef", "REQ_BRIDGE_1"])
def test_a_client_sent_id_of_the_bridges_own_form_is_replaced(bridge, forged):
    """Else one request could pass for another in the log: a client may only bring an id of its own."""
    answer = requests.get(f"{bridge.url}/healthz", headers={"x-request-id": forged})
    assert re.fullmatch(r"req_bridge_[0-9a-f]{32}", answer.headers["x-request-id"])
    assert answer.headers["x-request-id"] != forged.lower()


def test_an_unexpected_error_is_a_500_in_the_clients_protocol_naming_the_request_id(bridge, fake, monkeypatch):
    def broken(*args):
        raise RuntimeError("a bug in a translation rule")

    _, *rest = messages._PAIRS[UPSTREAM_CHAT]
    monkeypatch.setitem(messages._PAIRS, UPSTREAM_CHAT, (broken, *rest))
    body = {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    failed = requests.post(f"{bridge.url}/v1/messages", json=body, headers={"x-request-id": "trace-42"})
    assert is_anthropic_error(failed, 500, "api_error")
    assert failed.headers["request-id"] == "trace-42"
    assert "request id trace-42" in failed.json()["error"]["message"]
    assert "a bug" not in failed.text
    monkeypatch.undo()
    fake.reply(fixture("openai/text.json"))
    assert requests.post(f"{bridge.url}/v1/messages", json=body).status_code == 200


def test_the_unexpected_errors_log_line_shows_a_forged_path_escaped(bridge, monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr("bridge.fronts.models.to_openai_model", broken)
    monkeypatch.setattr("bridge.fronts.models._upstream_model", lambda protocol, model_id: {"id": model_id})
    failed = requests.get(f'{bridge.url}/v1/models/gpt%0D%1B[2K{{"forged":1}}')
    assert is_openai_error(failed, 500)
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unhandled error on")]
    assert line == 'unhandled error on GET /v1/models/gpt\\r\\x1b[2K{"forged":1}'


def test_unknown_route_is_a_json_404_in_each_protocol(bridge):
    assert is_anthropic_error(requests.post(f"{bridge.url}/v1/messages/nope", json={}), 404, "not_found_error")
    assert is_openai_error(requests.get(f"{bridge.url}/v1/nope"), 404)


def test_wrong_method_is_a_json_405(bridge):
    assert is_anthropic_error(requests.get(f"{bridge.url}/v1/messages"), 405, "invalid_request_error")
    assert is_openai_error(requests.get(f"{bridge.url}/v1/chat/completions"), 405)


@pytest.mark.parametrize(
    "path, check",
    [
        ("/v1/messages", lambda r, s: is_anthropic_error(r, s, "invalid_request_error")),
        ("/v1/messages/count_tokens", lambda r, s: is_anthropic_error(r, s, "invalid_request_error")),
        ("/v1/chat/completions", is_openai_error),
    ],
)
def test_bodies_that_are_not_a_json_object_are_rejected_in_the_clients_protocol(bridge, path, check):
    url = bridge.url + path
    json_type = {"content-type": "application/json"}
    wrong_type = requests.post(url, data="{}", headers={"content-type": "text/plain"})
    assert check(wrong_type, 415) and "Content-Type" in wrong_type.text
    assert check(requests.post(url, data="{", headers=json_type), 400)
    assert check(requests.post(url, data="", headers=json_type), 400)
    assert check(requests.post(url, data="[1, 2]", headers=json_type), 400)
    assert check(requests.post(url, data=b'{"a": "\xff"}', headers=json_type), 400)
    assert check(requests.post(url, data="[" * 100000 + "]" * 100000, headers=json_type), 400)
    assert requests.get(f"{bridge.url}/healthz").status_code == 200


@pytest.mark.parametrize(
    "path, tool",
    [
        ("/v1/messages", lambda deep: {"name": "t", "input_schema": {"type": "object", "default": deep}}),
        (
            "/v1/chat/completions",
            lambda deep: {
                "type": "function",
                "function": {"name": "t", "parameters": {"type": "object", "default": deep}},
            },
        ),
    ],
)
def test_a_body_nested_near_the_parsers_limit_is_answered_or_a_400_never_a_500(bridge, fake, path, tool):
    """orjson reads 1,024 levels; the json module, which writes what orjson cannot (over 255
    levels), runs out of stack short of that: such a body is the client's problem, a 400."""
    for depth in range(900, 1030, 6):
        fake.reply(fixture("openai/text.json" if path == "/v1/messages" else "anthropic/text.json"))
        body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": [tool("DEEP")]}
        raw = json.dumps(body).replace('"DEEP"', "[" * depth + "]" * depth)
        reply = requests.post(
            bridge.url + path, data=raw, headers={**ANTHROPIC_HEADERS, "content-type": "application/json"}
        )
        in_protocol = (
            (
                is_anthropic_error(reply, 400, "invalid_request_error")
                if path == "/v1/messages"
                else is_openai_error(reply, 400)
            )
            if reply.status_code == 400
            else False
        )
        assert reply.status_code == 200 or (in_protocol and "nested too deeply" in reply.text), (
            depth,
            reply.status_code,
            reply.text[:200],
        )
    assert requests.get(f"{bridge.url}/healthz").status_code == 200


def test_a_body_over_the_limit_is_a_413_in_the_clients_protocol(start_bridge):
    live = start_bridge(BRIDGE_MAX_BODY_BYTES=2048)
    big = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 4096}]}
    anthropic_reply = requests.post(f"{live.url}/v1/messages", json=big)
    assert is_anthropic_error(anthropic_reply, 413, "request_too_large")
    assert "BRIDGE_MAX_BODY_BYTES" in anthropic_reply.json()["error"]["message"]
    assert is_openai_error(requests.post(f"{live.url}/v1/chat/completions", json=big), 413)


def test_client_keys_are_required_when_configured(start_bridge, fake):
    live = start_bridge(BRIDGE_CLIENT_KEYS="ci:sk-good")
    assert is_anthropic_error(requests.post(f"{live.url}/v1/messages", json={}), 401, "authentication_error")
    assert is_openai_error(
        requests.post(f"{live.url}/v1/chat/completions", json={}, headers={"authorization": "Bearer sk-bad"}), 401
    )
    assert requests.get(f"{live.url}/healthz").status_code == 200
    fake.reply(json_reply({"data": []}))
    ok = requests.get(f"{live.url}/v1/models", headers={"authorization": "Bearer sk-good"})
    assert ok.status_code == 200
    assert "authorization" not in fake.last.headers and "x-api-key" not in fake.last.headers


def test_in_pass_through_mode_the_clients_key_goes_upstream_in_the_upstreams_style(bridge, fake):
    fake.reply(json_reply({"data": []}), json_reply({"data": []}))
    requests.get(f"{bridge.url}/v1/models", headers={"x-api-key": "sk-ant-client", **ANTHROPIC_HEADERS})
    assert fake.last.path == "/v1/models" and fake.last.headers["authorization"] == "Bearer sk-ant-client"
    requests.get(f"{bridge.url}/v1/models", headers={"authorization": "Bearer sk-openai-client"})
    assert fake.last.headers["x-api-key"] == "sk-openai-client"
    assert fake.last.headers["anthropic-version"]


def test_a_held_upstream_key_replaces_the_clients_key(start_bridge, fake):
    live = start_bridge(BRIDGE_CLIENT_KEYS="sk-client", BRIDGE_OPENAI_API_KEY="sk-upstream-held")
    fake.reply(json_reply({"data": []}))
    requests.get(f"{live.url}/v1/models", headers={"x-api-key": "sk-client", **ANTHROPIC_HEADERS})
    assert fake.last.headers["authorization"] == "Bearer sk-upstream-held"
    assert "sk-client" not in str(fake.last.headers)


def test_only_allow_listed_headers_go_upstream(bridge, fake):
    fake.reply(json_reply({"data": []}))
    requests.get(
        f"{bridge.url}/v1/models",
        headers={
            "cookie": "session=1",
            "x-forwarded-for": "10.0.0.1",
            "connection": "keep-alive, x-secret",
            "x-secret": "1",
            **ANTHROPIC_HEADERS,
        },
    )
    sent = set(fake.last.headers)
    assert not sent & {"cookie", "x-forwarded-for", "x-secret", "anthropic-version"}


def test_an_upstream_429_keeps_its_status_message_and_retry_after(bridge, fake):
    fake.reply(fixture("openai/error_429.json"))
    reply = requests.get(f"{bridge.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 429, "rate_limit_error")
    assert reply.headers["retry-after"] == "1"
    assert "Rate limit" in reply.json()["error"]["message"]


def test_an_html_502_from_a_load_balancer_becomes_a_json_502(bridge, fake):
    page = fixture("common/html_502.html").body
    fake.reply(Reply(status=502, body=page, headers={"content-type": "text/html"}))
    reply = requests.get(f"{bridge.url}/v1/models")
    assert is_openai_error(reply, 502)
    assert "<html" not in reply.text and "text/html" in reply.json()["error"]["message"]


def test_an_overloaded_upstream_is_529_for_anthropic_clients_and_503_for_openai_clients(bridge, fake):
    fake.reply(fixture("anthropic/error_529.json"), fixture("openai/error_503.json"))
    assert is_openai_error(requests.get(f"{bridge.url}/v1/models"), 503)
    assert is_anthropic_error(
        requests.get(f"{bridge.url}/v1/models", headers=ANTHROPIC_HEADERS), 529, "overloaded_error"
    )


def test_connection_refused_is_a_502_and_a_silent_upstream_a_504(start_bridge, fake):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    refused = start_bridge(BRIDGE_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
    reply = requests.get(f"{refused.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert is_anthropic_error(reply, 502, "api_error") and "connect" in reply.json()["error"]["message"]
    slow = start_bridge(BRIDGE_READ_TIMEOUT=1)
    fake.reply(Reply(body=b"{}", delay_headers=1.5))
    assert is_anthropic_error(requests.get(f"{slow.url}/v1/models", headers=ANTHROPIC_HEADERS), 504, "api_error")


@pytest.mark.parametrize(
    "name, status", [("error_503.json", 529), ("error_429.json", 429), ("error_500.json", 500), ("error_401.json", 401)]
)
def test_an_upstream_error_answer_goes_back_at_once_for_the_clients_sdk_to_retry(start_bridge, fake, name, status):
    """One retry budget per user call, the SDK's: the bridge asks the upstream once, whatever
    BRIDGE_RETRIES says (it counts connection attempts), and hands back the wait it asked for."""
    live = start_bridge(BRIDGE_RETRIES=2, BRIDGE_RETRY_BACKOFF=0.01, BRIDGE_RETRY_MAX_WAIT=1)
    fake.reply(
        fixture(f"openai/{name}", headers={"content-type": "application/json", "retry-after": "0"}),
        json_reply({"data": []}),
    )
    reply = requests.get(f"{live.url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert reply.status_code == status and reply.headers["retry-after"] == "0"
    assert len(fake.requests) == 1
