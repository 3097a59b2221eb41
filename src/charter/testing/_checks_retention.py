"""Store checks of retention: ``prune`` deletes what expired and finished, nothing live."""

from __future__ import annotations

from datetime import timedelta

from ..ledger import DeferredRecord, LedgerStore
from ._records import (
    HOUR,
    NOW,
    WAIT,
    approval,
    claim_record,
    commit,
    decide,
    entry,
    entry_of,
    read_claim,
    stored_approval,
)
from ._store_check import StoreCheck, expect, expect_equal, store_check

__all__ = ("RETENTION_CHECKS",)

PAST = NOW - HOUR
"""When the expired records expired."""


@store_check
async def prune_deletes_expired_entries_with_their_claims_and_settled_records(
    store: LedgerStore,
) -> None:
    """Completed entries that expired before ``before`` go, with claim and settled record."""
    completed = entry("req-completed", expires_at=PAST)
    await commit(store, completed, claim=claim_record(completed, result_reference="note:1"))
    settled = entry("req-settled", expires_at=PAST)
    await commit(store, settled, status="deferred", deferred=DeferredRecord.of(settled))
    expect(
        await store.settle_deferred(settled.invocation_id, "{}", PAST - HOUR),
        "settle_deferred() of an active record returned False",
    )
    edge = entry("req-edge", expires_at=NOW)  # expires at ``before``: not before it
    edge_claim = claim_record(edge)
    kept = await commit(store, edge, claim=edge_claim)

    expect_equal(await store.prune(NOW), 2, "prune(now): the number of rows deleted")

    for gone in (completed, settled):
        expect_equal(
            await entry_of(store, gone.request_id), None, f"the pruned entry {gone.request_id!r}"
        )
    expect_equal(
        await read_claim(store, "acme", "alice", "req-completed"), None, "a pruned entry's claim"
    )
    expect_equal(
        await store.get_deferred(settled.invocation_id),
        None,
        "the settled deferred record of a pruned entry",
    )
    expect_equal(await entry_of(store, "req-edge"), kept, "an entry expiring exactly at `before`")
    expect_equal(await read_claim(store, "acme", "alice", "req-edge"), edge_claim, "its claim")
    # A pruned request id is free again, and starts without a claim.
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(entry("req-completed"), NOW), None, "claim() after prune")
        expect_equal(
            await tx.get_claim("acme", "alice", "req-completed"), None, "get_claim() after prune"
        )


@store_check
async def prune_never_deletes_live_or_unfinished_work(store: LedgerStore) -> None:
    """Unexpired entries, deferred entries and their active records, open approvals stay."""
    live = entry("req-live", expires_at=NOW + HOUR)
    live_claim = claim_record(live)
    stored_live = await commit(store, live, claim=live_claim)
    waiting = entry("req-waiting", expires_at=PAST)
    waiting_record = DeferredRecord.of(waiting)
    stored_waiting = await commit(
        store, waiting, status="deferred", outcome="{}", deferred=waiting_record
    )
    for approval_id in ("apr-pending", "apr-approved"):
        await store.insert_approval(approval(approval_id, expires_at=PAST))
    await decide(store, "apr-approved", "approved", at=PAST - HOUR)
    await store.insert_approval(approval("apr-denied", expires_at=NOW + HOUR))
    await decide(store, "apr-denied", "denied")
    approvals = [
        await stored_approval(store, approval_id)
        for approval_id in ("apr-pending", "apr-approved", "apr-denied")
    ]

    expect_equal(await store.prune(NOW), 0, "prune(now) with nothing it may delete")

    expect_equal(await entry_of(store, "req-live"), stored_live, "live entry")
    expect_equal(await read_claim(store, "acme", "alice", "req-live"), live_claim, "its claim")
    expect_equal(
        await entry_of(store, "req-waiting"), stored_waiting, "an expired entry still deferred"
    )
    expect_equal(
        await store.get_deferred(waiting.invocation_id), waiting_record, "its active record"
    )
    for record in approvals:
        expect_equal(
            await store.get_approval(record.id), record, f"the approval {record.id!r} kept"
        )


@store_check
async def prune_deletes_denied_and_consumed_approvals_that_expired(store: LedgerStore) -> None:
    """Denied and consumed approvals that expired before ``before`` go; nothing else."""
    for approval_id in ("apr-denied", "apr-consumed"):
        await store.insert_approval(approval(approval_id, expires_at=PAST))
    await decide(store, "apr-denied", "denied", at=PAST - HOUR)
    await decide(store, "apr-consumed", "approved", at=PAST - HOUR)
    async with store.transaction(wait=WAIT) as tx:
        expect(
            await tx.consume_approval("apr-consumed", "req-apr-consumed", PAST - HOUR),
            "consume_approval() of an approved, unexpired approval returned False",
        )
    await store.insert_approval(approval("apr-edge", expires_at=NOW))
    await decide(store, "apr-edge", "denied")
    edge = await stored_approval(store, "apr-edge")

    expect_equal(await store.prune(NOW), 2, "prune(now): the number of rows deleted")

    for gone in ("apr-denied", "apr-consumed"):
        expect_equal(await store.get_approval(gone), None, f"the pruned approval {gone!r}")
    expect_equal(
        await store.get_approval("apr-edge"), edge, "a denied approval expiring at `before`"
    )


@store_check
async def prune_works_through_a_backlog_in_batches(store: LedgerStore) -> None:
    """``prune(before, batch_size=2)`` still deletes the whole backlog; a batch under 1 fails."""
    for index in range(5):
        await commit(store, entry(f"req-{index}", expires_at=PAST))
    for index in range(3):
        await store.insert_approval(approval(f"apr-{index}", expires_at=PAST))
        await decide(store, f"apr-{index}", "denied", at=PAST - HOUR)

    expect_equal(await store.prune(NOW, batch_size=2), 8, "prune(now, batch_size=2)")

    expect_equal(await entry_of(store, "req-4"), None, "the last entry")
    expect_equal(await store.get_approval("apr-2"), None, "the last approval")
    expect_equal(await store.prune(NOW, batch_size=2), 0, "a second prune(now)")
    try:
        await store.prune(NOW + timedelta(days=1), batch_size=0)
    except ValueError:
        return
    raise AssertionError("prune(batch_size=0) did not raise ValueError")


RETENTION_CHECKS: tuple[StoreCheck, ...] = (
    prune_deletes_expired_entries_with_their_claims_and_settled_records,
    prune_never_deletes_live_or_unfinished_work,
    prune_deletes_denied_and_consumed_approvals_that_expired,
    prune_works_through_a_backlog_in_batches,
)
"""The checks of retention."""
