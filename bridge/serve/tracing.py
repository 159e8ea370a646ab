"""OpenTelemetry traces, off unless the standard OTEL_* variables ask for OTLP (settings.traces).

One SERVER span per request, named and attributed as the GenAI semantic conventions say
(`chat <model>`, gen_ai.*), continuing the client's W3C `traceparent`; one CLIENT span per
upstream attempt (failover.py), whose context goes upstream in the call's `traceparent`. Only
metadata, as in the access log: model names, token counts, statuses, the client key's name;
never a key, and a prompt or a completion only when an operator turns that on (span_content.py).

The opentelemetry SDK (`pip install bridge[otel]`) is imported only when traces are on; the
exporter is its OTLP/HTTP one, which reads its endpoint, headers, timeout and compression from
the OTEL_EXPORTER_OTLP_* variables, and the sampler OTEL_TRACES_SAMPLER. Ended spans wait in a
bounded queue (OTEL_BSP_MAX_QUEUE_SIZE) for a thread that exports them in batches: a span that
finds it full is dropped and counted (bridge_trace_spans_dropped_total), not logged, so a
collector that is down or slow costs a request nothing but its spans.
"""

import os
import socket


class Tracing:
    """The spans of one app: a tracer, and the processor exporting what it ends."""

    def __init__(self):
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from .span_export import Batches

        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self.provider = TracerProvider(resource=resource())
        self.provider.add_span_processor(Batches(OTLPSpanExporter()))
        self._tracer = self.provider.get_tracer("bridge")

    def request(self, environ):
        """The SERVER span of a request, child of the client's `traceparent` when it sent one."""
        carrier = {}
        for header in ("traceparent", "tracestate"):
            value = environ.get(f"HTTP_{header.upper()}")
            if value:
                carrier[header] = value
        parent = self._propagator.extract(carrier) if carrier else None
        return self._tracer.start_span(
            environ.get("REQUEST_METHOD", "GET"), context=parent, kind=self._trace.SpanKind.SERVER
        )

    def attempt(self, parent, name, attributes, headers):
        """A CLIENT span for one upstream call under `parent`, its context added to `headers`."""
        span = self._tracer.start_span(
            name,
            context=self._trace.set_span_in_context(parent),
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        self._propagator.inject(headers, context=self._trace.set_span_in_context(span))
        return span

    def ended(self, span, attributes, error=None):
        """Set `attributes`, mark the span failed with `error` (an error.type) if any, and end it."""
        span.set_attributes({key: value for key, value in attributes.items() if value is not None})
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()

    def shutdown(self):
        self.provider.shutdown()


def resource():
    """Who exports, for traces and metrics alike: OTEL_SERVICE_NAME (`bridge` by default), and
    the worker process as service.instance.id, so that each gunicorn worker's metrics are a
    series of their own for the collector, not one that several overwrite."""
    from opentelemetry.sdk.resources import Resource

    return Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME", "bridge"),
            "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
        }
    )
