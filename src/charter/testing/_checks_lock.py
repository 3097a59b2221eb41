"""Store checks of the transaction lock: a held key is busy, and free again when it ends.

Where the lock sits is the store's choice: the in-memory store and SQLite serialise
whole transactions (the second one raises ``StoreBusy`` on entering), PostgreSQL locks
the claimed key (the second one raises it from ``claim``). Either way a transaction that
wants a key another transaction holds gets ``StoreBusy`` once its ``wait`` runs out.
"""

from __future__ import annotations

import asyncio

from ..errors import StoreBusy
from ..ledger import LedgerEntry, LedgerStore
from ._records import NOW, WAIT, Abort, entry
from ._store_check import StoreCheck, expect_equal, store_check

__all__ = ("LOCK_CHECKS",)

SHORT_WAIT = 0.1
"""The ``wait`` of a transaction that is expected to give up."""

PATIENCE = 30.0
"""How long past its ``wait`` a transaction may take to give up before the check fails."""


async def _hold(
    store: LedgerStore,
    record: LedgerEntry,
    holding: asyncio.Event,
    release: asyncio.Event,
    *,
    commit: bool,
) -> None:
    """Claim ``record``, say so, wait to be released, then commit or roll back."""
    try:
        async with store.transaction(wait=WAIT) as tx:
            expect_equal(await tx.claim(record, NOW), None, "claim() of a free key")
            holding.set()
            await release.wait()
            if not commit:
                raise Abort
            await tx.complete(record.model_copy(update={"status": "completed", "outcome": "{}"}))
    except Abort:
        pass
    finally:
        holding.set()  # also when it failed before holding: the check must not wait forever


async def _expect_busy(store: LedgerStore, record: LedgerEntry) -> None:
    """Fail unless claiming ``record`` within ``SHORT_WAIT`` raises ``StoreBusy``."""
    what = f"transaction(wait={SHORT_WAIT}) claiming a key another open transaction holds"
    try:
        async with asyncio.timeout(SHORT_WAIT + PATIENCE):
            async with store.transaction(wait=SHORT_WAIT) as tx:
                got = await tx.claim(record, NOW)
    except StoreBusy:
        return
    except TimeoutError:
        raise AssertionError(
            f"{what} was still waiting {PATIENCE:.0f} s after its wait ran out; "
            "it must raise StoreBusy"
        ) from None
    raise AssertionError(f"{what} returned {got!r} instead of raising StoreBusy")


async def _contend(store: LedgerStore, record: LedgerEntry, *, commit: bool) -> None:
    """While one transaction holds ``record``'s key, another must be busy."""
    holding, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(store, record, holding, release, commit=commit))
    try:
        await holding.wait()
        if holder.done():
            await holder  # its error, if it failed to claim
            raise AssertionError("the holding transaction ended before it was released")
        await _expect_busy(store, record.model_copy(update={"invocation_id": "inv-late"}))
    finally:
        release.set()
        await holder


@store_check
async def a_held_key_is_busy_for_another_transaction_until_it_commits(
    store: LedgerStore,
) -> None:
    """While a claim is open, another claim of its key raises ``StoreBusy``; then it replays."""
    record = entry()
    await _contend(store, record, commit=True)
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(
            await tx.claim(entry(invocation_id="inv-after"), NOW),
            record.model_copy(update={"status": "completed", "outcome": "{}"}),
            "claim() after the transaction holding the key committed",
        )


@store_check
async def a_held_key_is_free_again_when_its_transaction_rolls_back(store: LedgerStore) -> None:
    """After the transaction holding a key rolls back, the next claim of the key inserts."""
    record = entry()
    await _contend(store, record, commit=False)
    async with store.transaction(wait=WAIT) as tx:
        expect_equal(
            await tx.claim(entry(invocation_id="inv-after"), NOW),
            None,
            "claim() after the transaction holding the key rolled back",
        )


LOCK_CHECKS: tuple[StoreCheck, ...] = (
    a_held_key_is_busy_for_another_transaction_until_it_commits,
    a_held_key_is_free_again_when_its_transaction_rolls_back,
)
"""The checks of the transaction lock."""
