"""On SQLite, a moment's lock or a caller that hangs up leaves no budget taken."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool
from tests.store.conftest import SQLITE_ONLY, SqlStoreFactory

from charter import Completed, ErrorCode, Failed, InFlight, Principal, RateLimit, Registry
from charter.host import Host
from charter.store import SqlStore

pytestmark = pytest.mark.anyio


class Search(BaseModel):
    destination: str


class Trips(BaseModel):
    found: list[str]


def search_host(store: SqlStore, *limits: InFlight | RateLimit) -> Host:
    async def search(args: Search) -> Trips:
        return Trips(found=[args.destination])

    registry = Registry()
    registry.register(
        tiered_tool("trips.search", "read", search, Search, Trips, limits=list(limits))
    )
    return Host(registry, store=store)


def someone(subject: str) -> Principal:
    return Principal(subject=subject, tenant_id="acme", scopes=frozenset({"*"}), kind="agent")


PLANNER = someone("planner")


async def used(store: SqlStore) -> dict[str, int]:
    now = datetime.now(UTC).timestamp()
    return {u.bucket.limit: u.used(now) for u in await store.budget_usage(now=now)}


@SQLITE_ONLY
async def test_calls_answered_unavailable_while_the_database_was_locked_hold_no_slot(
    make_sql_store: SqlStoreFactory, tmp_path: Path
) -> None:
    store = await make_sql_store(busy_timeout=0.2)
    host = search_host(store, InFlight(limit=2, key="tool"), RateLimit(calls=100, per=60))
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, PLANNER), Completed)
    lock = sqlite3.connect(tmp_path / "charter.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # an operator's shell, a backup: the lock, briefly
    try:
        for _ in range(2):
            refused = await host.invoke("trips.search", {"destination": "x"}, PLANNER)
            assert isinstance(refused, Failed) and refused.code is ErrorCode.PROVIDER_UNAVAILABLE
            assert refused.reason == "budgets_unavailable"
    finally:
        lock.execute("COMMIT")
        lock.close()
    for subject in ("planner", "booker"):
        outcome = await host.invoke("trips.search", {"destination": "x"}, someone(subject))
        assert isinstance(outcome, Completed)


@SQLITE_ONLY
async def test_a_caller_gone_while_its_spend_waited_for_the_lock_keeps_nothing(
    make_sql_store: SqlStoreFactory, tmp_path: Path
) -> None:
    store = await make_sql_store(busy_timeout=2)
    host = search_host(store, InFlight(limit=1), RateLimit(calls=3, per=3_600, name="hourly"))
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, PLANNER), Completed)
    lock = sqlite3.connect(tmp_path / "charter.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    caller = anyio.CancelScope()

    async def call() -> None:
        with caller:
            await host.invoke("trips.search", {"destination": "y"}, PLANNER)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.2)  # the call waits in its spend; the client goes away
            caller.cancel()
            await anyio.sleep(0.05)
            lock.execute("COMMIT")  # the spend goes through, after its caller left
    finally:
        lock.close()
    assert await used(store) == {"hourly": 1}
    assert isinstance(await host.invoke("trips.search", {"destination": "z"}, PLANNER), Completed)
    assert await used(store) == {"hourly": 2}
