"""Records the SQL store tests build, with fresh ids, at one fixed instant (``NOW``).

Each builder takes keyword overrides for any field. Unlike the store contract's builders
(``charter.testing``), ids are random, so a test may build many records on one database.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from charter.audit import AuditEvent
from charter.ledger import ApprovalRecord, ApprovalStatus, ClaimRecord, LedgerEntry, LedgerStore
from charter.store import SqlStore

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
"""The instant the tests run at (the ``now`` and ``at`` they give the store)."""


def entry(**overrides: Any) -> LedgerEntry:
    """A ledger entry being claimed (``in_progress``) under a fresh request id."""
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
    """A pending approval of a destructive call, expiring in an hour."""
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
    """The audit event of a completed call by ``acme/alice``."""
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


def claim_record(of: LedgerEntry, **overrides: Any) -> ClaimRecord:
    """The created-target claim of ``of``'s command, without a result yet."""
    values: dict[str, Any] = {
        "tenant_id": of.tenant_id,
        "principal_id": of.principal_id,
        "request_id": of.request_id,
        "capability_id": "c",
        "fingerprint": "f",
        "created_at": NOW,
    }
    values.update(overrides)
    return ClaimRecord(**values)


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
