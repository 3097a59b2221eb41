"""Effects in OpenTelemetry: one ``effect <name>`` span per attempt, an attempts counter by
name and status, and the outbox's depth and oldest age as gauges after a worker pass."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from tests.effects.kit import FakeProvider, build, refund

from charter._telemetry import EFFECT_AGE_METRIC, EFFECT_ATTEMPTS_METRIC, EFFECT_DEPTH_METRIC

pytestmark = pytest.mark.anyio


def _points(otel: Any, metric: str) -> list[Any]:
    data = otel.metrics.get_metrics_data()
    found: list[Any] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for m in scope.metrics:
                if m.name == metric:
                    found.extend(m.data.data_points)
    return found


async def test_each_attempt_is_a_span_and_counted_by_status(otel: Any) -> None:
    host, _ = build(provider=FakeProvider(failures=1))
    await refund(host)
    [record] = await host.effects.list()
    while (await host.effects.get(record.key)).status == "pending":  # type: ignore[union-attr]
        await host.effects.work(once=True)
    spans = [
        s
        for s in otel.spans.get_finished_spans()
        if (s.attributes or {}).get("charter.effect.key") == record.key
    ]
    assert [s.attributes["charter.effect.attempt"] for s in spans] == [1, 2]
    failed, delivered = spans
    assert failed.name == "effect payments.refund" and failed.kind is SpanKind.CLIENT
    assert failed.attributes["charter.effect.status"] == "pending"
    assert failed.status.status_code is StatusCode.ERROR
    assert "ConnectionError" in (failed.status.description or "")
    assert delivered.attributes["charter.effect.status"] == "delivered"
    assert delivered.status.status_code is StatusCode.UNSET
    counted = {
        p.attributes["charter.effect.status"]: p.value
        for p in _points(otel, EFFECT_ATTEMPTS_METRIC)
        if p.attributes["charter.effect.name"] == "payments.refund"
    }
    assert counted["pending"] >= 1 and counted["delivered"] >= 1


async def test_a_worker_pass_reports_the_backlog(otel: Any) -> None:
    host, _ = build(provider=FakeProvider(failures=10**9), max_attempts=50)
    await refund(host)
    await refund(host)
    await host.effects.work(once=True)
    [depth] = _points(otel, EFFECT_DEPTH_METRIC)
    [age] = _points(otel, EFFECT_AGE_METRIC)
    assert depth.value == 2
    assert age.value >= 0.0
