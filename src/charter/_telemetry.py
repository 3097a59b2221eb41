"""OpenTelemetry spans and metrics for invocations, or nothing when otel is not installed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ("Telemetry",)


class Telemetry:
    """One span per invocation (GenAI ``execute_tool`` conventions), a counter and a histogram."""

    def __init__(self) -> None:
        """Bind to the global OpenTelemetry providers when the API is installed."""
        try:
            from opentelemetry import metrics, trace
        except ImportError:  # charter[otel] not installed: every method is a no-op
            self._tracer: Any = None
            return
        self._trace = trace
        self._tracer = trace.get_tracer("charter")
        meter = metrics.get_meter("charter")
        self._calls = meter.create_counter(
            "charter.tool.invocations", unit="{invocation}", description="Tool invocations"
        )
        self._duration = meter.create_histogram(
            "charter.tool.duration", unit="s", description="Tool invocation duration"
        )

    @contextlib.contextmanager
    def span(self, tool: str, call_id: str | None) -> Iterator[Any]:
        """Open the ``execute_tool <name>`` span around one invocation."""
        if self._tracer is None:
            yield None
            return
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if call_id is not None:
            attributes["gen_ai.tool.call.id"] = call_id
        with self._tracer.start_as_current_span(
            f"execute_tool {tool}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        ) as span:
            yield span

    def finish(
        self, span: Any, *, tool: str, outcome: str, code: str | None, seconds: float
    ) -> None:
        """Record the outcome on the span and in the metrics."""
        if self._tracer is None:
            return
        attributes = {"gen_ai.tool.name": tool, "charter.outcome": outcome}
        if code is not None:
            attributes["error.type"] = code
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
        span.set_attribute("charter.outcome", outcome)
        self._calls.add(1, attributes)
        self._duration.record(seconds, attributes)
