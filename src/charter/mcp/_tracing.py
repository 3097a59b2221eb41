"""The SDK's span per MCP message, started only while a tracer provider records.

The low-level ``Server`` puts its ``OpenTelemetryMiddleware`` in ``server.middleware``
(documented there: drop it from the list to opt out). It wraps every message in a SERVER
span, parented on the W3C trace context of the request's ``_meta``. With no tracer
provider installed the span records nothing, yet building it cost about 100,000
instructions a ``tools/call`` (5% of the request, callgrind, 2026-12-07). ``WhenTracing``
keeps the SDK's middleware and runs it when either:

- a provider that records is installed (the question charter's own ``execute_tool`` span
  asks): its span is then the parent of charter's; or
- the message's ``_meta`` carries a field of the global propagator (``traceparent``,
  ``tracestate``, ``baggage`` by default): even without a provider the SDK's middleware
  makes that context current, so the handler's outgoing calls (a gateway's call to its
  upstream server carries ``traceparent`` in its ``_meta`` too) pass the caller's trace on.

Otherwise the message goes straight on, as it would through a span that records nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from opentelemetry import propagate

from .._telemetry import tracing_installed

__all__ = ("WhenTracing", "trace_only_when_recording")

_SDK_SPAN_MIDDLEWARE = "OpenTelemetryMiddleware"
"""The class name of the SDK's span middleware (its module is private, so it is not
imported; ``tests/mcp/test_mcp_tracing.py`` checks that the name still finds it)."""


class WhenTracing:
    """Server middleware: run ``inner`` while a provider records or the message carries a trace."""

    __slots__ = ("inner", "tracing")

    def __init__(self, inner: ServerMiddleware[Any], tracing: Callable[[], bool]) -> None:
        """Wrap the SDK middleware ``inner``."""
        self.inner = inner
        self.tracing = tracing

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Run the message through ``inner`` when it is traced, else straight on."""
        if self.tracing() or _carries_trace_context(ctx.meta):
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def _carries_trace_context(meta: Mapping[str, Any] | None) -> bool:
    """Whether ``meta`` holds a field the global propagator reads.

    The propagator is looked up per message: an application may set another after the
    server is built.
    """
    if not meta:
        return False
    return not propagate.get_global_textmap().fields.isdisjoint(meta)


def trace_only_when_recording(middleware: list[ServerMiddleware[Any]]) -> None:
    """Wrap the SDK's span middleware in ``middleware`` (a server's list) in ``WhenTracing``."""
    tracing = tracing_installed()
    middleware[:] = [
        WhenTracing(m, tracing) if type(m).__name__ == _SDK_SPAN_MIDDLEWARE else m
        for m in middleware
    ]
