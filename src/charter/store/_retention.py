"""Retention: delete expired rows in short batches, never anything still live."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._schema import approvals, audit_events, claims, deferred, effects, ledger_entries

__all__ = (
    "PruneBatch",
    "prune_approvals",
    "prune_audit_events",
    "prune_entries",
    "prune_finished_effects",
)

PruneBatch = Callable[[AsyncConnection, datetime, int], Awaitable[int]]
"""Deletes one batch in the caller's transaction; returns how many rows it counted."""


async def prune_entries(conn: AsyncConnection, before: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` completed entries that expired before ``before``.

    Each goes with its created-target claim and its settled deferred record. Returns the
    number of entries deleted.
    """
    e = ledger_entries.c
    doomed = sa.and_(e.status == "completed", e.expires_at < before)
    keys = [
        tuple(row)
        for row in await conn.execute(
            sa.select(e.tenant_id, e.principal_id, e.request_id, e.invocation_id)
            .where(doomed)
            .order_by(e.expires_at)
            .limit(batch_size)
        )
    ]
    if not keys:
        return 0
    ids = [key[:3] for key in keys]
    c, d = claims.c, deferred.c
    await conn.execute(
        sa.delete(claims).where(sa.tuple_(c.tenant_id, c.principal_id, c.request_id).in_(ids))
    )
    await conn.execute(
        sa.delete(deferred).where(
            d.invocation_id.in_([key[3] for key in keys]), d.status == "settled"
        )
    )
    # ``doomed`` again: an entry replaced by a new claim since the SELECT stays.
    result = await conn.execute(
        sa.delete(ledger_entries).where(
            sa.tuple_(e.tenant_id, e.principal_id, e.request_id).in_(ids), doomed
        )
    )
    return result.rowcount


async def prune_approvals(conn: AsyncConnection, before: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` denied or consumed approvals that expired before ``before``.

    Pending and approved approvals are never deleted: a person may still act on them.
    """
    a = approvals.c
    doomed = sa.and_(a.status.in_(("denied", "consumed")), a.expires_at < before)
    batch = sa.select(a.id).where(doomed).order_by(a.expires_at).limit(batch_size)
    result = await conn.execute(sa.delete(approvals).where(a.id.in_(batch.scalar_subquery())))
    return result.rowcount


async def prune_audit_events(
    conn: AsyncConnection, before: datetime, batch_size: int, *, anonymous_only: bool
) -> int:
    """Delete up to ``batch_size`` audit events older than ``before`` (anonymous only, if asked).

    Returns how many were deleted.
    """
    c = audit_events.c
    doomed = c.time < before
    if anonymous_only:
        doomed = sa.and_(doomed, c.subject.is_(None))
    batch = sa.select(c.seq).where(doomed).order_by(c.seq).limit(batch_size)
    result = await conn.execute(sa.delete(audit_events).where(c.seq.in_(batch.scalar_subquery())))
    return result.rowcount


async def prune_finished_effects(conn: AsyncConnection, before: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` delivered or discarded effects that finished before ``before``.

    Pending effects (still to run) and dead ones (waiting for a person to retry or
    discard them) are never deleted.
    """
    f = effects.c
    doomed = sa.and_(f.status.in_(("delivered", "discarded")), f.updated_at < before)
    batch = sa.select(f.key).where(doomed).order_by(f.updated_at).limit(batch_size)
    # ``doomed`` again: an effect re-driven since the SELECT stays.
    result = await conn.execute(
        sa.delete(effects).where(f.key.in_(batch.scalar_subquery()), doomed)
    )
    return result.rowcount
