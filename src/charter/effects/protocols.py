"""What the effect outbox needs of a store (``SqlStore`` and ``MemoryStore`` keep it)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from .records import EffectRecord, EffectStatus

__all__ = ("EffectStore",)


@runtime_checkable
class EffectStore(Protocol):
    """Protocol: claims due effects with a lease, records results, lists and re-drives.

    Rows are written by ``LedgerTransaction.insert_effect`` inside a call's transaction.
    """

    async def claim_effects(
        self, *, now: datetime, lease_until: datetime, worker: str, limit: int
    ) -> list[EffectRecord]:
        """Lease up to ``limit`` due pending effects to ``worker`` and count an attempt.

        Due: ``next_attempt_at`` passed and no live lease. Concurrent claimers never get
        the same effect while its lease lasts (``FOR UPDATE SKIP LOCKED`` on PostgreSQL).
        A due effect whose ``attempts`` already reached ``max_attempts`` (its last attempt
        started but never recorded a result) is not run again: the claim parks it
        ``dead`` (``changes.abandoned``) and returns it with that status, to be audited.
        """
        ...

    async def finish_effect(
        self,
        key: str,
        *,
        worker: str,
        status: EffectStatus,
        next_attempt_at: datetime | None,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Record an attempt's result if ``worker`` still holds the lease; whether it did.

        ``delivered`` or ``dead`` end the effect; ``pending`` schedules the next attempt.
        """
        ...

    async def renew_effect(
        self, key: str, *, worker: str, lease_until: datetime, now: datetime
    ) -> bool:
        """Extend ``worker``'s lease on a pending effect to ``lease_until``; whether it held it.

        False when the effect is no longer pending or another worker claimed it (its lease
        ran out first): then ``worker`` must not start an attempt.
        """
        ...

    async def get_effect(self, key: str) -> EffectRecord | None:
        """Read one effect."""
        ...

    async def list_effects(
        self,
        *,
        tenant_id: str | None = None,
        status: EffectStatus | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> list[EffectRecord]:
        """List effects, newest first, filtered by tenant, status and staging request."""
        ...

    async def redrive_effect(self, key: str, *, now: datetime) -> bool:
        """Make a dead or discarded effect pending again with fresh attempts; whether it did."""
        ...

    async def discard_effect(self, key: str, *, now: datetime) -> bool:
        """Give up on a pending or dead effect (kept, never run again); whether it did."""
        ...

    async def prune_effects(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete delivered and discarded effects that finished before ``before``; how many.

        Pending and dead effects are never deleted.
        """
        ...

    async def effect_backlog(self) -> tuple[int, datetime | None]:
        """How many effects are pending, and when the oldest of them was created."""
        ...
