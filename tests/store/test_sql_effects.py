"""The effect outbox on ``SqlStore`` (SQLite and PostgreSQL): rows commit with the call's
ledger entry and domain writes or not at all; claims lease rows so concurrent workers never
share one; results, listing, re-driving and discarding."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from tests.effects.kit import FakeProvider, build, refund, reuse_after_expiry
from tests.store.conftest import SqlStoreFactory

from charter import Completed, Failed
from charter.effects import EffectRecord
from charter.store import SqlStore
from charter.store._schema import effects, ledger_entries

pytestmark = pytest.mark.anyio


def _record(key: str, now: datetime, **fields: object) -> EffectRecord:
    values: dict[str, object] = {
        "key": key,
        "tenant_id": "acme",
        "name": "payments.refund",
        "payload": {"booking_id": "bk_1", "amount_cents": 1},
        "max_attempts": 3,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
    }
    values.update(fields)
    return EffectRecord.model_validate(values)


async def _count(store: SqlStore, table: sa.Table) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one())


async def test_an_effect_row_commits_with_the_ledger_entry_and_is_delivered(
    sql_store: SqlStore,
) -> None:
    host, provider = build(sql_store)
    rid = str(uuid.uuid4())
    assert isinstance(await refund(host, request_id=rid, effects=2), Completed)
    records = await host.effects.list(tenant_id="acme", request_id=rid)
    assert [r.seq for r in records] == [1, 0]
    assert {r.status for r in records} == {"delivered"}
    assert all(r.delivered_at is not None and r.leased_by is None for r in records)
    assert sorted(provider.calls.values()) == [1, 1]
    assert await host.effects.backlog() == (0, None)


async def test_a_rolled_back_call_leaves_neither_ledger_entry_nor_effect(
    sql_store: SqlStore,
) -> None:
    host, provider = build(sql_store)
    assert isinstance(await refund(host, fail=True), Failed)
    assert await _count(sql_store, effects) == 0
    assert await _count(sql_store, ledger_entries) == 0
    assert not provider.calls


async def test_a_request_id_reused_after_expiry_keys_its_effect_anew(sql_store: SqlStore) -> None:
    (old, new), provider = await reuse_after_expiry(sql_store)
    assert old.key != new.key
    assert (old.status, old.payload["amount_cents"]) == ("dead", 100)
    assert (new.status, new.payload["amount_cents"]) == ("delivered", 200)
    assert provider.refunds[new.key].amount_cents == 200


async def test_retry_then_dead_then_redrive_on_sql(sql_store: SqlStore) -> None:
    provider = FakeProvider(failures=10**9)
    host, _ = build(sql_store, provider=provider, max_attempts=2)
    await refund(host)
    [record] = await host.effects.list()
    assert record.status == "pending" and record.last_error is not None
    while (await host.effects.list())[0].status == "pending":
        await host.effects.work(once=True)
    [record] = await host.effects.list()
    assert record.status == "dead" and record.attempts == 2
    count, _ = await host.effects.backlog()
    assert count == 0
    provider.failures = 0
    assert await host.effects.retry(record.key)
    await host.effects.work(once=True)
    assert (await host.effects.get(record.key)).status == "delivered"  # type: ignore[union-attr]
    assert not await host.effects.discard(record.key)  # delivered: nothing to discard


async def test_concurrent_claims_never_lease_one_effect_twice(
    sql_store: SqlStore, make_sql_store: SqlStoreFactory
) -> None:
    now = datetime.now(UTC)
    async with sql_store.transaction(wait=5) as tx:
        for i in range(60):
            assert await tx.insert_effect(_record(f"eff_{i:03d}", now))
        assert not await tx.insert_effect(_record("eff_000", now))  # the key decides
    stores = [sql_store, await make_sql_store(), await make_sql_store()]

    async def claimer(store: SqlStore, name: str) -> list[str]:
        got: list[str] = []
        while batch := await store.claim_effects(
            now=now, lease_until=now + timedelta(minutes=1), worker=name, limit=7
        ):
            got.extend(r.key for r in batch)
        return got

    results = await asyncio.gather(*(claimer(stores[i % 3], f"w{i}") for i in range(6)))
    claimed = [key for keys in results for key in keys]
    assert sorted(claimed) == [f"eff_{i:03d}" for i in range(60)]
    # Leased: nobody else may finish them, and nothing is due until the lease ends.
    [first] = [r for r in await sql_store.list_effects(limit=100) if r.key == "eff_000"]
    assert first.attempts == 1 and first.leased_by is not None
    assert not await sql_store.finish_effect(
        "eff_000",
        worker="someone-else",
        status="delivered",
        next_attempt_at=None,
        error=None,
        at=now,
    )
    later = now + timedelta(minutes=2)
    again = await sql_store.claim_effects(
        now=later, lease_until=later + timedelta(minutes=1), worker="w9", limit=100
    )
    assert len(again) == 60 and {r.attempts for r in again} == {2}


async def test_error_text_with_nul_is_stored(sql_store: SqlStore) -> None:
    now = datetime.now(UTC)
    async with sql_store.transaction(wait=5) as tx:
        await tx.insert_effect(_record("eff_nul", now, leased_by="me", lease_until=now))
    assert await sql_store.finish_effect(
        "eff_nul", worker="me", status="pending", next_attempt_at=now, error="bad\x00byte", at=now
    )
    stored = await sql_store.get_effect("eff_nul")
    assert stored is not None and stored.last_error == "bad\ufffdbyte"
    assert await sql_store.get_effect("nul\x00key") is None


async def test_prune_deletes_finished_effects_and_keeps_pending_and_dead(
    sql_store: SqlStore,
) -> None:
    long_ago = datetime(2026, 1, 1, tzinfo=UTC)
    recent = datetime.now(UTC)
    rows = {
        "eff_old_delivered": ("delivered", long_ago),
        "eff_old_discarded": ("discarded", long_ago),
        "eff_old_dead": ("dead", long_ago),
        "eff_old_pending": ("pending", long_ago),
        "eff_new_delivered": ("delivered", recent),
    }
    async with sql_store.transaction(wait=5) as tx:
        for key, (status, at) in rows.items():
            assert await tx.insert_effect(_record(key, at, status=status, updated_at=at))
    cutoff = recent - timedelta(hours=1)
    assert await sql_store.prune_effects(cutoff, batch_size=1) == 2
    kept = {r.key: r.status for r in await sql_store.list_effects(limit=100)}
    assert kept == {
        "eff_old_dead": "dead",
        "eff_old_pending": "pending",
        "eff_new_delivered": "delivered",
    }
    assert await sql_store.prune_effects(cutoff) == 0
    # A dead effect stays until a person discards it; then it ages like the others.
    host, _ = build(sql_store)
    assert await host.effects.discard("eff_old_dead")
    assert await sql_store.prune_effects(cutoff) == 0
    assert await sql_store.prune_effects(datetime.now(UTC) + timedelta(days=2)) == 2
    assert [r.key for r in await sql_store.list_effects(limit=100)] == ["eff_old_pending"]
    with pytest.raises(ValueError, match="batch_size"):
        await sql_store.prune_effects(cutoff, batch_size=0)
