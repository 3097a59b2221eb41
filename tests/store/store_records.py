"""Records the SQL store tests build, at one fixed instant (``NOW``): the store contract's
own builders (``charter.testing``), each taking keyword overrides for any field, with random
ids where the contract's are fixed, so that a test may build many records on one database.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any

import anyio
import sqlalchemy as sa

from charter.audit import AuditEvent
from charter.ledger import ApprovalRecord, ApprovalStatus, LedgerEntry, LedgerStore
from charter.store import SqlStore
from charter.testing import _records as contract
from charter.testing._records import NOW as NOW  # re-exported, with claim_record
from charter.testing._records import claim_record as claim_record


@contextmanager
def statements_sent(store: SqlStore) -> Iterator[list[str]]:
    """Every statement SQLAlchemy sends on ``store``'s engine during the block, in order."""
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        sent.append(statement)

    sa.event.listen(store.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        sa.event.remove(store.engine.sync_engine, "before_cursor_execute", record)


def entry(**overrides: Any) -> LedgerEntry:
    """The store contract's ledger entry being claimed, under a fresh request id."""
    return contract.entry(overrides.pop("request_id", str(uuid.uuid4())), **overrides)


def approval(**overrides: Any) -> ApprovalRecord:
    """The store contract's pending approval, under a fresh id, expiring in an hour."""
    return contract.approval(overrides.pop("id", "apr_" + uuid.uuid4().hex), **overrides)


def audit_event(**overrides: Any) -> AuditEvent:
    """The store contract's audit event of a completed call by ``acme/alice``, fresh id."""
    return contract.audit_event(overrides.pop("id", "aud_" + uuid.uuid4().hex), **overrides)


async def all_at_once(
    work: Callable[[], Awaitable[object]], times: int, *, timeout: float = 60
) -> list[object]:
    """Run ``work()`` ``times`` times in concurrent tasks released together; the results."""
    results: list[object] = []
    go = anyio.Event()

    async def caller() -> None:
        await go.wait()
        results.append(await work())

    with anyio.fail_after(timeout):
        async with anyio.create_task_group() as tg:
            for _ in range(times):
                tg.start_soon(caller)
            go.set()
    return results


async def decide(
    store: LedgerStore,
    approval_id: str,
    status: ApprovalStatus,
    *,
    expected: tuple[ApprovalStatus, ...] = ("pending",),
    at: datetime = NOW,
) -> bool:
    """Move an approval to ``status`` as ``bob``, with no reason; whether it moved."""
    return await store.decide_approval(
        approval_id,
        expected=expected,
        status=status,
        decided_by="bob",
        reason=None,
        at=at,
        history=(),
    )


def completed(record: LedgerEntry, outcome: str = "{}") -> LedgerEntry:
    """``record`` as its call's transaction completes it."""
    return record.model_copy(update={"status": "completed", "outcome": outcome})


@asynccontextmanager
async def holding(
    store: SqlStore,
    take: Callable[[Any], Awaitable[object]],
    give_back: Callable[[Any], Awaitable[object]] | None = None,
) -> AsyncIterator[None]:
    """Keep a transaction open in another task for the block: ``take(tx)`` runs before the
    block starts; when it ends, ``give_back(tx)`` and the commit."""
    taken = anyio.Event()
    release = anyio.Event()

    async def holder() -> None:
        async with store.transaction(wait=5) as tx:
            await take(tx)
            taken.set()
            await release.wait()
            if give_back is not None:
                await give_back(tx)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await taken.wait()
            try:
                yield
            finally:
                release.set()


def holding_the_lock(store: SqlStore, record: LedgerEntry) -> AbstractAsyncContextManager[None]:
    """Claim ``record`` in another task's transaction for the block, then complete it."""

    async def take(tx: Any) -> None:
        assert await tx.claim(record, NOW) is None

    async def give_back(tx: Any) -> None:
        await tx.complete(completed(record))

    return holding(store, take, give_back)
