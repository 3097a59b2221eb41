"""What the ledger keeps of a request: its entry, its created-target claim, its deferral.

Plain frozen pydantic records: they cross into the database (the SQL store writes them
field by field) and back, so they validate what a store hands back.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ..registry import PreparedAction

__all__ = (
    "ActionStatus",
    "BoundCommand",
    "ClaimRecord",
    "DeferredRecord",
    "LedgerEntry",
    "Record",
    "RequestKey",
    "bound_command",
)


class Record(BaseModel):
    """A ledger record: frozen, and refusing unknown fields, so a store's rows are checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class RequestKey(TypedDict):
    """Which request a record is about, as its fields: tenant, principal, request id."""

    tenant_id: str
    principal_id: str
    request_id: str


class BoundCommand(TypedDict):
    """The exact command a ledger entry or an approval is bound to, as their fields."""

    tool: str
    capability_id: str
    capability_version: str
    target: str | None
    fingerprint: str


def bound_command(prepared: PreparedAction, fingerprint: str) -> BoundCommand:
    """The command ``prepared`` runs: the tool at its version, its target, ``fingerprint``."""
    return {
        "tool": prepared.tool.name,
        "capability_id": prepared.tool.capability_id,
        "capability_version": prepared.tool.capability_version,
        "target": prepared.target,
        "fingerprint": fingerprint,
    }


class LedgerEntry(Record):
    """One committed request: its key, what it was, and its stored outcome."""

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

    def request_key(self) -> RequestKey:
        """The request this entry is about, for the records kept with it."""
        return {
            "tenant_id": self.tenant_id,
            "principal_id": self.principal_id,
            "request_id": self.request_id,
        }


class ClaimRecord(Record):
    """A created-target command's claim and, once recorded, its result reference."""

    tenant_id: str
    principal_id: str
    request_id: str
    capability_id: str
    fingerprint: str
    result_reference: str | None = None
    created_at: datetime


class DeferredRecord(Record):
    """A call whose work continues elsewhere until ``Host.settle`` completes it."""

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
            **entry.request_key(),
            tool=entry.tool,
            created_at=entry.created_at,
        )


class ActionStatus(Record):
    """Where a request stands, for ``Host.action_status``."""

    request_id: str
    tool: str
    status: Literal["completed", "deferred", "awaiting_approval", "approved", "denied", "expired"]
    outcome: dict[str, Any] | None = None
    """The stored outcome of a completed request, or the ``Denied`` of a refused one."""
    approval_id: str | None = None
    updated_at: datetime
