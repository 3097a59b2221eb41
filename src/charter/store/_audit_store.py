"""``SqlStore``'s audit methods: the store is also the durable audit sink."""

from __future__ import annotations

import functools
from datetime import datetime

import sqlalchemy as sa

from ..audit import AuditEvent
from ._access import SqlAccess
from ._audit_batch import AuditBatches
from ._connections import run_to_completion
from ._retention import prune_audit_events
from ._rows import audit_from_row, audit_values, searchable_tenant
from ._schema import audit_events
from ._statements import statements

__all__ = ("SqlAuditLog",)


class SqlAuditLog(SqlAccess):
    """The audit half of ``SqlStore``: record events, list them, prune old ones."""

    _audit_batches: AuditBatches
    """Set by ``SqlStore``: ``AuditBatches(self._write_audit_events)``."""

    async def record(self, event: AuditEvent) -> None:
        """Store an audit event; the events recorded meanwhile share one statement and commit.

        Returns once the event is stored (see ``_audit_batch`` for the group commit).
        """
        await self._audit_batches.record(event)

    async def _write_audit_events(self, events: list[AuditEvent]) -> None:
        """Insert ``events`` in one statement that commits on its own (``AuditBatches``)."""
        action = "recording an audit event" if len(events) == 1 else "recording audit events"
        # Urgent: the calls waiting for these events to answer have nothing else to write.
        async with self._statement(action, urgent=True) as conn:
            insert = statements(conn.dialect.name).insert_audit
            if len(events) == 1:
                await conn.execute(insert, audit_values(events[0]))
            else:
                await conn.execute(insert, [audit_values(event) for event in events])

    @run_to_completion
    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Recent audit events, newest first, acting on or made by one tenant (or all)."""
        if limit <= 0:
            return []
        c = audit_events.c
        statement = sa.select(c.event).order_by(c.time.desc(), c.seq.desc()).limit(limit)
        if tenant is not None:
            wanted = searchable_tenant(tenant)
            statement = statement.where(sa.or_(c.tenant == wanted, c.principal_tenant == wanted))
        return [audit_from_row(row) for row in await self._read(statement)]

    @run_to_completion
    async def prune_audit(
        self, before: datetime, *, anonymous_only: bool = False, batch_size: int = 500
    ) -> int:
        """Delete audit events older than ``before`` (only anonymous ones, if asked).

        Batches of ``batch_size`` rows, one short write transaction each. Returns how many
        events were deleted. Charter never calls it by itself: ``charter db prune`` does,
        with the retentions it is given.
        """
        batch = functools.partial(prune_audit_events, anonymous_only=anonymous_only)
        return await self._prune_in_batches(batch, before, batch_size)
