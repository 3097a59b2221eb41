"""What the ledger keeps of a request: its entry, its created-target claim, its deferral.

Plain frozen pydantic records: they cross into the database (the SQL store writes them
field by field) and back, so they validate what a store hands back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ("ActionStatus", "ClaimRecord", "DeferredRecord", "LedgerEntry")

_record = ConfigDict(frozen=True, extra="forbid")


class LedgerEntry(BaseModel):
    """One committed request: its key, what it was, and its stored outcome."""

    model_config = _record

    tenant_id: str
    principal_id: str
    request_id: str
    tool: str
    capability_id: str
    capability_version: str
    target: str | None
    fingerprint: str
    status: Literal["in_progress", "completed", "deferred"]
    outcome: str | None = None
    """The outcome as JSON (``outcome_adapter``), once known."""
    approval_id: str | None = None
    invocation_id: str
    created_at: datetime
    expires_at: datetime


class ClaimRecord(BaseModel):
    """A created-target command's claim and, once recorded, its result reference."""

    model_config = _record

    tenant_id: str
    principal_id: str
    request_id: str
    capability_id: str
    fingerprint: str
    result_reference: str | None = None
    created_at: datetime


class DeferredRecord(BaseModel):
    """A call whose work continues elsewhere until ``Host.settle`` completes it."""

    model_config = _record

    invocation_id: str
    tenant_id: str
    principal_id: str
    request_id: str
    tool: str
    status: Literal["active", "settled"] = "active"
    outcome: str | None = None
    created_at: datetime
    settled_at: datetime | None = None

    @classmethod
    def of(cls, entry: LedgerEntry) -> DeferredRecord:
        """The active record of ``entry``'s call, deferred in the transaction that claimed it."""
        return cls(
            invocation_id=entry.invocation_id,
            tenant_id=entry.tenant_id,
            principal_id=entry.principal_id,
            request_id=entry.request_id,
            tool=entry.tool,
            created_at=entry.created_at,
        )


class ActionStatus(BaseModel):
    """Where a request stands, for ``Host.action_status``."""

    model_config = _record

    request_id: str
    tool: str
    status: Literal["completed", "deferred", "awaiting_approval", "approved", "denied", "expired"]
    outcome: dict[str, Any] | None = None
    """The stored outcome of a completed request, or the ``Denied`` of a refused one."""
    approval_id: str | None = None
    updated_at: datetime
