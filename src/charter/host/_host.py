"""The host: the one pipeline every transport calls (``invoke``, or ``prepare`` then ``execute``).

The steps every call goes through, in order, are ``_pipeline``'s. The host is that
pipeline, built with what it needs (the ledger gate, approvals, budgets, effects, notifications,
audit), and is the one place transports call: discovery, the pipeline, continuing a pause
(``resume``), asking for an approval (``request_approval``), settling a deferred call
(``settle``) and where requests stand.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from .._limits import PayloadLimits
from .._refusals import RefusalAggregator
from .._telemetry import Telemetry
from ..audit import AuditLosses, AuditSink, AuditTrail, AuditWatch, MemoryAuditSink
from ..auth import (
    AccessCatalog,
    AuthenticationUnavailable,
    Authenticator,
    Credentials,
    Principal,
)
from ..errors import ConfigurationError, StoreBusy, StoreUnavailable
from ..ledger import (
    ActionStatus,
    ApprovalRecord,
    Approvals,
    FaultHook,
    LedgerGate,
    LedgerStore,
    MemoryStore,
)
from ..ledger.budgets import BudgetReport, BudgetStore, MemoryBudgets
from ..limits import Limit, check_limits
from ..manifest import deprecation_warnings
from ..outcome import (
    Failed,
    InteractionRequired,
    ToolOutcome,
)
from ..policy import InvocationControls
from ..registry import Registry
from . import _pauses, _serving, _settle, _standing
from ._access import ScopeChecks
from ._budgets import Budgets
from ._calls import (
    NO_CALL_OPTIONS,
    CallOptions,
    ContextFactory,
    Settlement,
    canonical_request_id,
)
from ._content import ContentContextFactory, HostContent
from ._effects import Effects
from ._notices import Notifications, Notifier
from ._pipeline import Pipeline, principal_id

__all__ = ("Host",)

logger = logging.getLogger("charter")

AUDIT_ALARM = timedelta(minutes=1)
"""How long ``audit_losses().failing`` (and so ``/readyz``) stays on after a lost event."""


class Host(Pipeline):
    """Runs every tool call through one pipeline: auth, tenancy, controls, ledger, audit.

    The host is the pipeline (``invoke``, ``prepare``, ``execute``, ``discard``,
    ``callable_tools``) built with what it needs, plus the services around it.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        store: LedgerStore | None = None,
        authenticator: Authenticator | None = None,
        context_factory: ContextFactory | None = None,
        audit: AuditSink | None = None,
        limits: PayloadLimits | None = None,
        admin_scope: str = "admin",
        approver_scope: str = "charter:approve",
        admin_may_approve: bool = False,
        access_catalog: AccessCatalog | None = None,
        approval_ttl: timedelta = timedelta(hours=1),
        retention: timedelta = timedelta(hours=24),
        allow_self_approval: bool = False,
        in_progress_wait: float = 5.0,
        anonymous_audit_window: timedelta = timedelta(minutes=1),
        rate_limits: Sequence[Limit] = (),
        rate_limited_audit_window: timedelta = timedelta(minutes=1),
        clock: Callable[[], datetime] | None = None,
        fault_hook: FaultHook | None = None,
        effect_lease: timedelta = timedelta(seconds=60),
        notifiers: Sequence[Notifier] = (),
        console_url: str | None = None,
        notify_attempts: int = 8,
        notify_backoff: timedelta = timedelta(seconds=2),
        content_context: ContentContextFactory | None = None,
    ) -> None:
        """Build a host around a registry.

        Args:
            registry: the tools.
            store: the durable ledger; defaults to an in-memory store (not durable).
            authenticator: turns transport credentials into principals.
            context_factory: builds the domain context; defaults to a plain ``ToolContext``.
            audit: receives one event per call; defaults to the store when it records
                audit events, else an in-memory sink.
            limits: limits on untrusted argument payloads.
            admin_scope: the scope that satisfies every scope check (never tenancy,
                confirmation, approval or validation).
            approver_scope: the scope an approver needs, held literally (no wildcard) by a
                person (``Principal.kind``).
            admin_may_approve: let a person holding the admin scope decide approvals too.
            access_catalog: scopes that wildcard grants do not satisfy.
            approval_ttl: how long a pending or granted approval stays usable.
            retention: how long completed outcomes are kept for replay.
            allow_self_approval: let requesters approve their own requests.
            in_progress_wait: seconds a duplicate waits for a running request before
                ``REQUEST_IN_PROGRESS``.
            anonymous_audit_window: refused anonymous calls of one kind are recorded as
                one audit event (with a ``count``) per window; zero records each.
            rate_limits: budgets every call spends, across all tools (``RateLimit``,
                ``InFlight``); a tool's own ``limits`` apply besides. Buckets live on the
                store when it keeps them (``SqlStore``: shared by every replica), else in
                this host.
            rate_limited_audit_window: ``RATE_LIMITED`` refusals of one caller and tool
                are recorded as one audit event (with a ``count``) per window; zero
                records each.
            clock: the current UTC time (injected by tests).
            fault_hook: called at named points of a ledgered call, for crash-injection
                tests only (see ``charter.ledger.FaultPoint``).
            effect_lease: how long one attempt at an effect is owned by whoever started
                it (this process right after commit, or a worker); a process that dies
                mid-attempt leaves it to a worker once this has passed.
            notifiers: where approval events go (``charter.notify.Webhook``,
                ``charter.notify.Slack``); each change's deliveries are effects written in
                the change's own transaction (docs/notifications.md).
            console_url: the public base URL of this server; events link to the
                approval's console card under it.
            notify_attempts: attempts at one notification before it is parked dead.
            notify_backoff: the delay before a notification's second attempt; it doubles
                each time (with jitter).
            content_context: builds the domain context of resource, prompt and completion
                handlers from the caller (``host.content``); defaults to a plain
                ``ToolContext``.

        Raises:
            ConfigurationError: retention is shorter than the approval lifetime, a rate
                limit is malformed, the effect lease is not positive, or two notifiers
                share a name.
        """
        if retention < approval_ttl:
            raise ConfigurationError(
                "retention must be at least the approval lifetime, so an approved request "
                "can still be replayed"
            )
        self.registry = registry
        self.store: LedgerStore = store if store is not None else MemoryStore()
        self.authenticator = authenticator
        self.limits = limits or PayloadLimits()
        self.admin_scope = admin_scope
        self.access_catalog = access_catalog
        # A partial, not a lambda: no Python frame on each of the calls that read it.
        self._clock = clock or functools.partial(datetime.now, UTC)
        store_sink = self.store if isinstance(self.store, _StoreAuditSink) else None
        # ``is not None``, not ``or``: a sink that defines ``__len__`` is falsy when empty.
        if audit is not None:
            self.audit: AuditSink = audit
        elif store_sink is not None:
            self.audit = store_sink
        else:
            self.audit = MemoryAuditSink()
        # Every event the host writes goes through the watch, which counts the lost ones.
        self._audit_watch = AuditWatch(self.audit, clock=self._clock, window=AUDIT_ALARM)
        self.effects = Effects(
            store=self.store,
            registry=registry,
            audit=self._audit_watch,
            clock=self._clock,
            lease=effect_lease,
            telemetry=Telemetry(),
            # Approvals are built below (they need the notifications, which need this).
            oversees=lambda principal: self.approvals.oversees(principal),
            admin_scope=admin_scope,
        )
        """The effect outbox: enqueue outside handlers, run workers, list and re-drive."""
        self.notifications = Notifications(
            notifiers,
            effects=self.effects,
            store=self.store,
            console_url=console_url,
            clock=self._clock,
            attempts=notify_attempts,
            backoff=notify_backoff,
            wait=in_progress_wait,
        )
        """The approval notifiers; each delivery is an effect (docs/notifications.md)."""
        self.approvals = Approvals(
            self.store,
            registry=registry,
            approver_scope=approver_scope,
            admin_scope=admin_scope,
            admin_may_approve=admin_may_approve,
            allow_self_approval=allow_self_approval,
            audit=self._audit_watch,
            clock=self._clock,
            notices=self.notifications if notifiers else None,
        )
        self._gate = LedgerGate(
            self.store,
            registry=registry,
            approvals=self.approvals,
            approval_ttl=approval_ttl,
            retention=retention,
            in_progress_wait=in_progress_wait,
            clock=self._clock,
            # Audit rows commit with the action when the store is the audit sink.
            audit_in_transaction=store_sink is not None and self.audit is store_sink,
            fault_hook=fault_hook,
            outbox=self.effects.outbox,
        )
        self._budgets = Budgets(
            store=self.store if isinstance(self.store, BudgetStore) else MemoryBudgets(),
            host_limits=check_limits("the host's rate_limits", rate_limits),
            clock=self._clock,
        )
        access = ScopeChecks(catalog=access_catalog, admin_scope=admin_scope)
        super().__init__(
            registry=registry,
            gate=self._gate,
            access=access,
            limits=self.limits,
            context_factory=context_factory,
            audit=self._audit_watch,
            refusals=_aggregator(anonymous_audit_window, self._clock),
            rate_refusals=_aggregator(rate_limited_audit_window, self._clock),
            budgets=self._budgets,
            clock=self._clock,
        )

        self.content = HostContent(
            registry.content,
            context_factory=content_context,
            audit=self._audit_watch,
            access=access,
            clock=self._clock,
            limits=self.limits,
        )
        """Resources, resource templates and prompts under this host's authority."""

    # -- authentication and discovery -------------------------------------------------------

    async def authenticate(self, credentials: Credentials) -> Principal | None:
        """Turn credentials into a principal (None when anonymous or no authenticator).

        Raises:
            AuthenticationFailed: the credentials are present but invalid.
            AuthenticationUnavailable: they could not be checked now (the authenticator's
                store is unavailable or busy, or the authenticator said so).
        """
        if self.authenticator is None:
            return None
        try:
            return await self.authenticator.authenticate(credentials)
        except (StoreUnavailable, StoreBusy) as exc:
            reason = "store_busy" if isinstance(exc, StoreBusy) else "store_unavailable"
            raise AuthenticationUnavailable(
                "The credentials could not be checked: the key store is unavailable. "
                "Retry shortly.",
                reason=reason,
            ) from exc

    def discover(
        self, principal: Principal | None, audience: str | None = None
    ) -> list[dict[str, Any]]:
        """The manifest entries of the tools ``principal`` may call.

        An entry whose deprecation (or an alias's) passed its sunset date carries
        ``warnings`` saying so.
        """
        today = self._clock().date()
        entries = []
        for registered in self.callable_tools(principal, audience):
            warnings = deprecation_warnings(registered.entry, today)
            entries.append(
                {**registered.entry, "warnings": warnings} if warnings else registered.entry
            )
        return entries

    # -- pauses (invoke, prepare, execute and discard are Pipeline's) ------------------------

    async def resume(
        self,
        paused: InteractionRequired,
        name: str,
        arguments: object,
        principal: Principal | None,
        *,
        approved: bool = True,
        value: object = None,
        controls: InvocationControls | None = None,
        call: CallOptions | None = None,
    ) -> ToolOutcome:
        """Continue a paused call with a person's answer: the one way every transport resumes.

        Args:
            paused: the ``InteractionRequired`` the call answered with.
            name: the tool, as in the paused call.
            arguments: the paused call's arguments, unchanged.
            principal: the caller, as in the paused call.
            approved: whether the person confirmed (the confirmation gate), wants to go on
                (the approval gate: an approver still decides), or approved/answered the
                handler's question.
            value: the answer to a handler's question (``interaction.kind == "response"``).
            controls: the transport's own controls for the call, as in the paused call.
            call: transport facts, as for ``invoke``.

        Returns:
            The call's outcome now: it runs when its gate is passed; a confirmation the
            person declined is ``Denied`` (``user_declined``); an approval still pending
            answers the same pause again.
        """
        return await _pauses.resume(
            self,
            self.limits,
            paused,
            name,
            arguments,
            principal,
            approved=approved,
            value=value,
            controls=controls,
            call=call or NO_CALL_OPTIONS,
        )

    async def request_approval(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        *,
        request_id: str,
        reason_code: str | None = None,
        call: CallOptions | None = None,
    ) -> ApprovalRecord | ToolOutcome:
        """Ask a person's approval of one exact call before making it; never runs anything.

        ``prepare`` with the call confirmed: for a tool whose policy asks approval, the
        request's approval record (new or existing). Otherwise the outcome says why there
        is nothing to approve: ``INVALID_INPUT`` (``approval_not_required``) for a call
        that would simply run, or what ``prepare`` answered (a replay, a denial, an error).
        """
        return await _pauses.request_approval(
            self,
            self.store,
            name,
            arguments,
            principal,
            request_id=request_id,
            reason_code=reason_code,
            call=call,
        )

    # -- where requests stand ---------------------------------------------------------------

    async def audit_events(
        self, principal: Principal, *, tenant: str | None = None, limit: int = 100
    ) -> AuditTrail | Failed:
        """Recent audit events the caller may read, newest first.

        The caller's own tenant by default; only the admin scope may name another tenant.
        Approvers and admins see every event of the tenant, other callers their own.
        """
        return await _standing.audit_events(
            self.audit,
            self.approvals,
            principal,
            tenant=tenant,
            limit=limit,
            admin_scope=self.admin_scope,
        )

    async def budget_usage(
        self, principal: Principal, *, tenant: str | None = None
    ) -> BudgetReport | Failed:
        """The rate limits and quotas being spent by calls for one tenant.

        The caller's own tenant by default; only the admin scope may name another.
        Approvers and admins see every budget of the tenant, other callers their own and
        the tenant's. A whole tool's budgets (``key="tool"``) belong to no tenant: the
        operator sees them with ``charter limits``.
        """
        return await _standing.budget_usage(
            self._budgets, self.approvals, principal, tenant=tenant, admin_scope=self.admin_scope
        )

    async def action_status(
        self, principal: Principal, request_id: str, *, tenant: str | None = None
    ) -> ActionStatus | None:
        """Where one of the caller's requests stands (None if unknown to this caller).

        A completed request shows its stored outcome; one refused by a person, or whose
        approval expired unused, shows its ``Denied``. ``tenant`` names the tenant a
        delegated request acted for (default: the caller's own); only the caller's own
        requests are ever found, whichever tenant is named.
        """
        key = canonical_request_id(request_id)
        if key is None:
            return None
        where = tenant if tenant is not None else principal.tenant_id
        return await self._gate.status(where, principal_id(principal), key)

    async def settle(
        self, invocation_id: str, outcome: ToolOutcome, *, tenant: str | None = None
    ) -> Settlement:
        """Complete a deferred call once with a completed, denied or failed outcome.

        A completed outcome's output is validated like every completed call's: output that
        does not match the tool's output model is refused (``INVALID_OUTPUT``) and nothing
        is stored. The result is falsy when nothing was stored, with the reason.

        ``tenant`` names the tenant of the caller settling (the bridges pass their
        principal's): a deferred call neither made by that tenant nor acting for it is
        refused like an unknown one (``NOT_FOUND``, ``deferred_not_found``) and left as
        it is. None, for the application itself (an external system's webhook), settles
        any.
        """
        return await _settle.settle(
            self.store, self.registry, invocation_id, outcome, self._clock(), tenant=tenant
        )

    def audit_losses(self) -> AuditLosses:
        """The audit events this host could not record; ``/readyz`` fails while it loses them."""
        return self._audit_watch.losses()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Host]:
        """Serve with the store open: what an ASGI app's lifespan enters.

        A store that must be opened (``SqlStore``) and was handed over unopened is opened
        here, and closed on the way out; a store the application opened itself is left as
        it is (its owner closes it). Either way the way out first waits for the calls of
        tools that are not cancellable still running, and records the pending audit counts.

        Raises:
            RuntimeError: the store was already closed.
            StoreError: opening it failed (``SqlStore.open``).
        """
        async with _serving.opened((self.store, self.audit), drain=self._drain):
            yield self

    async def aclose(self) -> None:
        """Record pending audit counts; release the store's connections and worker threads."""
        await self._drain()
        await self.notifications.aclose()
        self.registry.close()
        close = getattr(self.store, "aclose", None)
        if close is not None:
            await close()


@runtime_checkable
class _StoreAuditSink(AuditSink, Protocol):
    """A store that also keeps audit events (then they commit with the action)."""


def _aggregator(window: timedelta, clock: Callable[[], datetime]) -> RefusalAggregator | None:
    return RefusalAggregator(window, clock) if window > timedelta(0) else None
