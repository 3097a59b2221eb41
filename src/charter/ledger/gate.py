"""The action gate: what a ledgered call needs before its handler, and its one transaction.

``admit`` runs before any handler and never writes a ledger row: it replays a committed
request, asks for a confirmation, creates or checks the request's approval, and turns a
person's denial (or an approval that expired unused) into a final ``Denied``. ``run``
claims the request, consumes the approval, runs the handler and commits the claim, the
handler's writes, the stored outcome and the audit event together. A failure, crash,
timeout or cancellation rolls everything back and leaves the request id free. The unique
key is the arbiter; there is no check-then-act.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from .._shortcuts import built
from ..audit import AuditEvent
from ..context import ToolContext, discard_after_commit, run_after_commit
from ..errors import StoreBusy, StoreUnavailable
from ..outcome import Completed, Deferred, Failed, ToolOutcome, outcome_adapter
from ..policy import InvocationControls
from ..registry import PreparedAction, Registry
from ._answers import (
    already_executed,
    approval_paused,
    approval_refusal,
    confirmation_required,
    effect_key_in_use,
    in_progress,
    replay,
    unavailable,
)
from ._claims import claim_factory
from .approval_service import Approvals
from .approvals import ApprovalRecord
from .budgets import Charge, SpendingStore
from .outbox import EffectOutbox, StagedEffects
from .protocols import FaultHook, FaultPoint, LedgerStore, LedgerTransaction
from .records import ActionStatus, DeferredRecord, LedgerEntry, bound_command

__all__ = ("AuditBuilder", "LedgerGate", "LedgerKey")


AuditBuilder = Callable[[ToolOutcome], AuditEvent]
"""Builds the audit event of a call from its outcome (written in the call's transaction)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerKey:
    """Which request a ledgered call is: its tenant, its principal and its request id."""

    tenant_id: str
    principal_id: str
    """The caller's stored identity (``Host`` derives it; ``anonymous`` for none)."""
    request_id: str
    """The request id as a canonical lower-case UUID."""


_SET_ON_CLAIM = frozenset(LedgerEntry.model_fields) - {"outcome"}
"""The fields the gate sets on the entry it claims (``model_fields_set``)."""


class _Rollback(Exception):
    """Leaves the transaction without committing, carrying the outcome to return."""

    def __init__(self, outcome: ToolOutcome) -> None:
        self.outcome = outcome


class _ApprovalUnusable(Exception):
    """The approval could not be consumed at claim time (decided, expired or used since)."""


class LedgerGate:
    """Applies an action policy: replay, confirmation, approvals, claim, run and commit."""

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
        outbox: EffectOutbox | None = None,
    ) -> None:
        """Bind the gate to a store and the registry whose actions it runs.

        ``outbox`` lets handlers stage effects (``ctx.effect``); without one they cannot.
        """
        self.fault_hook = fault_hook
        self.outbox = outbox
        self.store = store
        self.registry = registry
        self.approvals = approvals
        self.approval_ttl = approval_ttl
        self.retention = retention
        self.in_progress_wait = in_progress_wait
        self.clock = clock
        self.audit_in_transaction = audit_in_transaction

    # -- before the handler ---------------------------------------------------------------

    async def admit(
        self,
        *,
        prepared: PreparedAction,
        key: LedgerKey,
        controls: InvocationControls,
        principal_tenant: str,
        fingerprint: str,
        confirmation_missing: bool,
    ) -> ToolOutcome | None:
        """What to answer instead of running, or None when the call may run now.

        Writes no ledger row. For an approval-gated tool it may create the request's
        pending approval (only once the call is confirmed).
        """
        policy = prepared.tool.action_policy
        gated = policy is not None and policy.approval != "never"
        try:
            if not gated:
                if confirmation_missing:
                    return confirmation_required(prepared, fingerprint, key.request_id)
                return None
            # A committed request replays before anything else: its approval is consumed.
            replay = await self.replay_of(key, fingerprint)
            if replay is not None:
                return replay
            if confirmation_missing:
                # A request a person already refused stays refused, confirmed or not.
                asked = await self.approvals.find(key.tenant_id, key.principal_id, key.request_id)
                refused = approval_refusal(asked, self.clock()) if asked is not None else None
                if refused is not None and asked is not None and asked.fingerprint == fingerprint:
                    return refused
                return confirmation_required(prepared, fingerprint, key.request_id)
            if controls.approval_id is None:
                return await self._ask(prepared, key, controls, fingerprint)
            return await self._check(
                controls.approval_id, prepared, key, principal_tenant, fingerprint
            )
        except StoreBusy:
            return in_progress(key.request_id)
        except StoreUnavailable as exc:
            return unavailable(exc)

    async def _ask(
        self,
        prepared: PreparedAction,
        key: LedgerKey,
        controls: InvocationControls,
        fingerprint: str,
    ) -> ToolOutcome:
        """Create (or read back) the request's approval and answer where it stands."""
        asked = await self.approvals.request(
            prepared=prepared,
            tenant_id=key.tenant_id,
            requester_id=key.principal_id,
            request_id=key.request_id,
            fingerprint=fingerprint,
            reason_code=controls.reason_code,
            ttl=self.approval_ttl,
        )
        if isinstance(asked, Failed):
            return asked
        record, created = asked
        return await self._standing(record, key, fingerprint, replayed=not created)

    async def _check(
        self,
        approval_id: str,
        prepared: PreparedAction,
        key: LedgerKey,
        principal_tenant: str,
        fingerprint: str,
    ) -> ToolOutcome | None:
        """Check the approval the call names; None when it is granted, unexpired and unused."""
        checked = await self.approvals.check(
            approval_id,
            prepared=prepared,
            tenant_id=key.tenant_id,
            principal_tenant=principal_tenant,
            requester_id=key.principal_id,
            request_id=key.request_id,
            fingerprint=fingerprint,
        )
        if isinstance(checked, Failed):
            # The same request may have committed in between (a concurrent resumer).
            return await self.replay_of(key, fingerprint) or checked
        if checked.status_at(self.clock()) == "approved":
            return None
        return await self._standing(checked, key, fingerprint, replayed=True)

    async def _standing(
        self, record: ApprovalRecord, key: LedgerKey, fingerprint: str, *, replayed: bool
    ) -> ToolOutcome:
        """The answer for a request whose approval is not usable right now."""
        refused = approval_refusal(record, self.clock())
        if refused is not None:
            return refused
        if record.status == "consumed":
            # Consumed by this very request (approvals are bound to it): it committed
            # after our replay check, so it replays now like any later retry.
            return await self.replay_of(key, fingerprint) or already_executed(record.id)
        return approval_paused(record, replayed=replayed)

    async def replay_of(self, key: LedgerKey, fingerprint: str) -> ToolOutcome | None:
        """The replay of the request's committed, unexpired entry, if there is one."""
        existing = await self.store.get_entry(key.tenant_id, key.principal_id, key.request_id)
        if existing is not None and existing.expires_at > self.clock():
            return replay(existing, fingerprint)
        return None

    # -- the transaction ------------------------------------------------------------------

    async def run(
        self,
        *,
        prepared: PreparedAction,
        ctx: ToolContext,
        controls: InvocationControls,
        key: LedgerKey,
        fingerprint: str,
        approval_id: str | None,
        audit: AuditBuilder,
        charge: Charge | None = None,
    ) -> tuple[ToolOutcome, bool]:
        """Claim, run and commit an admitted call.

        Returns the outcome and whether its audit event was written in the transaction.
        With a ``charge`` (a ``SpendingStore`` only), the transaction spends it as it opens.

        Raises:
            BudgetRefused: The charge did not fit; nothing ran, nothing is spent.
            BudgetUnavailable: The charge could not be spent; nothing ran.
        """
        now = self.clock()
        # Every field, in the model's order, of a value the gate made itself and of the
        # right type: no validation needed (see _shortcuts).
        fields: dict[str, Any] = {
            "tenant_id": key.tenant_id,
            "principal_id": key.principal_id,
            "request_id": key.request_id,
            **bound_command(prepared, fingerprint),
            "status": "in_progress",
            "outcome": None,
            "approval_id": approval_id,
            "invocation_id": ctx.invocation_id or uuid.uuid4().hex,
            "created_at": now,
            "expires_at": now + self.retention,
        }
        entry = built(LedgerEntry, fields, set(_SET_ON_CLAIM))
        try:
            return await self._claim_and_run(prepared, ctx, controls, entry, audit, charge)
        except _ApprovalUnusable:
            pass
        # Between admission and the claim the approval was revoked, expired or used by a
        # concurrent resumer of this request: answer as a retry would now.
        try:
            assert approval_id is not None
            record = await self.store.get_approval(approval_id)
            if record is None:
                return already_executed(approval_id), False
            return await self._standing(record, key, fingerprint, replayed=True), False
        except StoreBusy:
            return in_progress(key.request_id), False
        except StoreUnavailable as exc:
            return unavailable(exc), False

    async def run_unledgered(self, prepared: PreparedAction, ctx: ToolContext) -> ToolOutcome:
        """Run a call that has no ledger row (no request id, or a tool that is never ledgered)."""
        outcome = await self.registry.dispatch_prepared(prepared, ctx)
        if not ctx.after_commit:  # almost every call: nothing registered with wait_until
            return outcome
        if isinstance(outcome, Completed):
            await run_after_commit(ctx.after_commit, prepared.tool.name)
        else:
            discard_after_commit(ctx.after_commit)
        return outcome

    async def _claim_and_run(
        self,
        prepared: PreparedAction,
        ctx: ToolContext,
        controls: InvocationControls,
        entry: LedgerEntry,
        audit: AuditBuilder,
        charge: Charge | None,
    ) -> tuple[ToolOutcome, bool]:
        registered = prepared.tool
        audited = False
        noticed: Sequence[object] = ()
        staged: StagedEffects | None = None
        try:
            async with self._transaction(charge) as tx:
                existing = await tx.claim(entry, self.clock())
                if existing is not None:
                    raise _Rollback(replay(existing, entry.fingerprint))
                self._fault("after_claim")
                noticed = await self._consume(tx, entry)
                ctx.db = tx.connection
                ctx.db_error = tx.transient_error
                staged = self._staging(entry)
                ctx.effect_stager = staged
                if registered.tool.enforcement == "handler":
                    ctx.handler_action_policy = self.registry.mint_handler_policy(
                        registered, controls, claim_factory(tx, entry, self.clock)
                    )
                outcome = await self.registry.dispatch_prepared(prepared, ctx)
                self._fault("after_mutation")
                if isinstance(outcome, Deferred):
                    await tx.insert_deferred(DeferredRecord.of(entry))
                    outcome = outcome.model_copy(
                        update={"token": outcome.token or {"invocationId": entry.invocation_id}}
                    )
                elif not isinstance(outcome, Completed):
                    raise _Rollback(outcome)
                if staged is not None and (taken := await staged.write(tx)) is not None:
                    raise _Rollback(effect_key_in_use(taken))
                if self.audit_in_transaction:
                    # Before complete(): a SQL store writes both in one statement.
                    await tx.record_audit(audit(outcome))
                    audited = True
                await tx.complete(
                    entry.model_copy(
                        update={
                            "status": "completed" if isinstance(outcome, Completed) else "deferred",
                            "outcome": outcome_adapter.dump_json(outcome).decode(),
                        }
                    )
                )
                self._fault("before_commit")
        except _Rollback as rollback:
            discard_after_commit(ctx.after_commit)
            return rollback.outcome, False
        except StoreBusy:
            discard_after_commit(ctx.after_commit)
            return in_progress(entry.request_id), False
        except StoreUnavailable as exc:
            # Not run after an unknown commit either: after-commit work runs at most once.
            discard_after_commit(ctx.after_commit)
            return unavailable(exc), False
        except BaseException:
            discard_after_commit(ctx.after_commit)
            raise
        finally:
            ctx.effect_stager = None
        self._fault("after_commit_before_response")
        if staged is not None and staged.records and self.outbox is not None:
            await self.outbox.deliver(staged.records)
        notices = self.approvals.notices
        if notices is not None and noticed:
            await notices.release(noticed)
        await run_after_commit(ctx.after_commit, registered.name)
        return outcome, audited

    def _transaction(self, charge: Charge | None) -> AbstractAsyncContextManager[LedgerTransaction]:
        """The call's transaction; with a ``charge``, one that spends it as it opens."""
        if charge is None:
            return self.store.transaction(wait=self.in_progress_wait)
        # The host charges a transaction only on a store that is a SpendingStore.
        spending = cast(SpendingStore, self.store)
        return spending.spending_transaction(wait=self.in_progress_wait, charge=charge)

    async def _consume(self, tx: LedgerTransaction, entry: LedgerEntry) -> Sequence[object]:
        """Consume the call's approval and stage its notices, in the call's transaction.

        Raises:
            _ApprovalUnusable: the approval is no longer granted and unexpired.
        """
        if entry.approval_id is None:
            return ()
        if not await tx.consume_approval(entry.approval_id, entry.request_id, self.clock()):
            raise _ApprovalUnusable
        notices = self.approvals.notices
        if notices is None:
            return ()
        record = await self.store.get_approval(entry.approval_id)
        if record is None:
            return ()
        consumed = record.model_copy(update={"status": "consumed", "consumed_by": entry.request_id})
        return await notices.stage(tx, "consumed", consumed, by=entry.principal_id)

    def _staging(self, entry: LedgerEntry) -> StagedEffects | None:
        """Where this call's ``ctx.effect`` stages its effects (None: no outbox)."""
        if self.outbox is None:
            return None
        return StagedEffects(
            registry=self.registry, outbox=self.outbox, entry=entry, clock=self.clock
        )

    def _fault(self, point: FaultPoint) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point)

    # -- afterwards -----------------------------------------------------------------------

    async def status(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ActionStatus | None:
        """Where one request stands (None when nothing is known of it)."""
        entry = await self.store.get_entry(tenant_id, principal_id, request_id)
        if entry is not None and entry.status != "in_progress":
            outcome = outcome_adapter.validate_json(entry.outcome) if entry.outcome else None
            return ActionStatus(
                request_id=request_id,
                tool=entry.tool,
                status="completed" if entry.status == "completed" else "deferred",
                outcome=outcome.model_dump(mode="json") if outcome is not None else None,
                approval_id=entry.approval_id,
                updated_at=entry.created_at,
            )
        approval = await self.store.find_approval(tenant_id, principal_id, request_id)
        if approval is None:
            return None
        refused = approval_refusal(approval, self.clock())
        status: Literal["awaiting_approval", "approved", "denied", "expired"]
        if refused is not None:
            status = "denied" if refused.cause == "approval_denied" else "expired"
        elif approval.status == "pending":
            status = "awaiting_approval"
        else:
            # Approved, or consumed by a call of this request that is still committing.
            status = "approved"
        return ActionStatus(
            request_id=request_id,
            tool=approval.tool,
            status=status,
            outcome=refused.model_dump(mode="json") if refused is not None else None,
            approval_id=approval.id,
            updated_at=approval.decided_at or approval.created_at,
        )
