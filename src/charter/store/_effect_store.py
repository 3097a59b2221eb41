"""``SqlStore``'s effect outbox methods (``charter.effects.EffectStore``), kept apart by concept."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from ..effects import EffectRecord, EffectStatus, changes
from . import _effect_rows as rows
from ._access import SqlAccess
from ._connections import run_to_completion
from ._errors import translated
from ._retention import prune_finished_effects
from ._types import is_storable

__all__ = ("SqlEffectOutbox",)


class SqlEffectOutbox(SqlAccess):
    """The outbox half of ``SqlStore``: claim under a lease, finish, list, re-drive."""

    @run_to_completion
    async def claim_effects(
        self, *, now: datetime, lease_until: datetime, worker: str, limit: int
    ) -> list[EffectRecord]:
        """Lease up to ``limit`` due pending effects to ``worker`` (SKIP LOCKED on PostgreSQL)."""
        if limit < 1:
            return []
        async with self._connection(self.busy_timeout) as conn:
            with translated("claiming effects"):
                return await rows.claim(
                    conn, now=now, lease_until=lease_until, worker=worker, limit=limit
                )

    @run_to_completion
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
        """Record an attempt's result if ``worker`` still holds the effect's lease.

        One statement that commits on its own: on PostgreSQL one round trip, without the
        ``BEGIN`` and ``COMMIT`` of a transaction around it.
        """
        if not is_storable(key, worker):
            return False
        error = None if error is None else _storable(error)
        fields = changes.finished(status, next_attempt_at=next_attempt_at, error=error, at=at)
        async with self._statement("recording an effect attempt") as conn:
            return await rows.finish(conn, key, worker, fields)

    @run_to_completion
    async def renew_effect(
        self, key: str, *, worker: str, lease_until: datetime, now: datetime
    ) -> bool:
        """Extend ``worker``'s lease on a pending effect it still holds; whether it did."""
        if not is_storable(key, worker):
            return False
        async with self._statement("renewing an effect's lease") as conn:
            return await rows.renew(conn, key, worker, lease_until, now)

    @run_to_completion
    async def get_effect(self, key: str) -> EffectRecord | None:
        """Read one effect."""
        if not is_storable(key):
            return None
        found = await self._read(rows.get(key))
        return rows.record(found[0]) if found else None

    @run_to_completion
    async def list_effects(
        self,
        *,
        tenant_id: str | None = None,
        status: EffectStatus | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> list[EffectRecord]:
        """List effects, newest first, filtered by tenant, status and staging request."""
        if limit <= 0 or not is_storable(*(v for v in (tenant_id, request_id) if v is not None)):
            return []
        found = await self._read(rows.listing(tenant_id, status, request_id, limit))
        return [rows.record(row) for row in found]

    @run_to_completion
    async def redrive_effect(self, key: str, *, now: datetime) -> bool:
        """Make a dead or discarded effect pending again with fresh attempts."""
        return await self._change_effect(key, now, rows.redrive, "re-driving an effect")

    @run_to_completion
    async def discard_effect(self, key: str, *, now: datetime) -> bool:
        """Give up on a pending or dead effect (kept, never run again)."""
        return await self._change_effect(key, now, rows.discard, "discarding an effect")

    async def _change_effect(
        self,
        key: str,
        now: datetime,
        change: Callable[[AsyncConnection, str, datetime], Awaitable[bool]],
        action: str,
    ) -> bool:
        """Apply ``change`` to one effect in a write of its own (errors as ``action``)."""
        if not is_storable(key):
            return False
        async with self._connection(self.busy_timeout) as conn:
            with translated(action):
                return await change(conn, key, now)

    @run_to_completion
    async def prune_effects(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete delivered and discarded effects that finished before ``before``; how many.

        Batches of ``batch_size`` rows, one short write transaction each. Pending and dead
        effects stay.
        """
        return await self._prune_in_batches(prune_finished_effects, before, batch_size)

    @run_to_completion
    async def effect_backlog(self) -> tuple[int, datetime | None]:
        """How many effects are pending, and when the oldest of them was created."""
        found = await self._read(rows.backlog())
        count, oldest = list(found[0])
        return int(count), oldest


def _storable(text: str) -> str:
    """Error text without the characters a database refuses (NUL, lone surrogates)."""
    cleaned = text.replace("\x00", "\ufffd")
    return cleaned.encode("utf-8", "replace").decode("utf-8")
