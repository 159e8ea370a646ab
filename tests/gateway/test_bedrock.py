"""Claude through Amazon Bedrock: a route's `"cloud": "bedrock"` deployment, over real HTTP to a
fake bedrock-runtime that checks each SigV4 signature with botocore and streams in AWS
event-stream frames (tests/fake_clouds.py). The SDKs are the clients: the anthropic SDK passed
through, the openai SDK translated, and AnthropicBedrock as the reference for the bodies."""

import base64
import binascii
import json
import os
import pickle
import re
import struct
import subprocess
import sys

import anthropic
import openai
import pytest
import requests

from bench.clouds import framed
from bench.processes import wait_for
from tests.fake_clouds import (
    ACCESS_KEY,
    EVENTSTREAM,
    REGION,
    SECRET_KEY,
    SESSION_TOKEN,
    FakeBedrock,
    bedrock_error,
    chunk,
    exception,
    frame,
    sse_data,
)
from tests.fake_upstream import FIXTURES, Reply, fixture, json_reply, messages_stream
from tests.helpers.recorded import recorded, recorded_events
from tests.helpers.servers import anthropic_client, openai_client

CLIENT_KEY = "sk-client-of-the-bridge"
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
PROFILE_ARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-v1:0"
HI = [{"role": "user", "content": "Say hi"}]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def bedrock():
    server = FakeBedrock()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def aws(monkeypatch, tmp_path, bedrock):
    """The test's credentials in the environment, as botocore's chain reads them; no shared
    file nor instance role of the machine's."""
    bedrock.reset()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))


def deployment(bedrock, name="bedrock-east", **fields):
    return {"name": name, "cloud": "bedrock", "region": REGION, "endpoint_url": bedrock.url, "model": MODEL, **fields}


def started(start_bridge, *deployments, **settings):
    document = {"routes": [{"models": ["claude-*"], "deployments": list(deployments)}], "cooldown_seconds": 600}
    return start_bridge(BRIDGE_ROUTES=json.dumps(document), BRIDGE_CLIENT_KEYS=f"team:{CLIENT_KEY}", **settings)


@pytest.fixture
def live(start_bridge, bedrock):
    return started(start_bridge, deployment(bedrock))


def reference(bedrock, **call):
    """What AnthropicBedrock sends for the same call (path, body), to the same fake."""
    client = anthropic.AnthropicBedrock(
        base_url=bedrock.url,
        aws_region=REGION,
        aws_access_key=ACCESS_KEY,
        aws_secret_key=SECRET_KEY,
        aws_session_token=SESSION_TOKEN,
        max_retries=0,
    )
    before = len(bedrock.requests)
    if call.get("stream"):
        with client.messages.create(**call) as stream:
            list(stream)
    else:
        client.messages.create(**call)
    assert len(bedrock.requests) == before + 1
    return bedrock.requests[-1]


def without_version(body):
    """AnthropicBedrock's installed version writes its own API version where Bedrock's is due."""
    return {k: v for k, v in body.items() if k != "anthropic_version"}


# -- pass-through: the anthropic SDK ---------------------------------------------------------


def test_a_passed_through_call_is_signed_and_sent_as_anthropic_bedrock_sends_it(live, bedrock):
    bedrock.reply(fixture("anthropic/text.json"))
    message = anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
        model="claude-opus-5",
        max_tokens=256,
        messages=HI,
        extra_headers={"anthropic-beta": "context-1m-2025-08-07,interleaved-thinking-2025-05-14"},
    )
    assert message.content[0].text == recorded("anthropic/text.json")["content"][0]["text"]
    sent = bedrock.requests[-1]
    assert sent.path == f"/model/{MODEL}/invoke"
    assert sent.body == {
        "max_tokens": 256,
        "messages": HI,
        "anthropic_version": "bedrock-2023-05-31",
        "anthropic_beta": ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"],
    }
    assert "x-api-key" not in sent.headers and "anthropic-beta" not in sent.headers

    bedrock.reply(fixture("anthropic/text.json"))
    theirs = reference(
        bedrock,
        model=MODEL,
        max_tokens=256,
        messages=HI,
        extra_headers={"anthropic-beta": "context-1m-2025-08-07,interleaved-thinking-2025-05-14"},
    )
    assert theirs.path == sent.path
    assert without_version(theirs.body) == without_version(sent.body)


def test_a_passed_through_stream_comes_event_for_event_from_the_frames(live, bedrock):
    bedrock.reply(fixture("anthropic/thinking_tool_use.sse"))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    call = {
        "max_tokens": 2048,
        "messages": HI,
        "tools": [WEATHER],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    with client.messages.stream(model="claude-opus-5", **call) as stream:
        events = [event.type for event in stream if event.type in recorded_types("anthropic/thinking_tool_use.sse")]
        final = stream.get_final_message()
    assert events == [name for name in recorded_types("anthropic/thinking_tool_use.sse") if name != "ping"]
    assert [block.type for block in final.content] == ["thinking", "tool_use"]
    sent = bedrock.requests[-1]
    assert sent.path == f"/model/{MODEL}/invoke-with-response-stream"
    assert "stream" not in sent.body and "model" not in sent.body

    bedrock.reply(fixture("anthropic/thinking_tool_use.sse"))
    theirs = reference(bedrock, model=MODEL, stream=True, **call)
    assert (theirs.path, without_version(theirs.body)) == (sent.path, without_version(sent.body))


def recorded_types(name):
    return [event for event, _ in recorded_events(name)]


def test_an_inference_profile_arn_is_one_path_segment(start_bridge, bedrock):
    live = started(start_bridge, deployment(bedrock, model=PROFILE_ARN))
    bedrock.reply(fixture("anthropic/text.json"))
    anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(model="claude-x", max_tokens=16, messages=HI)
    assert bedrock.requests[-1].path == "/model/" + PROFILE_ARN.replace("/", "%2F") + "/invoke"

    bedrock.reply(fixture("anthropic/text.json"))
    assert reference(bedrock, model=PROFILE_ARN, max_tokens=16, messages=HI).path == bedrock.requests[-2].path


def test_count_tokens_goes_to_bedrock_count_tokens_with_the_invoke_body(live, bedrock):
    bedrock.reply(json_reply({"inputTokens": 42}))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    counted = client.messages.count_tokens(model="claude-opus-5", messages=HI, tools=[WEATHER])
    assert counted.input_tokens == 42
    sent = bedrock.requests[-1]
    assert sent.path == f"/model/{MODEL}/count-tokens"
    invoke = json.loads(base64.b64decode(sent.body["input"]["invokeModel"]["body"]))
    assert invoke == {
        "max_tokens": 1,
        "messages": HI,
        "tools": [WEATHER],
        "anthropic_version": "bedrock-2023-05-31",
    }

    bedrock.reply(json_reply({"inputTokens": 50}))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    assert client.messages.count_tokens(model="claude-opus-5", messages=HI, thinking=thinking).input_tokens == 50
    invoke = json.loads(base64.b64decode(bedrock.requests[-1].body["input"]["invokeModel"]["body"]))
    assert invoke["max_tokens"] == 2049, "InvokeModel wants more output tokens than the thinking budget"


# -- translated: the openai SDK ----------------------------------------------------------------


def test_the_openai_sdk_streams_chat_and_calls_tools_through_bedrock(live, bedrock):
    client = openai_client(live.url, api_key=CLIENT_KEY)
    bedrock.reply(messages_stream(["Hel", "lo"]))
    stream = client.chat.completions.create(model="claude-opus-5", messages=HI, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello"
    assert bedrock.requests[-1].path.endswith("/invoke-with-response-stream")

    bedrock.reply(fixture("anthropic/tool_use.json"))
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER["input_schema"]}}
    answer = client.chat.completions.create(model="claude-opus-5", messages=HI, tools=[tool])
    assert (
        answer.choices[0].message.tool_calls[0].function.name
        == recorded("anthropic/tool_use.json")["content"][-1]["name"]
    )
    sent = bedrock.requests[-1]
    assert sent.path.endswith("/invoke") and sent.body["tools"][0]["name"] == "get_weather"
    assert sent.body["anthropic_version"] == "bedrock-2023-05-31" and "model" not in sent.body


def test_the_openai_sdk_streams_a_response_with_reasoning_through_bedrock(live, bedrock):
    bedrock.reply(fixture("anthropic/thinking.sse"))
    client = openai_client(live.url, api_key=CLIENT_KEY)
    stream = client.responses.create(
        model="claude-opus-5", input="Think, then say hi", reasoning={"effort": "low"}, stream=True
    )
    events = list(stream)
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [item.type for item in events[-1].response.output] == ["reasoning", "message"]
    assert bedrock.requests[-1].body["thinking"]["type"] in ("enabled", "adaptive")


# -- credentials -------------------------------------------------------------------------------


def test_a_wrong_secret_is_refused_by_the_signature_check_and_is_the_operators_problem(
    start_bridge, bedrock, monkeypatch, caplog
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    live = started(start_bridge, deployment(bedrock))
    with caplog.at_level("WARNING", logger="bridge.gateway.upstream"):
        response = requests.post(
            f"{live.url}/v1/messages",
            headers={"x-api-key": CLIENT_KEY},
            json={"model": "claude-opus-5", "max_tokens": 16, "messages": HI},
        )
    assert "check the AWS credentials (botocore's default chain) of deployment bedrock-east" in caplog.text
    assert "no key held" not in caplog.text and "not-the-secret" not in caplog.text
    assert bedrock.requests[-1].headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID")
    assert response.status_code == 502, response.text
    assert "credentials were refused" in response.json()["error"]["message"]
    assert "not-the-secret" not in response.text
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


def test_credentials_come_from_a_shared_file_and_its_profile(start_bridge, bedrock, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    (tmp_path / "aws-credentials").write_text(
        f"[bridge]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
        f"aws_session_token = {SESSION_TOKEN}\n"
    )
    live = started(start_bridge, deployment(bedrock, aws_profile="bridge"))
    bedrock.reply(fixture("anthropic/text.json"))
    message = anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
        model="claude-opus-5", max_tokens=16, messages=HI
    )
    assert message.content[0].text


def test_no_credentials_anywhere_is_a_settings_error_naming_the_deployment(start_bridge, bedrock, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    from bridge.settings import SettingsError

    with pytest.raises(SettingsError, match=r'deployments\[0\] \("bedrock-east"\): no AWS credentials found'):
        started(start_bridge, deployment(bedrock))


def test_without_botocore_the_error_says_which_extra_to_install(bedrock):
    document = {"routes": [{"models": ["c"], "deployments": [deployment(bedrock)]}]}
    program = (
        "import sys; sys.modules['botocore'] = None\n"
        "from bridge import settings; from bridge.gateway import routes\n"
        "try:\n"
        "    routes.load(settings.load(dict(BRIDGE_ROUTES=sys.argv[1], BRIDGE_CLIENT_KEYS='k')))\n"
        "except settings.SettingsError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", program, json.dumps(document)], capture_output=True, text=True)
    assert "pip install 'bridge[bedrock]'" in out.stdout, out.stderr


# -- Bedrock's failures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, kind, sdk_error",
    [
        (429, "ThrottlingException", anthropic.RateLimitError),
        (400, "ValidationException", anthropic.BadRequestError),
        (404, "ResourceNotFoundException", anthropic.NotFoundError),
        (503, "ServiceUnavailableException", anthropic.InternalServerError),
        (500, "InternalServerException", anthropic.InternalServerError),
    ],
)
def test_bedrock_http_errors_reach_the_client_in_its_protocol(live, bedrock, status, kind, sdk_error):
    bedrock.reply(bedrock_error(status, kind, f"{kind} says no"))
    with pytest.raises(sdk_error) as caught:
        anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
            model="claude-opus-5", max_tokens=16, messages=HI
        )
    assert f"{kind} says no" in str(caught.value)

    bedrock.reply(bedrock_error(status, kind, f"{kind} says no"))
    response = requests.post(
        f"{live.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
        json={"model": "claude-opus-5", "messages": HI},
    )
    assert response.json()["error"]["message"] == f"{kind} says no"
    assert response.status_code == (503 if status == 503 else status)


def _stream_ending_with(live, bedrock, last_frame):
    """The client's events of a stream whose opening (message_start, the block's start, one
    delta "Hel") reaches it, then `last_frame`; checks the opening arrived whole."""
    opening = [chunk(sse_data(event)) for event in messages_stream("Hel").events[:3]]
    bedrock.reply(Reply(headers={"content-type": EVENTSTREAM}, events=[*opening, last_frame]))
    response = requests.post(
        f"{live.url}/v1/messages",
        headers={"x-api-key": CLIENT_KEY},
        json={"model": "claude-opus-5", "max_tokens": 16, "messages": HI, "stream": True},
    )
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[2]["delta"]["text"] == "Hel", "what came before the frame reached the client"
    return events


@pytest.mark.parametrize(
    "name, error_type",
    [
        ("throttlingException", "rate_limit_error"),
        ("modelStreamErrorException", "api_error"),
        ("validationException", "invalid_request_error"),
        ("serviceUnavailableException", "overloaded_error"),
        ("internalServerException", "api_error"),
    ],
)
def test_an_exception_frame_ends_the_stream_with_an_error_event_of_its_kind(live, bedrock, name, error_type):
    events = _stream_ending_with(live, bedrock, exception(name, "it broke"))
    assert events[-1] == {"type": "error", "error": {"type": error_type, "message": f"Bedrock {name}: it broke"}}


def test_a_broken_frame_is_a_clear_error_not_a_crash(live, bedrock):
    good = chunk(sse_data(messages_stream().events[0]))
    broken = bytearray(chunk({"type": "ping"}))
    broken[-1] ^= 0xFF  # its CRC32 no longer matches
    bedrock.reply(Reply(headers={"content-type": EVENTSTREAM}, events=[good, bytes(broken)]))
    client = openai_client(live.url, api_key=CLIENT_KEY)
    with pytest.raises(openai.APIError, match="malformed event-stream frame"):
        list(client.chat.completions.create(model="claude-opus-5", messages=HI, stream=True))
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}


# -- failover across kinds ---------------------------------------------------------------------


def test_a_throttled_bedrock_deployment_fails_over_to_anthropics_api(start_bridge, bedrock, fake):
    anthropic_api = {"name": "anthropic-api", "protocol": "anthropic", "base_url": fake.url, "tier": 2}
    live = started(start_bridge, deployment(bedrock), anthropic_api, BRIDGE_RETRIES=1)
    bedrock.reply(bedrock_error(429, "ThrottlingException", "Too many requests, please wait before trying again."))
    fake.reply(fixture("anthropic/text.sse"))
    stream = openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(
        model="claude-opus-5", messages=HI, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text and len(bedrock.requests) == 1 and len(fake.requests) == 1
    assert fake.last.body["model"] == "claude-opus-5", "the Anthropic deployment's own model name"
    assert fake.last.path == "/v1/messages" and fake.last.body["stream"] is True

    fake.reply(fixture("anthropic/text.json"))  # Bedrock cools down: the next call goes to Anthropic at once
    anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(model="claude-opus-5", max_tokens=8, messages=HI)
    assert len(bedrock.requests) == 1 and len(fake.requests) == 2


def test_bridge_check_probes_the_bedrock_deployment_with_its_credentials(bedrock, fake, monkeypatch):
    from tests.helpers.servers import bridge_env

    document = {"default_routes": False, "routes": [{"models": ["claude-*"], "deployments": [deployment(bedrock)]}]}
    env = {**bridge_env(fake), "BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "k"}

    bedrock.reply(json_reply({"inputTokens": 3}))
    ok = subprocess.run(
        [sys.executable, "-m", "bridge.cli", "check"], env={**os.environ, **env}, capture_output=True, text=True
    )
    assert f"bedrock-east (bedrock): POST {bedrock.url}/model/{MODEL}/count-tokens -> reachable, HTTP 200" in ok.stdout
    assert bedrock.requests[-1].path.endswith("/count-tokens")

    failed = subprocess.run(
        [sys.executable, "-m", "bridge.cli", "check"],
        env={**os.environ, **env, "AWS_SECRET_ACCESS_KEY": "wrong-secret"},
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1 and "failing: bedrock-east" in failed.stdout
    assert "HTTP 403 (the credentials were refused" in failed.stdout
    assert "wrong-secret" not in failed.stdout + failed.stderr and SECRET_KEY not in ok.stdout + ok.stderr


# -- the routes file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"cloud": "azure"}, "cloud must be one of bedrock, vertex"),
        ({"base_url": "https://example.com"}, "a bedrock deployment takes no base_url"),
        ({"api_key_env": "KEY"}, "a bedrock deployment takes no api_key_env"),
        ({"project": "p"}, "a bedrock deployment takes no project"),
        ({"region": None}, "region is required for a Bedrock deployment"),
        ({"protocol": "openai-chat"}, "a bedrock deployment speaks anthropic, not openai-chat"),
        ({"model": None}, "model is required"),
    ],
)
def test_a_bedrock_deployment_s_mistakes_are_named(bedrock, fields, message):
    from bridge import settings
    from bridge.gateway import routes

    entry = {k: v for k, v in {**deployment(bedrock), **fields}.items() if v is not None}
    document = {"routes": [{"models": ["c"], "deployments": [entry]}]}
    with pytest.raises(settings.SettingsError, match=re.escape(message)):
        routes.load(settings.load({"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "k"}))


def test_a_cloud_field_on_an_api_deployment_and_credentials_without_client_keys_are_refused(bedrock):
    from bridge import settings
    from bridge.gateway import routes

    api = {"name": "a", "protocol": "anthropic", "base_url": bedrock.url, "region": REGION}
    with pytest.raises(settings.SettingsError, match="region applies to a cloud deployment only"):
        routes.load(settings.load({"BRIDGE_ROUTES": json.dumps({"routes": [{"models": ["c"], "deployments": [api]}]})}))
    document = {"routes": [{"models": ["c"], "deployments": [deployment(bedrock)]}]}
    with pytest.raises(settings.SettingsError, match="holds an upstream key or cloud credentials"):
        routes.load(settings.load({"BRIDGE_ROUTES": json.dumps(document)}))


def test_the_configuration_a_reload_pickles_signs_in_the_worker_that_unpickles_it(bedrock):
    """gunicorn's master hands workers the configuration `bridge check --pickle` wrote."""
    from bridge.gateway import routes

    document = {"routes": [{"models": ["c"], "deployments": [deployment(bedrock)]}]}
    environ = {"BRIDGE_ROUTES": json.dumps(document), "BRIDGE_CLIENT_KEYS": "k"}
    _, table = pickle.loads(pickle.dumps(routes.configuration(environ)))
    cloud = table.routes[0].deployments[0].cloud
    url = f"{bedrock.url}/model/{MODEL}/invoke"
    headers = cloud.sign("POST", url, {"content-type": "application/json"}, b"{}")
    bedrock.reply(json_reply({"ok": True}))
    assert requests.post(url, data=b"{}", headers=headers).status_code == 200


@pytest.mark.parametrize(
    "base, headers",
    [
        (None, {"content-type": "application/json", "accept-encoding": "identity"}),
        (None, {"content-type": "application/json", "X-Team": " blue  team ", "x-id": "a,b", "connection": "te"}),
        ("https://Bedrock-Runtime.us-east-1.amazonaws.com:443", {"content-type": "application/json"}),
        ("http://[::1]:8080", {"content-type": "application/json", "Host": "proxy.internal"}),
    ],
)
def test_a_signature_is_the_one_botocore_signs_an_awsrequest_with(bedrock, monkeypatch, base, headers):
    """The bridge hands botocore's SigV4Auth a lighter request than AWSRequest: the headers it
    sends, their Authorization and X-Amz-Date, are those of botocore's own request, to the byte."""
    import datetime

    import botocore.auth
    from botocore.awsrequest import AWSRequest

    from bridge.gateway.bedrock import Bedrock

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: datetime.datetime(2026, 1, 2, 3, 4, 5))
    base = base or bedrock.url
    cloud = Bedrock(REGION, base)
    url, data = f"{base}/model/{MODEL}/invoke?x=1", b'{"messages": []}'
    request = AWSRequest(method="POST", url=url, headers=dict(headers), data=data)
    botocore.auth.SigV4Auth(cloud.credentials().get_frozen_credentials(), "bedrock", REGION).add_auth(request)
    assert cloud.sign("POST", url, headers, data) == dict(request.headers.items())
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "another-secret")  # rotated: the day's key is another
    rotated = Bedrock(REGION, base)
    request = AWSRequest(method="POST", url=url, headers=dict(headers), data=data)
    botocore.auth.SigV4Auth(rotated.credentials().get_frozen_credentials(), "bedrock", REGION).add_auth(request)
    assert rotated.sign("POST", url, headers, data) == dict(request.headers.items())
    signed = request.headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "x-amz-security-token"} | {name.lower() for name in headers} - {"connection"} == set(
        signed
    )


def test_the_fakes_frames_are_botocores_test_vectors_byte_for_byte():
    """bench/clouds.frame, which tests/fake_clouds.py and the bench write Bedrock streams with, writes
    what AWS's format says (PROVENANCE.md: botocore's vectors)."""
    vectors = FIXTURES / "bedrock"
    assert (
        frame({"content-type": "application/json"}, b"{'foo':'bar'}")
        == (vectors / "eventstream_one_string_header.bin").read_bytes()
    )
    error_frame = frame({":message-type": "error", ":error-code": "code", ":error-message": "message"}, b"")
    assert error_frame == (vectors / "eventstream_error_message.bin").read_bytes()


def test_an_error_frame_is_an_error_of_the_stream():
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    decoder = EventStreamDecoder(1 << 20)
    recorded_frame = (FIXTURES / "bedrock" / "eventstream_error_message.bin").read_bytes()
    with pytest.raises(BridgeError, match="Bedrock code: message"):
        decoder.feed(recorded_frame[:20])
        decoder.feed(recorded_frame[20:])


CHUNK = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}


@pytest.mark.parametrize(
    "payload, event",
    [
        (b'{"bytes":"eyJ0eXBlIjoicGluZyJ9","p":"abc"}', b'{"type":"ping"}'),
        (b'{"bytes": "eyJ0eXBlIjoicGluZyJ9", "n": NaN}', b'{"type":"ping"}'),  # orjson refuses, json reads
        (b'{"bytes": "eyJ0eXBlIjoicGluZyJ9", "bytes": "e30="}', b"{}"),  # the last, as JSON reads it
        (b'{"bytes": "e30=\\u0041"}', None),  # an escaped A after the padding: not strict base64
        (b'{"bytes": "e3 0="}', None),
        (b'{"bytes": "e30*"}', None),
        (b'{"bytes": 5}', None),
        (b'{"p": "e30="}', None),
        (b'["e30="]', None),
        (b'{"bytes": "e30=', None),
        (b"\xff", None),
    ],
)
def test_a_chunk_frame_is_its_base64_bytes_or_refused(payload, event):
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    decoder = EventStreamDecoder(1 << 20)
    if event is None:
        with pytest.raises(BridgeError, match="upstream sent a chunk frame without its base64 bytes"):
            decoder.feed(frame(CHUNK, payload))
    else:
        assert [e.data for e in decoder.feed(frame(CHUNK, payload))] == [event]


def _decoded_alone(payload):
    """A chunk's event as a decoder that saw no chunk before reads it, or the refusal's words."""
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    try:
        return EventStreamDecoder(1 << 20).feed(frame(CHUNK, payload))[0].data
    except BridgeError as error:
        return str(error)


def _encoded(event):
    return b'{"bytes":"%s","p":"abcdefgh"}' % base64.b64encode(json.dumps(event, separators=(",", ":")).encode())


@pytest.mark.parametrize(
    "rest",
    [
        b"IjoiaGkifX0=",  # the usual: another text
        b"",  # the head alone
        b"IjoiaGkifX0",  # padding missing
        b"=IjoiaGkifX0",  # padding first
        b"IjoiaGkifX0==",  # too much
        b"Ijoi aGkifX0=",
        b"IjoiaGkifX0=\\u0041",  # an escaped character after the padding
        b"\\u0049joiaGkifX0=",  # an escaped character the JSON reads as base64's I
    ],
)
def test_a_chunk_that_begins_as_the_last_one_did_is_read_as_it_alone_is(rest):
    """The chunks after the first decode only what follows their shared head: the same event as a
    decoder that saw no chunk before reads, or the same refusal."""
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "first"}}
    learned = _encoded(delta)
    head = learned[len(b'{"bytes":"') :][:96]
    payload = b'{"bytes":"%s%s"}' % (head, rest)
    decoder = EventStreamDecoder(1 << 20)
    assert [e.data for e in decoder.feed(frame(CHUNK, learned))] == [_decoded_alone(learned)]
    alone = _decoded_alone(payload)
    try:
        assert [e.data for e in decoder.feed(frame(CHUNK, payload))] == [alone]
    except BridgeError as error:
        assert str(error) == alone
    if rest == b"IjoiaGkifX0=":
        assert alone.endswith(b'"hi"}}')


def test_chunks_of_other_heads_are_read_whole():
    """A chunk that does not begin as the last did (another index, another event) is decoded
    whole, and its head kept for the next."""
    from bridge.gateway.bedrock import EventStreamDecoder

    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: text}}
        for index, kind, key, text in [
            (0, "text_delta", "text", "one"),
            (0, "text_delta", "text", "two"),
            (1, "input_json_delta", "partial_json", '{"a": "é"}'),
            (1, "input_json_delta", "partial_json", "1}"),
            (0, "text_delta", "text", "three"),
        ]
    ]
    payloads = [_encoded(delta) for delta in deltas] + [_encoded({"type": "message_stop"})] * 2
    decoder = EventStreamDecoder(1 << 20)
    events = [e.data for payload in payloads for e in decoder.feed(frame(CHUNK, payload))]
    assert events == [_decoded_alone(payload) for payload in payloads]
    assert [json.loads(event) for event in events] == deltas + [{"type": "message_stop"}] * 2


def test_chunks_are_read_around_other_events_until_an_exception_frame():
    """Frames of the same headers come as the same dict (the reader's): any other frame is read anew."""
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    ping = frame(CHUNK, b'{"bytes": "eyJ0eXBlIjoicGluZyJ9"}')
    other = frame({":event-type": "metadata", ":message-type": "event"}, b'{"x": 1}')
    decoder = EventStreamDecoder(1 << 20)
    assert [e.data for e in decoder.feed(ping + other + ping + ping)] == [b'{"type":"ping"}'] * 3
    assert len(decoder.feed(ping + exception("throttlingException", "slow down") + ping)) == 1
    with pytest.raises(BridgeError, match="Bedrock throttlingException: slow down"):
        decoder.feed(ping)


def test_a_frame_larger_than_the_event_limit_is_refused_before_it_is_whole():
    from bridge.gateway.bedrock import EventStreamDecoder
    from bridge.protocols.errors import BridgeError

    decoder = EventStreamDecoder(1000)
    large = chunk({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x" * 5000}})
    with pytest.raises(BridgeError, match="larger than 1000 bytes"):
        decoder.feed(large[:2000])


def test_credentials_near_their_expiry_are_refreshed_by_botocore_before_a_call(
    start_bridge, bedrock, monkeypatch, tmp_path
):
    """A credential_process profile (as SSO or a vault hands out short-lived keys): credentials
    that expire within botocore's refresh window are fetched again before the next signature."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    runs = tmp_path / "runs"
    script = tmp_path / "credentials.py"
    script.write_text(
        "import datetime, json, sys\n"
        f"open({str(runs)!r}, 'a').write('run\\n')\n"
        "expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)\n"
        f"print(json.dumps({{'Version': 1, 'AccessKeyId': {ACCESS_KEY!r}, 'SecretAccessKey': {SECRET_KEY!r},\n"
        f"  'SessionToken': {SESSION_TOKEN!r}, 'Expiration': expires.isoformat()}}))\n"
    )
    (tmp_path / "aws-config").write_text(f"[profile vault]\ncredential_process = {sys.executable} {script}\n")
    live = started(start_bridge, deployment(bedrock, aws_profile="vault"))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    for _ in range(3):
        bedrock.reply(fixture("anthropic/text.json"))
        assert client.messages.create(model="claude-opus-5", max_tokens=8, messages=HI).content
    assert len(runs.read_text().splitlines()) >= 4, "fetched at start-up, then again before each call"


def test_a_deployments_cap_and_the_access_line_hold_for_bedrock(start_bridge, bedrock):
    from tests.helpers.servers import access_lines

    live = started(start_bridge, deployment(bedrock, max_tokens=100), BRIDGE_LOG_LEVEL="INFO")
    bedrock.reply(messages_stream("Hi"))
    with access_lines() as lines:
        stream = openai_client(live.url, api_key=CLIENT_KEY).chat.completions.create(
            model="claude-opus-5", messages=HI, max_tokens=4000, stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hi"
        wait_for(lambda: lines, "the access line")
    assert bedrock.requests[-1].body["max_tokens"] == 100
    [line] = lines
    assert (line["deployment"], line["upstream_model"]) == ("bedrock-east", MODEL)
    assert (line["input_tokens"], line["output_tokens"], line["usage"]) == (100, 10, "reported")


def test_a_deployments_betas_keep_the_flags_bedrock_refuses_away(start_bridge, bedrock):
    """Bedrock refuses a whole call for one beta flag its model does not know."""
    bedrock.betas = {"interleaved-thinking-2025-05-14"}
    call = {"model": "claude-opus-5", "max_tokens": 8, "messages": HI}
    flags = {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
    every = started(start_bridge, deployment(bedrock))
    with pytest.raises(anthropic.BadRequestError, match="invalid beta flag"):
        anthropic_client(every.url, api_key=CLIENT_KEY).messages.create(**call, extra_headers=flags)

    chosen = started(start_bridge, deployment(bedrock, betas=["interleaved-thinking-2025-05-14"]))
    bedrock.reply(fixture("anthropic/text.json"))
    anthropic_client(chosen.url, api_key=CLIENT_KEY).messages.create(**call, extra_headers=flags)
    assert bedrock.requests[-1].body["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]


def test_credentials_that_cannot_be_refreshed_send_the_call_to_the_next_deployment(
    start_bridge, bedrock, fake, monkeypatch, tmp_path
):
    """Nothing was sent: the call goes on to Anthropic's API, and the log says why."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    runs = tmp_path / "runs"
    script = tmp_path / "credentials.py"
    script.write_text(  # short-lived keys once, then the vault is gone
        "import datetime, json, pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "if runs.exists(): sys.exit('vault unreachable')\n"
        "runs.write_text('run')\n"
        "expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)\n"
        f"print(json.dumps({{'Version': 1, 'AccessKeyId': {ACCESS_KEY!r}, 'SecretAccessKey': {SECRET_KEY!r},\n"
        f"  'SessionToken': {SESSION_TOKEN!r}, 'Expiration': expires.isoformat()}}))\n"
    )
    (tmp_path / "aws-config").write_text(f"[profile vault]\ncredential_process = {sys.executable} {script}\n")
    anthropic_api = {"name": "anthropic-api", "protocol": "anthropic", "base_url": fake.url, "tier": 2}
    live = started(start_bridge, deployment(bedrock, aws_profile="vault"), anthropic_api, BRIDGE_RETRIES=1)
    fake.reply(fixture("anthropic/text.json"))
    message = anthropic_client(live.url, api_key=CLIENT_KEY).messages.create(
        model="claude-opus-5", max_tokens=8, messages=HI
    )
    assert message.content[0].text == recorded("anthropic/text.json")["content"][0]["text"]
    assert not bedrock.requests and len(fake.requests) == 1


# -- the event-stream reader (bridge/protocols/eventstream.py) ---------------------------------

# One header of every value type AWS's format has: true, false, byte, short, integer, long,
# bytes, string, timestamp, UUID.
EVERY_TYPE = (
    b"\x01t\x00"
    + b"\x01f\x01"
    + b"\x01b\x02\x7f"
    + b"\x01s\x03\x01\x02"
    + b"\x01i\x04\x00\x00\x00\x05"
    + b"\x01l\x05"
    + bytes(8)
    + b"\x01y\x06\x00\x03abc"
    + b"\x0d:message-type\x07\x00\x05event"
    + b"\x02ts\x08"
    + bytes(8)
    + b"\x01u\x09"
    + bytes(range(16))
)


def test_the_reader_reads_what_botocore_reads_wherever_the_reads_split_the_frames():
    """botocore's parser is the oracle: the same string headers and payloads, the stream cut in
    two at every byte and fed a byte at a time."""
    import botocore.eventstream

    from bridge.protocols.eventstream import Reader

    stream = b"".join(
        [
            chunk({"type": "message_start", "message": {"id": "msg_1"}}),
            framed(EVERY_TYPE, b'{"x": 1}'),
            framed(b"", b""),
            exception("throttlingException", "slow down"),
            (FIXTURES / "bedrock" / "eventstream_one_string_header.bin").read_bytes(),
        ]
    )
    oracle = botocore.eventstream.EventStreamBuffer()
    oracle.add_data(stream)
    expected = [
        ({k: v for k, v in message.headers.items() if isinstance(v, str)}, message.payload) for message in oracle
    ]
    assert len(expected) == 5
    for cut in range(len(stream) + 1):
        reader = Reader(1 << 20)
        assert [*reader.feed(stream[:cut]), *reader.feed(stream[cut:])] == expected, cut
        reader.close()
    reader = Reader(1 << 20)
    assert [frame for at in range(len(stream)) for frame in reader.feed(stream[at : at + 1])] == expected
    reader.close()


def _prelude_of(total, headers_length):
    """A frame's first 12 bytes, their CRC32 right, saying these lengths."""
    prelude = struct.pack(">II", total, headers_length)
    return prelude + struct.pack(">I", binascii.crc32(prelude))


def _flipped(data, at):
    data = bytearray(data)
    data[at] ^= 0x01
    return bytes(data)


GOOD = chunk({"type": "ping"})
BROKEN_FRAMES = {
    "prelude's CRC32 does not match": _flipped(GOOD, 3),  # the total length changed, not its CRC32
    "malformed event-stream frame: its CRC32 does not match": _flipped(GOOD, len(GOOD) - 10),
    "larger than 16777216 bytes": _prelude_of(1 << 31, 0),  # 2 GiB promised: refused before any of it
    "headers longer than 131072 bytes": _prelude_of(1 << 20, 200_000),
    "total length shorter than its headers": _prelude_of(20, 10) + bytes(8),
    "the stream ended inside a frame": GOOD[:-1],
    "a header of unknown value type 10": framed(b"\x01x\x0a", b"{}"),
    "headers cut short": framed(b"\x0d:message-type\x07\x00\x09event", b"{}"),
    "a chunk frame without its base64 bytes": frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, b'{"bytes": "e30*"}'
    ),
}


@pytest.mark.parametrize("message", BROKEN_FRAMES)
def test_a_broken_frame_ends_the_stream_with_an_error_and_the_service_stays_healthy(live, bedrock, message):
    events = _stream_ending_with(live, bedrock, BROKEN_FRAMES[message])
    assert events[-1]["type"] == "error" and events[-1]["error"]["type"] == "api_error"
    assert message in events[-1]["error"]["message"]
    bedrock.reply(messages_stream("Hi"))
    client = anthropic_client(live.url, api_key=CLIENT_KEY)
    with client.messages.stream(model="claude-opus-5", max_tokens=16, messages=HI) as stream:
        assert stream.get_final_text() == "Hi", "the next stream is answered"
    assert requests.get(f"{live.url}/healthz").json() == {"status": "ok"}
