"""The store contract (``charter.testing``) on every store charter ships, identically.

Each check runs on a fresh store: ``MemoryStore``, ``SqlStore`` on SQLite (a new file) and
``SqlStore`` on PostgreSQL (a new schema; skipped without a server, failed under
``CI=true``, like the rest of ``tests/store``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tests.builders import packages_loaded_by
from tests.store.conftest import postgres_schema, require_postgres

from charter.ledger import LedgerEntry, LedgerStore
from charter.ledger.memory import MemoryStore, _MemoryTransaction
from charter.store import SqlStore, sqlite_url
from charter.testing import STORE_CHECKS, StoreCheck, check_store_contract

pytestmark = pytest.mark.anyio


@pytest.fixture(
    params=[
        pytest.param("memory"),
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LedgerStore]:
    """A fresh, empty, open store of each kind charter ships."""
    backend: str = request.param
    if backend == "memory":
        yield MemoryStore()
    elif backend == "sqlite":
        async with SqlStore(sqlite_url(tmp_path / "charter.db")) as sql_store:
            yield sql_store
    else:
        require_postgres()
        with postgres_schema() as url:
            async with SqlStore(url) as sql_store:
                yield sql_store


@pytest.mark.parametrize("check", STORE_CHECKS, ids=str)
async def test_every_store_keeps_the_store_contract(check: StoreCheck, store: LedgerStore) -> None:
    await check(store)


def test_the_checks_have_distinct_names_and_a_description() -> None:
    names = [check.name for check in STORE_CHECKS]
    assert len(set(names)) == len(names)
    assert all(check.description.endswith(".") for check in STORE_CHECKS)


def test_importing_charter_testing_imports_no_test_framework_or_database_library() -> None:
    test_libraries = ("pytest", "anyio", "sqlalchemy", "hypothesis")
    assert packages_loaded_by("charter.testing", test_libraries) == []


# -- the suite has teeth: deliberately broken stores fail exactly the checks they break ------


class KeepsClaimsOfPrunedEntries(MemoryStore):
    """``prune`` deletes expired entries but leaves their created-target claims."""

    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        claims = dict(self.claims)
        deleted = await super().prune(before, batch_size=batch_size)
        self.claims.update(claims)  # the defect
        return deleted


class KeepsClaimsOfReplacedEntries(MemoryStore):
    """A claim that replaces an expired entry keeps the old entry's created-target claim
    (MemoryStore before the fix of issue #14 item 6)."""

    @asynccontextmanager
    async def transaction(self, *, wait: float) -> AsyncIterator[Any]:
        async with super().transaction(wait=wait) as tx:
            yield _KeepingClaims(self, tx)


class _KeepingClaims:
    def __init__(self, store: MemoryStore, tx: Any) -> None:
        self._store = store
        self._tx = tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        old = self._store.claims.get((entry.tenant_id, entry.principal_id, entry.request_id))
        existing: LedgerEntry | None = await self._tx.claim(entry, now)
        if existing is None and old is not None:
            await self._tx.insert_claim(old)  # the defect
        return existing


class UnlockedStore(MemoryStore):
    """Transactions do not exclude each other: no lock, so never ``StoreBusy``."""

    @asynccontextmanager
    async def transaction(self, *, wait: float) -> AsyncIterator[Any]:
        tx = _MemoryTransaction(self)  # the defect: no write lock taken
        yield tx
        tx.apply()


class SettlesWhateverHoldsTheKey(MemoryStore):
    """``settle_deferred`` completes the entry holding the key now, even a later call's
    (MemoryStore before the store contract)."""

    async def settle_deferred(self, invocation_id: str, outcome: str, at: datetime) -> bool:
        record = self.deferred.get(invocation_id)
        settled = await super().settle_deferred(invocation_id, outcome, at)
        if settled and record is not None:
            key = (record.tenant_id, record.principal_id, record.request_id)
            self.entries[key] = self.entries[key].model_copy(
                update={"status": "completed", "outcome": outcome}
            )
        return settled


class DecidesWithoutComparing(MemoryStore):
    """``decide_approval`` overwrites any status: a blind set, not a compare-and-set."""

    async def decide_approval(self, approval_id: str, **change: Any) -> bool:
        change["expected"] = ("pending", "approved", "denied", "consumed")  # the defect
        return await super().decide_approval(approval_id, **change)


class PrunesOpenApprovals(MemoryStore):
    """``prune`` also deletes expired pending approvals, which a person may still grant."""

    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        deleted = await super().prune(before, batch_size=batch_size)
        pending = [
            a.id for a in self.approvals.values() if a.status == "pending" and a.expires_at < before
        ]
        for approval_id in pending:  # the defect
            del self.approvals[approval_id]
        return deleted + len(pending)


def failed_checks(raised: pytest.ExceptionInfo[ExceptionGroup[Exception]]) -> set[str]:
    notes = [failure.__notes__[-1] for failure in raised.value.exceptions]
    assert all(note.startswith("store check ") for note in notes)
    assert all(isinstance(failure, AssertionError) for failure in raised.value.exceptions)
    return {note.removeprefix("store check ").split(":")[0] for note in notes}


@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        (
            KeepsClaimsOfPrunedEntries,
            {"prune_deletes_expired_entries_with_their_claims_and_settled_records"},
        ),
        (KeepsClaimsOfReplacedEntries, {"replacing_an_expired_entry_drops_its_claim"}),
        (
            UnlockedStore,
            {
                "a_held_key_is_busy_for_another_transaction_until_it_commits",
                "a_held_key_is_free_again_when_its_transaction_rolls_back",
            },
        ),
        (SettlesWhateverHoldsTheKey, {"settling_leaves_a_later_entry_of_the_same_key_alone"}),
        (
            DecidesWithoutComparing,
            {
                "deciding_an_approval_is_a_compare_and_set",
                "an_approved_unexpired_approval_is_consumed_exactly_once",
            },
        ),
        (PrunesOpenApprovals, {"prune_never_deletes_live_or_unfinished_work"}),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
async def test_a_broken_store_fails_exactly_the_checks_of_its_defect(
    broken: type[MemoryStore], caught_by: set[str]
) -> None:
    with pytest.raises(ExceptionGroup) as raised:
        await check_store_contract(lambda: nullcontext(broken()))
    assert failed_checks(raised) == caught_by
    assert str(raised.value).startswith(f"{len(caught_by)} of {len(STORE_CHECKS)} store checks")


async def test_check_store_contract_passes_on_a_store_that_keeps_it() -> None:
    await check_store_contract(lambda: nullcontext(MemoryStore()))
