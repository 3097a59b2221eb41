"""OpenTelemetry spans and metrics for invocations, or nothing when otel is not installed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ._shortcuts import meter_provider_reader, tracer_provider_reader

__all__ = (
    "DURATION_METRIC",
    "EFFECT_AGE_METRIC",
    "EFFECT_ATTEMPTS_METRIC",
    "EFFECT_DEPTH_METRIC",
    "INVOCATIONS_METRIC",
    "RATE_LIMITED_METRIC",
    "UNKNOWN_TOOL",
    "Telemetry",
    "tracing_installed",
)

INVOCATIONS_METRIC = "charter.tool.invocations"
"""Counter of invocations, by ``gen_ai.tool.name``, ``charter.outcome`` and ``error.type``."""

DURATION_METRIC = "charter.tool.duration"
"""Histogram of invocation durations in seconds, with the counter's attributes."""

RATE_LIMITED_METRIC = "charter.rate_limit.refusals"
"""Counter of calls a budget refused, by ``gen_ai.tool.name`` and ``charter.limit``.

The limit label is declared in code (``RateLimit.label``), so its cardinality is bounded.
"""

EFFECT_ATTEMPTS_METRIC = "charter.effect.attempts"
"""Counter of effect attempts, by ``charter.effect.name`` and ``charter.effect.status``."""

EFFECT_DEPTH_METRIC = "charter.effect.queue.depth"
"""Gauge of pending effects, as the last worker pass saw it."""

EFFECT_AGE_METRIC = "charter.effect.queue.oldest_age"
"""Gauge of the age in seconds of the oldest pending effect, as the last worker pass saw it."""

UNKNOWN_TOOL = "(unknown)"
"""The metrics' tool label for a name that matched no tool the caller may see.

Callers choose the names they send, so labelling metrics with them would let anyone grow
the metrics' cardinality; no tool can be called this (names cannot contain parentheses).
"""


_NO_SPAN: AbstractContextManager[None] = contextlib.nullcontext()
"""What ``Telemetry.span`` returns when there is nothing to trace (reusable)."""


class _Installed:
    """Whether an application installed an OpenTelemetry provider that records.

    Asked per call, since an application may install its provider after building the
    host; once one is installed it stays (OpenTelemetry refuses to replace it), so a yes
    is kept.
    """

    __slots__ = ("_inactive", "_on", "_read")

    def __init__(self, read: Callable[[], object], inactive: tuple[type, ...]) -> None:
        self._read = read
        self._inactive = inactive
        self._on = False

    def __call__(self) -> bool:
        if self._on:
            return True
        provider = self._read()
        if provider is None or isinstance(provider, self._inactive):
            return False
        self._on = True
        return True


def tracing_installed() -> Callable[[], bool]:
    """A check, asked per call, of whether an OpenTelemetry tracer provider that records is set.

    Always False without the OpenTelemetry API.
    """
    try:
        from opentelemetry import trace
    except ImportError:
        return lambda: False
    # get_tracer_provider() looks its environment variable up in os.environ on every call
    # until a provider is set, which costs more than the rest of an untraced call's
    # telemetry. Called once here, it installs a provider the environment names; after
    # that, the module global the reader returns answers without the lookup.
    trace.get_tracer_provider()
    return _Installed(
        tracer_provider_reader(trace), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    )


class Telemetry:
    """One span per invocation (GenAI ``execute_tool`` conventions), a counter and a histogram."""

    def __init__(self) -> None:
        """Bind to the global OpenTelemetry providers when the API is installed.

        The tracer and meter are proxies until an application installs its providers,
        so a host built before that still reports once they exist.
        """
        try:
            from opentelemetry import metrics, trace
        except ImportError:  # charter[otel] not installed: every method is a no-op
            self._tracer: Any = None
            return
        self._trace = trace
        self._tracer = trace.get_tracer("charter")
        # Without an installed tracer provider a span records nothing, yet starting one
        # still costs a context switch per call, so a span is started only once one is.
        self._tracing = tracing_installed()
        # Until an application installs a meter provider, the instruments are proxies
        # that drop every measurement, yet building a call's attributes and making the
        # two calls would cost more than the rest of its telemetry: checked the same way.
        # (get_meter, like get_tracer_provider, installs one the environment names.)
        self._metering = _Installed(meter_provider_reader(metrics), (metrics.NoOpMeterProvider,))
        meter = metrics.get_meter("charter")
        self._calls = meter.create_counter(
            INVOCATIONS_METRIC, unit="{invocation}", description="Tool invocations"
        )
        self._duration = meter.create_histogram(
            DURATION_METRIC, unit="s", description="Tool invocation duration"
        )
        self._rate_limited = meter.create_counter(
            RATE_LIMITED_METRIC, unit="{invocation}", description="Calls refused by a budget"
        )
        self._effect_attempts = meter.create_counter(
            EFFECT_ATTEMPTS_METRIC, unit="{attempt}", description="Effect attempts"
        )
        self._effect_depth = meter.create_gauge(
            EFFECT_DEPTH_METRIC, unit="{effect}", description="Pending effects"
        )
        self._effect_age = meter.create_gauge(
            EFFECT_AGE_METRIC, unit="s", description="Age of the oldest pending effect"
        )

    def span(self, tool: str, call_id: str | None) -> AbstractContextManager[Any]:
        """Open the ``execute_tool <name>`` span around one invocation.

        The context manager yields None when OpenTelemetry is not installed or no tracer
        provider is set (then nothing is started).
        """
        if self._tracer is None or not self._tracing():
            return _NO_SPAN
        return self._span(tool, call_id)

    @contextlib.contextmanager
    def _span(self, tool: str, call_id: str | None) -> Iterator[Any]:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
        if call_id is not None:
            attributes["gen_ai.tool.call.id"] = call_id
        with self._tracer.start_as_current_span(
            f"execute_tool {tool}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        ) as span:
            yield span

    def finish(
        self, span: Any, *, tool: str | None, outcome: str, code: str | None, seconds: float
    ) -> None:
        """Record the outcome on the span and in the metrics.

        Args:
            span: the span ``span`` yielded (None when not tracing).
            tool: the canonical name of the tool called, or None when the name matched no
                tool the caller may see.
            outcome: the outcome's ``kind``.
            code: the error code of a ``failed`` outcome.
            seconds: how long the invocation took.
        """
        if span is not None:
            if tool is not None:
                # An alias was called, or nothing yet: name the span for the canonical tool.
                span.update_name(f"execute_tool {tool}")
                span.set_attribute("gen_ai.tool.name", tool)
            span.set_attribute("charter.outcome", outcome)
            if code is not None:
                span.set_attribute("error.type", code)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, code))
        if self._tracer is None or not self._metering():
            return
        attributes = {"gen_ai.tool.name": tool or UNKNOWN_TOOL, "charter.outcome": outcome}
        if code is not None:
            attributes["error.type"] = code
        self._calls.add(1, attributes)
        self._duration.record(seconds, attributes)

    def rate_limited(self, *, tool: str, limit: str) -> None:
        """Count one call the budget ``limit`` refused."""
        if self._tracer is None or not self._metering():
            return
        self._rate_limited.add(1, {"gen_ai.tool.name": tool, "charter.limit": limit})

    def effect_span(self, name: str, key: str, attempt: int) -> AbstractContextManager[Any]:
        """Open the ``effect <name>`` span around one attempt (yields None when not tracing)."""
        if self._tracer is None or not self._tracing():
            return _NO_SPAN
        return self._tracer.start_as_current_span(  # type: ignore[no-any-return]
            f"effect {name}",
            kind=self._trace.SpanKind.CLIENT,
            attributes={
                "charter.effect.name": name,
                "charter.effect.key": key,
                "charter.effect.attempt": attempt,
            },
        )

    def effect_attempted(self, span: Any, *, name: str, status: str, error: str | None) -> None:
        """Record one attempt's result on its span and in the attempts counter."""
        if self._tracer is None:
            return
        if span is not None:
            span.set_attribute("charter.effect.status", status)
            if error is not None:
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        if self._metering():
            self._effect_attempts.add(
                1, {"charter.effect.name": name, "charter.effect.status": status}
            )

    def effect_backlog(self, *, depth: int, oldest_age: float) -> None:
        """Report the outbox's pending depth and its oldest pending effect's age."""
        if self._tracer is None or not self._metering():
            return
        self._effect_depth.set(depth)
        self._effect_age.set(oldest_age)
