"""What only ``SqlStore`` does, on SQLite and PostgreSQL: errors, text, time, audit, lifecycle.

What every store does (ledger entries, approvals, claims, deferred records, retention, the
transaction lock) is the store contract, run on ``SqlStore`` and ``MemoryStore`` alike by
``tests/store/test_store_contract.py``; races are in ``test_sql_concurrency.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from tests.store.conftest import POSTGRES_URL
from tests.store.store_records import NOW, approval, audit_event, claim_record, decide, entry

from charter.errors import ConfigurationError, ErrorCode
from charter.ledger import LedgerEntry
from charter.store import SqlStore, StoreError, UnstorableValue, sqlite_url

pytestmark = pytest.mark.anyio

SqlStoreFactory = Callable[..., Awaitable[SqlStore]]


async def claim_and_complete(store: SqlStore, record: LedgerEntry, outcome: str = "{}") -> None:
    async with store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": outcome}))


async def count(store: SqlStore, table: str) -> int:
    async with store.engine.connect() as conn:
        value = (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one()
    return int(value)


# -- misuse the gate never makes, and timestamps --------------------------------------------


async def test_complete_without_a_claim_is_a_store_error(sql_store: SqlStore) -> None:
    with pytest.raises(StoreError, match="claim"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.complete(entry(status="completed"))


async def test_complete_without_a_claim_commits_nothing_of_its_transaction(
    sql_store: SqlStore,
) -> None:
    # On PostgreSQL the outcome goes with the COMMIT: its failure must stop the COMMIT.
    with pytest.raises(StoreError, match="claim"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.insert_claim(claim_record(entry()))
            await tx.complete(entry(status="completed"))
    assert await count(sql_store, "charter_claims") == 0


@pytest.mark.parametrize("ending", ["commit", "rollback"])
async def test_a_statement_before_the_claim_runs_inside_the_transaction(
    sql_store: SqlStore, ending: str
) -> None:
    # On PostgreSQL the BEGIN waits for the transaction's first statement, which the claim
    # sends with it: a statement sent through SQLAlchemy first must not run on its own.
    class Abort(Exception):
        pass

    record = entry()
    with pytest.raises(Abort) if ending == "rollback" else nullcontext():
        async with sql_store.transaction(wait=5) as tx:
            await tx.insert_claim(claim_record(record))
            assert await tx.claim(record, NOW) is None
            if ending == "rollback":
                raise Abort
            await tx.complete(record.model_copy(update={"status": "completed"}))
    assert await count(sql_store, "charter_claims") == (1 if ending == "commit" else 0)
    assert await count(sql_store, "charter_ledger_entries") == (1 if ending == "commit" else 0)


async def test_a_connection_goes_back_to_the_pool_out_of_autocommit(
    make_sql_store: SqlStoreFactory,
) -> None:
    # PostgreSQL's gate transaction runs its connection in autocommit mode (it sends its
    # own BEGIN); the next user of that connection must get a transaction again.
    store = await make_sql_store(pool_size=1)
    await claim_and_complete(store, entry())
    async with store.engine.connect() as conn:
        await conn.execute(sa.text("DELETE FROM charter_ledger_entries"))
        await conn.rollback()
    assert await count(store, "charter_ledger_entries") == 1


async def test_recording_a_result_without_a_claim_is_a_store_error(sql_store: SqlStore) -> None:
    with pytest.raises(StoreError, match="claim"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.record_claim_result("acme", "alice", "r", "note:1")


async def test_timestamps_round_trip_as_the_same_instant_in_utc(sql_store: SqlStore) -> None:
    tokyo = timezone(timedelta(hours=9))
    created = datetime(2030, 1, 1, 21, 0, 0, 123456, tzinfo=tokyo)
    record = entry(created_at=created, expires_at=datetime(9999, 12, 31, tzinfo=UTC))
    await claim_and_complete(sql_store, record)
    stored = await sql_store.get_entry("acme", "alice", record.request_id)
    assert stored is not None
    assert stored.created_at == created
    assert stored.created_at.tzinfo == UTC
    assert stored.expires_at == datetime(9999, 12, 31, tzinfo=UTC)


async def test_a_naive_timestamp_is_refused(sql_store: SqlStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.claim(entry(created_at=datetime(2030, 1, 1)), NOW)


# -- NUL characters -------------------------------------------------------------------------


async def test_a_nul_character_is_refused_before_the_database_on_both_backends(
    sql_store: SqlStore,
) -> None:
    record = entry(target="note:\x001")
    with pytest.raises(UnstorableValue) as raised:
        async with sql_store.transaction(wait=5) as tx:
            await tx.claim(record, NOW)
    assert raised.value.code is ErrorCode.INVALID_INPUT
    assert raised.value.meta == {"reason": "unstorable_value"}
    assert "\x00" not in str(raised.value)
    # The transaction was rolled back cleanly; the request id is free.
    await claim_and_complete(sql_store, record.model_copy(update={"target": "note:1"}))


async def test_the_transaction_stays_usable_after_a_refused_value(sql_store: SqlStore) -> None:
    record = entry()
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        await tx.insert_claim(claim_record(record))
        with pytest.raises(UnstorableValue):
            await tx.record_claim_result("acme", "alice", record.request_id, "note:\x00")
        await tx.record_claim_result("acme", "alice", record.request_id, "note:1")
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    async with sql_store.transaction(wait=5) as tx:
        claim = await tx.get_claim("acme", "alice", record.request_id)
    assert claim is not None and claim.result_reference == "note:1"


async def test_reads_with_a_nul_key_find_nothing_instead_of_failing(sql_store: SqlStore) -> None:
    assert await sql_store.get_entry("acme\x00", "alice", "r") is None
    assert await sql_store.get_approval("apr_\x00") is None
    assert await sql_store.find_approval("acme", "al\x00ice", "r") is None
    assert await sql_store.list_approvals("ac\x00me", None, 10) == []
    assert await sql_store.get_deferred("\x00") is None
    assert await sql_store.settle_deferred("\x00", "{}", NOW) is False
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.get_claim("acme", "alice", "\x00") is None
        assert await tx.consume_approval("apr_\x00", "r", NOW) is False


async def test_json_arguments_keep_nul_and_unicode_exactly(sql_store: SqlStore) -> None:
    record = approval(arguments={"text": "a\x00b", "emoji": "\U0001f600", "é": ["ü"]})
    await sql_store.insert_approval(record)
    assert await sql_store.get_approval(record.id) == record


async def test_an_approval_with_a_nul_in_a_column_is_refused(sql_store: SqlStore) -> None:
    with pytest.raises(UnstorableValue):
        await sql_store.insert_approval(approval(reason_code="bad\x00"))
    assert await count(sql_store, "charter_approvals") == 0


# -- audit events ---------------------------------------------------------------------------


async def test_audit_events_are_listed_newest_first_by_tenant_and_limited(
    sql_store: SqlStore,
) -> None:
    events = [
        audit_event(time=NOW + timedelta(seconds=1)),
        audit_event(time=NOW + timedelta(seconds=2), tenant="globex", delegated=True),
        audit_event(time=NOW + timedelta(seconds=3), principal_tenant="globex", tenant="globex"),
        audit_event(time=NOW + timedelta(seconds=4), subject=None, principal_tenant=None),
    ]
    for event in events:
        await sql_store.record(event)
    assert await sql_store.events() == list(reversed(events))
    assert await sql_store.events(tenant="acme") == [events[3], events[1], events[0]]
    assert await sql_store.events(tenant="globex") == [events[2], events[1]]
    assert await sql_store.events(limit=1) == [events[3]]
    assert await sql_store.events(tenant="nobody") == []
    assert await sql_store.events(limit=0) == []


async def test_events_recorded_in_the_same_tick_come_back_in_reverse_order(
    sql_store: SqlStore,
) -> None:
    events = [audit_event() for _ in range(5)]
    for event in events:
        await sql_store.record(event)
    assert await sql_store.events() == list(reversed(events))


async def test_an_audit_event_with_hostile_text_is_recorded_exactly(sql_store: SqlStore) -> None:
    event = audit_event(tool="no\x00such\ud800tool", tenant="ac\x00me", reason="x\x00")
    await sql_store.record(event)
    assert await sql_store.events(tenant="ac\x00me") == [event]
    assert await sql_store.events() == [event]


# -- retention ------------------------------------------------------------------------------


async def test_prune_commits_each_batch_in_a_short_transaction_of_its_own(
    sql_store: SqlStore,
) -> None:
    # What prunes is the store contract (tests/store/test_store_contract.py); here, how:
    # batch by batch, so a backlog never holds the write lock for long, and no orphan row.
    past = NOW - timedelta(days=1)
    for _ in range(7):
        record = entry(expires_at=past)
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(record, NOW) is None
            claim = claim_record(record, result_reference="note:1", created_at=past)
            await tx.insert_claim(claim)
            await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    for _ in range(3):
        denied = approval(expires_at=past)
        await sql_store.insert_approval(denied)
        assert await decide(sql_store, denied.id, "denied", at=past)
    commits: list[None] = []
    sa.event.listen(sql_store.engine.sync_engine, "commit", lambda conn: commits.append(None))

    assert await sql_store.prune(NOW, batch_size=2) == 7 + 3

    assert len(commits) >= 4 + 2  # ceil(7 / 2) entry batches, ceil(3 / 2) approval batches
    for table in ("charter_ledger_entries", "charter_claims", "charter_approvals"):
        assert await count(sql_store, table) == 0


# -- lifecycle ------------------------------------------------------------------------------


async def test_a_store_must_be_opened_before_use(store_url: str) -> None:
    store = SqlStore(store_url)
    with pytest.raises(RuntimeError, match="not open"):
        await store.get_entry("acme", "alice", "r")
    await store.aclose()


async def test_a_closed_store_says_so_and_cannot_be_reopened(store_url: str) -> None:
    async with SqlStore(store_url) as store:
        pass
    with pytest.raises(RuntimeError, match="closed by aclose"):
        await store.get_entry("acme", "alice", "r")
    with pytest.raises(RuntimeError, match="closed by aclose"):
        async with store.transaction(wait=1):
            pass
    with pytest.raises(RuntimeError, match="opens once"):
        await store.open()
    await store.aclose()  # closing twice is harmless


async def test_opening_twice_is_refused(sql_store: SqlStore) -> None:
    with pytest.raises(RuntimeError, match="opens once"):
        await sql_store.open()


@pytest.mark.serial
async def test_a_pooled_connection_the_server_closed_is_replaced_before_it_is_used(
    make_sql_store: Any, store_backend: str
) -> None:
    # What a server restart does to every idle pooled connection, done to one: the next
    # checkout must notice (without a round trip of its own) and connect again, so no
    # caller sees an error.
    if store_backend != "postgres":
        pytest.skip("SQLite has no server to hang up")
    import psycopg

    store = await make_sql_store(pool_size=1)
    pid_query = sa.text("SELECT pg_backend_pid()")
    async with store.transaction(wait=5) as tx:
        old_pid = (await tx.connection.execute(pid_query)).scalar_one()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        # The second argument waits (up to 10 s) until the backend has exited.
        ended = admin.execute("SELECT pg_terminate_backend(%s, 10000)", (old_pid,)).fetchone()
    assert ended is not None and ended[0] is True
    record = entry()
    async with store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        new_pid = (await tx.connection.execute(pid_query)).scalar_one()
    assert new_pid != old_pid
    assert await store.get_entry("acme", "alice", record.request_id) is not None


def test_unsupported_urls_are_configuration_errors(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="not 'mysql"):
        SqlStore("mysql+aiomysql://u@h/db")
    with pytest.raises(ConfigurationError, match="in-memory"):
        SqlStore("sqlite+aiosqlite:///:memory:")
    with pytest.raises(ConfigurationError, match="in-memory"):
        SqlStore("sqlite+aiosqlite://")
    with pytest.raises(ConfigurationError, match="pool_size"):
        SqlStore(sqlite_url(tmp_path / "x.db"), pool_size=0)


async def test_plain_sqlite_urls_get_the_async_driver_and_paths_are_escaped(
    tmp_path: Any,
) -> None:
    path = tmp_path / "odd ?#name.db"
    async with SqlStore(sqlite_url(path)) as store:
        assert store.dialect == "sqlite"
    assert path.exists()
    async with SqlStore(f"sqlite:///{tmp_path / 'plain.db'}") as store:
        assert store.engine.url.drivername == "sqlite+aiosqlite"


def test_the_repr_hides_the_password() -> None:
    store = SqlStore("postgresql://user:s3cret@127.0.0.1:5432/db")
    assert "s3cret" not in repr(store)
    assert "postgresql+psycopg" in repr(store)
