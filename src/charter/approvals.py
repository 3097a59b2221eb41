"""Human approvals: request, check, list, grant and deny, bound to one exact command."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .auth import Principal, missing_scopes
from .errors import ErrorCode, ToolError
from .ledger import ApprovalRecord, ApprovalStatus, LedgerStore
from .outcome import (
    Continuation,
    Denied,
    Failed,
    Interaction,
    InteractionRequired,
    failed,
    failed_from_error,
)
from .policy import CONTROL_FIELD

if TYPE_CHECKING:
    from .registry import PreparedAction, Registry

__all__ = ("Approvals", "approval_paused", "approval_refusal")


class Approvals:
    """The approvals of one host: ``host.approvals``."""

    def __init__(
        self,
        store: LedgerStore,
        *,
        registry: Registry,
        approver_scope: str,
        admin_scope: str,
        allow_self_approval: bool,
        clock: Callable[[], datetime],
    ) -> None:
        """Bind approvals to a store; approvers need ``approver_scope`` in the same tenant."""
        self.store = store
        self.registry = registry
        self.approver_scope = approver_scope
        self.admin_scope = admin_scope
        self.allow_self_approval = allow_self_approval
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
        registered = prepared.tool
        now = self.clock()
        record = ApprovalRecord(
            id="apr_" + uuid.uuid4().hex,
            tenant_id=tenant_id,
            requester_id=requester_id,
            request_id=request_id,
            tool=registered.name,
            capability_id=registered.capability_id,
            capability_version=registered.capability_version,
            target=prepared.target,
            fingerprint=fingerprint,
            arguments=prepared.arguments,
            risk=registered.evaluated_risk,
            reason_code=reason_code,
            created_at=now,
            expires_at=now + ttl,
        )
        stored = await self.store.insert_approval(record)
        if stored.fingerprint != fingerprint:
            return failed(
                ErrorCode.IDEMPOTENCY_CONFLICT,
                "This requestId already asked approval for a different call.",
                reason="idempotency_key_reused",
            )
        return stored, stored.id == record.id

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
        self, principal: Principal, status: ApprovalStatus | None = "pending", limit: int = 100
    ) -> list[ApprovalRecord]:
        """Approvals in the caller's tenant (approvers see all, others their own)."""
        records = await self.store.list_approvals(principal.tenant_id, status, limit)
        if self.is_approver(principal):
            return records
        return [r for r in records if r.requester_id == principal.subject]

    async def get(self, principal: Principal, approval_id: str) -> ApprovalRecord | None:
        """One approval, if the caller may see it (same tenant; approver or requester)."""
        record = await self.store.get_approval(approval_id)
        if record is None or record.tenant_id != principal.tenant_id:
            return None
        if not self.is_approver(principal) and record.requester_id != principal.subject:
            return None
        return record

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

    def is_approver(self, principal: Principal) -> bool:
        """Whether ``principal`` may decide approvals (and see every approval of its tenant)."""
        return missing_scopes(
            principal.scopes, (self.approver_scope,), admin_scope=self.admin_scope
        ).allowed

    async def _decide(
        self,
        approval_id: str,
        approver: Principal,
        status: ApprovalStatus,
        reason: str | None,
    ) -> ApprovalRecord | Failed:
        if not self.is_approver(approver):
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Deciding approvals needs the {self.approver_scope!r} scope.",
                reason="insufficient_scope",
                missing=[self.approver_scope],
            )
        record = await self.store.get_approval(approval_id)
        if record is None or record.tenant_id != approver.tenant_id:
            return _denied(approval_id, "not_found")
        if record.requester_id == approver.subject and not self.allow_self_approval:
            return _denied(approval_id, "self_approval")
        if record.status == status:
            return record
        expected: tuple[ApprovalStatus, ...] = (
            ("pending",) if status == "approved" else ("pending", "approved")
        )
        if record.status not in expected:
            return _denied(approval_id, f"already_{record.status}")
        if record.expires_at <= self.clock():
            return _denied(approval_id, "expired")
        try:
            changed = await self.store.decide_approval(
                approval_id,
                expected=expected,
                status=status,
                decided_by=approver.subject,
                reason=reason,
                at=self.clock(),
            )
        except ToolError as exc:  # e.g. a reason the store cannot hold (a NUL character)
            return failed_from_error(exc)
        current = await self.store.get_approval(approval_id)
        if current is None:
            return _denied(approval_id, "not_found")
        if not changed and current.status != status:
            return _denied(approval_id, f"already_{current.status}")
        return current


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


def approval_paused(record: ApprovalRecord, *, replayed: bool) -> InteractionRequired:
    """The ``InteractionRequired`` a caller gets while its approval is pending or unused."""
    continuation = Continuation(request_id=record.request_id, confirmed=True, approval_id=record.id)
    retry = f'"{CONTROL_FIELD}": {json.dumps(continuation.controls())}'
    on = f" on {record.target!r}" if record.target else ""
    if record.status == "approved":
        prompt = f"Approval {record.id} for {record.tool!r}{on} was granted."
        steps = [f"Retry the same call with {retry} to run it."]
    else:
        prompt = (
            f"Approval {record.id} is needed before {record.tool!r} runs{on}; a person "
            "who may approve must grant it."
        )
        steps = [
            f"Ask an approver to grant approval {record.id} (do not request another).",
            f"Then retry the same call with {retry}.",
        ]
    return InteractionRequired(
        interaction=Interaction(
            id=record.id,
            kind="approval",
            prompt=prompt,
            metadata={
                "code": ErrorCode.APPROVAL_REQUIRED.value,
                "approvalId": record.id,
                "status": record.status,
                "replayed": replayed,
                "tool": record.tool,
                "target": record.target,
                "requestId": record.request_id,
                "expiresAt": record.expires_at.isoformat(),
                "nextSteps": steps,
            },
        ),
        gate="approval",
        request_id=record.request_id,
        approval_id=record.id,
        approval_status=record.status,
        expires_at=record.expires_at,
        continuation=continuation,
        next_steps=tuple(steps),
    )


def approval_refusal(record: ApprovalRecord, now: datetime) -> Denied | None:
    """The final ``Denied`` of a request whose approval was denied or expired unused."""
    if record.status == "denied":
        return Denied(
            reason=f"A person ({record.decided_by}) denied approval {record.id} for "
            f"{record.tool!r}"
            + (f": {record.decision_reason}" if record.decision_reason else "")
            + ". This request will not run; do not retry it unless the person changes their "
            "mind (then make a new request with a new requestId).",
            cause="approval_denied",
            approval_id=record.id,
            request_id=record.request_id,
            decided_by=record.decided_by,
            decided_at=record.decided_at,
            decision_reason=record.decision_reason,
            next_steps=("Tell the user the action was denied and why; do not retry this request.",),
        )
    if record.status in ("pending", "approved") and record.expires_at <= now:
        return Denied(
            reason=f"Approval {record.id} for {record.tool!r} expired at "
            f"{record.expires_at.isoformat()} before it was "
            + ("used" if record.status == "approved" else "decided")
            + ". This request will not run; to try again, make a new request with a new "
            "requestId.",
            cause="approval_expired",
            approval_id=record.id,
            request_id=record.request_id,
            decided_by=record.decided_by,
            decided_at=record.expires_at,
            next_steps=(
                "If the action is still wanted, make the call again with a new requestId; "
                "it asks for a new approval.",
            ),
        )
    return None
