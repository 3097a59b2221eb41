"""Reliability battery, ledger core under concurrency (reliability.md §5.1: L01, L06, L12,
L15, L16), on SQLite and PostgreSQL.

The races of the ledger: many callers of one request id at once (the same input, two inputs,
a blinded pre-check, a five-connection pool) and many request ids at once. The rest of the
ledger rows are in test_battery_ledger.py; the two files are one family, split so that two
workers of `make test` can run them side by side (each burst file takes minutes). The tool,
the ``Observer`` and ``burst`` are described there and in ``battery_support``.
"""

from __future__ import annotations

import asyncio

import pytest
from battery_support import (
    ALICE,
    CALLERS,
    EFFECTS,
    ITERATIONS,
    LEDGER,
    EnvFactory,
    Observer,
    battery_host,
    burst,
    completed,
    executed_once,
    failure,
    no_errors_logged,
    rid,
    widget,
)
from tests.store.conftest import large_pool_lock

from charter import ErrorCode
from charter.ledger import LedgerEntry
from charter.outcome import Completed, ToolOutcome
from charter.store import SqlStore

pytestmark = pytest.mark.anyio


# -- L01 ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_L01_concurrent_same_key_single_execution(
    make_env: EnvFactory, observer: Observer, caplog: pytest.LogCaptureFixture
) -> None:
    env = await make_env(pool_size=CALLERS + 2, in_progress_wait=60)
    for iteration in range(ITERATIONS):
        request_id = rid()
        outcomes = await burst(
            env.host, env.battery, [("create_widget", widget("once", request_id), ALICE)] * CALLERS
        )
        first = executed_once(outcomes)
        assert sum(completed(o).replayed for o in outcomes) == CALLERS - 1
        assert isinstance(first.output, dict)
        assert await observer.effect_ids(request_id=request_id) == [first.output["widget_id"]]
        assert await observer.count(LEDGER, request_id=request_id) == 1
        assert env.battery.runs == iteration + 1
    no_errors_logged(caplog)


# -- L06 ------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_L06_concurrent_mismatch_race(
    make_env: EnvFactory, observer: Observer, caplog: pytest.LogCaptureFixture
) -> None:
    env = await make_env(pool_size=CALLERS + 2, in_progress_wait=60)
    half = CALLERS // 2
    for iteration in range(ITERATIONS):
        request_id = rid()
        calls = [
            ("create_widget", widget("A" if i % 2 else "B", request_id), ALICE)
            for i in range(2 * half)
        ]
        outcomes = await burst(env.host, env.battery, calls)
        winner = next(o for o in outcomes if isinstance(o, Completed) and not o.replayed)
        assert isinstance(winner.output, dict)
        won = winner.output["name"]
        for (_, arguments, _), outcome in zip(calls, outcomes, strict=True):
            if arguments["name"] == won:
                assert completed(outcome).output == winner.output
            else:
                failure(outcome, ErrorCode.IDEMPOTENCY_CONFLICT, "idempotency_key_reused")
        assert await observer.effect_ids(request_id=request_id) == [winner.output["widget_id"]]
        assert env.battery.runs == iteration + 1
    no_errors_logged(caplog)


# -- L12 ------------------------------------------------------------------------------------


BLIND_BURSTS = 5
SMALL_POOL_BURSTS = 5


class BlindStore(SqlStore):
    """A deliberately broken pre-check: ``get_entry`` never finds a committed request, so
    every call, even a late duplicate, goes on to claim (as DBOS's
    ``test_sync_ds_conflicts_when_duplicate_execution_wins`` forces a lost race)."""

    async def get_entry(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> LedgerEntry | None:
        return None


@pytest.mark.slow
async def test_L12_loser_never_masks_winner(
    store_url: str, observer: Observer, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        large_pool_lock(store_url, CALLERS + 2),
        BlindStore(store_url, pool_size=CALLERS + 2, busy_timeout=60) as store,
    ):
        battery, host = await battery_host(store, in_progress_wait=60)
        request_id = rid()
        first = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
        stored = await observer.entry(request_id)
        # The loser's claim conflicts and reads the winner's committed row: a replay, never
        # a raw unique violation, and nothing written over the winner's row.
        late = completed(await host.invoke("create_widget", widget("w", request_id), ALICE))
        assert late == first.model_copy(update={"replayed": True})
        failure(
            await host.invoke("create_widget", widget("other", request_id), ALICE),
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "idempotency_key_reused",
        )
        assert await observer.entry(request_id) == stored
        # The blind pre-check forces every late caller into a lost claim, so each burst is
        # 63 forced losses; L01 already repeats the burst 20 times, 5 suffice here.
        for _ in range(BLIND_BURSTS):
            burst_id = rid()
            calls = [("create_widget", widget("w", burst_id), ALICE)] * CALLERS
            winner = executed_once(await burst(host, battery, calls))
            assert isinstance(winner.output, dict)
            assert await observer.effect_ids(request_id=burst_id) == [winner.output["widget_id"]]
        assert battery.runs == BLIND_BURSTS + 1
    no_errors_logged(caplog)


# -- L15 / L16 ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_L15_small_pool_no_deadlock(
    make_env: EnvFactory, observer: Observer, caplog: pytest.LogCaptureFixture
) -> None:
    # 5 bursts, not 20: every burst queues 64 callers on 5 connections, so starvation or
    # a pool deadlock stops the first one (its timeout); L01 repeats the race itself.
    env = await make_env(pool_size=5, in_progress_wait=60)
    for iteration in range(SMALL_POOL_BURSTS):
        request_id = rid()
        calls = [("create_widget", widget("w", request_id), ALICE)] * CALLERS
        winner = executed_once(await burst(env.host, env.battery, calls))
        assert isinstance(winner.output, dict)
        assert await observer.effect_ids(request_id=request_id) == [winner.output["widget_id"]]
        assert env.battery.runs == iteration + 1
    no_errors_logged(caplog)


KEYS = 1000
WORKERS = 16


@pytest.mark.slow
async def test_L16_many_keys_no_false_conflicts(
    make_env: EnvFactory,
    observer: Observer,
    store_backend: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One run of 1,000 keys (not 20): the keys are the repetition. On PostgreSQL the
    # default wait (5 s) applies: different keys never wait for each other, so a
    # table-level lock would show up as REQUEST_IN_PROGRESS. SQLite has one write lock
    # for the whole database by design, and its busy handler is not first-come
    # first-served: on a loaded machine one of 16 writers can wait past 5 s. There the
    # row checks that queueing writers never conflict, with a wait that allows the queue.
    wait = 60.0 if store_backend == "sqlite" else 5.0
    env = await make_env(pool_size=WORKERS + 2, in_progress_wait=wait)
    keys = [rid() for _ in range(KEYS)]
    barrier = asyncio.Barrier(WORKERS)

    async def worker(mine: list[str]) -> list[ToolOutcome]:
        await barrier.wait()
        return [await env.host.invoke("create_widget", widget(k, k), ALICE) for k in mine]

    async with asyncio.timeout(110):
        chunks = await asyncio.gather(*(worker(keys[w::WORKERS]) for w in range(WORKERS)))
    outcomes = [o for chunk in chunks for o in chunk]
    assert [o for o in outcomes if not (isinstance(o, Completed) and not o.replayed)] == []
    assert await observer.count(EFFECTS) == KEYS
    assert await observer.count(LEDGER) == KEYS
    no_errors_logged(caplog)
