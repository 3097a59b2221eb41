"""Store checks of approvals: insert, read, list, decide (compare-and-set) and consume."""

from __future__ import annotations

from datetime import timedelta

from ..ledger import ApprovalDecision, ApprovalRecord, LedgerStore, LedgerTransaction
from ._records import HOUR, NOW, WAIT, Abort, approval, decide, set_decision, stored_approval
from ._store_check import StoreCheck, expect, expect_equal, store_check

__all__ = ("APPROVAL_CHECKS",)


@store_check
async def an_approval_reads_back_exactly_as_inserted(store: LedgerStore) -> None:
    """An inserted approval reads back equal by id and by (tenant, requester, request id)."""
    record = approval()
    expect_equal(await store.insert_approval(record), record, "insert_approval() of a new one")
    expect_equal(await store.get_approval("apr-1"), record, "get_approval()")
    expect_equal(await store.find_approval("acme", "alice", "req-apr-1"), record, "find_approval()")
    expect_equal(await store.get_approval("apr-unknown"), None, "get_approval() of an unknown id")
    for key in (("globex", "alice", "req-apr-1"), ("acme", "bob", "req-apr-1")):
        expect_equal(await store.find_approval(*key), None, f"find_approval{key}")


@store_check
async def inserting_an_approval_for_the_same_request_returns_the_first(
    store: LedgerStore,
) -> None:
    """A second approval for one (tenant, requester, request id) returns the stored one."""
    first = approval()
    await store.insert_approval(first)
    second = approval("apr-2", request_id="req-apr-1", fingerprint="sha256:other")
    expect_equal(await store.insert_approval(second), first, "insert_approval() of the same key")
    expect_equal(await store.get_approval("apr-2"), None, "the approval that was not inserted")
    await decide(store, "apr-1", "approved")
    decided = await stored_approval(store, "apr-1")
    expect_equal(await store.insert_approval(second), decided, "insert_approval() after a decision")
    for other in (
        approval("apr-3", request_id="req-apr-1", requester_id="bob"),
        approval("apr-4", request_id="req-apr-1", tenant_id="globex"),
    ):
        expect_equal(
            await store.insert_approval(other),
            other,
            f"insert_approval() for the same request id of {other.tenant_id}/{other.requester_id}",
        )


@store_check
async def approvals_are_listed_newest_first_by_tenant_and_status(store: LedgerStore) -> None:
    """``list_approvals`` lists one tenant's, of one status or all, newest first, up to limit."""
    records = [approval(f"apr-{i}", created_at=NOW - HOUR + timedelta(minutes=i)) for i in range(4)]
    for record in [records[2], records[0], records[3], records[1]]:
        await store.insert_approval(record)
    await store.insert_approval(approval("apr-globex", tenant_id="globex", created_at=NOW))
    await decide(store, "apr-1", "denied")
    expect_equal(
        _ids(await store.list_approvals("acme", None, 10)),
        ["apr-3", "apr-2", "apr-1", "apr-0"],
        "list_approvals('acme', None, 10)",
    )
    expect_equal(
        _ids(await store.list_approvals("acme", "pending", 2)),
        ["apr-3", "apr-2"],
        "list_approvals('acme', 'pending', 2)",
    )
    expect_equal(
        _ids(await store.list_approvals("acme", "denied", 10)),
        ["apr-1"],
        "list_approvals('acme', 'denied', 10)",
    )
    expect_equal(
        await store.list_approvals("acme", "approved", 10), [], "list of a status none has"
    )
    expect_equal(await store.list_approvals("acme", None, 0), [], "list_approvals() limit 0")
    expect_equal(await store.list_approvals("initech", None, 10), [], "another tenant's list")
    listed = await store.list_approvals("acme", None, 1)
    expect_equal(listed, [records[3]], "the listed record equals the stored one")


@store_check
async def deciding_an_approval_is_a_compare_and_set(store: LedgerStore) -> None:
    """``decide_approval`` is a compare-and-set, and keeps the history it is given."""
    record = approval()
    await store.insert_approval(record)
    at = NOW + timedelta(minutes=5)
    granted = ApprovalDecision(status="approved", decided_by="acme/bob", decided_at=at, reason="ok")
    expect(
        await set_decision(store, "apr-1", ("pending",), (granted,)),
        "decide_approval() of a pending approval expecting pending returned False",
    )
    approved = record.with_decision(
        "approved", decided_by="acme/bob", at=at, reason="ok", history=(granted,)
    )
    expect_equal(await store.get_approval("apr-1"), approved, "the approval once approved")
    lost = ApprovalDecision(status="denied", decided_by="acme/carol", decided_at=NOW)
    expect(
        not await set_decision(store, "apr-1", ("pending",), (lost,)),
        "decide_approval() of an approved approval expecting pending returned True",
    )
    expect_equal(await store.get_approval("apr-1"), approved, "the approval after a lost race")
    expect(
        not await set_decision(store, "apr-1", (), (lost,)),
        "decide_approval() expecting no status returned True",
    )
    revoked_at = NOW + timedelta(minutes=6)
    revoked = ApprovalDecision(
        status="denied", decided_by="acme/carol", decided_at=revoked_at, reason="revoked"
    )
    expect(
        await set_decision(store, "apr-1", ("pending", "approved"), (granted, revoked)),
        "decide_approval() of an approved approval expecting (pending, approved) returned False",
    )
    expect_equal(
        await store.get_approval("apr-1"),
        approved.with_decision(
            "denied",
            decided_by="acme/carol",
            at=revoked_at,
            reason="revoked",
            history=(granted, revoked),
        ),
        "the approval once revoked (its history keeps who granted)",
    )
    expect(
        not await set_decision(store, "apr-unknown", ("pending",), (granted,)),
        "decide_approval() of an unknown approval returned True",
    )


@store_check
async def an_approved_unexpired_approval_is_consumed_exactly_once(store: LedgerStore) -> None:
    """``consume_approval`` takes an approved approval before it expires, once, for one request."""
    for record in (
        approval("apr-pending"),
        approval("apr-denied"),
        approval("apr-expired", expires_at=NOW),
        approval("apr-good", expires_at=NOW + timedelta(microseconds=1)),
    ):
        await store.insert_approval(record)
    await decide(store, "apr-denied", "denied")
    await decide(store, "apr-expired", "approved")
    await decide(store, "apr-good", "approved")
    approved = await stored_approval(store, "apr-good")
    async with store.transaction(wait=WAIT) as tx:
        for refused in ("apr-pending", "apr-denied", "apr-expired", "apr-unknown"):
            expect(
                not await tx.consume_approval(refused, "req-1", NOW),
                f"consume_approval({refused!r}) returned True",
            )
        expect(
            await tx.consume_approval("apr-good", "req-1", NOW),
            "consume_approval() of an approval approved until one microsecond after now "
            "returned False",
        )
        expect(
            not await tx.consume_approval("apr-good", "req-2", NOW),
            "a second consume_approval() in the same transaction returned True",
        )
    async with store.transaction(wait=WAIT) as tx:
        expect(
            not await tx.consume_approval("apr-good", "req-3", NOW),
            "consume_approval() of a consumed approval returned True",
        )
    expect_equal(
        await store.get_approval("apr-good"),
        approved.model_copy(update={"status": "consumed", "consumed_by": "req-1"}),
        "the consumed approval (its decision kept)",
    )
    expect(
        not await set_decision(
            store,
            "apr-good",
            ("pending", "approved"),
            (ApprovalDecision(status="denied", decided_by="acme/bob", decided_at=NOW),),
        ),
        "decide_approval() revoked a consumed approval",
    )


@store_check
async def approvals_written_in_a_transaction_commit_or_roll_back_with_it(
    store: LedgerStore,
) -> None:
    """``tx.insert_approval`` and ``tx.decide_approval`` commit with their transaction.

    The host writes an approval change and its notifications in one transaction: a
    rolled-back insert or decision leaves nothing, a committed one reads back.
    """
    record = approval()
    try:
        async with store.transaction(wait=WAIT) as tx:
            expect_equal(await tx.insert_approval(record), record, "tx.insert_approval()")
            raise Abort
    except Abort:
        pass
    expect_equal(await store.get_approval("apr-1"), None, "an approval inserted, rolled back")
    async with store.transaction(wait=WAIT) as tx:
        await tx.insert_approval(record)
        again = approval("apr-2", request_id="req-apr-1", fingerprint="sha256:other")
        expect_equal(
            await tx.insert_approval(again), record, "tx.insert_approval() of the same request"
        )
    expect_equal(await store.get_approval("apr-1"), record, "an approval inserted, committed")
    decision = ApprovalDecision(status="approved", decided_by="acme/bob", decided_at=NOW)

    async def grant(tx: LedgerTransaction) -> bool:
        return await set_decision(tx, "apr-1", ("pending",), (decision,))

    try:
        async with store.transaction(wait=WAIT) as tx:
            expect(await grant(tx), "tx.decide_approval() refused")
            raise Abort
    except Abort:
        pass
    expect_equal(await store.get_approval("apr-1"), record, "a decision rolled back")
    async with store.transaction(wait=WAIT) as tx:
        expect(await grant(tx), "tx.decide_approval() refused")
        expect(
            not await grant(tx),
            "a second compare-and-set from pending in the same transaction succeeded",
        )
    decided = await stored_approval(store, "apr-1")
    expect_equal(
        (decided.status, decided.decided_by, decided.history),
        ("approved", "acme/bob", (decision,)),
        "the decision committed in a transaction",
    )


def _ids(records: list[ApprovalRecord]) -> list[str]:
    return [record.id for record in records]


APPROVAL_CHECKS: tuple[StoreCheck, ...] = (
    an_approval_reads_back_exactly_as_inserted,
    inserting_an_approval_for_the_same_request_returns_the_first,
    approvals_are_listed_newest_first_by_tenant_and_status,
    deciding_an_approval_is_a_compare_and_set,
    an_approved_unexpired_approval_is_consumed_exactly_once,
    approvals_written_in_a_transaction_commit_or_roll_back_with_it,
)
"""The checks of approvals."""
