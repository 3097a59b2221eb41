"""The action ledger's records and the store protocols behind them.

What a store keeps (ledger entries, approvals, created-target claims, deferred records)
and the two protocols a store implements: ``LedgerStore`` and its ``LedgerTransaction``.
The gate that uses them to run a call exactly once is ``charter.gate.LedgerGate``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from .audit import AuditEvent
from .auth import split_principal_key
from .errors import CharterError, ToolError
from .outcome import ApprovalStatus

__all__ = (
    "ActionStatus",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalStatus",
    "ClaimRecord",
    "DeferredRecord",
    "FaultHook",
    "FaultPoint",
    "LedgerEntry",
    "LedgerStore",
    "LedgerTransaction",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
)

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


class ApprovalDecision(BaseModel):
    """One decision on an approval, as its history keeps it."""

    model_config = _record

    status: Literal["approved", "denied"]
    """``approved`` (granted) or ``denied`` (denied, or revoked after a grant)."""
    decided_by: str
    """The decider's principal key (``tenant/subject``)."""
    decided_at: datetime
    reason: str | None = None


class ApprovalRecord(BaseModel):
    """A request for a person's approval, bound to one exact command."""

    model_config = _record

    id: str
    tenant_id: str
    requester_id: str
    """The requester's principal key (``<home tenant>/<subject>``, see ``principal_key``)."""
    request_id: str
    tool: str
    capability_id: str
    capability_version: str
    target: str | None
    fingerprint: str
    arguments: dict[str, Any]
    """The validated arguments, shown to the approver."""
    risk: str
    reason_code: str | None = None
    status: ApprovalStatus = "pending"
    created_at: datetime
    expires_at: datetime
    decided_by: str | None = None
    """Who made the latest decision (a principal key); every decision is in ``history``."""
    decided_at: datetime | None = None
    decision_reason: str | None = None
    consumed_by: str | None = None
    """The request id whose execution consumed the approval."""
    history: tuple[ApprovalDecision, ...] = ()
    """Every decision, oldest first: a revocation never erases who granted."""

    @property
    def requester_tenant(self) -> str | None:
        """The requester's home tenant (differs from ``tenant_id`` for a delegated call)."""
        return split_principal_key(self.requester_id)[0]

    @property
    def requester_subject(self) -> str:
        """The requester's subject."""
        return split_principal_key(self.requester_id)[1]


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


class StoreBusy(Exception):
    """Raised by a store when a transaction or a claim could not get its lock in time."""


class StoreError(CharterError):
    """Raised by a store when the database fails for a reason other than a lock wait.

    Examples: a statement rejected, a handler that left the transaction aborted. The
    original driver error is the ``__cause__``. (Re-exported as ``charter.store.StoreError``.)
    """


class StoreUnavailable(StoreError):
    """Raised by a store when the database cannot be reached or the connection was lost.

    The transaction did not commit, unless ``commit_unknown`` is true: then the connection
    was lost while the COMMIT was in flight, and the database may have committed it.
    Either way a retry with the same request id is safe: it replays what committed, or
    runs the action afresh. The gate answers ``PROVIDER_UNAVAILABLE`` (retryable).
    """

    def __init__(self, message: str, *, commit_unknown: bool = False) -> None:
        super().__init__(message)
        self.commit_unknown = commit_unknown
        """The connection was lost during COMMIT: the transaction may have committed."""


class LedgerTransaction(Protocol):
    """Protocol: one write transaction; everything in it commits or rolls back together."""

    @property
    def connection(self) -> object:
        """The database connection handed to handlers as ``ctx.db``."""
        ...

    def transient_error(self, exc: Exception) -> ToolError | None:
        """Name a transient database error a handler let escape from ``connection``.

        Return a retryable ``ToolError`` for a lock wait that ran out, a serialization
        failure, a deadlock or a lost connection (the transaction rolls back, so a retry
        is safe), None for anything else. Handed to handlers' hosts as ``ctx.db_error``.
        """
        ...

    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        """Insert ``entry`` unless its key exists; return the existing committed entry.

        An expired entry is replaced. Raises ``StoreBusy`` when the key stays locked.
        """
        ...

    async def complete(self, entry: LedgerEntry) -> None:
        """Store the final status and outcome of a claimed entry."""
        ...

    async def consume_approval(self, approval_id: str, request_id: str, now: datetime) -> bool:
        """Mark an approved, unexpired approval consumed; False if it no longer is."""
        ...

    async def get_claim(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ClaimRecord | None:
        """Read a created-target claim."""
        ...

    async def insert_claim(self, claim: ClaimRecord) -> None:
        """Insert a created-target claim."""
        ...

    async def record_claim_result(
        self, tenant_id: str, principal_id: str, request_id: str, reference: str
    ) -> None:
        """Record a claim's typed result reference."""
        ...

    async def insert_deferred(self, record: DeferredRecord) -> None:
        """Persist an active deferred record."""
        ...

    async def record_audit(self, event: AuditEvent) -> None:
        """Write an audit event in this transaction."""
        ...


class LedgerStore(Protocol):
    """Protocol: durable ledger, approvals, claims, deferred records and audit events.

    ``charter.testing.STORE_CHECKS`` is what an implementation must do (docs/ledger.md,
    "Writing a store").
    """

    def transaction(self, *, wait: float) -> AbstractAsyncContextManager[LedgerTransaction]:
        """Open a write transaction, waiting at most ``wait`` seconds (else ``StoreBusy``)."""
        ...

    async def get_entry(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> LedgerEntry | None:
        """Read a committed entry."""
        ...

    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert a pending approval, or return the one already made for its request."""
        ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """Read an approval by id."""
        ...

    async def find_approval(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """Read the approval made for one request."""
        ...

    async def list_approvals(
        self, tenant_id: str, status: ApprovalStatus | None, limit: int
    ) -> list[ApprovalRecord]:
        """List a tenant's approvals, newest first."""
        ...

    async def decide_approval(
        self,
        approval_id: str,
        *,
        expected: tuple[ApprovalStatus, ...],
        status: ApprovalStatus,
        decided_by: str,
        reason: str | None,
        at: datetime,
        history: tuple[ApprovalDecision, ...],
    ) -> bool:
        """Change an approval's status if it is still in ``expected`` (compare-and-set).

        ``history`` is the record's new history (the caller appends this decision to the
        history it read with the expected status).
        """
        ...

    async def get_deferred(self, invocation_id: str) -> DeferredRecord | None:
        """Read a deferred record."""
        ...

    async def settle_deferred(self, invocation_id: str, outcome: str, at: datetime) -> bool:
        """Settle an active deferred record, and the ledger entry its call created, once."""
        ...

    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete completed entries and decided approvals that expired before ``before``.

        Raises:
            ValueError: ``batch_size`` is less than 1.
        """
        ...


FaultPoint = Literal[
    "after_claim", "after_mutation", "before_commit", "after_commit_before_response"
]
"""Named points in a ledgered call where a test may inject a crash."""

FaultHook = Callable[[FaultPoint], None]
"""Called at each ``FaultPoint`` of a ledgered call; for crash tests only (off by default)."""
