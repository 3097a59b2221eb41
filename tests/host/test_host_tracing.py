"""Tracing and metrics with the OpenTelemetry SDK: one ``execute_tool`` span per invocation
(GenAI semantic conventions), a counter and a duration histogram by tool and outcome."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import ErrorCode, Principal, Registry
from charter._telemetry import DURATION_METRIC, INVOCATIONS_METRIC, UNKNOWN_TOOL
from charter.host import CallOptions, Host
from charter.outcome import Completed, Failed, InteractionRequired

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset({"x:read"}))


class In(BaseModel):
    n: int = 1


class Out(BaseModel):
    n: int


async def echo(data: In) -> Out:
    return Out(n=data.n)


def _host() -> tuple[Host, str]:
    """A host with a uniquely named tool, so cumulative metrics of other tests never mix in."""
    name = "traced_" + uuid.uuid4().hex[:12]
    registry = Registry()
    traced = tiered_tool(
        name, "read", echo, In, Out, aliases=[name + "_old"], required_scopes=["x:read"]
    )
    registry.register(traced)
    registry.register(tiered_tool(name + "_confirm", "sensitive", echo, In, Out))
    return Host(registry), name


def _call() -> CallOptions:
    return CallOptions(call_id="call_" + uuid.uuid4().hex)


def _one_span(otel: Any, call: CallOptions) -> Any:
    assert call.call_id is not None
    spans = otel.finished_spans(call.call_id)
    assert len(spans) == 1, spans
    return spans[0]


async def test_a_completed_call_has_one_execute_tool_span(otel: Any) -> None:
    host, name = _host()
    call = _call()
    outcome = await host.invoke(name, {"n": 2}, PRINCIPAL, call=call)
    assert isinstance(outcome, Completed)
    span = _one_span(otel, call)
    assert span.name == f"execute_tool {name}"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call.call_id,
        "charter.outcome": "completed",
    }
    assert span.status.status_code is StatusCode.UNSET


async def test_a_failed_call_sets_error_status_and_error_type(otel: Any) -> None:
    host, name = _host()
    call = _call()
    outcome = await host.invoke(name, {"n": "two"}, PRINCIPAL, call=call)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.INVALID_INPUT
    span = _one_span(otel, call)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "INVALID_INPUT"
    assert span.attributes["error.type"] == "INVALID_INPUT"
    assert span.attributes["charter.outcome"] == "failed"


async def test_an_interaction_is_not_an_error(otel: Any) -> None:
    host, name = _host()
    call = _call()
    outcome = await host.invoke(
        name + "_confirm", {"_charter": {"requestId": str(uuid.uuid4())}}, PRINCIPAL, call=call
    )
    assert isinstance(outcome, InteractionRequired)
    span = _one_span(otel, call)
    assert span.status.status_code is StatusCode.UNSET
    assert span.attributes["charter.outcome"] == "interaction-required"
    assert "error.type" not in span.attributes


async def test_an_alias_call_is_traced_under_the_canonical_name(otel: Any) -> None:
    host, name = _host()
    call = _call()
    assert isinstance(await host.invoke(name + "_old", {}, PRINCIPAL, call=call), Completed)
    span = _one_span(otel, call)
    assert span.name == f"execute_tool {name}"
    assert span.attributes["gen_ai.tool.name"] == name


async def test_an_unknown_name_is_traced_bounded_and_counted_as_unknown(otel: Any) -> None:
    host, _ = _host()
    before = sum(p.value for p in otel.points(INVOCATIONS_METRIC, UNKNOWN_TOOL))
    call = _call()
    long_name = "x" * 10_000
    outcome = await host.invoke(long_name, {}, PRINCIPAL, call=call)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.NOT_FOUND
    span = _one_span(otel, call)
    assert len(span.name) <= len("execute_tool ") + 200
    assert span.attributes["error.type"] == "NOT_FOUND"
    after = sum(p.value for p in otel.points(INVOCATIONS_METRIC, UNKNOWN_TOOL))
    assert after == before + 1
    assert otel.points(INVOCATIONS_METRIC, long_name) == []


async def test_a_name_that_is_not_a_string_is_traced_without_error(otel: Any) -> None:
    host, _ = _host()
    call = _call()
    outcome = await host.invoke(None, {}, PRINCIPAL, call=call)  # type: ignore[arg-type]
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.NOT_FOUND
    span = _one_span(otel, call)
    assert span.attributes["gen_ai.tool.name"] == "None"


async def test_each_invocation_has_its_own_span(otel: Any) -> None:
    host, name = _host()
    calls = [_call() for _ in range(5)]
    for call in calls:
        await host.invoke(name, {}, PRINCIPAL, call=call)
    for call in calls:
        _one_span(otel, call)


async def test_the_span_is_a_child_of_the_callers_span(otel: Any) -> None:
    host, name = _host()
    call = _call()
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("agent turn") as parent:
        await host.invoke(name, {}, PRINCIPAL, call=call)
    span = _one_span(otel, call)
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id


async def test_the_counter_and_histogram_are_labelled_by_tool_and_outcome(otel: Any) -> None:
    host, name = _host()
    await host.invoke(name, {}, PRINCIPAL)
    await host.invoke(name, {}, PRINCIPAL)
    await host.invoke(name, {"n": "bad"}, PRINCIPAL)
    await host.invoke(name, {}, None)
    counts = {
        (p.attributes["charter.outcome"], p.attributes.get("error.type")): p.value
        for p in otel.points(INVOCATIONS_METRIC, name)
    }
    assert counts == {
        ("completed", None): 2,
        ("failed", "INVALID_INPUT"): 1,
        ("failed", "UNAUTHENTICATED"): 1,
    }
    durations = {
        (p.attributes["charter.outcome"], p.attributes.get("error.type")): p
        for p in otel.points(DURATION_METRIC, name)
    }
    assert {key: p.count for key, p in durations.items()} == counts
    for point in durations.values():
        assert point.sum >= 0
