"""The SDK's span per MCP message: kept, parenting charter's ``execute_tool`` span, while a
tracer provider records; skipped while none does (``charter.mcp._tracing``)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client import Client
from mcp.server.lowlevel import Server
from opentelemetry import trace
from opentelemetry.trace import SpanKind, format_trace_id

from charter.host import Host
from charter.mcp import ConnectionState, create_server
from charter.mcp._tracing import WhenTracing

pytestmark = pytest.mark.anyio


class Recorder:
    """An SDK server middleware that notes each message it sees, then passes it on."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        self.seen.append(ctx.method)
        return await call_next(ctx)


class Context:
    """What the SDK's span middleware reads of a message's context."""

    method = "tools/call"
    protocol_version = "2026-07-28"
    request_id = 7

    def __init__(self, meta: dict[str, Any] | None = None) -> None:
        self.params = {"name": "echo"}
        self.meta = meta


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


async def test_the_sdk_span_middleware_is_found_and_wrapped(host: Host) -> None:
    # The SDK's module for it is private: the wrapper finds it by class name, so a rename
    # in the SDK would leave the span on for every message. This notices it.
    server = create_server(host)
    wrapped = [m for m in server.middleware if isinstance(m, WhenTracing)]
    assert [type(m.inner).__name__ for m in wrapped] == ["OpenTelemetryMiddleware"]
    assert not any(type(m).__name__ == "OpenTelemetryMiddleware" for m in server.middleware)


async def test_without_a_recording_provider_the_message_skips_the_sdk_span() -> None:
    inner = Recorder()
    skipped = WhenTracing(inner, tracing=lambda: False)
    traced = WhenTracing(inner, tracing=lambda: True)

    async def handler(ctx: Any) -> dict[str, Any]:
        return {"handled": ctx.method}

    assert await skipped(Context(), handler) == {"handled": "tools/call"}  # type: ignore[arg-type]
    assert inner.seen == []
    assert await traced(Context(), handler) == {"handled": "tools/call"}  # type: ignore[arg-type]
    assert inner.seen == ["tools/call"]


async def test_a_message_carrying_a_trace_passes_it_on_even_when_nothing_records(
    host: Host,
) -> None:
    # Without a provider the SDK's middleware still makes the caller's traceparent current,
    # so what the handler calls next (an upstream MCP server, through the SDK's client)
    # carries it on. Skipping the middleware must not break that chain.
    [wrapped] = [m for m in create_server(host).middleware if isinstance(m, WhenTracing)]
    untraced = WhenTracing(wrapped.inner, tracing=lambda: False)
    seen: list[str] = []

    async def handler(ctx: Any) -> None:
        seen.append(format_trace_id(trace.get_current_span().get_span_context().trace_id))

    await untraced(Context({"traceparent": TRACEPARENT}), handler)  # type: ignore[arg-type]
    await untraced(Context({"io.modelcontextprotocol/clientInfo": {}}), handler)  # type: ignore[arg-type]
    assert seen == [TRACE_ID, format_trace_id(0)]


async def test_with_a_provider_the_sdk_span_parents_charters_execute_tool_span(
    otel: Any, host: Host, mode: str
) -> None:
    server: Server[ConnectionState] = create_server(host, principal=None)
    otel.spans.clear()  # the exporter is the process's: only this test's spans from here
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("echo", {"text": "ab"})
    assert result.is_error is False, result
    spans = otel.spans.get_finished_spans()
    [tool_span] = [s for s in spans if s.name == "execute_tool echo"]
    [sdk_span] = [s for s in spans if s.name == "tools/call echo"]
    assert sdk_span.kind == SpanKind.SERVER
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == sdk_span.context.span_id
