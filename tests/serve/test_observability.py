"""Access log and metrics: one JSON line per request and matching Prometheus series; never a key or message text."""

import datetime
import json
import logging
import re
import select
import sys

import anthropic
import openai
import pytest
import requests
from werkzeug.test import EnvironBuilder

from bench.processes import wait_for
from bridge.serve import observability
from bridge.serve.observability import access_log
from tests.fake_upstream import Reply, fixture
from tests.helpers.servers import Gate, access_lines, metric

CLIENT_KEY = "sk-client-key-for-observability-tests"
UPSTREAM_KEY = "sk-upstream-key-for-observability-tests"
PROMPT = "please keep this sentence out of every log"
MODEL_MAP = '{"claude-test": "gpt-4o-mini"}'


@pytest.fixture
def live(start_bridge, caplog):
    caplog.set_level(logging.DEBUG)  # every other logger too, to check none of them leaks
    return start_bridge(
        BRIDGE_CLIENT_KEYS=f"team-a:{CLIENT_KEY}",
        BRIDGE_OPENAI_API_KEY=UPSTREAM_KEY,
        BRIDGE_MODEL_MAP=MODEL_MAP,
        BRIDGE_LOG_LEVEL="DEBUG",
        BRIDGE_PING_INTERVAL="0.1",
    )


@pytest.fixture
def lines(live):
    """Every access line `live` writes during the test, parsed (next to its own stderr handler)."""
    with access_lines() as written:
        yield written


def client(live):
    return anthropic.Anthropic(base_url=live.url, api_key=CLIENT_KEY, max_retries=0)


def fixture_events(name):
    return [json.loads(e.split(b"data: ", 1)[1]) for e in fixture(name).events if b"data: {" in e]


CLIENT_SIDE = ("anthropic", "openai", "httpx2", "httpcore2")  # the test's own SDK logs its requests


def assert_nothing_secret_logged(caplog, lines, *texts):
    bridge_side = [r for r in caplog.records if r.name.split(".")[0] not in CLIENT_SIDE]
    assert any(r.name.startswith("bridge") or r.name == "werkzeug" for r in bridge_side)
    everything = "\n".join([r.getMessage() for r in bridge_side] + [json.dumps(line) for line in lines])
    for secret in (CLIENT_KEY, UPSTREAM_KEY, PROMPT, *texts):
        assert secret not in everything


def test_a_streamed_request_is_one_line_written_when_the_stream_ends(live, fake, lines, caplog):
    usage = fixture_events("openai/text.sse")[-1]["usage"]
    answer = "".join(
        e["choices"][0]["delta"].get("content") or "" for e in fixture_events("openai/text.sse") if e["choices"]
    )
    series = {
        ("bridge_requests_total", "status", "200"),
        ("bridge_tokens_total", "kind", "input"),
        ("bridge_tokens_total", "kind", "output"),
        ("bridge_time_to_first_byte_seconds_count", "stream", "true"),
    }
    before = {(n, k, v): metric(live, n, direction="messages_to_chat", **{k: v}) for n, k, v in series}
    fake.reply(fixture("openai/text.sse"))
    with client(live).messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
    ) as stream:
        assert stream.get_final_text() == answer
        request_id = stream.response.headers["request-id"]
    wait_for(lambda: lines, "the access line")

    [line] = lines
    assert {
        k: line[k]
        for k in (
            "request_id",
            "method",
            "route",
            "direction",
            "client",
            "model",
            "upstream_model",
            "status",
            "upstream_status",
            "stream",
            "error",
            "input_tokens",
            "output_tokens",
        )
    } == {
        "request_id": request_id,
        "method": "POST",
        "route": "/v1/messages",
        "direction": "messages_to_chat",
        "client": "team-a",
        "model": "claude-test",
        "upstream_model": "gpt-4o-mini",
        "status": 200,
        "upstream_status": 200,
        "stream": True,
        "error": None,
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
    }
    assert 0 <= line["ttfb_ms"] <= line["duration_ms"]

    grown = {(n, k, v): metric(live, n, direction="messages_to_chat", **{k: v}) - before[n, k, v] for n, k, v in series}
    assert grown == {
        ("bridge_requests_total", "status", "200"): 1,
        ("bridge_tokens_total", "kind", "input"): usage["prompt_tokens"],
        ("bridge_tokens_total", "kind", "output"): usage["completion_tokens"],
        ("bridge_time_to_first_byte_seconds_count", "stream", "true"): 1,
    }
    assert_nothing_secret_logged(caplog, lines, answer)


def test_an_answer_that_ends_is_written_once_though_the_server_never_closes_it(live, fake, lines):
    """werkzeug's server skips close() when the client hangs up right after the last chunk."""
    fake.reply(fixture("openai/text.sse"))
    body = {"model": "claude-test", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    environ = EnvironBuilder(
        path="/v1/messages", method="POST", json=body, headers={"x-api-key": CLIENT_KEY}
    ).get_environ()
    answer = live.app.wsgi_app(environ, lambda status, headers, exc_info=None: None)
    assert b"message_stop" in b"".join(answer)  # to its end, and no close()
    assert [(line["route"], line["stream"], line["error"]) for line in lines] == [("/v1/messages", True, None)]
    answer.close()
    assert len(lines) == 1


def test_a_huge_model_name_is_cut_short_in_the_access_line(live, fake, lines):
    model = "claude-" + "x" * 100_000  # unmapped: it goes upstream as it is
    fake.reply(fixture("openai/text.json"))
    client(live).messages.create(model=model, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert fake.last.body["model"] == model
    wait_for(lambda: lines, "the access line")
    for logged in (lines[-1]["model"], lines[-1]["upstream_model"]):
        assert logged.endswith("…") and model.startswith(logged[:-1]) and len(logged) < 1000


def test_the_access_line_is_stamped_with_the_requests_start_in_utc_to_the_millisecond(live, fake, lines):
    fake.reply(fixture("openai/text.json"))
    before = datetime.datetime.now(datetime.timezone.utc)
    client(live).messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    wait_for(lambda: lines, "the access line")
    after = datetime.datetime.now(datetime.timezone.utc)
    stamp = lines[-1]["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp
    assert before - datetime.timedelta(milliseconds=1) <= datetime.datetime.fromisoformat(stamp) <= after


def test_stderr_gets_the_bare_line_and_handlers_an_info_record_of_the_access_logger(live, fake, capsys):
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    access_log.addHandler(handler)
    try:
        fake.reply(fixture("openai/text.json"))
        client(live).messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        wait_for(lambda: records, "the access line")
    finally:
        access_log.removeHandler(handler)
    (record,) = records
    assert (record.name, record.levelno, record.levelname) == ("bridge.access", logging.INFO, "INFO")
    assert (record.pathname, record.lineno) == ("", 0)  # README: no caller file or line
    assert json.loads(record.getMessage())["route"] == "/v1/messages"
    request_id = json.loads(record.getMessage())["request_id"]
    written = []

    def on_stderr():  # within BRIDGE_ACCESS_LOG_FLUSH, with lines of calls before it perhaps
        written.extend(line for line in capsys.readouterr().err.splitlines() if request_id in line)
        return written

    wait_for(on_stderr, "the line on stderr")
    assert written == [record.getMessage()]


class _Stderr:
    """sys.stderr that keeps each write apart."""

    def __init__(self):
        self.writes = []

    def write(self, text):
        self.writes.append(text)


def test_held_access_lines_are_written_together_in_whole_lines_a_pipe_keeps_whole(monkeypatch):
    stderr = _Stderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    lines = observability._StderrLines()
    lines.every = 60
    record = logging.makeLogRecord({"msg": "x" * 999})
    held = lines.HELD_BYTES // 1000
    for _ in range(held):
        lines.handle(record)
    assert stderr.writes == []
    lines.handle(record)  # past the bound
    assert "".join(stderr.writes) == ("x" * 999 + "\n") * (held + 1)
    assert all(len(write) <= select.PIPE_BUF and write.endswith("\n") for write in stderr.writes)
    assert len(stderr.writes) == -(-(held + 1) // (select.PIPE_BUF // 1000))


def test_held_access_lines_are_bounded_in_bytes_not_characters(monkeypatch):
    stderr = _Stderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    lines = observability._StderrLines()
    lines.every = 60
    record = logging.makeLogRecord({"msg": "é" * 499})  # 999 bytes with its newline, 500 characters
    held = lines.HELD_BYTES // 1000
    for _ in range(held):
        lines.handle(record)
    assert stderr.writes == []
    lines.handle(record)  # past the bound in bytes, at half of it in characters
    assert "".join(stderr.writes) == ("é" * 499 + "\n") * (held + 1)
    assert all(len(write.encode()) <= select.PIPE_BUF for write in stderr.writes)


def test_lines_held_when_the_interval_becomes_zero_go_before_the_next(monkeypatch):
    stderr = _Stderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    lines = observability._StderrLines()
    lines.every = 60
    lines.handle(logging.makeLogRecord({"msg": "first"}))
    assert stderr.writes == []
    lines.every = 0  # a stopping worker's write_access_lines_at_once
    lines.handle(logging.makeLogRecord({"msg": "second"}))
    wait_for(lambda: "".join(stderr.writes) == "first\nsecond\n", "both lines, in order")
    lines.handle(logging.makeLogRecord({"msg": "third"}))
    assert stderr.writes[-1] == "third\n"  # at once, alone


@pytest.mark.parametrize("stamp", [0.0, 1764171288.5, 1764171288.999, 1764171289.0, 4102444799.25])
def test_utc_times_read_as_datetime_writes_them(stamp):
    expected = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat(timespec="milliseconds")
    assert observability._utc_time(stamp) == expected.replace("+00:00", "Z")


def test_an_upstream_failure_is_logged_with_its_type_and_counted(live, fake, lines, caplog):
    errors_before = metric(live, "bridge_upstream_errors_total", direction="messages_to_chat", type="rate_limit")
    fake.reply(fixture("openai/error_429.json"))
    with pytest.raises(anthropic.RateLimitError) as raised:
        client(live).messages.create(model="claude-test", max_tokens=64, messages=[{"role": "user", "content": PROMPT}])
    wait_for(lambda: lines, "the access line")

    [line] = lines
    assert (line["status"], line["upstream_status"], line["stream"]) == (429, 429, False)
    assert line["error"] == raised.value.body["error"]["type"] == "rate_limit_error"
    assert line["input_tokens"] is None and line["output_tokens"] is None
    assert (
        metric(live, "bridge_upstream_errors_total", direction="messages_to_chat", type="rate_limit")
        == errors_before + 1
    )
    assert_nothing_secret_logged(caplog, lines)


def test_an_error_in_the_middle_of_a_stream_is_the_lines_error(live, fake, lines, caplog):
    fake.reply(fixture("openai/groq_midstream_error.sse"))
    response = requests.post(
        f"{live.url}/v1/messages",
        headers={"x-api-key": CLIENT_KEY},
        json={
            "model": "claude-test",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": PROMPT}],
        },
    )
    told = [
        json.loads(part.split("data: ", 1)[1])
        for part in response.text.split("\n\n")
        if part.startswith("event: error")
    ]
    wait_for(lambda: lines, "the access line")

    [line] = lines
    assert (line["status"], line["stream"]) == (200, True)
    assert told and line["error"] == told[0]["error"]["type"]
    assert_nothing_secret_logged(caplog, lines)


def test_a_client_that_leaves_mid_stream_is_logged_when_the_bridge_notices(live, fake, lines):
    gate = Gate(fixture("openai/text.sse").events)
    fake.reply(Reply(headers={"content-type": "text/event-stream"}, events=gate))
    gate.release(2)
    try:
        with requests.post(
            f"{live.url}/v1/messages",
            headers={"x-api-key": CLIENT_KEY},
            stream=True,
            json={
                "model": "claude-test",
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": PROMPT}],
            },
        ) as response:
            next(response.iter_content(chunk_size=None))
        wait_for(lambda: lines, "the access line")
    finally:
        gate.release(len(gate.events))
    [line] = lines
    assert (line["stream"], line["error"]) == (True, "client_closed")


def test_a_refused_client_is_logged_without_the_key_it_tried(live, lines, caplog):
    wrong = "sk-wrong-key-someone-tried"
    answer = requests.post(f"{live.url}/v1/messages", headers={"x-api-key": wrong}, json={})
    wait_for(lambda: lines, "the access line")
    [line] = lines
    assert (line["status"], line["client"], line["error"]) == (401, None, answer.json()["error"]["type"])
    assert_nothing_secret_logged(caplog, lines, wrong)


def test_metrics_need_no_client_key_and_are_not_logged(live, lines):
    answer = requests.get(f"{live.url}/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    requests.get(f"{live.url}/healthz")
    wait_for(lambda: lines, "the access line")
    assert [line["route"] for line in lines] == ["/healthz"]


@pytest.mark.parametrize("stream", [False, True])
def test_logged_tokens_are_the_usage_the_client_was_given_cached_tokens_included(live, fake, lines, stream):
    fake.reply(fixture("anthropic/cache_read.sse" if stream else "anthropic/cache_usage.json"))
    # Read to the end with requests: the openai SDK drops the connection after [DONE], and
    # werkzeug's test server then skips closing the response (its drain of the socket raises).
    answer = requests.post(
        f"{live.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
        json={
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {}),
        },
    )
    if stream:
        chunks = [json.loads(part[len("data: ") :]) for part in answer.text.split("\n\n") if part.startswith("data: {")]
        usage = [chunk["usage"] for chunk in chunks if chunk.get("usage")][-1]
    else:
        usage = answer.json()["usage"]
    wait_for(lambda: lines, "the access line")
    [line] = lines
    assert usage["prompt_tokens_details"]["cached_tokens"] > 0
    assert (line["input_tokens"], line["output_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_a_streamed_responses_request_is_counted_under_its_direction_with_its_usage(live, fake, lines):
    """The usage of a Responses stream rides on its last event's `response`."""
    usage = [e for e in fixture_events("anthropic/text.sse") if e["type"] == "message_start"][0]["message"]["usage"]
    before = metric(live, "bridge_requests_total", direction="responses_to_messages", status="200")
    fake.reply(fixture("anthropic/text.sse"))
    responses = openai.OpenAI(base_url=f"{live.url}/v1", api_key=CLIENT_KEY, max_retries=0).responses
    with responses.stream(model="claude-test", input=PROMPT) as stream:
        final = stream.get_final_response()
    wait_for(lambda: lines, "the access line")
    [line] = lines
    assert (line["direction"], line["route"], line["stream"]) == ("responses_to_messages", "/v1/responses", True)
    assert (line["input_tokens"], line["output_tokens"]) == (final.usage.input_tokens, final.usage.output_tokens)
    assert line["input_tokens"] >= usage["input_tokens"] and line["output_tokens"]
    assert metric(live, "bridge_requests_total", direction="responses_to_messages", status="200") == before + 1


def test_usage_is_counted_wherever_an_event_carries_it():
    """At the top level, in a message (message_start) or in a response (a Responses event): as
    the client was told it (saw) and as the upstream reported it (heard); nowhere else."""
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 7}}},
        {"type": "response.completed", "response": {"usage": {"output_tokens": 3}}},
        {"type": "message_delta", "usage": {"cache_read_input_tokens": 2}},
        {"type": "content_block_delta", "index": 0, "delta": {"usage": {"input_tokens": 99}}},
    ]
    expected = {"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 2}
    record = observability.Record()
    for event in events:
        record.saw(event)
        record.heard(event)
    record.heard("[DONE]")
    assert record.usage == expected and record.upstream_usage == expected
