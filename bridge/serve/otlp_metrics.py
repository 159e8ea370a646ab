"""The GenAI conventions' metrics over OTLP/HTTP, beside their Prometheus form (observability.py),
when the standard OTEL_* variables ask for OTLP metrics (settings.otlp_metrics).

Imported only then. A request only adds to the SDK's in-memory aggregates; a reader thread of
each worker exports them every OTEL_METRIC_EXPORT_INTERVAL (60000 ms), waiting at most
OTEL_METRIC_EXPORT_TIMEOUT (30000 ms) for the collector, so one that is down costs a request
nothing. The attributes are the Prometheus labels' values, bounded the same way.
"""

from . import tracing


class Meters:
    """The instruments, named, united and bucketed as the GenAI semantic conventions say."""

    def __init__(self, seconds, per_token, token_buckets):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        self.provider = MeterProvider(metric_readers=[reader], resource=tracing.resource())
        meter = self.provider.get_meter("bridge")
        self._duration = meter.create_histogram(
            "gen_ai.server.request.duration",
            unit="s",
            description="From request to the end of its answer (a stream's whole length).",
            explicit_bucket_boundaries_advisory=seconds,
        )
        self._first_token = meter.create_histogram(
            "gen_ai.server.time_to_first_token",
            unit="s",
            description="From request to a stream's first event for the client (streams only).",
            explicit_bucket_boundaries_advisory=seconds,
        )
        self._per_token = meter.create_histogram(
            "gen_ai.server.time_per_output_token",
            unit="s",
            description="A stream's time after its first event, per output token after the first.",
            explicit_bucket_boundaries_advisory=per_token,
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens per request, by gen_ai.token.type: input (cached included) or output.",
            explicit_bucket_boundaries_advisory=token_buckets,
        )

    def record(self, attributes, duration, first_token, per_token, tokens):
        """One request's measures; `attributes` are the gen_ai.* and bridge.deployment ones."""
        self._duration.record(duration, attributes)
        if first_token is not None:
            self._first_token.record(first_token, attributes)
        if per_token is not None:
            self._per_token.record(per_token, attributes)
        for kind, count in zip(("input", "output"), tokens, strict=True):
            if count:
                self._tokens.record(count, {**attributes, "gen_ai.token.type": kind})
