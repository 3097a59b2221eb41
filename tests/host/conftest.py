"""Fixtures for the host tests: the OpenTelemetry SDK, installed once, exporting to memory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Otel:
    """The in-memory span exporter and metric reader installed for this test session."""

    spans: Any
    """An ``InMemorySpanExporter``."""
    metrics: Any
    """An ``InMemoryMetricReader``."""

    def finished_spans(self, call_id: str) -> list[Any]:
        """The finished spans of one call, found by its ``gen_ai.tool.call.id``."""
        return [
            s
            for s in self.spans.get_finished_spans()
            if (s.attributes or {}).get("gen_ai.tool.call.id") == call_id
        ]

    def points(self, metric: str, tool: str) -> list[Any]:
        """The data points of one charter metric for one tool label (cumulative)."""
        data = self.metrics.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name != metric:
                        continue
                    found.extend(
                        p
                        for p in m.data.data_points
                        if p.attributes.get("gen_ai.tool.name") == tool
                    )
        return found


@pytest.fixture(scope="session")
def otel() -> Iterator[Otel]:
    """Install SDK tracer and meter providers once: OpenTelemetry's globals can be set once
    per process. Hosts bind to proxies, so hosts built before this still report to it."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(meter_provider)
    assert trace.get_tracer_provider() is tracer_provider, (
        "another test installed a global TracerProvider first; install it once, here"
    )
    assert metrics.get_meter_provider() is meter_provider, (
        "another test installed a global MeterProvider first; install it once, here"
    )
    yield Otel(spans=exporter, metrics=reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
