"""The SQL of approvals: statements and row conversions ``SqlStore`` runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import StoreError
from ..ledger import (
    ApprovalCursor,
    ApprovalDecision,
    ApprovalRecord,
    ApprovalStatus,
    ListedStatus,
)
from ._schema import approvals
from ._statements import insert

__all__ = ("by_id", "by_request", "decide", "dump", "first", "insert_or_read", "newest", "record")

_c = approvals.c


def record(row: sa.Row[Any]) -> ApprovalRecord:
    """The approval a row holds."""
    return ApprovalRecord.model_validate(dict(row._mapping))


def first(rows: Sequence[sa.Row[Any]]) -> ApprovalRecord | None:
    """The approval of the first row, if any."""
    return record(rows[0]) if rows else None


def dump(history: Sequence[ApprovalDecision]) -> list[dict[str, Any]]:
    """An approval's history as the JSON its column holds."""
    return [decision.model_dump(mode="json") for decision in history]


def by_id(approval_id: str) -> sa.Select[Any]:
    """The approval with this id."""
    return sa.select(approvals).where(_c.id == approval_id)


def by_request(tenant_id: str, requester_id: str, request_id: str) -> sa.Select[Any]:
    """The approval one request asked for (its unique key)."""
    return sa.select(approvals).where(
        _c.tenant_id == tenant_id, _c.requester_id == requester_id, _c.request_id == request_id
    )


def newest(
    tenant_id: str,
    status: ListedStatus | None,
    limit: int,
    *,
    requester_id: str | None = None,
    before: ApprovalCursor | None = None,
    now: datetime | None = None,
) -> sa.Select[Any]:
    """A tenant's approvals, newest first (see ``ApprovalStore.list_approvals``)."""
    statement = (
        sa.select(approvals)
        .where(_c.tenant_id == tenant_id)
        .order_by(_c.created_at.desc(), _c.id.desc())
        .limit(limit)
    )
    if requester_id is not None:
        statement = statement.where(_c.requester_id == requester_id)
    if before is not None:
        at, approval_id = before
        statement = statement.where(
            sa.or_(_c.created_at < at, sa.and_(_c.created_at == at, _c.id < approval_id))
        )
    if status is not None:
        statement = statement.where(_listed_as(status, now))
    return statement


def _listed_as(status: ListedStatus, now: datetime | None) -> sa.ColumnElement[bool]:
    """Whether a row's status at ``now`` is ``status`` (``ApprovalRecord.status_at``)."""
    if now is None:
        return _c.status == status
    if status == "expired":
        return sa.and_(_c.status.in_(_UNUSED), _c.expires_at <= now)
    if status in _UNUSED:
        return sa.and_(_c.status == status, _c.expires_at > now)
    return _c.status == status


_UNUSED = ("pending", "approved")
"""The statuses an approval leaves for ``expired`` once its time runs out."""


async def decide(
    conn: AsyncConnection,
    approval_id: str,
    expected: Sequence[ApprovalStatus],
    status: ApprovalStatus,
    *,
    by: str,
    reason: str | None,
    at: datetime,
    history: Sequence[ApprovalDecision],
) -> bool:
    """Set a decision and the new history if the status is still one of ``expected``.

    Returns whether the approval changed (compare-and-set: of concurrent deciders on the
    same expected status, one wins).
    """
    statement = (
        sa.update(approvals)
        .where(_c.id == approval_id, _c.status.in_(expected))
        .values(
            status=status,
            decided_by=by,
            decided_at=at,
            decision_reason=reason,
            history=sa.bindparam("history", type_=approvals.c.history.type),
        )
    )
    return (await conn.execute(statement, {"history": dump(history)})).rowcount == 1


async def insert_or_read(conn: AsyncConnection, new: ApprovalRecord) -> ApprovalRecord:
    """Insert a pending approval, or read the one its request already made.

    Re-reads when the row it conflicted with vanished before it could be read (pruned).
    """
    for _ in range(3):
        inserted = await conn.execute(
            insert(conn.dialect.name, approvals)
            .values(**new.model_dump(exclude={"history"}), history=dump(new.history))
            .on_conflict_do_nothing(index_elements=["tenant_id", "requester_id", "request_id"])
            .returning(_c.id)
        )
        if inserted.first() is not None:
            return new
        row = (
            await conn.execute(by_request(new.tenant_id, new.requester_id, new.request_id))
        ).first()
        if row is not None:
            return record(row)
    raise StoreError("the approval kept disappearing while it was inserted; retry")
