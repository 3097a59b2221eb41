"""Store checks of created-target claims: they commit with their entry and go with it."""

from __future__ import annotations

from ..ledger import LedgerStore
from ._records import HOUR, NOW, WAIT, Abort, claim_record, commit, entry, entry_of, read_claim
from ._store_check import StoreCheck, expect_equal, store_check

__all__ = ("CLAIM_CHECKS",)


@store_check
async def a_created_target_claim_and_its_result_commit_together(store: LedgerStore) -> None:
    """A claim inserted and given a result in a transaction reads back with both after commit."""
    record = entry()
    claim = claim_record(record, fingerprint="sha256:command")
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(record, NOW), None, "claim() of a free key")
        expect_equal(
            await tx.get_claim("acme", "alice", "req-1"), None, "get_claim() before insert"
        )
        await tx.insert_claim(claim)
        expect_equal(
            await tx.get_claim("acme", "alice", "req-1"), claim, "get_claim() after insert"
        )
        await tx.record_claim_result("acme", "alice", "req-1", "note:n1")
        expect_equal(
            await tx.get_claim("acme", "alice", "req-1"),
            claim.model_copy(update={"result_reference": "note:n1"}),
            "get_claim() after record_claim_result() in the same transaction",
        )
        await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    expect_equal(
        await read_claim(store, "acme", "alice", "req-1"),
        claim.model_copy(update={"result_reference": "note:n1"}),
        "the committed claim (fingerprint and result reference kept)",
    )
    for key in (("globex", "alice", "req-1"), ("acme", "bob", "req-1"), ("acme", "alice", "r")):
        expect_equal(await read_claim(store, *key), None, f"get_claim{key}")


@store_check
async def replacing_an_expired_entry_drops_its_claim(store: LedgerStore) -> None:
    """The claim of an expired entry goes when a new claim replaces the entry."""
    old = entry(expires_at=NOW)
    await commit(store, old, claim=claim_record(old, result_reference="note:old"))
    fresh = entry(fingerprint="sha256:second", invocation_id="inv-2", expires_at=NOW + HOUR)
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(await tx.claim(fresh, NOW), None, "claim() of an expired key")
        expect_equal(
            await tx.get_claim("acme", "alice", "req-1"),
            None,
            "get_claim() in the transaction that replaced the expired entry",
        )
        await tx.complete(fresh.model_copy(update={"status": "completed", "outcome": "{}"}))
    expect_equal(
        await read_claim(store, "acme", "alice", "req-1"),
        None,
        "the claim of an expired entry that was replaced",
    )
    # A replacement that makes a claim of its own keeps that one, with its fingerprint.
    second = entry("req-2", expires_at=NOW)
    await commit(store, second, claim=claim_record(second, result_reference="note:old"))
    again = entry("req-2", fingerprint="sha256:second", invocation_id="inv-2b")
    new_claim = claim_record(again)
    await commit(store, again, claim=new_claim)
    expect_equal(
        await read_claim(store, "acme", "alice", "req-2"),
        new_claim,
        "the claim made by the entry that replaced an expired one",
    )


@store_check
async def a_rolled_back_replacement_keeps_the_expired_entry_and_its_claim(
    store: LedgerStore,
) -> None:
    """A replacement of an expired entry that rolls back leaves the old entry and claim."""
    old = entry(expires_at=NOW)
    claim = claim_record(old, result_reference="note:old")
    stored = await commit(store, old, claim=claim)
    try:
        async with store.transaction(wait=WAIT) as tx:
            expect_equal(
                await tx.claim(entry(fingerprint="sha256:second"), NOW),
                None,
                "claim() of an expired key",
            )
            raise Abort
    except Abort:
        pass
    expect_equal(await entry_of(store), stored, "the expired entry kept")
    expect_equal(
        await read_claim(store, "acme", "alice", "req-1"), claim, "the expired entry's claim"
    )


CLAIM_CHECKS: tuple[StoreCheck, ...] = (
    a_created_target_claim_and_its_result_commit_together,
    replacing_an_expired_entry_drops_its_claim,
    a_rolled_back_replacement_keeps_the_expired_entry_and_its_claim,
)
"""The checks of created-target claims."""
