"""Benchmarks: charter's cost against a baseline measured in the same run.

Each ``bench/bench_*.py`` module exposes ``def cases() -> list[Case]``; ``python -m bench``
collects every module's cases, times them in interleaved rounds and writes one table to
``docs/benchmarks.md``. Absolute numbers depend on the machine; the ratio to a baseline
timed in the same process, round by round, is what a case is judged on.

Times are CPU time of the benchmark process (all its threads) by default, which a busy
machine disturbs far less than wall-clock time; ``--clock wall`` measures elapsed time
instead, for cases that wait on I/O.

A ``throughput`` case loads servers in processes of their own with wrk (``bench/_load.py``)
and compares requests per second, higher being better; an ``rss`` case compares a server's
resident memory after many calls with its memory after a few.

Timed assertions never go in the test suite: a loaded CI machine would make them flaky.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

__all__ = (
    "CLOCKS",
    "Case",
    "Check",
    "Clock",
    "Load",
    "Measure",
    "Operation",
    "Result",
    "Sides",
    "run_case",
)

Clock = Literal["cpu", "wall"]
"""What a case is timed with: the process's CPU time, or elapsed time."""

CLOCKS: dict[str, Callable[[], int]] = {
    "cpu": time.process_time_ns,
    "wall": time.perf_counter_ns,
}

Measure = Literal["time", "memory", "throughput", "rss"]
"""What a case compares: time per operation, memory per item, requests per second under
load (the operations return a ``Load``), or a server's resident memory in bytes (the
operations return it; ``baseline`` runs first, then ``run`` on the same server)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Load:
    """What one load run measured: throughput, latency percentiles and the server's CPU."""

    requests_per_second: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float
    """CPU time the server processes spent per answered request, in milliseconds: how much
    work a request costs them, however much of a CPU they got while loaded."""

    @staticmethod
    def median(loads: list[Load]) -> Load:
        """The median of each figure over rounds."""
        return Load(
            requests_per_second=statistics.median(x.requests_per_second for x in loads),
            p50_ms=statistics.median(x.p50_ms for x in loads),
            p99_ms=statistics.median(x.p99_ms for x in loads),
            cpu_ms=statistics.median(x.cpu_ms for x in loads),
        )


Operation = Callable[[], Awaitable[object]]
"""One timed operation: an async callable run many times per round."""

Check = Callable[[], Awaitable[None]]
"""Runs once before timing and raises if a side does not do what its case claims."""

_Figure = TypeVar("_Figure")
"""What one side measures in one round: microseconds, bytes per item or a ``Load``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One comparison: a charter operation against a baseline doing the same work without it."""

    name: str
    """What charter does, as it appears in the table."""
    baseline_name: str
    """What the baseline does."""
    run: Operation
    """The charter operation."""
    baseline: Operation
    """The baseline operation."""
    target: float
    """The ratio (charter / baseline) the case should stay under; for ``throughput``, the
    ratio of requests per second it should reach."""
    check: Check | None = None
    """Runs once before timing and raises if either operation does not do what the case
    claims (so a case never times a fast failure)."""
    note: str = ""
    """One sentence under the table: what exactly is measured."""
    rounds: int | None = None
    """This case's own number of rounds, for operations far slower than a call."""
    iterations: int | None = None
    """This case's own operations per round (registering 1,000 tools is one operation)."""
    measure: Measure = "time"
    """``time`` per operation, or ``memory``: the bytes an operation leaves allocated (the
    object it returns is kept until measured), divided by ``per``."""
    per: int = 1
    """How many items one operation makes, for memory per item."""
    clock: Clock | None = None
    """This case's own clock, over ``--clock``: ``wall`` for a case whose work happens
    partly in another process (a stdio server), which the CPU clock would not see."""
    close: Callable[[], Awaitable[None]] | None = None
    """Runs once after timing, in the same event loop, even when timing raised: closes what
    the case opened (a client session, a server listening on a port) while the loop still
    runs, rather than leaving it to the loop's final cancellation of every task at once."""


class Sides(NamedTuple):
    """What a case times: charter's operation, the baseline's, and the check of both (the
    ``Case`` fields of the same names).

    Several cases may time the same sides (a duration and a memory case) or share a check.
    """

    run: Operation
    baseline: Operation
    check: Check | None = None

    def case(
        self, name: str, baseline_name: str, *, target: float, note: str, **options: Any
    ) -> Case:
        """The case ``name`` against ``baseline_name`` timing these sides; ``options`` are
        its other ``Case`` fields."""
        return Case(
            name=name,
            baseline_name=baseline_name,
            target=target,
            note=note,
            **self._asdict(),
            **options,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """The medians of one case's rounds, both sides in the case's ``unit``."""

    case: Case
    charter: float
    """charter's median: microseconds per operation, bytes per item, or requests per second."""
    baseline: float
    """The baseline's median, in the same unit."""
    rounds: int
    iterations: int
    """Operations per round of each side (1 for memory, throughput and rss cases)."""
    clock: Clock
    loads: tuple[Load, Load] | None = None
    """``throughput``: charter's median load and the baseline's (their requests per second
    are the two medians)."""

    @staticmethod
    def of_rounds(
        case: Case, charter: list[float], baseline: list[float], *, iterations: int, clock: Clock
    ) -> Result:
        """The result of both sides' figures over the rounds (one figure per round)."""
        return Result(
            case=case,
            charter=statistics.median(charter),
            baseline=statistics.median(baseline),
            rounds=len(charter),
            iterations=iterations,
            clock=clock,
        )

    @property
    def unit(self) -> str:
        """``µs`` for time, ``B`` for memory, ``req/s`` for throughput."""
        if self.case.measure == "throughput":
            return "req/s"
        return "B" if self.case.measure in ("memory", "rss") else "µs"

    @property
    def ratio(self) -> float:
        """charter median / baseline median."""
        return self.charter / self.baseline

    @property
    def cpu_ratio(self) -> float | None:
        """``throughput``: the baseline's CPU time per request over charter's.

        What the throughput ratio would be if each server had a CPU of its own: on a shared
        machine, requests per second also move with how much of a CPU each server got.
        """
        if self.loads is None:
            return None
        mine, theirs = self.loads
        return theirs.cpu_ms / mine.cpu_ms if mine.cpu_ms else None

    @property
    def within_target(self) -> bool:
        """Whether the ratio is within the case's target (at least it, for throughput)."""
        if self.case.measure == "throughput":
            return self.ratio >= self.case.target
        return self.ratio <= self.case.target


async def _interleaved(
    case: Case, rounds: int, measure: Callable[[Operation], Awaitable[_Figure]]
) -> tuple[list[_Figure], list[_Figure]]:
    """``measure`` of each side per round: charter's figures, then the baseline's.

    The sides alternate which goes first, so drift in machine load and clock speed falls on
    both alike.
    """
    charter: list[_Figure] = []
    baseline: list[_Figure] = []
    for index in range(rounds):
        sides = (case.run, case.baseline) if index % 2 == 0 else (case.baseline, case.run)
        for side in sides:
            (charter if side is case.run else baseline).append(await measure(side))
    return charter, baseline


async def _time(operation: Operation, iterations: int, now: Callable[[], int]) -> float:
    """Microseconds per call of ``operation`` over ``iterations`` calls."""
    started = now()
    for _ in range(iterations):
        await operation()
    return (now() - started) / iterations / 1000


async def _measure(case: Case, *, rounds: int, iterations: int, clock: Clock) -> Result:
    try:
        return await _measure_time(case, rounds=rounds, iterations=iterations, clock=clock)
    finally:
        if case.close is not None:
            await case.close()


async def _measure_time(case: Case, *, rounds: int, iterations: int, clock: Clock) -> Result:
    now = CLOCKS[clock]
    if case.check is not None:
        await case.check()
    # Warm up both sides (caches, lazily built executors, the audit deque).
    await _time(case.run, iterations, now)
    await _time(case.baseline, iterations, now)
    charter, baseline = await _interleaved(case, rounds, lambda side: _time(side, iterations, now))
    return Result.of_rounds(case, charter, baseline, iterations=iterations, clock=clock)


async def _retained(operation: Operation) -> int:
    """Bytes still allocated once ``operation`` returned (what it built and keeps)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = await operation()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


async def _bytes_per_item(operation: Operation, per: int) -> float:
    """The bytes ``operation`` keeps, per item it makes."""
    return await _retained(operation) / per


async def _measure_memory(case: Case, *, rounds: int) -> Result:
    if case.check is not None:
        await case.check()
    charter, baseline = await _interleaved(
        case, rounds, lambda side: _bytes_per_item(side, case.per)
    )
    return Result.of_rounds(case, charter, baseline, iterations=1, clock="cpu")


async def _measure_load(case: Case, *, rounds: int) -> Result:
    """Interleaved load rounds (a short warm-up run of each side first)."""
    try:
        if case.check is not None:
            await case.check()
        if case.measure == "rss":
            baseline_bytes = await case.baseline()
            charter_bytes = await case.run()
            assert isinstance(baseline_bytes, int) and isinstance(charter_bytes, int)
            return Result(
                case=case,
                charter=charter_bytes,
                baseline=baseline_bytes,
                rounds=1,
                iterations=1,
                clock="wall",
            )
        await case.run()
        await case.baseline()
        charter, baseline = await _interleaved(case, rounds, _load_run)
        mine, theirs = Load.median(charter), Load.median(baseline)
        return Result(
            case=case,
            charter=mine.requests_per_second,
            baseline=theirs.requests_per_second,
            rounds=rounds,
            iterations=1,
            clock="wall",
            loads=(mine, theirs),
        )
    finally:
        if case.close is not None:
            await case.close()


async def _load_run(operation: Operation) -> Load:
    """One load run of a throughput side."""
    load = await operation()
    assert isinstance(load, Load), f"a throughput operation returned {load!r}"
    return load


def run_case(
    case: Case, *, rounds: int = 21, iterations: int = 300, clock: Clock = "cpu"
) -> Result:
    """Time one case with the garbage collector paused, as ``timeit`` does.

    A case's own ``rounds``, ``iterations`` and ``clock`` take precedence over the arguments; a
    ``memory`` case measures allocations instead (tracemalloc), with the collector on.
    """
    rounds = case.rounds or rounds
    iterations = case.iterations or iterations
    clock = case.clock or clock
    if case.measure == "memory":
        return asyncio.run(_measure_memory(case, rounds=rounds))
    if case.measure in ("throughput", "rss"):
        return asyncio.run(_measure_load(case, rounds=rounds))
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return asyncio.run(_measure(case, rounds=rounds, iterations=iterations, clock=clock))
    finally:
        if enabled:
            gc.enable()
