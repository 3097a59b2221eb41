"""Rate-limit buckets on SQLite and PostgreSQL: shared by hosts, exact under concurrency."""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import anyio
import psycopg
import pytest
import sqlalchemy as sa
from psycopg import pq
from pydantic import BaseModel
from tests.builders import risk, tiered_tool
from tests.store.conftest import POSTGRES_URL, SqlStoreFactory

from charter import (
    ActionPolicy,
    Completed,
    ErrorCode,
    Failed,
    Principal,
    RateLimit,
    Registry,
    ToolError,
)
from charter.errors import StoreUnavailable
from charter.host import Host
from charter.ledger.budgets import Bucket, BudgetRefused, BudgetStore, Charge
from charter.store import SqlStore
from charter.store import _budget_postgres as budget_postgres
from charter.store import _budget_rows as budget_rows
from charter.store import _pipelined as pipelined
from charter.store._pipelined import raw
from charter.store.errors import UnstorableValue

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


def planner_bucket(tool: str, calls: int) -> Bucket:
    """The planner's bucket of ``tool`` for a limit of ``calls`` a minute."""
    return Bucket(
        tool=tool,
        limit=f"{calls}/60s by principal",
        holder="acme/planner",
        tenant="acme",
        interval=60 / calls,
        window=60.0,
    )


BUCKET = planner_bucket("trips.search", 3)


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


async def test_a_spending_transaction_spends_before_its_first_statement_whatever_it_is(
    sql_store: SqlStore,
) -> None:
    # The gate claims first; here the first statement is the application's own, or none
    # runs (PostgreSQL then sends the spend with the COMMIT).
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    first = Charge(spends=((BUCKET, 20.0),), now=now)
    async with sql_store.spending_transaction(wait=1.0, charge=first) as tx:
        assert (await tx.connection.execute(sa.text("SELECT 1"))).scalar() == 1
    second = Charge(spends=((BUCKET, 40.0),), now=now)
    async with sql_store.spending_transaction(wait=1.0, charge=second):
        pass
    assert first.spent and second.spent
    assert await sql_store.budget_arrival(BUCKET) == pytest.approx(now + 60)
    refused = Charge(spends=((BUCKET, 20.0),), now=now)
    with pytest.raises(BudgetRefused):
        async with sql_store.spending_transaction(wait=1.0, charge=refused) as tx:
            await tx.connection.execute(sa.text("SELECT 1"))
    assert not refused.spent
    assert await sql_store.budget_arrival(BUCKET) == pytest.approx(now + 60)


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


class Refund(BaseModel):
    booking_id: str
    amount_cents: int


def refund_registry(ran: list[str], *, limits: list[Any], fail: bool = False) -> Registry:
    """A ledgered write under ``limits``; with ``fail``, its handler fails after running."""

    async def refund(args: Refund) -> Refund:
        ran.append(args.booking_id)
        await anyio.sleep(0.01)
        if fail:
            raise ToolError(ErrorCode.UPSTREAM_ERROR, "the payment provider said no")
        return args

    registry = Registry()
    never = ActionPolicy(
        target_type="booking", command_target_field="booking_id", confirmation="never"
    )
    refund_tool = tiered_tool(
        "bookings.refund",
        "sensitive",
        refund,
        Refund,
        Refund,
        description="Refund a booking.",
        risk_policy=risk("refund", reversible=False),
        action_policy=never,
        limits=limits,
    )
    registry.register(refund_tool)
    return registry


def refund_args(booking: str, request: str | None = None) -> dict[str, Any]:
    controls = {"requestId": request or str(uuid.uuid4())}
    return {"booking_id": booking, "amount_cents": 100, "_charter": controls}


def rate_limited(outcome: object) -> bool:
    return isinstance(outcome, Failed) and outcome.code is ErrorCode.RATE_LIMITED


async def test_64_concurrent_ledgered_writes_on_two_hosts_run_exactly_10(
    make_sql_store: SqlStoreFactory,
) -> None:
    # A ledgered call's transaction spends its budget: still one statement, no lost update.
    # Every call may wait its turn for the lock (on a loaded machine SQLite's queue can pass
    # the default 5 s wait, which would answer REQUEST_IN_PROGRESS instead).
    ran: list[str] = []
    limits = [RateLimit(calls=10, per=60)]
    hosts = [
        Host(
            refund_registry(ran, limits=limits),
            store=await make_sql_store(pool_size=8, busy_timeout=60),
            in_progress_wait=60,
        )
        for _ in range(2)
    ]
    outcomes: list[object] = []

    async def call(i: int) -> None:
        outcomes.append(
            await hosts[i % 2].invoke("bookings.refund", refund_args(f"bk{i}"), PLANNER)
        )

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(call, i)
    assert sum(isinstance(o, Completed) for o in outcomes) == 10
    assert sum(rate_limited(o) for o in outcomes) == 54
    assert len(ran) == 10


async def test_a_ledgered_replay_is_free_and_a_refusal_runs_nothing(sql_store: SqlStore) -> None:
    ran: list[str] = []
    host = Host(refund_registry(ran, limits=[RateLimit(calls=2, per=3600)]), store=sql_store)
    first = refund_args("bk_1")
    for _ in range(4):
        assert isinstance(await host.invoke("bookings.refund", first, PLANNER), Completed)
    second = await host.invoke("bookings.refund", refund_args("bk_2"), PLANNER)
    assert isinstance(second, Completed) and not second.replayed
    refused = await host.invoke("bookings.refund", refund_args("bk_3"), PLANNER)
    assert rate_limited(refused) and isinstance(refused, Failed) and refused.meta is not None
    retry_after = refused.meta["retryAfter"]
    assert isinstance(retry_after, int | float) and retry_after > 0
    # Spent: a retry of a committed request still replays, and nothing else ran.
    again = await host.invoke("bookings.refund", first, PLANNER)
    assert isinstance(again, Completed) and again.replayed
    assert ran == ["bk_1", "bk_2"]


@pytest.mark.parametrize("tenant_first", [True, False], ids=["tenant-first", "tenant-last"])
async def test_a_ledgered_call_refused_by_one_limit_gives_back_the_others(
    sql_store: SqlStore, tenant_first: bool
) -> None:
    # Tenant-last: PostgreSQL sent the tenant's spend after the refused one, and gives it back.
    ran: list[str] = []
    limits = [RateLimit(calls=5, per=60, key="tenant"), RateLimit(calls=1, per=60)]
    if not tenant_first:
        limits.reverse()
    host = Host(refund_registry(ran, limits=limits), store=sql_store)
    assert isinstance(await host.invoke("bookings.refund", refund_args("a"), PLANNER), Completed)
    for _ in range(6):
        assert rate_limited(await host.invoke("bookings.refund", refund_args("b"), PLANNER))
    # The tenant budget lost one unit only: four colleagues still get through.
    for name in ("w", "x", "y", "z"):
        colleague = Principal(subject=name, tenant_id="acme", scopes=frozenset({"*"}))
        outcome = await host.invoke("bookings.refund", refund_args(name), colleague)
        assert isinstance(outcome, Completed)
    assert ran == ["a", "w", "x", "y", "z"]


async def test_a_ledgered_call_whose_handler_failed_keeps_what_it_spent(
    sql_store: SqlStore,
) -> None:
    ran: list[str] = []
    limits = [RateLimit(calls=2, per=3600)]
    host = Host(refund_registry(ran, limits=limits, fail=True), store=sql_store)
    for booking in ("a", "b"):
        failed = await host.invoke("bookings.refund", refund_args(booking), PLANNER)
        assert isinstance(failed, Failed) and failed.code is ErrorCode.UPSTREAM_ERROR
    # The transactions rolled back, the spends did not: the handler ran twice.
    assert rate_limited(await host.invoke("bookings.refund", refund_args("c"), PLANNER))
    assert ran == ["a", "b"]


async def test_a_limited_ledgered_write_costs_no_round_trip_more_and_no_connection(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spend rides on the ledger transaction's connection, before it begins, and on
    # PostgreSQL in the round trip that begins it: no round trip, connection or
    # transaction of its own. SQLite spends in a short write transaction on that connection.
    limited = Host(refund_registry([], limits=[RateLimit(calls=100, per=60)]), store=sql_store)
    plain = Host(refund_registry([], limits=[]), store=sql_store)
    engine = sql_store.engine.sync_engine
    seen: list[str] = []
    trace = tempfile.TemporaryFile()

    def statement(*args: Any) -> None:
        seen.append("statement")

    def checkout(dbapi_connection: Any, *args: Any) -> None:
        seen.append("checkout")
        if sql_store.dialect == "postgresql":  # libpq's protocol trace: one line a message
            pgconn = dbapi_connection.driver_connection.pgconn
            pgconn.trace(trace.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def checkin(dbapi_connection: Any, *args: Any) -> None:
        seen.append("checkin")
        if sql_store.dialect == "postgresql" and dbapi_connection is not None:
            dbapi_connection.driver_connection.pgconn.untrace()  # writes out the trace

    async def counted(host: Host) -> Counter[str]:
        seen.clear()
        trace.seek(0)
        trace.truncate()
        outcome = await host.invoke("bookings.refund", refund_args("bk"), PLANNER)
        assert isinstance(outcome, Completed)
        with anyio.fail_after(5):
            while "checkin" not in seen:  # the connection may go back after the answer
                await anyio.sleep(0.01)
        trace.seek(0)
        messages = trace.read()
        statements = sum(
            line.startswith(b"F\t") and b"\tExecute\t" in line for line in messages.splitlines()
        )
        waits = round_trips(messages, seen.count("sync"))
        return Counter(seen) + Counter(round_trip=waits, execute=statements)

    enqueue_sync = psycopg.AsyncPipeline._enqueue_sync

    def counting_sync(pipeline: psycopg.AsyncPipeline) -> None:
        if sys._getframe(1).f_code is pipelined._send.__code__:  # not the pipeline's end
            seen.append("sync")
        enqueue_sync(pipeline)

    monkeypatch.setattr(psycopg.AsyncPipeline, "_enqueue_sync", counting_sync)

    sa.event.listen(engine, "before_cursor_execute", statement)
    sa.event.listen(engine.pool, "checkout", checkout)
    sa.event.listen(engine.pool, "checkin", checkin)
    try:
        with_limit, without = await counted(limited), await counted(plain)
    finally:
        sa.event.remove(engine, "before_cursor_execute", statement)
        sa.event.remove(engine.pool, "checkout", checkout)
        sa.event.remove(engine.pool, "checkin", checkin)
        trace.close()
    assert with_limit["checkout"] == without["checkout"] == 1
    bucket = planner_bucket("bookings.refund", 100)
    assert await sql_store.budget_arrival(bucket) is not None  # spent
    if sql_store.dialect == "postgresql":
        assert without["round_trip"] > 0
        assert with_limit["round_trip"] == without["round_trip"]
        # One statement more: the spend, committed at a Sync, with no BEGIN or COMMIT.
        assert with_limit["execute"] == without["execute"] + 1
    else:
        # SQLite begins the spend's own short transaction with BEGIN IMMEDIATE.
        assert with_limit["statement"] == without["statement"] + 2


async def test_a_spend_goes_as_sqlalchemy_would_send_it_and_refuses_what_it_cannot_store(
    sql_store: SqlStore,
) -> None:
    if sql_store.dialect != "postgresql":
        pytest.skip("SQLite spends through SQLAlchemy")
    statement = budget_rows.spend_statement(sql_store.dialect)
    async with sql_store.engine.connect() as conn:
        for bucket in (BUCKET, replace(BUCKET, holder="acme/a|b%c", tenant="")):
            expected = raw(conn, statement, budget_rows.spend_parameters(bucket, 20.0, 1e9))
            assert budget_rows.spend_raw(conn, bucket, 20.0, 1e9) == expected
        for unstorable in ("a\x00b", "\ud800"):
            with pytest.raises(UnstorableValue):
                budget_rows.spend_raw(conn, replace(BUCKET, holder=unstorable), 20.0, 1e9)


def round_trips(trace: bytes, syncs: int) -> int:
    """The times the client waited for the server, from libpq's trace of its messages.

    The server ends each answer with a ReadyForQuery, one per ``Sync``; ``syncs`` of them
    were sent in the middle of a pipeline (``_pipelined.SYNC``), which went on sending
    without waiting for them.
    """
    answers = sum(
        line.startswith(b"B\t") and b"\tReadyForQuery\t" in line for line in trace.splitlines()
    )
    return answers - syncs


async def test_a_spend_keeps_its_begin_and_commit_where_a_pipeline_cannot_sync(
    make_sql_store: SqlStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a Sync of its own (libpq before 14, a psycopg without it), the spend of both
    # buckets still commits together, and a refusal still gives back what was spent.
    ran: list[str] = []
    store, host = await postgres_refunds(make_sql_store, ran, calls=2)
    monkeypatch.setattr(budget_postgres, "syncs", lambda: False)
    tenant = RateLimit(calls=10, per=60, key="tenant")
    host = Host(refund_registry(ran, limits=[tenant, RateLimit(calls=2, per=60)]), store=store)
    before = datetime.now(UTC).timestamp()
    assert isinstance(await host.invoke("bookings.refund", refund_args("b"), PLANNER), Completed)
    spent_by = datetime.now(UTC).timestamp()
    assert rate_limited(await host.invoke("bookings.refund", refund_args("c"), PLANNER))
    assert ran == ["a", "b"]
    arrival = await store.budget_arrival(
        Bucket(
            tool="bookings.refund",
            limit=tenant.label,
            holder="tenant:acme",
            tenant="acme",
            interval=6.0,
            window=60.0,
        )
    )
    assert arrival is not None
    # One unit spent, by "b" (the refused call's was given back): 6 seconds of the tenant's
    # window past that spend; two would put it 12 seconds past. Bounded by the clock read
    # around b's call, not by now, so a slow machine cannot fail it.
    assert before + 5 < arrival <= spent_by + 6


async def test_a_ledgered_call_is_refused_as_unavailable_when_its_spend_fails(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    host = Host(refund_registry(ran, limits=[RateLimit(calls=2, per=60)]), store=sql_store)

    async def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the database went away")

    engine = sql_store.engine.sync_engine
    if sql_store.dialect == "postgresql":
        # The spend goes with the claim, below SQLAlchemy: the server drops the connection
        # once it is checked out, so the pipeline that carries the spend finds it gone.
        def terminate(dbapi_connection: Any, *args: Any) -> None:
            pid = dbapi_connection.driver_connection.info.backend_pid
            with psycopg.connect(POSTGRES_URL, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

        sa.event.listen(engine.pool, "checkout", terminate)
    else:
        monkeypatch.setattr(budget_rows, "spend", unreachable)
    try:
        outcome = await host.invoke("bookings.refund", refund_args("bk"), PLANNER)
    finally:
        if sql_store.dialect == "postgresql":
            sa.event.remove(engine.pool, "checkout", terminate)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert outcome.retryable and outcome.reason == "budgets_unavailable"
    assert ran == []
    # Nothing stayed spent (two calls fit), and the pool replaced the lost connection.
    monkeypatch.undo()
    for booking in ("c", "d"):
        outcome = await host.invoke("bookings.refund", refund_args(booking), PLANNER)
        assert isinstance(outcome, Completed)
    assert ran == ["c", "d"]


async def postgres_refunds(
    make_sql_store: SqlStoreFactory, ran: list[str], *, calls: int, **options: Any
) -> tuple[SqlStore, Host]:
    """A PostgreSQL store (skip on SQLite) and a host whose refunds have spent one call."""
    store = await make_sql_store(**options)
    if store.dialect != "postgresql":
        pytest.skip("SQLite spends through SQLAlchemy, in a write transaction of its own")
    host = Host(refund_registry(ran, limits=[RateLimit(calls=calls, per=60)]), store=store)
    assert isinstance(await host.invoke("bookings.refund", refund_args("a"), PLANNER), Completed)
    return store, host


async def test_a_ledgered_call_whose_bucket_stays_locked_is_refused_as_unavailable(
    make_sql_store: SqlStoreFactory,
) -> None:
    # A real lock wait that runs out: the bucket's row is held by another transaction.
    ran: list[str] = []
    store, host = await postgres_refunds(make_sql_store, ran, calls=2, busy_timeout=0.2)
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("SELECT arrival FROM charter_budgets FOR UPDATE"))
        outcome = await host.invoke("bookings.refund", refund_args("b"), PLANNER)
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.PROVIDER_UNAVAILABLE
    assert outcome.reason == "budgets_unavailable"
    # Nothing stayed spent, and the connection went back to the pool usable.
    assert isinstance(await host.invoke("bookings.refund", refund_args("c"), PLANNER), Completed)
    assert rate_limited(await host.invoke("bookings.refund", refund_args("d"), PLANNER))
    assert ran == ["a", "c"]


def test_the_installed_psycopg_lets_a_spend_commit_at_a_sync_of_its_own() -> None:
    # _pipelined queues a Sync through psycopg's private AsyncPipeline._enqueue_sync (the
    # public Pipeline.sync() waits a round trip). Without it the spend silently falls back
    # to BEGIN / INSERT / COMMIT; an upgrade of psycopg that drops it fails here instead.
    assert pipelined.syncs()
