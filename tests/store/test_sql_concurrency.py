"""Races, lock waits and rollbacks of ``SqlStore`` transactions, on SQLite and PostgreSQL.

Concurrency here is real: one connection per transaction, released together by an
``anyio.Event``. SQLite serialises writers at ``BEGIN IMMEDIATE``, so its tasks meet before
the transaction; PostgreSQL's meet inside it, so their statements race for the same row.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from anyio import wait_all_tasks_blocked
from tests.store.conftest import SQLITE_ONLY, SqlStoreFactory
from tests.store.store_records import (
    NOW,
    all_at_once,
    approval,
    audit_event,
    claim_record,
    completed,
    decide,
    entry,
    holding,
    holding_the_lock,
    statements_sent,
)

from charter.errors import StoreBusy, StoreError
from charter.ledger import ApprovalRecord, DeferredRecord, LedgerEntry
from charter.store import SqlStore
from charter.store._connections import WriteQueue
from charter.store._dialects import busy_setting

pytestmark = pytest.mark.anyio

CALLERS = 64
ITERATIONS = 3
"""Bursts per concurrency test (the reliability battery loops 20 times)."""

side_effects = sa.Table(
    "test_side_effects",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.Text, nullable=False),
)


async def create_side_effects(store: SqlStore) -> None:
    async with store.engine.begin() as conn:
        await conn.run_sync(side_effects.metadata.create_all)


async def count_side_effects(store: SqlStore) -> int:
    async with store.engine.connect() as conn:
        return int(
            (await conn.execute(sa.select(sa.func.count()).select_from(side_effects))).scalar_one()
        )


async def burst(
    store: SqlStore | list[SqlStore],
    backend: str,
    work: Callable[[Any], Awaitable[object]],
    *,
    wait: float = 30,
) -> list[object]:
    """Run ``work(tx)`` in ``CALLERS`` concurrent transactions released together.

    Given several stores (on one database), the callers take turns among them.
    """
    stores = store if isinstance(store, list) else [store]
    turns = itertools.count()
    begun = 0
    all_begun = anyio.Event()

    async def caller() -> object:
        nonlocal begun
        async with stores[next(turns) % len(stores)].transaction(wait=wait) as tx:
            if backend == "postgres":
                begun += 1
                if begun == CALLERS:
                    all_begun.set()
                await all_begun.wait()
            return await work(tx)

    return await all_at_once(caller, CALLERS)


# -- BEGIN IMMEDIATE ------------------------------------------------------------------------


@SQLITE_ONLY  # BEGIN IMMEDIATE is SQLite's; PostgreSQL locks rows, not the database
async def test_every_sqlite_write_transaction_begins_immediate(sql_store: SqlStore) -> None:
    statements: list[str] = []
    sa.event.listen(
        sql_store.engine.sync_engine,
        "before_cursor_execute",
        lambda conn, cursor, statement, *rest: statements.append(statement),
    )
    pending = approval()
    writes: list[Callable[[], Awaitable[object]]] = [
        lambda: sql_store.insert_approval(pending),
        lambda: decide(sql_store, pending.id, "approved"),
        lambda: sql_store.settle_deferred("inv", "{}", NOW),
        lambda: sql_store.prune(NOW),
        lambda: sql_store.record(audit_event(subject=None, principal_tenant=None, tenant=None)),
        lambda: sql_store.create_api_key(tenant_id="acme", subject="bot", scopes=[]),
        lambda: sql_store.revoke_api_key("0123456789abcdef"),
    ]
    for write in writes:
        statements.clear()
        await write()
        begins = [s for s in statements if s.upper().startswith("BEGIN")]
        assert begins and set(begins) == {"BEGIN IMMEDIATE"}, (write, statements)
    statements.clear()
    async with sql_store.transaction(wait=5) as tx:
        await tx.claim(entry(), NOW)
    assert statements[0] == "BEGIN IMMEDIATE"
    statements.clear()
    await sql_store.get_entry("acme", "alice", "r")
    assert not [s for s in statements if s.upper().startswith("BEGIN")]


async def test_the_reader_reads_committed_rows_while_a_call_holds_the_write_lock(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    # An application's read outside a call (a read-only tool's query) must not wait for
    # the write lock a ledgered call holds. On SQLite a connection of ``store.engine``
    # begins BEGIN IMMEDIATE and so waits for that lock until its busy timeout gives up;
    # one of ``store.reader`` begins nothing, reads the last commit and goes.
    store = await make_sql_store(busy_timeout=0.3)
    await create_side_effects(store)
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(side_effects).values(request_id="committed"))

    async def write_uncommitted(tx: Any) -> None:
        await tx.connection.execute(sa.insert(side_effects).values(request_id="uncommitted"))

    async def read(engine: Any) -> list[str]:
        async with engine.connect() as conn:
            rows = await conn.execute(sa.select(side_effects.c.request_id))
            return [row.request_id for row in rows]

    async with holding(store, write_uncommitted):
        with anyio.fail_after(5):  # the lock is held until the block ends: no waiting
            assert await read(store.reader) == ["committed"]
        if store_backend == "sqlite":
            with pytest.raises(sa.exc.OperationalError, match="database is locked"):
                await read(store.engine)
    assert sorted(await read(store.reader)) == ["committed", "uncommitted"]


async def test_the_reader_refuses_writes_and_the_block_writes_nothing(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    # On SQLite a connection of store.reader begins no transaction: a write through it
    # would commit on its own, so a block of two whose second failed kept its first. The
    # store refuses every write it can see there, before it runs, on both databases.
    store = await make_sql_store()
    await create_side_effects(store)
    writes: list[Any] = [
        sa.insert(side_effects).values(request_id="inserted"),
        sa.update(side_effects).values(request_id="updated"),
        sa.delete(side_effects),
        sa.text("INSERT INTO test_side_effects (request_id) VALUES ('as text')"),
        sa.text("  delete from test_side_effects"),
        # What query-tagging tools put first, and statements beyond INSERT/UPDATE/DELETE.
        sa.text("/* app:report */ INSERT INTO test_side_effects (request_id) VALUES ('t')"),
        sa.text("-- tagged\nINSERT INTO test_side_effects (request_id) VALUES ('t')"),
        sa.text(
            "WITH gone AS (DELETE FROM test_side_effects RETURNING request_id) "
            "SELECT count(*) FROM gone"
            if store_backend == "postgres"
            else "WITH x AS (SELECT 1) DELETE FROM test_side_effects"
        ),
        sa.text(
            "TRUNCATE test_side_effects"
            if store_backend == "postgres"
            else "REPLACE INTO test_side_effects (request_id) VALUES ('r')"
        ),
    ]
    for write in writes:
        with pytest.raises(StoreError, match=r"store\.reader only reads"):
            async with store.reader.begin() as conn:
                await conn.execute(sa.select(side_effects.c.request_id))
                await conn.execute(write)
    async with store.reader.connect() as conn:
        assert (await conn.execute(sa.select(side_effects.c.request_id))).all() == []
        # Reads, SQL text included, still pass.
        assert (await conn.execute(sa.text("SELECT count(*) FROM test_side_effects"))).scalar() == 0
        tagged = "/* app:report */ SELECT count(*) AS updates FROM test_side_effects"
        assert (await conn.execute(sa.text(tagged))).scalar() == 0
    async with store.engine.begin() as conn:  # the write engine is untouched
        await conn.execute(writes[0])
    async with store.reader.connect() as conn:
        assert (await conn.execute(sa.select(side_effects.c.request_id))).scalars().all() == [
            "inserted"
        ]


async def test_concurrent_read_then_write_transactions_serialize_without_database_is_locked(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    # The pattern that fails at once under a deferred BEGIN: read first, then write. With
    # BEGIN IMMEDIATE each transaction waits for the lock up front, under the busy timeout.
    # Half the callers go through a second store on the same database, as another process
    # would: a store queues its own writers, and the two stores meet at SQLite's lock.
    store = await make_sql_store(pool_size=CALLERS)
    other = await make_sql_store(pool_size=CALLERS)
    await create_side_effects(store)

    async def read_then_write(tx: Any) -> object:
        conn = tx.connection
        seen = (
            await conn.execute(sa.select(sa.func.count()).select_from(side_effects))
        ).scalar_one()
        await conn.execute(sa.insert(side_effects).values(request_id=str(seen)))
        return seen

    for iteration in range(ITERATIONS):
        results = await burst([store, other], "sqlite", read_then_write)  # barrier before tx
        assert len(results) == CALLERS
        if store_backend == "sqlite":
            # Serialised: every transaction saw all the commits before it.
            offset = iteration * CALLERS
            assert sorted(results) == list(range(offset, offset + CALLERS))  # type: ignore[type-var]
    assert await count_side_effects(store) == CALLERS * ITERATIONS


async def in_line_behind_a_writer(
    store: SqlStore, arrivals: Sequence[Callable[[], Coroutine[Any, Any, object]]]
) -> None:
    """Hold the write lock while ``arrivals`` start, each in line before the next; let go."""
    holding = anyio.Event()
    release = anyio.Event()

    async def holder() -> None:
        async with store.transaction(wait=30):
            holding.set()
            await release.wait()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await holding.wait()
            for arrival in arrivals:
                tg.start_soon(arrival)
                await wait_all_tasks_blocked()  # it is in line before the next one comes
            release.set()


def writing(
    store: SqlStore, order: list[object], index: int
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A write transaction that notes ``index`` in ``order`` once it has the lock."""

    async def write() -> None:
        async with store.transaction(wait=30):
            order.append(index)

    return write


@SQLITE_ONLY  # PostgreSQL locks rows: writers of different keys do not wait at all
async def test_writers_of_one_sqlite_store_take_the_write_lock_in_arrival_order(
    sql_store: SqlStore,
) -> None:
    # SQLite's busy handler polls, so waiters would get the lock in whatever order they
    # happen to poll; the store's own queue hands it over in the order they asked.
    order: list[object] = []
    await in_line_behind_a_writer(
        sql_store, [writing(sql_store, order, index) for index in range(CALLERS)]
    )
    assert order == list(range(CALLERS))


@SQLITE_ONLY
async def test_an_audit_event_of_its_own_goes_before_the_writers_waiting_in_line(
    sql_store: SqlStore,
) -> None:
    # A read tool's audit event is written in a transaction of its own, and its call waits
    # for it to answer: in arrival order it would wait for every ledgered call ahead of it.
    # It goes first instead, one short INSERT; the writers keep their own order.
    order: list[object] = []

    def executed(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if statement.startswith("INSERT INTO charter_audit_events"):
            order.append("audit")

    arrivals = [writing(sql_store, order, index) for index in range(4)]
    arrivals.insert(3, lambda: sql_store.record(audit_event()))
    sa.event.listen(sql_store.engine.sync_engine, "before_cursor_execute", executed)
    try:
        await in_line_behind_a_writer(sql_store, arrivals)
    finally:
        sa.event.remove(sql_store.engine.sync_engine, "before_cursor_execute", executed)
    assert order == ["audit", 0, 1, 2, 3]


@SQLITE_ONLY
async def test_writers_whose_waits_left_differ_a_little_do_not_set_the_busy_timeout_again(
    make_sql_store: SqlStoreFactory,
) -> None:
    # A writer's BEGIN IMMEDIATE waits what is left of its wait after its turn in line, a
    # few milliseconds different for every queued writer. Setting SQLite's busy timeout
    # to each was a statement per transaction; a setting up to 100 ms below serves.
    store = await make_sql_store(pool_size=1, busy_timeout=5)  # one connection, at 5000 ms
    with statements_sent(store) as sent:
        for wait in (5, 4.95, 4.91, 5, 4.93, 3):
            async with store.transaction(wait=wait):
                pass
        await store.record(audit_event())  # a write at the store's own 5 s
        await store.get_entry("acme", "alice", "none")  # a read
    pragmas = [s.rsplit(None, 1)[-1] for s in sent if s.startswith("PRAGMA busy_timeout")]
    # Never above a writer's wait left: 4.95 s sets 4900 ms, which serves 4.91 s and 5 s;
    # 3 s sets 3000, then the store's own 5 s sets 5000 again; the read keeps it.
    assert pragmas == ["4900", "3000", "5000"]


def test_a_busy_timeout_is_kept_when_close_enough_and_never_above_a_writers_wait() -> None:
    assert busy_setting(5000, 5000, reading=False) is None
    assert busy_setting(4900, 4950, reading=False) is None  # up to 100 ms below
    assert busy_setting(5000, 4950, reading=False) == 4900  # above: down to the grid
    assert busy_setting(4800, 4950, reading=False) == 4900  # too far below
    assert busy_setting(5000, 4950, reading=True) is None  # a read may wait longer
    assert busy_setting(1000, 4950, reading=True) == 4900
    assert busy_setting(60, 50, reading=False) == 50  # a tenth of a short wait
    assert busy_setting(46, 50, reading=False) is None
    assert busy_setting(5, 0, reading=False) == 0  # no wait at all stays none


async def test_a_turn_given_to_a_writer_cancelled_at_that_moment_passes_to_the_next() -> None:
    # The turn is handed over by setting the next waiter's future; when that waiter is
    # cancelled in the same moment it must hand the turn on, or every writer after it
    # would wait for ever. Cancelled and timed-out waiters leave the line.
    queue = WriteQueue()
    release, _ = await queue.enter(5)
    first = asyncio.ensure_future(queue.enter(5))
    timed_out = asyncio.ensure_future(queue.enter(0.01))
    second = asyncio.ensure_future(queue.enter(5, urgent=True))
    third = asyncio.ensure_future(queue.enter(5))
    await asyncio.sleep(0.05)
    with pytest.raises(StoreBusy):
        await timed_out
    # The urgent writer is next: its turn comes just as it is cancelled.
    release()
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    # The turn went on to the oldest writer in line, then to the next.
    with anyio.fail_after(5):
        release, _ = await first
    assert not third.done()
    release()
    with anyio.fail_after(5):
        release, _ = await third
    release()
    # Free again: the next writer takes it at once.
    release, rest = await queue.enter(5)
    assert rest == 5
    release()


# -- lock waits -----------------------------------------------------------------------------


async def test_a_transaction_that_cannot_get_the_lock_within_wait_raises_store_busy(
    sql_store: SqlStore,
) -> None:
    record = entry()
    async with holding_the_lock(sql_store, record):
        started = anyio.current_time()
        with pytest.raises(StoreBusy):
            # SQLite fails at BEGIN IMMEDIATE; PostgreSQL in the claim's INSERT (55P03).
            async with sql_store.transaction(wait=0.2) as tx:
                await tx.claim(record, NOW)
        assert anyio.current_time() - started < 5
    async with sql_store.transaction(wait=5) as tx:
        existing = await tx.claim(record, NOW)
    assert existing is not None and existing.status == "completed"


async def test_a_write_outside_the_gate_waits_busy_timeout_then_raises_store_busy(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    store = await make_sql_store(busy_timeout=0.2)
    await store.insert_approval(approval(id="apr_busy"))

    async def lock_the_approval(tx: Any) -> None:
        # Locks the approval's row on PostgreSQL, the database on SQLite.
        await tx.connection.execute(
            sa.text("UPDATE charter_approvals SET status = 'approved' WHERE id = 'apr_busy'")
        )

    async with holding(store, lock_the_approval):
        with pytest.raises(StoreBusy):
            await decide(store, "apr_busy", "denied", expected=("pending", "approved"))


# -- compare-and-set under concurrency --------------------------------------------------------


async def test_64_concurrent_consumers_of_one_approval_see_exactly_one_true(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    store = await make_sql_store(pool_size=CALLERS)
    for _ in range(ITERATIONS):
        granted = approval()
        await store.insert_approval(granted)
        assert await decide(store, granted.id, "approved")

        async def consume(tx: Any, approval_id: str = granted.id) -> object:
            return await tx.consume_approval(approval_id, uuid.uuid4().hex, NOW)

        results = await burst(store, store_backend, consume)
        assert results.count(True) == 1
        assert results.count(False) == CALLERS - 1
        stored = await store.get_approval(granted.id)
        assert stored is not None and stored.status == "consumed"


async def test_64_concurrent_claims_of_one_key_give_one_winner_and_63_committed_entries(
    make_sql_store: SqlStoreFactory, store_backend: str
) -> None:
    store = await make_sql_store(pool_size=CALLERS)
    for _ in range(ITERATIONS):
        request_id = str(uuid.uuid4())

        async def claim(tx: Any, request_id: str = request_id) -> LedgerEntry | None:
            mine = entry(request_id=request_id)
            existing = await tx.claim(mine, NOW)
            if existing is None:
                await tx.complete(completed(mine))
            return existing  # type: ignore[no-any-return]

        results = await burst(store, store_backend, claim)
        assert results.count(None) == 1
        others = [r for r in results if r is not None]
        assert len(others) == CALLERS - 1
        winner = await store.get_entry("acme", "alice", request_id)
        assert winner is not None
        assert all(r == winner for r in others)
        assert winner.status == "completed"


# -- rollback -------------------------------------------------------------------------------


async def test_an_exception_rolls_back_the_claim_the_handlers_writes_and_the_audit_event(
    sql_store: SqlStore,
) -> None:
    await create_side_effects(sql_store)
    record = entry()
    with pytest.raises(RuntimeError, match="handler failed"):
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(record, NOW) is None
            await tx.connection.execute(sa.insert(side_effects).values(request_id="x"))
            await tx.insert_claim(claim_record(record))
            await tx.record_audit(audit_event(id="aud_lost"))
            raise RuntimeError("handler failed")
    assert await sql_store.get_entry("acme", "alice", record.request_id) is None
    assert await count_side_effects(sql_store) == 0
    assert await sql_store.events() == []
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None  # the request id is free
        assert await tx.get_claim("acme", "alice", record.request_id) is None


async def test_cancellation_rolls_back_and_leaves_the_store_usable(sql_store: SqlStore) -> None:
    await create_side_effects(sql_store)
    record = entry()
    inside = anyio.Event()

    async def doomed() -> None:
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(record, NOW) is None
            await tx.connection.execute(sa.insert(side_effects).values(request_id="x"))
            inside.set()
            await anyio.sleep_forever()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(doomed)
            await inside.wait()
            # anyio re-delivers the cancellation at every await until the scope exits:
            # the rollback and the close must still complete.
            tg.cancel_scope.cancel()
    assert await sql_store.get_entry("acme", "alice", record.request_id) is None
    assert await count_side_effects(sql_store) == 0
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None


async def test_a_timeout_inside_a_transaction_rolls_it_back(sql_store: SqlStore) -> None:
    record = entry()
    with anyio.move_on_after(0.05):
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(record, NOW) is None
            await anyio.sleep_forever()
    assert await sql_store.get_entry("acme", "alice", record.request_id) is None


async def test_a_caller_cancelled_while_it_waits_for_the_lock_stops_when_the_wait_ends(
    make_sql_store: SqlStoreFactory,
) -> None:
    store = await make_sql_store()
    record = entry()
    async with holding_the_lock(store, record):
        started = anyio.current_time()
        with anyio.move_on_after(0.1) as scope:
            # Waits at BEGIN IMMEDIATE (SQLite) or in the claim's INSERT (PostgreSQL);
            # a statement in flight is never interrupted, so the cancellation lands
            # when the lock wait gives up, and the connection goes back clean.
            async with store.transaction(wait=1) as tx:
                await tx.claim(record, NOW)
        assert scope.cancelled_caught
        assert anyio.current_time() - started < 10
    async with store.transaction(wait=5) as tx:
        existing = await tx.claim(record, NOW)
    assert existing is not None and existing.status == "completed"
    assert await store.get_entry("acme", "alice", record.request_id) == existing


async def test_64_concurrent_approval_requests_for_one_request_make_one_approval(
    make_sql_store: SqlStoreFactory,
) -> None:
    store = await make_sql_store(pool_size=CALLERS, busy_timeout=30)
    request_id = str(uuid.uuid4())

    async def request() -> object:
        return await store.insert_approval(approval(request_id=request_id))

    results = await all_at_once(request, CALLERS)
    assert len({r.id for r in results if isinstance(r, ApprovalRecord)}) == 1
    assert len(await store.list_approvals("acme", None, 100)) == 1


async def test_64_concurrent_settlements_of_one_deferred_call_settle_it_once(
    make_sql_store: SqlStoreFactory,
) -> None:
    store = await make_sql_store(pool_size=CALLERS, busy_timeout=30)
    record = entry()
    async with store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        await tx.insert_deferred(
            DeferredRecord(
                invocation_id=record.invocation_id,
                tenant_id="acme",
                principal_id="alice",
                request_id=record.request_id,
                tool="t",
                created_at=NOW,
            )
        )
        await tx.complete(record.model_copy(update={"status": "deferred", "outcome": "{}"}))
    results = await all_at_once(
        lambda: store.settle_deferred(record.invocation_id, '{"n":1}', NOW), CALLERS
    )
    assert results.count(True) == 1
    assert results.count(False) == CALLERS - 1
