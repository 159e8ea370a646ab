"""OpenTelemetry traces and metrics over OTLP/HTTP to a receiver in the test, decoded with
opentelemetry-proto: one SERVER span per request in the GenAI conventions' names, a CLIENT span
per upstream attempt, the caller's traceparent continued to the upstream, no prompt text unless
an operator asks for it (then cut at its limit); the conventions' metrics; off unless configured,
and a collector that is down costs a request nothing but its spans."""

import json
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.processes import ROOT, free_port, wait_for
from bridge import settings as settings_module
from tests.fake_upstream import FakeUpstream, fixture
from tests.helpers.servers import metric

PROMPT = "a sentence that must never reach a trace"
MESSAGES = [{"role": "user", "content": PROMPT}]


class Receiver:
    """An OTLP/HTTP receiver on loopback: every span and metric export, decoded, and the spans' raw bytes."""

    def __init__(self):
        self.spans = []
        self.raw = []
        self.metrics = []  # (resource attributes, metric) of every export, in order
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.path == "/v1/metrics":
                    export = ExportMetricsServiceRequest.FromString(body)
                    for resource in export.resource_metrics:
                        for scope in resource.scope_metrics:
                            receiver.metrics.extend((attributes(resource.resource), m) for m in scope.metrics)
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    receiver.raw.append(body)
                    export = ExportTraceServiceRequest.FromString(body)
                    for resource in export.resource_spans:
                        for scope in resource.scope_spans:
                            receiver.spans.extend(scope.spans)
                    answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        self.url = f"{self.base}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def refusing():
    server = FakeUpstream(listening=False)
    yield server
    server.close()


def attributes(item):
    """A span's (resource's, data point's) attributes as {name: value}, lists as tuples."""
    found = {}
    for pair in item.attributes:
        value = pair.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            found[pair.key] = tuple(getattr(v, v.WhichOneof("value")) for v in value.array_value.values)
        else:
            found[pair.key] = getattr(value, kind)
    return found


def traced(start_bridge, monkeypatch, endpoint, **settings):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    return start_bridge(OTEL_TRACES_EXPORTER="otlp", **settings)


def test_a_request_is_a_server_span_with_a_client_span_per_attempt_continuing_the_callers_trace(
    start_bridge, monkeypatch, receiver, refusing, fake
):
    deployments = [
        {"name": "down", "protocol": "anthropic", "base_url": refusing.url},
        {"name": "up", "protocol": "anthropic", "base_url": fake.url},
    ]
    routes = {"routes": [{"models": ["claude"], "deployments": deployments}]}
    live = traced(
        start_bridge,
        monkeypatch,
        receiver.url,
        BRIDGE_ROUTES=json.dumps(routes),
        BRIDGE_RETRIES=1,
        BRIDGE_CLIENT_KEYS="team-t:sk-traced team=ml",
    )
    fake.default = fixture("anthropic/text.sse")
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-traced", max_retries=0)
    stream = client.chat.completions.create(
        model="claude",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    wait_for(lambda: any(span.kind == Span.SPAN_KIND_SERVER for span in receiver.spans), "the request's span")

    [server] = [span for span in receiver.spans if span.kind == Span.SPAN_KIND_SERVER]
    assert server.name == "chat claude"
    assert server.trace_id.hex() == trace_id and server.parent_span_id.hex() == caller_span
    said = attributes(server)
    assert said["gen_ai.operation.name"] == "chat"
    assert said["gen_ai.provider.name"] == "anthropic"
    assert said["gen_ai.request.model"] == "claude"
    assert said["gen_ai.response.model"] == "claude"
    assert said["gen_ai.usage.input_tokens"] > 0 and said["gen_ai.usage.output_tokens"] > 0
    assert said["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert said["bridge.client"] == "team-t" and said["bridge.team"] == "ml" and said["bridge.deployment"] == "up"
    assert said["http.response.status_code"] == 200 and "error.type" not in said

    attempts = sorted(
        (span for span in receiver.spans if span.kind == Span.SPAN_KIND_CLIENT), key=lambda s: s.start_time_unix_nano
    )
    assert [attributes(span)["bridge.deployment"] for span in attempts] == ["down", "up"]
    assert all(span.parent_span_id == server.span_id and span.trace_id == server.trace_id for span in attempts)
    assert all(span.name == "chat claude" for span in attempts)
    down, up = (attributes(span) for span in attempts)
    assert down["error.type"] == "connection" and down["bridge.failover.reason"] == "connection"
    assert up["http.response.status_code"] == 200 and "bridge.failover.reason" not in up
    assert attempts[0].status.code == attempts[0].status.STATUS_CODE_ERROR

    version, upstream_trace, parent, flags = fake.last.headers["traceparent"].split("-")
    assert (upstream_trace, parent) == (trace_id, attempts[1].span_id.hex())
    exported = b"".join(receiver.raw)
    assert PROMPT.encode() not in exported and b"Hello" not in exported
    assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & set(said)


def test_an_operator_may_record_prompts_and_answers_in_spans_each_cut_at_its_limit(
    start_bridge, monkeypatch, receiver, fake
):
    live = traced(
        start_bridge,
        monkeypatch,
        receiver.url,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        BRIDGE_TRACE_CONTENT_LIMIT=300,
    )
    fake.default = fixture("anthropic/text.sse")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    instructions = "Answer in one line. " * 40  # 800 characters
    stream = client.responses.create(model="claude-x", instructions=instructions, input=PROMPT, stream=True)
    answer = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
    assert answer
    wait_for(lambda: any(span.kind == Span.SPAN_KIND_SERVER for span in receiver.spans), "the request's span")

    said = attributes(next(span for span in receiver.spans if span.kind == Span.SPAN_KIND_SERVER))
    assert json.loads(said["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
    ]
    assert json.loads(said["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "end_turn"}
    ]
    instructions = said["gen_ai.system_instructions"]
    assert len(instructions) == 300 and instructions.endswith("…[cut]")
    assert instructions.startswith('[{"type":"text","content":"Answer in one line.')


def test_a_recorded_answer_holds_every_text_event_of_a_stream(start_bridge, monkeypatch, receiver, fake):
    """The relay writes the usual text event without parsing it, except for a record that keeps
    the answer's text: it sees every one."""
    live = traced(start_bridge, monkeypatch, receiver.url, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    fake.default = fixture("anthropic/text_sdk.sse")  # three plain texts: the later two would go the fast way
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    stream = client.chat.completions.create(model="claude-x", messages=MESSAGES, stream=True)
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert answer == "Hello there!"
    wait_for(lambda: any(span.kind == Span.SPAN_KIND_SERVER for span in receiver.spans), "the request's span")

    said = attributes(next(span for span in receiver.spans if span.kind == Span.SPAN_KIND_SERVER))
    assert json.loads(said["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": answer}]


# The GenAI conventions' metrics and their units.
UNITS = {
    "gen_ai.server.request.duration": "s",
    "gen_ai.server.time_to_first_token": "s",
    "gen_ai.server.time_per_output_token": "s",
    "gen_ai.client.token.usage": "{token}",
}


def test_the_conventions_metrics_go_over_otlp_too_with_their_names_units_and_attributes(
    start_bridge, monkeypatch, receiver, fake
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
    live = start_bridge(OTEL_METRICS_EXPORTER="otlp", OTEL_TRACES_EXPORTER="none")
    meters = live.app.wsgi_app.meters
    try:
        fake.default = fixture("anthropic/text.sse")
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
        stream = client.chat.completions.create(model="claude-x", messages=MESSAGES, stream=True)
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        wait_for(lambda: set(UNITS) <= {m.name for _, m in receiver.metrics}, "the GenAI metrics")
    finally:
        meters.provider.shutdown()  # its reader thread would export every 100 ms for the session

    latest = {metric.name: (resource, metric) for resource, metric in receiver.metrics}
    for name, unit in UNITS.items():
        resource, metric = latest[name]
        assert metric.unit == unit and resource["service.name"] == "bridge"
        assert resource["service.instance.id"].endswith(f":{os.getpid()}")  # each worker's own series
        points = metric.histogram.data_points
        assert sum(point.count for point in points) >= 1 and not receiver.spans
        said = attributes(points[0])
        assert said["gen_ai.operation.name"] == "chat" and said["gen_ai.provider.name"] == "anthropic"
        assert said["gen_ai.request.model"] and said["gen_ai.response.model"] and said["bridge.deployment"]
    kinds = {
        attributes(point)["gen_ai.token.type"] for point in latest["gen_ai.client.token.usage"][1].histogram.data_points
    }
    assert kinds == {"input", "output"}


# What tracing and OTLP metrics load (redis-py imports some of opentelemetry's API and SDK
# packages for its own use, opentelemetry.sdk.metrics among them).
UNTRACED = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter",
    "bridge.serve.span_export",
    "bridge.serve.otlp_metrics",
)


def test_tracing_and_otlp_metrics_are_off_and_the_sdk_not_even_imported_unless_configured(fake):
    script = (
        "import sys\n"
        "from bridge.app import create_app\n"
        "from bridge import settings\n"
        f"create_app(settings.load({{'BRIDGE_OPENAI_BASE_URL': '{fake.url}'}}))\n"
        f"assert not [name for name in sys.modules if name.startswith({UNTRACED!r})], 'imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_an_untraced_bridge_sends_no_traceparent_upstream(start_bridge, fake):
    live = start_bridge()
    fake.reply(fixture("anthropic/text.json"))
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    client.chat.completions.create(model="claude-x", messages=MESSAGES)
    assert "traceparent" not in {name.lower() for name in fake.last.headers}


def test_a_collector_that_is_down_costs_requests_nothing_and_their_dropped_spans_are_counted(
    start_bridge, monkeypatch, fake
):
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    live = traced(start_bridge, monkeypatch, f"http://127.0.0.1:{free_port()}/v1/traces")
    dropped = metric(live, "bridge_trace_spans_dropped_total")
    fake.default = fixture("anthropic/text.json")
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="sk-client", max_retries=0)
    for _ in range(20):
        assert client.chat.completions.create(model="claude-x", messages=MESSAGES).choices[0].message.content
    assert metric(live, "bridge_trace_spans_dropped_total") - dropped >= 10


@pytest.mark.parametrize(
    "environ, problem",
    [
        ({"OTEL_TRACES_EXPORTER": "console"}, "OTEL_TRACES_EXPORTER: bridge exports traces with otlp only"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL: bridge exports traces over http/protobuf only",
        ),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "lots"}, "OTEL_BSP_MAX_QUEUE_SIZE: must be a int"),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, "OTEL_METRICS_EXPORTER: bridge exports metrics with otlp only"),
        (
            {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_METRIC_EXPORT_INTERVAL": "soon"},
            "OTEL_METRIC_EXPORT_INTERVAL: must be a int",
        ),
        (
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"},
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: must be true or false",
        ),
    ],
)
def test_what_bridge_cannot_do_with_the_otel_variables_stops_its_start(environ, problem):
    with pytest.raises(settings_module.SettingsError, match=problem):
        settings_module.load(environ)


@pytest.mark.parametrize(
    "environ, on",
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_traces_are_on_only_when_the_standard_variables_ask_for_otlp(environ, on):
    assert settings_module.load(environ).traces is on
