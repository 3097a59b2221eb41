"""The store contract: what every ``LedgerStore`` must do, as checks you run on your own.

The gate (``charter.ledger.LedgerGate``) relies on these behaviours of a store, and
charter's stores (``MemoryStore``, ``SqlStore`` on SQLite and on PostgreSQL) pass every
check. A store of your own is run through the same checks, through the ``LedgerStore``
and ``LedgerTransaction`` protocols only:

- **ledger entries**: a claim inserts, stays invisible until its transaction commits,
  returns the committed entry of its key, replaces an expired one; the key is (tenant,
  principal, request id); a rolled-back transaction leaves nothing (entry, claim,
  consumed approval, deferred record, audit event);
- **approvals**: insert (the same request returns the first), get, find, list newest
  first by tenant and status with a limit, decide as a compare-and-set, consume only when
  approved and unexpired, exactly once;
- **created-target claims**: they commit with their result; replacing an expired entry
  drops its claim;
- **deferred records**: settled once, completing the entry of their own call only;
- **retention**: ``prune`` deletes expired completed entries with their claims and settled
  deferred records, and expired denied or consumed approvals, in batches; never anything
  pending, approved, deferred or unexpired;
- **the transaction lock**: a transaction that wants a key another open transaction
  holds raises ``StoreBusy`` once its ``wait`` runs out; the key is free again when the
  holder commits or rolls back.

Time is passed in (a fixed instant in 2030): no check reads the clock or sleeps. Each
check expects a fresh, empty, open store, and runs on asyncio. When the store also lists
audit events (``events()``, like an ``AuditSink``), the audit checks read them back.

This module imports no test framework. With pytest (and an async plugin such as
anyio's), parametrise one test over ``STORE_CHECKS``::

    import pytest
    from charter.testing import STORE_CHECKS, StoreCheck

    @pytest.mark.anyio
    @pytest.mark.parametrize("check", STORE_CHECKS, ids=str)
    async def test_my_store_keeps_the_store_contract(check: StoreCheck, my_store) -> None:
        await check(my_store)  # my_store: a fixture yielding a fresh, open store

Anywhere else, ``await check_store_contract(open_store)`` runs them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TypeAlias

from ..ledger import LedgerStore
from ._checks_approvals import APPROVAL_CHECKS
from ._checks_claims import CLAIM_CHECKS
from ._checks_deferred import DEFERRED_CHECKS
from ._checks_ledger import LEDGER_CHECKS
from ._checks_lock import LOCK_CHECKS
from ._checks_retention import RETENTION_CHECKS
from ._store_check import StoreCheck

__all__ = ("STORE_CHECKS", "StoreCheck", "StoreFactory", "check_store_contract")

STORE_CHECKS: tuple[StoreCheck, ...] = (
    *LEDGER_CHECKS,
    *APPROVAL_CHECKS,
    *CLAIM_CHECKS,
    *DEFERRED_CHECKS,
    *RETENTION_CHECKS,
    *LOCK_CHECKS,
)
"""Every check of the store contract, grouped by what they cover."""

StoreFactory: TypeAlias = Callable[[], AbstractAsyncContextManager[LedgerStore]]
"""Opens a fresh, empty store for one check and closes it afterwards.

For example ``lambda: SqlStore(sqlite_url(new_path()))``, or
``lambda: contextlib.nullcontext(MemoryStore())`` for a store with nothing to close.
"""


async def check_store_contract(
    open_store: StoreFactory, *, checks: Iterable[StoreCheck] = STORE_CHECKS
) -> None:
    """Run each check on a fresh store from ``open_store``; fail with every failure at once.

    Args:
        open_store: Called once per check; the store it yields must be open and empty.
        checks: The checks to run (all of them by default).

    Raises:
        ExceptionGroup: One or more checks failed. Each failure is in it with a note
            naming its check (``store check <name>: <description>``).
    """
    selected = tuple(checks)
    failures: list[Exception] = []
    failed: list[str] = []
    for check in selected:
        try:
            async with open_store() as store:
                await check(store)
        except Exception as exc:
            exc.add_note(f"store check {check.name}: {check.description}")
            failures.append(exc)
            failed.append(check.name)
    if failures:
        raise ExceptionGroup(
            f"{len(failures)} of {len(selected)} store checks failed: {', '.join(failed)}",
            failures,
        )
