from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# `make test` lets the pytest processes cache bytecode (they import every test module), but
# the programs tests start must not: several tests rewrite a module and run a command on it
# again within the same second, at times at the same size, and a cached .pyc (keyed by the
# source's mtime in seconds and its size) would then be taken for the new source. (In the
# pytest processes, a module written by a test gets a fresh name each time: tests/cli's
# `write_target`.)
#
# pytest-xdist starts its workers after this file is imported, so they inherit the variable
# too, and Python reads it only at start-up: a worker would then cache nothing, and every
# worker of every run would rewrite and compile again each test module and each module of
# charter it imports (seconds of CPU per worker). So the first pytest process records
# whether it caches, and its workers do as it does.
_CACHING = "CHARTER_TESTS_CACHE_BYTECODE"
if "PYTEST_XDIST_WORKER" in os.environ:
    sys.dont_write_bytecode = os.environ.get(_CACHING) != "1"
else:
    os.environ[_CACHING] = "0" if sys.dont_write_bytecode else "1"
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

# Property tests judge the code, never the machine's speed: Hypothesis's per-example
# deadline and its "input generation is slow" health check are wall-clock checks that fail
# when the suite shares a loaded machine (more workers than cores, other processes beside
# it), so both are off for every property test; a test's own ``@settings`` inherit this.
settings.register_profile("charter", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("charter")


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio: the core uses the standard library's asyncio tools."""
    return "asyncio"


# `make test` runs the suite on pytest-xdist workers, a test file at a time (`--dist loadfile`,
# so a file's module fixtures are built once), in the order collected
# (`--no-loadscope-reorder`; xdist's default puts the files with the most tests first). The
# files below take longest, so they go first, longest first: with xdist's order, a one-test
# file of 90 s started five minutes into a 6 min 50 s run, and the run waited for it.
# Measured on a 2-core machine, 2026-12-07; a slow file missing here runs in file order.
LONGEST_FIRST = (
    "tests/battery/test_battery_transports.py",
    "tests/battery/test_battery_ledger_races.py",
    "tests/battery/test_battery_ledger.py",
    "tests/battery/test_battery_approvals.py",
    "tests/cli/test_cli_serve_limits.py",
    "tests/battery/test_battery_crash.py",
    "tests/examples/test_travel_openapi.py",
    "tests/examples/test_travel_tour.py",
    "tests/gateway/test_gateway_serve.py",
    "tests/battery/test_battery_protocol.py",
    "tests/store/test_sql_concurrency.py",
    "tests/battery/test_battery_effects.py",
    "tests/cli/test_cli_limits.py",
    "tests/http/test_http_openapi.py",
    "tests/harness/test_provider_contracts.py",
    "tests/gateway/test_gateway_upstreams.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files of LONGEST_FIRST first; the rest keep their order."""
    rank = {path: position for position, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


# -- OpenTelemetry: the SDK installed once per process, exporting to memory ----------------
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
