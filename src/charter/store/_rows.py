"""Statements and row conversions shared by the store and its transactions."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..audit import AuditEvent
from ._statements import statements
from ._types import searchable

__all__ = (
    "audit_from_row",
    "audit_values",
    "searchable_tenant",
    "write_audit",
)


def _searchable(value: str | None) -> str | None:
    # Search columns only: the exact value is kept in the event's JSON.
    return None if value is None else searchable(value)


def audit_values(event: AuditEvent) -> dict[str, Any]:
    """The row for one audit event; the exact event goes in ``event`` as ASCII JSON.

    An audit write must never fail on what a caller sent (an unknown tool name with a
    NUL in it is still worth recording), so the search columns get NUL-free copies.
    """
    return {
        "id": _searchable(event.id),
        "time": event.time,
        "tenant": _searchable(event.tenant),
        "principal_tenant": _searchable(event.principal_tenant),
        "subject": _searchable(event.subject),
        "tool": _searchable(event.tool),
        "request_id": _searchable(event.request_id),
        "outcome": event.outcome,
        "event": event.model_dump(mode="json"),
    }


def searchable_tenant(tenant: str) -> str:
    """The form a tenant takes in the audit search columns."""
    return searchable(tenant)


def audit_from_row(row: sa.Row[Any]) -> AuditEvent:
    """Rebuild an audit event from its stored JSON."""
    return AuditEvent.model_validate(row._mapping["event"])


async def write_audit(conn: AsyncConnection, event: AuditEvent) -> None:
    """Insert one audit event on ``conn``."""
    await conn.execute(statements(conn.dialect.name).insert_audit, audit_values(event))
