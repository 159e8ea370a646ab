"""The export of ended spans, off the request path (tracing.py); imported only when traces are on."""

import collections
import logging
import os
import threading

from opentelemetry.sdk.trace import SpanProcessor
from prometheus_client import Counter

log = logging.getLogger(__name__)

DROPPED = Counter(
    "bridge_trace_spans_dropped", "Spans not exported: the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)."
)


class Batches(SpanProcessor):
    """A span processor: ended spans in a bounded queue, exported in batches by a thread of its
    own, started in the process that ends its first span (a gunicorn worker).

    The SDK's BatchSpanProcessor logs a warning for every span it drops; this one counts them.
    The batching variables are the standard OTEL_BSP_* ones.
    """

    def __init__(self, exporter):
        self._exporter = exporter
        self._capacity = _number("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self._batch = min(_number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), self._capacity)
        self._delay = _number("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self._spans = collections.deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._pid = self._thread = None
        DROPPED.inc(0)  # at zero while traces are on

    def on_start(self, span, parent_context=None):
        pass

    def on_end(self, span):
        if not span.context.trace_flags.sampled:
            return
        if self._pid != os.getpid():
            self._start()
        if len(self._spans) >= self._capacity:
            DROPPED.inc()
            return
        self._spans.append(span)
        if len(self._spans) >= self._batch:
            with self._ready:
                self._ready.notify()

    def _start(self):
        with self._ready:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._spans = collections.deque()  # a forked copy's are the parent's to export
            self._thread = threading.Thread(target=self._run, name="span-exporter", daemon=True)
            self._thread.start()

    def _run(self):
        while True:
            with self._ready:
                if not self._stopping and len(self._spans) < self._batch:
                    self._ready.wait(self._delay)
                stopping = self._stopping
            self._export_all()
            if stopping:
                return

    def _export_all(self):
        while self._spans:
            batch = []
            while len(batch) < self._batch and self._spans:
                try:
                    batch.append(self._spans.popleft())
                except IndexError:  # force_flush took the last meanwhile
                    break
            try:
                self._exporter.export(batch)
            except Exception:  # the exporter's own failures are results; anything else is logged
                log.exception("exporting %d spans failed", len(batch))

    def force_flush(self, timeout_millis=30000):
        self._export_all()
        return True

    def shutdown(self):
        """Export what is queued, within OTEL_BSP_EXPORT_TIMEOUT: the TracerProvider calls it at exit."""
        with self._ready:
            if self._stopping:
                return
            self._stopping = True
            self._ready.notify()
        if self._thread is not None:  # a worker exiting waits this long at most for what is queued
            self._thread.join(timeout=_number("OTEL_BSP_EXPORT_TIMEOUT", 30000) / 1000)
        self._exporter.shutdown()


def _number(variable, default):
    """An OTEL_BSP_* variable's whole number (settings.traces checked it), or its default."""
    value = os.environ.get(variable)
    return int(value) if value else default
