"""Rate-limit buckets on SQLite and PostgreSQL: shared by hosts, exact under concurrency."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import Completed, ErrorCode, Failed, Principal, RateLimit, Registry
from charter.host import Host
from charter.ledger.budgets import Bucket, BudgetStore
from charter.store import SqlStore

SqlStoreFactory = Callable[..., Awaitable[SqlStore]]
pytestmark = pytest.mark.anyio


class Search(BaseModel):
    destination: str


class Trips(BaseModel):
    found: list[str]


def search_registry(ran: list[str]) -> Registry:
    async def search(args: Search) -> Trips:
        ran.append(args.destination)
        await anyio.sleep(0.01)
        return Trips(found=[args.destination])

    registry = Registry()
    limits = [RateLimit(calls=10, per=60)]
    registry.register(tiered_tool("trips.search", "read", search, Search, Trips, limits=limits))
    return registry


PLANNER = Principal(subject="planner", tenant_id="acme", scopes=frozenset({"*"}), kind="agent")

BUCKET = Bucket(
    tool="trips.search",
    limit="3/60s by principal",
    holder="acme/planner",
    tenant="acme",
    interval=20.0,
    window=60.0,
)


async def test_sql_store_is_a_budget_store_and_spends_by_the_window(sql_store: SqlStore) -> None:
    assert isinstance(sql_store, BudgetStore)
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    spent = [await sql_store.spend_budget(BUCKET, cost=20.0, now=now) for _ in range(4)]
    assert spent == [True, True, True, False]
    assert await sql_store.budget_arrival(BUCKET) == pytest.approx(now + 60)
    assert not await sql_store.spend_budget(BUCKET, cost=20.0, now=now + 19.9)
    assert await sql_store.spend_budget(BUCKET, cost=20.0, now=now + 20)
    await sql_store.refund_budget(BUCKET, cost=20.0)
    [usage] = await sql_store.budget_usage(now=now + 20)
    assert usage.bucket == BUCKET and usage.capacity == 3 and usage.used(now + 20) == 2
    assert await sql_store.budget_usage(now=now + 20, tenant="globex") == []
    assert await sql_store.prune_budgets(now=now + 20) == 0
    assert await sql_store.prune_budgets(now=now + 80) == 1
    assert await sql_store.budget_arrival(BUCKET) is None


async def test_64_concurrent_calls_on_two_hosts_sharing_the_store_run_exactly_10(
    make_sql_store: SqlStoreFactory,
) -> None:
    ran: list[str] = []
    hosts = [Host(search_registry(ran), store=await make_sql_store(pool_size=8)) for _ in range(2)]
    outcomes: list[object] = []

    async def call(i: int) -> None:
        host = hosts[i % 2]
        outcomes.append(await host.invoke("trips.search", {"destination": f"d{i}"}, PLANNER))

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(call, i)
    assert sum(isinstance(o, Completed) for o in outcomes) == 10
    refused = [o for o in outcomes if isinstance(o, Failed)]
    assert len(refused) == 54 and {o.code for o in refused} == {ErrorCode.RATE_LIMITED}
    assert len(ran) == 10
