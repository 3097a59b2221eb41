"""Records and small steps the store checks share: fixed times, builders, committed writes.

Every time is a fixed instant passed to the store (``NOW`` and offsets from it), so no
check depends on the clock or sleeps. Ids are fixed strings: each check runs on a fresh,
empty store, and a failure is reproducible.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from ..audit import AuditEvent
from ..ledger import (
    ApprovalDecision,
    ApprovalRecord,
    ApprovalStatus,
    ApprovalStore,
    ClaimRecord,
    DeferredRecord,
    LedgerEntry,
    LedgerStore,
    LedgerTransaction,
)
from ..ledger.approvals import decision_arguments
from ._store_check import expect

__all__ = (
    "HOUR",
    "NOW",
    "WAIT",
    "Abort",
    "AuditReader",
    "approval",
    "audit_event",
    "audit_ids",
    "claim_record",
    "commit",
    "decide",
    "set_decision",
    "entry",
    "read_claim",
    "stored_approval",
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
"""The instant every check is at (the ``now`` and ``at`` the store is given)."""

WAIT = 5.0
"""The ``transaction(wait=…)`` of a check that expects no contention."""

HOUR = timedelta(hours=1)
"""The unit most offsets from ``NOW`` are made of."""


class Abort(Exception):
    """Raised inside a transaction's block to roll it back."""


def entry(request_id: str = "req-1", **overrides: Any) -> LedgerEntry:
    """A ledger entry being claimed (``in_progress``), expiring in a day."""
    values: dict[str, Any] = {
        "tenant_id": "acme",
        "principal_id": "alice",
        "request_id": request_id,
        "tool": "notes.create",
        "capability_id": "notes.create",
        "capability_version": "1",
        "target": "note:1",
        "fingerprint": "sha256:first",
        "status": "in_progress",
        "invocation_id": f"inv-{request_id}",
        "created_at": NOW - HOUR,
        "expires_at": NOW + 24 * HOUR,
    }
    values.update(overrides)
    return LedgerEntry(**values)


def approval(approval_id: str = "apr-1", **overrides: Any) -> ApprovalRecord:
    """A pending approval for request ``req-<approval id>``, expiring in an hour."""
    values: dict[str, Any] = {
        "id": approval_id,
        "tenant_id": "acme",
        "requester_id": "alice",
        "request_id": f"req-{approval_id}",
        "tool": "notes.delete",
        "capability_id": "notes.delete",
        "capability_version": "1",
        "target": "note:1",
        "fingerprint": "sha256:approved",
        "arguments": {"note_id": "1", "nested": {"list": [1, 2.5, None, True]}, "é": "ü"},
        "risk": "destructive",
        "reason_code": "cleanup",
        "created_at": NOW - HOUR,
        "expires_at": NOW + HOUR,
    }
    values.update(overrides)
    return ApprovalRecord(**values)


def claim_record(of: LedgerEntry, **overrides: Any) -> ClaimRecord:
    """The created-target claim of ``of``'s command, without a result yet."""
    values: dict[str, Any] = {
        "tenant_id": of.tenant_id,
        "principal_id": of.principal_id,
        "request_id": of.request_id,
        "capability_id": of.capability_id,
        "fingerprint": of.fingerprint,
        "created_at": of.created_at,
    }
    values.update(overrides)
    return ClaimRecord(**values)


def audit_event(event_id: str, **overrides: Any) -> AuditEvent:
    """An audit event of a completed call in tenant ``acme``."""
    values: dict[str, Any] = {
        "id": event_id,
        "time": NOW,
        "subject": "alice",
        "principal_tenant": "acme",
        "tenant": "acme",
        "tool": "notes.create",
        "outcome": "completed",
    }
    values.update(overrides)
    return AuditEvent(**values)


async def commit(
    store: LedgerStore,
    record: LedgerEntry,
    *,
    status: Literal["completed", "deferred"] = "completed",
    outcome: str = '{"kind":"completed","output":{}}',
    claim: ClaimRecord | None = None,
    deferred: DeferredRecord | None = None,
) -> LedgerEntry:
    """Claim ``record`` in a transaction of its own and complete it; return what was stored.

    With ``claim``, the transaction also inserts that created-target claim; with
    ``deferred``, that deferred record.
    """
    done = record.model_copy(update={"status": status, "outcome": outcome})
    async with store.transaction(wait=WAIT) as tx:
        existing = await tx.claim(record, NOW)
        expect(
            existing is None,
            f"claim() of the free key {_key(record)} returned an entry instead of None: "
            f"{existing!r}",
        )
        if claim is not None:
            await tx.insert_claim(claim)
        if deferred is not None:
            await tx.insert_deferred(deferred)
        await tx.complete(done)
    return done


async def entry_of(store: LedgerStore, request_id: str = "req-1") -> LedgerEntry | None:
    """The stored entry of ``entry(request_id)``'s key (tenant acme, principal alice)."""
    return await store.get_entry("acme", "alice", request_id)


async def read_claim(
    store: LedgerStore, tenant_id: str, principal_id: str, request_id: str
) -> ClaimRecord | None:
    """Read a created-target claim in a transaction of its own (which then commits)."""
    async with store.transaction(wait=WAIT) as tx:
        return await tx.get_claim(tenant_id, principal_id, request_id)


async def decide(
    store: LedgerStore,
    approval_id: str,
    status: Literal["approved", "denied"],
    *,
    at: datetime = NOW,
) -> None:
    """Move a pending approval to ``status`` as ``acme/bob``; fail unless it was pending."""
    decision = ApprovalDecision(
        status=status, decided_by="acme/bob", decided_at=at, reason=f"{status} by bob"
    )
    decided = await set_decision(store, approval_id, ("pending",), (decision,))
    expect(decided, f"decide_approval() of the pending approval {approval_id!r} returned False")


async def set_decision(
    writer: ApprovalStore | LedgerTransaction,
    approval_id: str,
    expected: tuple[ApprovalStatus, ...],
    history: tuple[ApprovalDecision, ...],
) -> bool:
    """``decide_approval`` of the last decision in ``history`` (status, decider, time, reason)."""
    return await writer.decide_approval(
        approval_id, expected=expected, **decision_arguments(history)
    )


async def stored_approval(store: LedgerStore, approval_id: str) -> ApprovalRecord:
    """Read an approval the check inserted; fail if the store lost it."""
    record = await store.get_approval(approval_id)
    if record is None:
        raise AssertionError(f"get_approval({approval_id!r}) found nothing after it was inserted")
    return record


@runtime_checkable
class AuditReader(Protocol):
    """A store that also reads back the audit events its transactions record."""

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Recent events, newest first."""
        ...


async def audit_ids(store: LedgerStore) -> list[str] | None:
    """The ids of the store's audit events, newest first; None if it cannot list them."""
    if not isinstance(store, AuditReader):
        return None
    return [event.id for event in await store.events(limit=1000)]


def _key(record: LedgerEntry) -> str:
    return f"({record.tenant_id!r}, {record.principal_id!r}, {record.request_id!r})"
