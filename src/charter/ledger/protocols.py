"""The store protocols: what the ledger gate needs of a store and of one transaction.

A store implements ``LedgerStore`` (which includes ``ApprovalStore``); its write
transaction implements ``LedgerTransaction``; both make the ``ApprovalWrites``, the
transaction within itself. ``charter.testing.STORE_CHECKS`` is the
contract an implementation must keep (docs/ledger.md, "Writing a store").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Literal, Protocol

from ..audit import AuditEvent
from ..effects import EffectRecord
from ..errors import ToolError
from ..outcome import ApprovalStatus
from .approvals import ApprovalCursor, ApprovalDecision, ApprovalRecord, ListedStatus
from .records import ClaimRecord, DeferredRecord, LedgerEntry

__all__ = (
    "ApprovalStore",
    "ApprovalWrites",
    "FaultHook",
    "FaultPoint",
    "LedgerStore",
    "LedgerTransaction",
)


class ApprovalWrites(Protocol):
    """Protocol: the approval writes a store makes on its own and a transaction within itself.

    ``ApprovalStore`` and ``LedgerTransaction`` both include them; in a transaction, what
    follows the write (notifications) commits with it.
    """

    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert a pending approval, or return the one already made for its request."""
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


class ApprovalStore(ApprovalWrites, Protocol):
    """Protocol: where approvals are kept (every ``LedgerStore`` is one)."""

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """Read an approval by id."""
        ...

    async def find_approval(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """Read the approval made for one request."""
        ...

    async def list_approvals(
        self,
        tenant_id: str,
        status: ListedStatus | None,
        limit: int,
        *,
        requester_id: str | None = None,
        before: ApprovalCursor | None = None,
        now: datetime | None = None,
    ) -> list[ApprovalRecord]:
        """List a tenant's approvals, newest first by (``created_at``, ``id``).

        Args:
            tenant_id: the tenant whose approvals to list.
            status: only approvals of this status (None: every one). With ``now``, the
                status at ``now`` (``ApprovalRecord.status_at``): ``pending`` and
                ``approved`` leave out those past their expiry, ``expired`` lists them.
            limit: at most this many.
            requester_id: only the approvals this principal key asked for.
            before: only the approvals after this cursor in the order (older ones).
            now: the time the status is read at; None compares the stored status.
        """
        ...


class LedgerTransaction(ApprovalWrites, Protocol):
    """Protocol: one write transaction; everything in it commits or rolls back together.

    Its approval writes (``ApprovalWrites``) commit or roll back with the rest.
    """

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

    async def insert_effect(self, record: EffectRecord) -> bool:
        """Write an effect to the outbox in this transaction; False if its key exists.

        An existing key is left alone (enqueueing the same effect twice is a no-op).
        """
        ...


class LedgerStore(ApprovalStore, Protocol):
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
