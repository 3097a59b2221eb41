"""The action ledger: exactly-once execution, replay, approvals and created-target claims.

A ledgered call runs inside one store transaction: the claim (a unique-key insert),
the handler's writes through ``ctx.db``, the stored outcome and the audit event commit
together. A failure, crash, timeout or cancellation rolls everything back and leaves
the request id free. The unique key is the arbiter; there is no check-then-act.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from .audit import AuditEvent
from .auth import Principal
from .context import ToolContext, discard_after_commit, run_after_commit
from .errors import CharterError, ErrorCode, ToolError
from .outcome import (
    Completed,
    Deferred,
    Failed,
    Interaction,
    InteractionRequired,
    ToolOutcome,
    failed,
    outcome_adapter,
)
from .policy import CONTROL_FIELD, CommandClaim, InvocationControls

if TYPE_CHECKING:
    from .approvals import Approvals
    from .registry import PreparedAction, Registry

__all__ = (
    "ActionStatus",
    "ApprovalRecord",
    "ApprovalStatus",
    "ClaimRecord",
    "DeferredRecord",
    "FaultHook",
    "FaultPoint",
    "LedgerEntry",
    "LedgerGate",
    "LedgerStore",
    "LedgerTransaction",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "interaction_for_approval",
)

_record = ConfigDict(frozen=True, extra="forbid")

ApprovalStatus = Literal["pending", "approved", "denied", "consumed"]


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


class ApprovalRecord(BaseModel):
    """A request for a person's approval, bound to one exact command."""

    model_config = _record

    id: str
    tenant_id: str
    requester_id: str
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
    decided_at: datetime | None = None
    decision_reason: str | None = None
    consumed_by: str | None = None
    """The request id whose execution consumed the approval."""


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
    status: Literal["completed", "deferred", "awaiting_approval", "approved", "denied"]
    outcome: dict[str, Any] | None = None
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
    """Protocol: durable ledger, approvals, claims, deferred records and audit events."""

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
    ) -> bool:
        """Change an approval's status if it is still in ``expected`` (compare-and-set)."""
        ...

    async def get_deferred(self, invocation_id: str) -> DeferredRecord | None:
        """Read a deferred record."""
        ...

    async def settle_deferred(self, invocation_id: str, outcome: str, at: datetime) -> bool:
        """Settle an active deferred record and its ledger entry once."""
        ...

    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete completed entries and decided approvals that expired before ``before``."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class _Key:
    tenant_id: str
    principal_id: str
    request_id: str


class _Rollback(Exception):
    """Leaves the transaction without committing, carrying the outcome to return."""

    def __init__(self, outcome: ToolOutcome) -> None:
        self.outcome = outcome


AuditBuilder = Callable[[ToolOutcome], AuditEvent]

FaultPoint = Literal[
    "after_claim", "after_mutation", "before_commit", "after_commit_before_response"
]
"""Named points in a ledgered call where a test may inject a crash."""

FaultHook = Callable[[FaultPoint], None]
"""Called at each ``FaultPoint`` of a ledgered call; for crash tests only (off by default)."""


class LedgerGate:
    """Applies an action policy: replay, approvals, claim, run and commit in one transaction."""

    def __init__(
        self,
        store: LedgerStore,
        *,
        registry: Registry,
        approvals: Approvals,
        approval_ttl: timedelta,
        retention: timedelta,
        in_progress_wait: float,
        clock: Callable[[], datetime],
        audit_in_transaction: bool,
        fault_hook: FaultHook | None = None,
    ) -> None:
        """Bind the gate to a store and the registry whose actions it runs."""
        self.fault_hook = fault_hook
        self.store = store
        self.registry = registry
        self.approvals = approvals
        self.approval_ttl = approval_ttl
        self.retention = retention
        self.in_progress_wait = in_progress_wait
        self.clock = clock
        self.audit_in_transaction = audit_in_transaction

    async def execute(
        self,
        *,
        prepared: PreparedAction,
        ctx: ToolContext,
        principal: Principal | None,
        controls: InvocationControls,
        fingerprint: str,
        audit: AuditBuilder,
    ) -> tuple[ToolOutcome, bool]:
        """Run a gated action; returns the outcome and whether its audit event was written.

        ``fingerprint`` is ``command_fingerprint`` of the prepared action.
        """
        registered = prepared.tool
        policy = registered.action_policy
        assert policy is not None
        request_id = controls.request_key
        if request_id is None:
            # A ledger-optional tool called without a request id runs without a row.
            return await self._run_unledgered(prepared, ctx), False
        key = _Key(
            tenant_id=ctx.tenant_id,
            principal_id=_principal_id(principal),
            request_id=request_id,
        )
        try:
            approval_id: str | None = None
            if policy.approval != "never":
                # Approvals read a committed outcome first: a replay must not create an
                # approval or answer with a consumed one. Without approvals the claim itself
                # finds a committed entry (and replays it), which saves a connection.
                replay = await self._committed(key, fingerprint)
                if replay is not None:
                    return replay, False
                asked = await self._approve(prepared, controls, principal, key, fingerprint)
                if asked is not None:
                    return asked, False
                approval_id = controls.approval_id
        except StoreBusy:
            return _in_progress(key.request_id), False
        except StoreUnavailable as exc:
            return _unavailable(exc), False
        now = self.clock()
        entry = LedgerEntry(
            tenant_id=key.tenant_id,
            principal_id=key.principal_id,
            request_id=key.request_id,
            tool=registered.name,
            capability_id=registered.capability_id,
            capability_version=registered.capability_version,
            target=prepared.target,
            fingerprint=fingerprint,
            status="in_progress",
            approval_id=approval_id,
            invocation_id=ctx.invocation_id or uuid.uuid4().hex,
            created_at=now,
            expires_at=now + self.retention,
        )
        return await self._claim_and_run(prepared, ctx, controls, entry, audit)

    async def _approve(
        self,
        prepared: PreparedAction,
        controls: InvocationControls,
        principal: Principal | None,
        key: _Key,
        fingerprint: str,
    ) -> ToolOutcome | None:
        """What to answer instead of running, while the call's approval is not usable."""
        # Each approval step below reads after ``_committed`` did: when it finds the
        # approval consumed, the same request may have committed in between (a
        # concurrent resumer), and then it replays like any later retry.
        if controls.approval_id is None:
            asked = await self.approvals.request(
                prepared=prepared,
                tenant_id=key.tenant_id,
                requester_id=key.principal_id,
                request_id=key.request_id,
                fingerprint=fingerprint,
                reason_code=controls.reason_code,
                ttl=self.approval_ttl,
            )
            if _consumed(asked):
                return await self._committed(key, fingerprint) or asked
            return asked
        problem = await self.approvals.check(
            controls.approval_id,
            prepared=prepared,
            tenant_id=key.tenant_id,
            principal_tenant=principal.tenant_id if principal is not None else "",
            requester_id=key.principal_id,
            fingerprint=fingerprint,
        )
        if problem is not None:
            return await self._committed(key, fingerprint) or problem
        return None

    async def _committed(self, key: _Key, fingerprint: str) -> ToolOutcome | None:
        """The replay of the request's committed, unexpired entry, if there is one."""
        existing = await self.store.get_entry(key.tenant_id, key.principal_id, key.request_id)
        if existing is not None and existing.expires_at > self.clock():
            return _replay(existing, fingerprint)
        return None

    async def _claim_and_run(
        self,
        prepared: PreparedAction,
        ctx: ToolContext,
        controls: InvocationControls,
        entry: LedgerEntry,
        audit: AuditBuilder,
    ) -> tuple[ToolOutcome, bool]:
        registered = prepared.tool
        audited = False
        try:
            async with self.store.transaction(wait=self.in_progress_wait) as tx:
                existing = await tx.claim(entry, self.clock())
                if existing is not None:
                    raise _Rollback(_replay(existing, entry.fingerprint))
                self._fault("after_claim")
                if entry.approval_id is not None and not await tx.consume_approval(
                    entry.approval_id, entry.request_id, self.clock()
                ):
                    raise _Rollback(_approval_denied(entry.approval_id, "already_executed"))
                ctx.db = tx.connection
                ctx.db_error = tx.transient_error
                if registered.tool.enforcement == "handler":
                    ctx.handler_action_policy = self.registry.mint_handler_policy(
                        registered, controls, _claim_factory(tx, entry, self.clock)
                    )
                outcome = await self.registry.dispatch_prepared(prepared, ctx)
                self._fault("after_mutation")
                if isinstance(outcome, Deferred):
                    await tx.insert_deferred(
                        DeferredRecord(
                            invocation_id=entry.invocation_id,
                            tenant_id=entry.tenant_id,
                            principal_id=entry.principal_id,
                            request_id=entry.request_id,
                            tool=entry.tool,
                            created_at=entry.created_at,
                        )
                    )
                    outcome = outcome.model_copy(
                        update={"token": outcome.token or {"invocationId": entry.invocation_id}}
                    )
                elif not isinstance(outcome, Completed):
                    raise _Rollback(outcome)
                await tx.complete(
                    entry.model_copy(
                        update={
                            "status": "completed" if isinstance(outcome, Completed) else "deferred",
                            "outcome": outcome_adapter.dump_json(outcome).decode(),
                        }
                    )
                )
                if self.audit_in_transaction:
                    await tx.record_audit(audit(outcome))
                    audited = True
                self._fault("before_commit")
        except _Rollback as rollback:
            discard_after_commit(ctx.after_commit)
            return rollback.outcome, False
        except StoreBusy:
            discard_after_commit(ctx.after_commit)
            return _in_progress(entry.request_id), False
        except StoreUnavailable as exc:
            # Not run after an unknown commit either: after-commit work runs at most once.
            discard_after_commit(ctx.after_commit)
            return _unavailable(exc), False
        except BaseException:
            discard_after_commit(ctx.after_commit)
            raise
        self._fault("after_commit_before_response")
        await run_after_commit(ctx.after_commit, registered.name)
        return outcome, audited

    def _fault(self, point: FaultPoint) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point)

    async def _run_unledgered(self, prepared: PreparedAction, ctx: ToolContext) -> ToolOutcome:
        outcome = await self.registry.dispatch_prepared(prepared, ctx)
        if isinstance(outcome, Completed):
            await run_after_commit(ctx.after_commit, prepared.tool.name)
        else:
            discard_after_commit(ctx.after_commit)
        return outcome

    async def status(self, principal: Principal, request_id: str) -> ActionStatus | None:
        """Where one of the caller's requests stands, within the caller's tenant."""
        key = _canonical_request_id(request_id)
        if key is None:
            return None
        entry = await self.store.get_entry(principal.tenant_id, principal.subject, key)
        if entry is not None and entry.status != "in_progress":
            outcome = (
                outcome_adapter.validate_json(entry.outcome or "null") if entry.outcome else None
            )
            return ActionStatus(
                request_id=key,
                tool=entry.tool,
                status="completed" if entry.status == "completed" else "deferred",
                outcome=outcome.model_dump(mode="json") if outcome is not None else None,
                approval_id=entry.approval_id,
                updated_at=entry.created_at,
            )
        approval = await self.store.find_approval(principal.tenant_id, principal.subject, key)
        if approval is None:
            return None
        status: Literal["awaiting_approval", "approved", "denied"] = (
            "awaiting_approval"
            if approval.status == "pending"
            else "denied"
            if approval.status == "denied"
            else "approved"
        )
        return ActionStatus(
            request_id=key,
            tool=approval.tool,
            status=status,
            approval_id=approval.id,
            updated_at=approval.decided_at or approval.created_at,
        )

    async def settle(self, invocation_id: str, outcome: ToolOutcome) -> bool:
        """Settle a deferred call once."""
        return await self.store.settle_deferred(
            invocation_id, outcome_adapter.dump_json(outcome).decode(), self.clock()
        )


def _principal_id(principal: Principal | None) -> str:
    return principal.subject if principal is not None else "anonymous"


def _canonical_request_id(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        return None


def _replay(entry: LedgerEntry, fingerprint: str) -> ToolOutcome:
    if entry.fingerprint != fingerprint:
        return failed(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "This requestId was already used for a different call; the stored call is not shown.",
            reason="idempotency_key_reused",
        )
    if entry.status == "in_progress" or entry.outcome is None:
        return _in_progress(entry.request_id)
    stored = outcome_adapter.validate_json(entry.outcome)
    if isinstance(stored, (Completed, Failed)):
        return stored.model_copy(update={"replayed": True})
    return stored


def _consumed(asked: ToolOutcome) -> bool:
    """Whether an approval interaction answers with an approval that was already used."""
    if not isinstance(asked, InteractionRequired) or asked.interaction.metadata is None:
        return False
    return asked.interaction.metadata.get("status") == "consumed"


def _in_progress(request_id: str) -> Failed:
    return failed(
        ErrorCode.REQUEST_IN_PROGRESS,
        "The same request is still running; retry with the same requestId shortly.",
        reason="request_in_progress",
        requestId=request_id,
    )


def _unavailable(exc: StoreUnavailable) -> Failed:
    if exc.commit_unknown:
        return failed(
            ErrorCode.PROVIDER_UNAVAILABLE,
            "The database connection was lost while the call was committing, so it may or "
            "may not have taken effect.",
            retryable=True,
            next_steps=(
                "Retry the same call with the same requestId (not a new one): if it took "
                "effect you get its stored result, otherwise it runs now.",
            ),
            reason="commit_outcome_unknown",
        )
    return failed(
        ErrorCode.PROVIDER_UNAVAILABLE,
        "The database is unreachable or dropped the connection before the call committed; "
        "nothing was stored.",
        retryable=True,
        next_steps=("Retry the same call with the same requestId shortly; it runs afresh.",),
        reason="store_unavailable",
    )


def _approval_denied(approval_id: str, reason: str) -> Failed:
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        "The approval does not authorise this exact call.",
        reason=reason,
        approvalId=approval_id,
    )


def _claim_factory(
    tx: LedgerTransaction, entry: LedgerEntry, clock: Callable[[], datetime]
) -> Callable[[], Awaitable[CommandClaim]]:
    taken: list[CommandClaim] = []

    async def claim() -> CommandClaim:
        if taken:
            return taken[0]
        existing = await tx.get_claim(entry.tenant_id, entry.principal_id, entry.request_id)
        if existing is not None:
            if existing.fingerprint != entry.fingerprint:
                raise ToolError(
                    ErrorCode.IDEMPOTENCY_CONFLICT,
                    "This requestId already created something from a different command.",
                    meta={"reason": "idempotency_key_reused"},
                )
            if existing.result_reference is None:
                raise ToolError(
                    ErrorCode.ACTION_POLICY_REQUIRED,
                    "An earlier execution claimed this command but recorded no result; it is "
                    "not run again. Report this request id to the operator.",
                    meta={"reason": "claim_incomplete", "requestId": entry.request_id},
                )
            taken.append(CommandClaim(prior=existing.result_reference, record=_already_recorded))
            return taken[0]
        await tx.insert_claim(
            ClaimRecord(
                tenant_id=entry.tenant_id,
                principal_id=entry.principal_id,
                request_id=entry.request_id,
                capability_id=entry.capability_id,
                fingerprint=entry.fingerprint,
                created_at=clock(),
            )
        )

        async def record(reference: str) -> None:
            if not reference or any(c.isspace() for c in reference) or ":" not in reference:
                raise ToolError(
                    ErrorCode.INVALID_OUTPUT,
                    "A result reference must look like '<type>:<id>' without whitespace.",
                    meta={"reason": "malformed_result_reference"},
                )
            await tx.record_claim_result(
                entry.tenant_id, entry.principal_id, entry.request_id, reference
            )

        taken.append(CommandClaim(prior=None, record=record))
        return taken[0]

    return claim


async def _already_recorded(reference: str) -> None:
    raise ToolError(
        ErrorCode.ACTION_POLICY_REQUIRED,
        "This command's result was recorded by an earlier execution; return claim.prior.",
        meta={"reason": "claim_already_recorded"},
    )


def interaction_for_approval(record: ApprovalRecord, *, replayed: bool) -> InteractionRequired:
    """The ``InteractionRequired`` a caller gets while an approval is outstanding."""
    return InteractionRequired(
        interaction=Interaction(
            id=record.id,
            kind="approval",
            prompt=(
                f"Approval {record.id} is needed before {record.tool!r} runs"
                + (f" on {record.target!r}" if record.target else "")
                + ". An approver (scope charter:approve) must grant it; then retry the same "
                f'call with "{CONTROL_FIELD}": {{"confirmed": true, "approvalId": '
                f'"{record.id}", "requestId": "{record.request_id}"}}.'
            ),
            metadata={
                "code": ErrorCode.APPROVAL_REQUIRED.value,
                "approvalId": record.id,
                "status": record.status,
                "replayed": replayed,
                "tool": record.tool,
                "target": record.target,
                "requestId": record.request_id,
                "expiresAt": record.expires_at.isoformat(),
                "nextSteps": [
                    f"Ask an approver to grant approval {record.id} (do not request another).",
                    f'Then retry with "{CONTROL_FIELD}": {{"confirmed": true, "approvalId": '
                    f'"{record.id}", "requestId": "{record.request_id}"}}.',
                ],
            },
        )
    )
