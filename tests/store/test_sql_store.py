"""Every ``LedgerStore``/``LedgerTransaction`` method of ``SqlStore``, on SQLite and PostgreSQL.

The in-memory store is the reference: each behaviour here is the one ``MemoryStore`` has,
unless a test says why the SQL store differs.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from tests.store.conftest import POSTGRES_URL

from charter.audit import AuditEvent
from charter.errors import ConfigurationError, ErrorCode
from charter.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    ClaimRecord,
    DeferredRecord,
    LedgerEntry,
)
from charter.store import SqlStore, StoreError, UnstorableValue, sqlite_url

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def entry(**overrides: Any) -> LedgerEntry:
    values: dict[str, Any] = {
        "tenant_id": "acme",
        "principal_id": "alice",
        "request_id": str(uuid.uuid4()),
        "tool": "create_note",
        "capability_id": "notes.create",
        "capability_version": "1",
        "target": "note:1",
        "fingerprint": "sha256:aaa",
        "status": "in_progress",
        "invocation_id": uuid.uuid4().hex,
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=24),
    }
    values.update(overrides)
    return LedgerEntry(**values)


def approval(**overrides: Any) -> ApprovalRecord:
    values: dict[str, Any] = {
        "id": "apr_" + uuid.uuid4().hex,
        "tenant_id": "acme",
        "requester_id": "alice",
        "request_id": str(uuid.uuid4()),
        "tool": "delete_note",
        "capability_id": "notes.delete",
        "capability_version": "1",
        "target": "note:1",
        "fingerprint": "sha256:bbb",
        "arguments": {"note_id": "1", "nested": {"list": [1, 2.5, None, True]}, "é": "ü"},
        "risk": "destructive",
        "created_at": NOW,
        "expires_at": NOW + timedelta(hours=1),
    }
    values.update(overrides)
    return ApprovalRecord(**values)


def audit_event(**overrides: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "id": "aud_" + uuid.uuid4().hex,
        "time": NOW,
        "subject": "alice",
        "principal_tenant": "acme",
        "tenant": "acme",
        "tool": "create_note",
        "outcome": "completed",
    }
    values.update(overrides)
    return AuditEvent(**values)


async def claim_and_complete(store: SqlStore, record: LedgerEntry, outcome: str = "{}") -> None:
    async with store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": outcome}))


async def count(store: SqlStore, table: str) -> int:
    async with store.engine.connect() as conn:
        value = (await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one()
    return int(value)


# -- ledger entries -------------------------------------------------------------------------


async def test_a_claim_commits_with_its_transaction_and_reads_back_equal(
    sql_store: SqlStore,
) -> None:
    record = entry()
    await claim_and_complete(sql_store, record, '{"kind":"completed","output":{}}')
    stored = await sql_store.get_entry("acme", "alice", record.request_id)
    assert stored == record.model_copy(
        update={"status": "completed", "outcome": '{"kind":"completed","output":{}}'}
    )


async def test_a_second_claim_of_the_same_key_returns_the_committed_entry(
    sql_store: SqlStore,
) -> None:
    first = entry()
    await claim_and_complete(sql_store, first)
    again = first.model_copy(update={"fingerprint": "sha256:other", "invocation_id": "x"})
    async with sql_store.transaction(wait=5) as tx:
        existing = await tx.claim(again, NOW)
    assert existing is not None
    assert existing.fingerprint == "sha256:aaa"
    assert existing.status == "completed"


async def test_the_key_is_tenant_principal_and_request_id(sql_store: SqlStore) -> None:
    first = entry()
    await claim_and_complete(sql_store, first)
    for other in (
        first.model_copy(update={"tenant_id": "globex"}),
        first.model_copy(update={"principal_id": "bob"}),
    ):
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(other, NOW) is None
    assert await sql_store.get_entry("globex", "alice", first.request_id) is not None
    assert await sql_store.get_entry("acme", "bob", first.request_id) is not None


async def test_a_claim_replaces_an_expired_entry_and_drops_its_created_target_claim(
    sql_store: SqlStore,
) -> None:
    old = entry(expires_at=NOW - timedelta(seconds=1))
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(old, NOW - timedelta(hours=1)) is None
        await tx.insert_claim(
            ClaimRecord(
                tenant_id="acme",
                principal_id="alice",
                request_id=old.request_id,
                capability_id="notes.create",
                fingerprint="sha256:aaa",
                result_reference="note:old",
                created_at=NOW - timedelta(hours=1),
            )
        )
        await tx.complete(old.model_copy(update={"status": "completed", "outcome": "{}"}))
    fresh = old.model_copy(
        update={"fingerprint": "sha256:new", "expires_at": NOW + timedelta(hours=1)}
    )
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(fresh, NOW) is None
        assert await tx.get_claim("acme", "alice", old.request_id) is None
        await tx.complete(fresh.model_copy(update={"status": "completed", "outcome": "{}"}))
    stored = await sql_store.get_entry("acme", "alice", old.request_id)
    assert stored is not None and stored.fingerprint == "sha256:new"


async def test_an_unexpired_entry_is_not_replaced(sql_store: SqlStore) -> None:
    record = entry(expires_at=NOW + timedelta(seconds=1))
    await claim_and_complete(sql_store, record)
    async with sql_store.transaction(wait=5) as tx:
        existing = await tx.claim(record.model_copy(update={"fingerprint": "sha256:x"}), NOW)
    assert existing is not None and existing.fingerprint == "sha256:aaa"


async def test_complete_without_a_claim_is_a_store_error(sql_store: SqlStore) -> None:
    with pytest.raises(StoreError, match="claim"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.complete(entry(status="completed"))


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


async def test_reads_of_unknown_keys_return_none(sql_store: SqlStore) -> None:
    assert await sql_store.get_entry("acme", "alice", str(uuid.uuid4())) is None
    assert await sql_store.get_approval("apr_missing") is None
    assert await sql_store.find_approval("acme", "alice", "r") is None
    assert await sql_store.get_deferred("inv_missing") is None


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
        await tx.insert_claim(
            ClaimRecord(
                tenant_id="acme",
                principal_id="alice",
                request_id=record.request_id,
                capability_id="c",
                fingerprint="f",
                created_at=NOW,
            )
        )
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


# -- approvals ------------------------------------------------------------------------------


async def test_insert_approval_returns_the_existing_one_for_the_same_request(
    sql_store: SqlStore,
) -> None:
    first = approval()
    assert await sql_store.insert_approval(first) == first
    second = approval(request_id=first.request_id, fingerprint="sha256:other")
    assert await sql_store.insert_approval(second) == first
    assert await sql_store.get_approval(second.id) is None
    assert await sql_store.find_approval("acme", "alice", first.request_id) == first
    other_requester = approval(request_id=first.request_id, requester_id="bob")
    assert await sql_store.insert_approval(other_requester) == other_requester


async def test_list_approvals_is_newest_first_filtered_and_limited(sql_store: SqlStore) -> None:
    records = [approval(created_at=NOW + timedelta(minutes=i)) for i in range(4)]
    for record in records:
        await sql_store.insert_approval(record)
    await sql_store.insert_approval(approval(tenant_id="globex"))
    assert await sql_store.decide_approval(
        records[1].id,
        expected=("pending",),
        status="denied",
        decided_by="bob",
        reason=None,
        at=NOW,
        history=(),
    )
    listed = await sql_store.list_approvals("acme", None, 10)
    assert [r.id for r in listed] == [r.id for r in reversed(records)]
    pending = await sql_store.list_approvals("acme", "pending", 2)
    assert [r.id for r in pending] == [records[3].id, records[2].id]
    denied = await sql_store.list_approvals("acme", "denied", 10)
    assert [r.id for r in denied] == [records[1].id]
    assert await sql_store.list_approvals("acme", None, 0) == []


async def test_decide_approval_is_a_compare_and_set(sql_store: SqlStore) -> None:
    record = approval()
    await sql_store.insert_approval(record)
    decided_at = NOW + timedelta(minutes=5)
    assert await sql_store.decide_approval(
        record.id,
        expected=("pending",),
        status="approved",
        decided_by="bob",
        reason="fine",
        at=decided_at,
        history=(),
    )
    assert not await sql_store.decide_approval(
        record.id,
        expected=("pending",),
        status="approved",
        decided_by="carol",
        reason=None,
        at=NOW,
        history=(),
    )
    stored = await sql_store.get_approval(record.id)
    assert stored is not None
    assert (stored.status, stored.decided_by, stored.decided_at, stored.decision_reason) == (
        "approved",
        "bob",
        decided_at,
        "fine",
    )
    assert await sql_store.decide_approval(
        record.id,
        expected=("pending", "approved"),
        status="denied",
        decided_by="carol",
        reason="changed my mind",
        at=NOW,
        history=(),
    )
    assert not await sql_store.decide_approval(
        "apr_unknown",
        expected=("pending",),
        status="approved",
        decided_by="b",
        reason=None,
        at=NOW,
        history=(),
    )


async def test_consume_approval_takes_an_approved_unexpired_approval_once(
    sql_store: SqlStore,
) -> None:
    pending, expired, good = (
        approval(),
        approval(expires_at=NOW),
        approval(),
    )
    for record in (pending, expired, good):
        await sql_store.insert_approval(record)
    for record in (expired, good):
        assert await sql_store.decide_approval(
            record.id,
            expected=("pending",),
            status="approved",
            decided_by="bob",
            reason=None,
            at=NOW,
            history=(),
        )
    async with sql_store.transaction(wait=5) as tx:
        assert not await tx.consume_approval(pending.id, "r1", NOW)
        assert not await tx.consume_approval(expired.id, "r1", NOW)
        assert await tx.consume_approval(good.id, "r1", NOW)
        assert not await tx.consume_approval(good.id, "r2", NOW)
    stored = await sql_store.get_approval(good.id)
    assert stored is not None and (stored.status, stored.consumed_by) == ("consumed", "r1")


async def test_a_consumption_rolled_back_leaves_the_approval_approved(sql_store: SqlStore) -> None:
    record = approval()
    await sql_store.insert_approval(record)
    await sql_store.decide_approval(
        record.id,
        expected=("pending",),
        status="approved",
        decided_by="bob",
        reason=None,
        at=NOW,
        history=(),
    )
    with pytest.raises(RuntimeError, match="handler failed"):
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.consume_approval(record.id, "r1", NOW)
            raise RuntimeError("handler failed")
    stored = await sql_store.get_approval(record.id)
    assert stored is not None and stored.status == "approved"


# -- created-target claims ------------------------------------------------------------------


async def test_a_claim_and_its_result_reference_commit_together(sql_store: SqlStore) -> None:
    record = entry()
    claim = ClaimRecord(
        tenant_id="acme",
        principal_id="alice",
        request_id=record.request_id,
        capability_id="notes.create",
        fingerprint="sha256:aaa",
        created_at=NOW,
    )
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        assert await tx.get_claim("acme", "alice", record.request_id) is None
        await tx.insert_claim(claim)
        assert await tx.get_claim("acme", "alice", record.request_id) == claim
        await tx.record_claim_result("acme", "alice", record.request_id, "note:n1")
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    async with sql_store.transaction(wait=5) as tx:
        stored = await tx.get_claim("acme", "alice", record.request_id)
    assert stored == claim.model_copy(update={"result_reference": "note:n1"})


async def test_recording_a_result_without_a_claim_is_a_store_error(sql_store: SqlStore) -> None:
    with pytest.raises(StoreError, match="claim"):
        async with sql_store.transaction(wait=5) as tx:
            await tx.record_claim_result("acme", "alice", "r", "note:1")


# -- deferred records -----------------------------------------------------------------------


async def test_settle_deferred_completes_the_record_and_its_entry_once(
    sql_store: SqlStore,
) -> None:
    record = entry()
    deferred = DeferredRecord(
        invocation_id=record.invocation_id,
        tenant_id="acme",
        principal_id="alice",
        request_id=record.request_id,
        tool="create_note",
        created_at=NOW,
    )
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, NOW) is None
        await tx.insert_deferred(deferred)
        await tx.complete(
            record.model_copy(update={"status": "deferred", "outcome": '{"kind":"deferred"}'})
        )
    assert await sql_store.get_deferred(record.invocation_id) == deferred
    settled_at = NOW + timedelta(minutes=1)
    done = '{"kind":"completed","output":{"ok":true}}'
    assert await sql_store.settle_deferred(record.invocation_id, done, settled_at)
    assert not await sql_store.settle_deferred(record.invocation_id, "{}", settled_at)
    assert not await sql_store.settle_deferred("inv_unknown", "{}", settled_at)
    assert await sql_store.get_deferred(record.invocation_id) == deferred.model_copy(
        update={"status": "settled", "outcome": done, "settled_at": settled_at}
    )
    stored = await sql_store.get_entry("acme", "alice", record.request_id)
    assert stored is not None and (stored.status, stored.outcome) == ("completed", done)


async def test_settling_does_not_touch_a_later_entry_that_reused_the_key(
    sql_store: SqlStore,
) -> None:
    # Differs from MemoryStore, which updates whatever entry holds the key now.
    old = entry(expires_at=NOW - timedelta(seconds=1))
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(old, NOW - timedelta(hours=1)) is None
        await tx.insert_deferred(
            DeferredRecord(
                invocation_id=old.invocation_id,
                tenant_id="acme",
                principal_id="alice",
                request_id=old.request_id,
                tool="create_note",
                created_at=NOW,
            )
        )
        await tx.complete(old.model_copy(update={"status": "deferred", "outcome": "{}"}))
    new = old.model_copy(
        update={"invocation_id": "inv_new", "expires_at": NOW + timedelta(hours=1)}
    )
    await claim_and_complete(sql_store, new, '{"new":true}')
    assert await sql_store.settle_deferred(old.invocation_id, '{"old":true}', NOW)
    stored = await sql_store.get_entry("acme", "alice", old.request_id)
    assert stored is not None and stored.outcome == '{"new":true}'


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


async def test_record_audit_commits_and_rolls_back_with_its_transaction(
    sql_store: SqlStore,
) -> None:
    kept, lost = audit_event(), audit_event()
    async with sql_store.transaction(wait=5) as tx:
        await tx.record_audit(kept)
    with pytest.raises(RuntimeError):
        async with sql_store.transaction(wait=5) as tx:
            await tx.record_audit(lost)
            raise RuntimeError("boom")
    assert await sql_store.events() == [kept]


# -- retention ------------------------------------------------------------------------------


async def test_prune_deletes_expired_completed_rows_in_batches_and_nothing_live(
    sql_store: SqlStore,
) -> None:
    past = NOW - timedelta(days=1)
    expired = [entry(expires_at=past) for _ in range(7)]
    for record in expired:
        async with sql_store.transaction(wait=5) as tx:
            assert await tx.claim(record, past - timedelta(hours=1)) is None
            await tx.insert_claim(
                ClaimRecord(
                    tenant_id="acme",
                    principal_id="alice",
                    request_id=record.request_id,
                    capability_id="c",
                    fingerprint="f",
                    result_reference="note:1",
                    created_at=past,
                )
            )
            await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    live = entry()
    await claim_and_complete(sql_store, live)
    waiting = entry(expires_at=past)  # deferred, not settled: its work is still running
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(waiting, past - timedelta(hours=1)) is None
        await tx.insert_deferred(
            DeferredRecord(
                invocation_id=waiting.invocation_id,
                tenant_id="acme",
                principal_id="alice",
                request_id=waiting.request_id,
                tool="create_note",
                created_at=past,
            )
        )
        await tx.complete(waiting.model_copy(update={"status": "deferred", "outcome": "{}"}))
    statuses: tuple[ApprovalStatus, ...] = ("pending", "approved", "denied", "consumed")
    approvals = {status: approval(expires_at=past) for status in statuses}
    fresh_denied = approval()
    for pending in (*approvals.values(), fresh_denied):
        await sql_store.insert_approval(pending)
    for status in statuses[1:]:
        assert await sql_store.decide_approval(
            approvals[status].id,
            expected=("pending",),
            status=status,
            decided_by="bob",
            reason=None,
            at=past,
            history=(),
        )
    await sql_store.decide_approval(
        fresh_denied.id,
        expected=("pending",),
        status="denied",
        decided_by="b",
        reason=None,
        at=NOW,
        history=(),
    )

    commits: list[None] = []
    sa.event.listen(sql_store.engine.sync_engine, "commit", lambda conn: commits.append(None))

    assert await sql_store.prune(NOW, batch_size=2) == 7 + 2

    assert len(commits) >= 4 + 1  # ceil(7 / 2) entry batches, at least one approval batch
    for record in expired:
        assert await sql_store.get_entry("acme", "alice", record.request_id) is None
    assert await sql_store.get_entry("acme", "alice", live.request_id) is not None
    assert await sql_store.get_entry("acme", "alice", waiting.request_id) is not None
    assert await sql_store.get_deferred(waiting.invocation_id) is not None
    assert await count(sql_store, "charter_claims") == 0
    for status in ("pending", "approved"):
        assert await sql_store.get_approval(approvals[status].id) is not None
    for status in ("denied", "consumed"):
        assert await sql_store.get_approval(approvals[status].id) is None
    assert await sql_store.get_approval(fresh_denied.id) is not None
    assert await sql_store.prune(NOW, batch_size=2) == 0


async def test_prune_takes_a_settled_deferred_record_with_its_entry(sql_store: SqlStore) -> None:
    past = NOW - timedelta(days=1)
    record = entry(expires_at=past)
    async with sql_store.transaction(wait=5) as tx:
        assert await tx.claim(record, past - timedelta(hours=1)) is None
        await tx.insert_deferred(
            DeferredRecord(
                invocation_id=record.invocation_id,
                tenant_id="acme",
                principal_id="alice",
                request_id=record.request_id,
                tool="create_note",
                created_at=past,
            )
        )
        await tx.complete(record.model_copy(update={"status": "deferred", "outcome": "{}"}))
    assert await sql_store.settle_deferred(record.invocation_id, "{}", past)
    assert await sql_store.prune(NOW) == 1
    assert await sql_store.get_deferred(record.invocation_id) is None


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
