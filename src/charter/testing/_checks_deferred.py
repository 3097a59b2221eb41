"""Store checks of deferred records: stored with their call, settled once."""

from __future__ import annotations

from datetime import timedelta

from ..ledger import DeferredRecord, LedgerStore
from ._records import NOW, commit, entry, entry_of
from ._store_check import StoreCheck, expect, expect_equal, store_check

__all__ = ("DEFERRED_CHECKS",)

_SETTLED = '{"kind":"completed","output":{"ok":true}}'


@store_check
async def a_deferred_call_settles_once_and_completes_its_entry(store: LedgerStore) -> None:
    """``settle_deferred`` settles an active record and completes its entry, only once."""
    record = entry()
    deferred = DeferredRecord.of(record)
    stored = await commit(
        store, record, status="deferred", outcome='{"kind":"deferred"}', deferred=deferred
    )
    expect_equal(await store.get_deferred("inv-req-1"), deferred, "the active deferred record")
    expect_equal(await entry_of(store), stored, "the deferred entry")
    at = NOW + timedelta(minutes=1)
    expect(
        await store.settle_deferred("inv-req-1", _SETTLED, at),
        "settle_deferred() of an active record returned False",
    )
    expect(
        not await store.settle_deferred("inv-req-1", '{"again":true}', at),
        "a second settle_deferred() returned True",
    )
    expect(
        not await store.settle_deferred("inv-unknown", _SETTLED, at),
        "settle_deferred() of an unknown invocation returned True",
    )
    expect_equal(
        await store.get_deferred("inv-req-1"),
        deferred.model_copy(update={"status": "settled", "outcome": _SETTLED, "settled_at": at}),
        "the settled deferred record",
    )
    expect_equal(
        await entry_of(store),
        stored.model_copy(update={"status": "completed", "outcome": _SETTLED}),
        "the entry of a settled call",
    )
    expect_equal(await store.get_deferred("inv-unknown"), None, "get_deferred() of an unknown id")


@store_check
async def settling_leaves_a_later_entry_of_the_same_key_alone(store: LedgerStore) -> None:
    """Settling a call whose expired entry was replaced does not touch the new entry."""
    old = entry(expires_at=NOW)
    await commit(store, old, status="deferred", outcome="{}", deferred=DeferredRecord.of(old))
    new = await commit(store, entry(invocation_id="inv-new", fingerprint="sha256:new"))
    expect(
        await store.settle_deferred("inv-req-1", _SETTLED, NOW),
        "settle_deferred() of an active record returned False",
    )
    expect_equal(
        await entry_of(store), new, "the entry that replaced the settled call's expired entry"
    )


DEFERRED_CHECKS: tuple[StoreCheck, ...] = (
    a_deferred_call_settles_once_and_completes_its_entry,
    settling_leaves_a_later_entry_of_the_same_key_alone,
)
"""The checks of deferred records."""
