"""``Approvals``: the service that asks for, checks and decides approvals (``host.approvals``).

It creates the approvals of the gate, checks one is bound to a call, lists them, and lets a
person holding the approver scope grant or deny them, auditing every decision (made or
refused) and keeping the record's history. ``ApprovalNotices`` (the host's notifications)
is told of every change inside the transaction that writes it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

from .._safe_log import log_exception
from ..audit import AuditAction, AuditEvent, AuditSink
from ..auth import Principal
from ..errors import ErrorCode, StoreBusy, StoreUnavailable, ToolError
from ..outcome import ApprovalStatus, Failed, failed, failed_from_error
from ..registry import PreparedAction, Registry
from .approvals import (
    ApprovalChange,
    ApprovalCursor,
    ApprovalDecision,
    ApprovalRecord,
    ListedStatus,
    decision_arguments,
)
from .protocols import ApprovalStore, LedgerTransaction
from .records import bound_command

__all__ = ("ApprovalNotices", "Approvals")

logger = logging.getLogger("charter")


class ApprovalNotices(Protocol):
    """Protocol: what must follow an approval change (notifications), written with it.

    ``stage`` runs inside the transaction that writes the change, so whatever it writes
    commits or rolls back with the change; ``release`` runs once that transaction has
    committed. The host's notifications implement it.
    """

    def transaction(self) -> AbstractAsyncContextManager[LedgerTransaction]:
        """Open a write transaction on the store the approvals are kept in."""
        ...

    async def stage(
        self,
        tx: LedgerTransaction,
        change: ApprovalChange,
        record: ApprovalRecord,
        *,
        by: str | None,
    ) -> Sequence[object]:
        """Write what follows ``change`` of ``record`` (by ``by``) in ``tx``; what to release."""
        ...

    async def release(self, staged: Sequence[object]) -> None:
        """Hand on what ``stage`` wrote, now that its transaction committed; never raises."""
        ...


class Approvals:
    """The approvals of one host: ``host.approvals``."""

    def __init__(
        self,
        store: ApprovalStore,
        *,
        registry: Registry,
        approver_scope: str,
        admin_scope: str,
        admin_may_approve: bool = False,
        allow_self_approval: bool,
        audit: AuditSink | None = None,
        clock: Callable[[], datetime],
        notices: ApprovalNotices | None = None,
    ) -> None:
        """Bind approvals to a store; see ``is_approver`` for who may decide.

        With ``notices``, each request and decision is written in a transaction together
        with what must follow it (the host's notifications).
        """
        self.notices = notices
        self.store = store
        self.registry = registry
        self.approver_scope = approver_scope
        self.admin_scope = admin_scope
        self.admin_may_approve = admin_may_approve
        self.allow_self_approval = allow_self_approval
        self.audit = audit
        self.clock = clock

    # -- used by the gate ---------------------------------------------------------------------

    async def request(
        self,
        *,
        prepared: PreparedAction,
        tenant_id: str,
        requester_id: str,
        request_id: str,
        fingerprint: str,
        reason_code: str | None,
        ttl: timedelta,
    ) -> tuple[ApprovalRecord, bool] | Failed:
        """Create the pending approval of this exact command, or read the request's own.

        Returns the record and whether it was made now, or ``IDEMPOTENCY_CONFLICT`` when
        the request id already asked approval for a different command.
        """
        now = self.clock()
        record = ApprovalRecord(
            id="apr_" + uuid.uuid4().hex,
            tenant_id=tenant_id,
            requester_id=requester_id,
            request_id=request_id,
            **bound_command(prepared, fingerprint),
            arguments=prepared.arguments,
            risk=prepared.tool.evaluated_risk,
            reason_code=reason_code,
            created_at=now,
            expires_at=now + ttl,
        )
        stored = await self._insert(record)
        if stored.fingerprint != fingerprint:
            return failed(
                ErrorCode.IDEMPOTENCY_CONFLICT,
                "This requestId already asked approval for a different call.",
                reason="idempotency_key_reused",
            )
        return stored, stored.id == record.id

    async def _insert(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert the approval (with its notices when there are any), or read its request's."""
        if self.notices is None:
            return await self.store.insert_approval(record)
        staged: Sequence[object] = ()
        async with self.notices.transaction() as tx:
            stored = await tx.insert_approval(record)
            if stored.id == record.id:
                staged = await self.notices.stage(tx, "requested", stored, by=None)
        await self.notices.release(staged)
        return stored

    async def find(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """The approval one request asked for, if it asked."""
        return await self.store.find_approval(tenant_id, requester_id, request_id)

    async def check(
        self,
        approval_id: str,
        *,
        prepared: PreparedAction,
        tenant_id: str,
        principal_tenant: str,
        requester_id: str,
        request_id: str,
        fingerprint: str,
    ) -> ApprovalRecord | Failed:
        """The approval if it was made for this exact call (whatever its status), else why not.

        Bound are the tenant, the requester, the request id, the tool at its version, the
        target and the fingerprint; any difference is ``AUTHORIZATION_DENIED`` with a reason.
        """
        record = await self.store.get_approval(approval_id)
        # A foreign tenant's approval answers exactly like a missing one (no oracle),
        # unless the caller's own tenant minted it for a different (delegated) tenant.
        if record is None or record.tenant_id not in (tenant_id, principal_tenant):
            return _denied(approval_id, "not_found")
        registered = prepared.tool
        checks: tuple[tuple[bool, str], ...] = (
            (
                (record.capability_id, record.capability_version, record.target)
                != (registered.capability_id, registered.capability_version, prepared.target),
                "mismatched_action",
            ),
            (record.tenant_id != tenant_id, "tenant_mismatch"),
            (record.fingerprint != fingerprint, "fingerprint_mismatch"),
            (record.requester_id != requester_id, "principal_mismatch"),
            # Last, as in seed A: the approval names one request, and only it may use it.
            (record.request_id != request_id, "request_id_mismatch"),
        )
        for failed_check, reason in checks:
            if failed_check:
                return _denied(approval_id, reason)
        return record

    # -- used by approvers --------------------------------------------------------------------

    async def list(
        self,
        principal: Principal,
        status: ListedStatus | None = "pending",
        limit: int = 100,
        *,
        before: ApprovalCursor | None = None,
    ) -> list[ApprovalRecord]:
        """Approvals in the caller's tenant, newest first (approvers see all, others their own).

        ``status`` is where each stands now (``ApprovalRecord.status_at``): ``pending``
        leaves out those past their expiry, which no one can decide any more, and
        ``expired`` lists them. ``before`` (the last one's ``cursor``) pages back.
        """
        # The store filters by requester before it counts the limit: filtered after, a
        # requester's own requests would be crowded off the page by everyone else's.
        return await self.store.list_approvals(
            principal.tenant_id,
            status,
            limit,
            requester_id=None if self.oversees(principal) else principal.key,
            before=before,
            now=self.clock(),
        )

    async def get(self, principal: Principal, approval_id: str) -> ApprovalRecord | None:
        """One approval, if the caller may see it (``oversees`` its tenant, or requested it).

        A requester sees its own approvals wherever they were made for (its delegated
        calls' approvals live in the tenant it acted for).
        """
        record = await self.store.get_approval(approval_id)
        if record is None:
            return None
        if record.requester_id == principal.key:
            return record
        if record.tenant_id == principal.tenant_id and self.oversees(principal):
            return record
        return None

    async def grant(
        self, approval_id: str, approver: Principal, reason: str | None = None
    ) -> ApprovalRecord | Failed:
        """Grant a pending approval; repeating the same decision is a no-op."""
        return await self._decide(approval_id, approver, "approved", reason)

    async def deny(
        self, approval_id: str, approver: Principal, reason: str | None = None
    ) -> ApprovalRecord | Failed:
        """Deny a pending approval, or revoke a granted one that was not yet used."""
        return await self._decide(approval_id, approver, "denied", reason)

    def oversees(self, principal: Principal) -> bool:
        """Whether ``principal`` sees all of its tenant's approvals and audit events.

        Approvers (``is_approver``) and holders of the admin scope; seeing is not deciding.
        """
        return self.is_approver(principal) or self.admin_scope in principal.scopes

    def is_approver(self, principal: Principal) -> bool:
        """Whether ``principal`` may decide approvals (and see all of its tenant's).

        The one rule for every way of deciding (REST and the console, MCP and the
        approval tools, the CLI): a person (``kind="person"``) holding the approver scope
        literally. No wildcard grant (``*``, ``*:*``, ``*:approve``, ``charter:*``) counts,
        and the admin scope only when the host says so (``admin_may_approve``). An agent
        or service never decides, whatever its scopes.
        """
        if principal.kind != "person":
            return False
        if self.approver_scope in principal.scopes:
            return True
        return self.admin_may_approve and self.admin_scope in principal.scopes

    async def _decide(
        self,
        approval_id: str,
        approver: Principal,
        status: Literal["approved", "denied"],
        reason: str | None,
    ) -> ApprovalRecord | Failed:
        decision = _Decision(approval_id=approval_id, approver=approver, status=status)
        try:
            result = await self._try_decide(decision, reason)
        except (StoreBusy, StoreUnavailable):
            # Nothing was decided (a lock wait ran out, or the database went away): the
            # same decision may simply be sent again.
            result = _busy(approval_id)
        if decision.audited:
            await self._audit_decision(decision, reason, result)
        return result

    async def _try_decide(self, decision: _Decision, reason: str | None) -> ApprovalRecord | Failed:
        approval_id, approver, status = decision.approval_id, decision.approver, decision.status
        record = await self.store.get_approval(approval_id)
        if record is None or record.tenant_id != approver.tenant_id:
            return _denied(approval_id, "not_found")
        decision.before = record
        if not self.is_approver(approver):
            return self._not_an_approver(approver)
        if record.requester_id == approver.key and not self.allow_self_approval:
            return _denied(approval_id, "self_approval")
        if record.status == status:
            decision.audited = False  # the same decision again: nothing new happened
            return record
        allowed: tuple[ApprovalStatus, ...] = (
            ("pending",) if status == "approved" else ("pending", "approved")
        )
        if record.status not in allowed:
            return _denied(approval_id, f"already_{record.status}")
        if record.status_at(self.clock()) == "expired":
            return _denied(approval_id, "expired")
        at = self.clock()
        entry = ApprovalDecision(
            status=status, decided_by=approver.key, decided_at=at, reason=reason
        )
        try:
            # Compare-and-set on the status the history was read with, so a concurrent
            # decision can never drop out of the history.
            changed = await self._write_decision(record, entry)
        except ToolError as exc:  # e.g. a reason the store cannot hold (a NUL character)
            return failed_from_error(exc)
        current = await self.store.get_approval(approval_id)
        if current is None:
            return _denied(approval_id, "not_found")
        if not changed:
            decision.audited = current.status != status
            return (
                current
                if current.status == status
                else _denied(approval_id, f"already_{current.status}")
            )
        return current

    async def _write_decision(self, record: ApprovalRecord, entry: ApprovalDecision) -> bool:
        """Compare-and-set ``entry`` on ``record`` (with its notices); whether it changed."""
        expected = (record.status,)
        decision = decision_arguments((*record.history, entry))
        if self.notices is None:
            return await self.store.decide_approval(record.id, expected=expected, **decision)
        staged: Sequence[object] = ()
        async with self.notices.transaction() as tx:
            changed = await tx.decide_approval(record.id, expected=expected, **decision)
            if changed:
                decided = record.with_decision(**decision)
                change: ApprovalChange = "granted" if entry.status == "approved" else "denied"
                staged = await self.notices.stage(tx, change, decided, by=entry.decided_by)
        await self.notices.release(staged)
        return changed

    def _not_an_approver(self, principal: Principal) -> Failed:
        if principal.kind != "person":
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Only a person may decide approvals; this caller is a {principal.kind}.",
                reason="not_a_person",
            )
        return failed(
            ErrorCode.AUTHORIZATION_DENIED,
            f"Deciding approvals needs the {self.approver_scope!r} scope itself (a wildcard "
            "grant does not count).",
            reason="insufficient_scope",
            missing=[self.approver_scope],
        )

    async def _audit_decision(
        self, decision: _Decision, reason: str | None, result: ApprovalRecord | Failed
    ) -> None:
        """One audit event per decision made, and per decision refused."""
        if self.audit is None:
            return
        before, approver = decision.before, decision.approver
        action: AuditAction = "approval.grant"
        if decision.status == "denied":
            revoking = before is not None and before.status == "approved"
            action = "approval.revoke" if revoking else "approval.deny"
        made = isinstance(result, ApprovalRecord)
        event = AuditEvent(
            id="aud_" + uuid.uuid4().hex,
            time=self.clock(),
            action=action,
            subject=approver.subject,
            principal_tenant=approver.tenant_id,
            tenant=before.tenant_id if before is not None else approver.tenant_id,
            tool=before.tool if before is not None else "charter.approvals",
            capability_id=before.capability_id if before is not None else None,
            capability_version=before.capability_version if before is not None else None,
            request_id=before.request_id if before is not None else None,
            approval_id=decision.approval_id[:200],
            outcome="completed" if made else "failed",
            code=None if isinstance(result, ApprovalRecord) else result.code.value,
            reason=None if isinstance(result, ApprovalRecord) else result.reason,
            note=reason,
        )
        try:
            await self.audit.record(event)
        except Exception:
            log_exception(logger, "could not record the audit event of a decision on an approval")


@dataclass(kw_only=True, slots=True)
class _Decision:
    """One decision being made: who decides what, what it was about, whether to audit it."""

    approval_id: str
    approver: Principal
    status: Literal["approved", "denied"]
    before: ApprovalRecord | None = None
    """The approval as read before deciding (None when the caller may not see it)."""
    audited: bool = True


def _busy(approval_id: str) -> Failed:
    return failed(
        ErrorCode.PROVIDER_UNAVAILABLE,
        "The approval could not be decided right now (the database is busy); nothing was "
        "decided. Send the same decision again shortly.",
        retryable=True,
        reason="store_busy",
        approvalId=approval_id,
    )


def _denied(approval_id: str, reason: str) -> Failed:
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        "The approval does not authorise this exact call."
        if reason not in {"self_approval", "not_found"}
        else (
            "Requesters may not approve their own requests."
            if reason == "self_approval"
            else f"No approval {approval_id!r} in your tenant."
        ),
        reason=reason,
        approvalId=approval_id,
    )
