"""Approval records: a person's approval of one exact command, and each decision on it.

An ``ApprovalRecord`` binds one exact command: tenant, requester, request id, tool at its
version, target and fingerprint. ``Approvals`` (``approval_service``) creates and decides
them; ``ApprovalStore`` (``protocols``) is where they are kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias, TypedDict

from ..auth import split_principal_key
from ..outcome import ApprovalStatus
from .records import Record

__all__ = (
    "ApprovalChange",
    "ApprovalCursor",
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalStatus",
    "DecisionArguments",
    "ListedStatus",
    "decision_arguments",
)

ListedStatus: TypeAlias = Literal["pending", "approved", "denied", "consumed", "expired"]
"""Where an approval stands as it is listed and shown: its stored status, except that a
pending or granted approval past its ``expires_at`` is ``expired``. Expiry is never stored;
such an approval can no longer be decided or used (``ApprovalRecord.status_at``)."""

ApprovalCursor: TypeAlias = tuple[datetime, str]
"""Where a page of approvals ends: its last approval's (``created_at``, ``id``). Lists are
newest first, by that pair, so the next page holds the approvals before it."""


class ApprovalDecision(Record):
    """One decision on an approval, as its history keeps it."""

    status: Literal["approved", "denied"]
    """``approved`` (granted) or ``denied`` (denied, or revoked after a grant)."""
    decided_by: str
    """The decider's principal key (``tenant/subject``)."""
    decided_at: datetime
    reason: str | None = None


class ApprovalRecord(Record):
    """A request for a person's approval, bound to one exact command."""

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

    def status_at(self, now: datetime) -> ListedStatus:
        """Where this approval stands at ``now``: ``expired`` once unused past its expiry."""
        if self.status in ("pending", "approved") and self.expires_at <= now:
            return "expired"
        return self.status

    @property
    def cursor(self) -> ApprovalCursor:
        """Where a page of approvals ending with this one ends (``ApprovalCursor``)."""
        return (self.created_at, self.id)

    @property
    def requester_tenant(self) -> str | None:
        """The requester's home tenant (differs from ``tenant_id`` for a delegated call)."""
        return split_principal_key(self.requester_id)[0]

    @property
    def requester_subject(self) -> str:
        """The requester's subject."""
        return split_principal_key(self.requester_id)[1]

    def with_decision(
        self,
        status: ApprovalStatus,
        *,
        decided_by: str,
        at: datetime,
        reason: str | None,
        history: tuple[ApprovalDecision, ...],
    ) -> ApprovalRecord:
        """This approval as ``decided_by`` left it at ``at``: its new status and history."""
        return self.model_copy(
            update={
                "status": status,
                "decided_by": decided_by,
                "decided_at": at,
                "decision_reason": reason,
                "history": history,
            }
        )


class DecisionArguments(TypedDict):
    """The decision ``decide_approval`` writes and ``ApprovalRecord.with_decision`` applies."""

    status: ApprovalStatus
    decided_by: str
    reason: str | None
    at: datetime
    history: tuple[ApprovalDecision, ...]


def decision_arguments(history: tuple[ApprovalDecision, ...]) -> DecisionArguments:
    """The last decision in ``history`` (the record's new history), as those arguments."""
    last = history[-1]
    return {
        "status": last.status,
        "decided_by": last.decided_by,
        "reason": last.reason,
        "at": last.decided_at,
        "history": history,
    }


ApprovalChange: TypeAlias = Literal["requested", "granted", "denied", "expired", "consumed"]
"""What happened to an approval: asked for, decided (a revocation is ``denied``), left
unused past its expiry, or used by the call it approved."""
