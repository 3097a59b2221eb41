"""Store checks of ledger entries: claim, complete, the key, expiry and rollback."""

from __future__ import annotations

from datetime import timedelta

from ..ledger import DeferredRecord, LedgerStore
from ._records import (
    HOUR,
    NOW,
    WAIT,
    Abort,
    approval,
    audit_event,
    audit_ids,
    claim_record,
    commit,
    decide,
    entry,
    entry_of,
    read_claim,
    stored_approval,
)
from ._store_check import StoreCheck, expect, expect_equal, store_check

__all__ = ("LEDGER_CHECKS",)


@store_check
async def claim_inserts_an_entry_that_commits_with_its_transaction(store: LedgerStore) -> None:
    """A claim of a free key returns None, stays invisible until commit, then reads back."""
    record = entry()
    done = record.model_copy(update={"status": "completed", "outcome": '{"kind":"completed"}'})
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(record, NOW), None, "claim() of a free key")
        expect_equal(
            await entry_of(store),
            None,
            "get_entry() of a key claimed by a transaction that has not committed yet",
        )
        await tx.complete(done)
    expect_equal(await entry_of(store), done, "get_entry() after the commit")
    expect_equal(await entry_of(store, "req-never"), None, "get_entry() of an unused key")


@store_check
async def claim_returns_the_committed_entry_of_its_key(store: LedgerStore) -> None:
    """A claim of a committed, unexpired key returns the stored entry and changes nothing."""
    stored = await commit(store, entry())
    again = entry(fingerprint="sha256:other", invocation_id="inv-other", target="note:2")
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(again, NOW), stored, "claim() of a committed key")
    expect_equal(await entry_of(store), stored, "the stored entry after a second claim of its key")


@store_check
async def the_key_is_tenant_principal_and_request_id(store: LedgerStore) -> None:
    """Entries differing only in tenant, principal or request id are separate requests."""
    records = [
        entry(),
        entry(tenant_id="globex", fingerprint="sha256:globex"),
        entry(principal_id="bob", fingerprint="sha256:bob"),
        entry("req-2", fingerprint="sha256:req-2"),
    ]
    stored = [await commit(store, record) for record in records]
    for record in stored:
        expect_equal(
            await store.get_entry(record.tenant_id, record.principal_id, record.request_id),
            record,
            f"get_entry{(record.tenant_id, record.principal_id, record.request_id)}",
        )


@store_check
async def claim_replaces_an_expired_entry(store: LedgerStore) -> None:
    """An entry whose ``expires_at`` is at or before ``now`` is replaced by the next claim."""
    await commit(store, entry(expires_at=NOW))
    live = await commit(store, entry("req-2", expires_at=NOW + timedelta(microseconds=1)))
    fresh = entry(
        fingerprint="sha256:second",
        invocation_id="inv-second",
        created_at=NOW,
        expires_at=NOW + 24 * HOUR,
    )
    done = fresh.model_copy(update={"status": "completed", "outcome": '{"second":true}'})
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(
            await tx.claim(entry("req-2", fingerprint="sha256:other"), NOW),
            live,
            "claim() of a key whose entry expires one microsecond after now",
        )
        expect_equal(
            await tx.claim(fresh, NOW),
            None,
            "claim() of a key whose entry expired at now (expires_at == now)",
        )
        await tx.complete(done)
    expect_equal(await entry_of(store), done, "the entry that replaced an expired one")


@store_check
async def a_rolled_back_transaction_leaves_nothing(store: LedgerStore) -> None:
    """An exception in the block undoes the claim, consumption, claim, deferred and audit."""
    await store.insert_approval(approval())
    await decide(store, "apr-1", "approved")
    approved = await stored_approval(store, "apr-1")
    events_before = await audit_ids(store)
    record = entry(approval_id="apr-1")
    try:
        async with store.transaction(wait=WAIT) as tx:
            expect_equal(await tx.claim(record, NOW), None, "claim() of a free key")
            expect(
                await tx.consume_approval("apr-1", "req-1", NOW),
                "consume_approval() of an approved, unexpired approval returned False",
            )
            await tx.insert_claim(claim_record(record))
            await tx.record_claim_result("acme", "alice", "req-1", "note:created")
            await tx.insert_deferred(DeferredRecord.of(record))
            await tx.record_audit(audit_event("aud-lost"))
            await tx.complete(record.model_copy(update={"status": "deferred", "outcome": "{}"}))
            raise Abort
    except Abort:
        pass
    else:
        raise AssertionError("the transaction swallowed the exception raised in its block")
    expect_equal(await entry_of(store), None, "the rolled-back entry")
    expect_equal(await read_claim(store, "acme", "alice", "req-1"), None, "the rolled-back claim")
    expect_equal(
        await store.get_approval("apr-1"),
        approved,
        "an approval whose consumption was rolled back (still approved, no consumed_by)",
    )
    expect_equal(
        await store.get_deferred(record.invocation_id), None, "the rolled-back deferred record"
    )
    expect_equal(await audit_ids(store), events_before, "audit events after the rollback")
    # The request id is free, and the approval still usable.
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(record, NOW), None, "claim() of the rolled-back key")
        expect(
            await tx.consume_approval("apr-1", "req-1", NOW),
            "consume_approval() after a rolled-back consumption returned False",
        )
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))


@store_check
async def audit_events_commit_with_their_transaction(store: LedgerStore) -> None:
    """An audit event recorded in a transaction is kept when it commits, lost when not.

    Read back only when the store also lists audit events (``events()``, as an
    ``AuditSink`` does); otherwise the check only records them.
    """
    async with store.transaction(wait=WAIT) as tx:
        await tx.record_audit(audit_event("aud-kept"))
    try:
        async with store.transaction(wait=WAIT) as tx:
            await tx.record_audit(audit_event("aud-lost"))
            raise Abort
    except Abort:
        pass
    listed = await audit_ids(store)
    if listed is not None:
        expect_equal(listed, ["aud-kept"], "the audit events of one committed transaction")


LEDGER_CHECKS: tuple[StoreCheck, ...] = (
    claim_inserts_an_entry_that_commits_with_its_transaction,
    claim_returns_the_committed_entry_of_its_key,
    the_key_is_tenant_principal_and_request_id,
    claim_replaces_an_expired_entry,
    a_rolled_back_transaction_leaves_nothing,
    audit_events_commit_with_their_transaction,
)
"""The checks of ledger entries, transactions and their audit events."""
