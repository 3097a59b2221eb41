"""``SqlStore``'s audit methods: the store is also the durable audit sink."""

from __future__ import annotations

import functools
from datetime import datetime

import sqlalchemy as sa

from ..audit import AuditEvent
from ._access import SqlAccess
from ._connections import run_to_completion
from ._errors import translated
from ._retention import prune_audit_events
from ._rows import audit_from_row, searchable_tenant, write_audit
from ._schema import audit_events

__all__ = ("SqlAuditLog",)


class SqlAuditLog(SqlAccess):
    """The audit half of ``SqlStore``: record events, list them, prune old ones."""

    @run_to_completion
    async def record(self, event: AuditEvent) -> None:
        """Store an audit event in its own transaction."""
        async with self._connection(self.busy_timeout) as conn:
            with translated("recording an audit event"):
                await write_audit(conn, event)

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
