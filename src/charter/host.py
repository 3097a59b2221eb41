"""The host: one invocation pipeline that every transport calls.

``Host.invoke`` runs these steps in order; checks before the ledger never leave a row,
so a corrected retry with the same request id works:

1. Limits on the raw payload (size, depth, width, NaN/Infinity, duplicate keys).
2. Find the tool. A tool outside the caller's audience answers like an unknown one.
3. Auth mode and required scopes (AND; the admin scope satisfies scope checks only,
   and each such use is audited).
4. Reserved controls: ``_charter`` is taken out of the arguments and parsed strictly,
   and merged with the transport's controls (which must agree).
5. Tenancy: the principal's tenant, or, for a delegable tool called with the admin
   scope, the tenant named in ``tenant_field`` or ``_charter.onBehalfOf`` (audited as
   delegated). Any other foreign tenant is ``AUTHORIZATION_DENIED``.
6. The context (factory, then the host's facts); input validation and target
   resolution (``Registry.prepare_action``); the request id a write needs; the command
   fingerprint.
7. Confirmation; then the action gate (ledger, approvals) and the handler under its
   timeout and cancellation; then output validation.
8. Audit event, trace span and metrics; return the outcome.
"""

from __future__ import annotations

import inspect
import logging
import os
import secrets
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from ._canonical import NonCanonicalValueError
from ._limits import PayloadLimits, PayloadRejected, check_value, parse_json
from ._refusals import RefusalAggregator
from ._safe_log import log_exception
from ._telemetry import Telemetry
from .audit import AuditEvent, AuditSink, AuditTrail, MemoryAuditSink
from .auth import (
    AccessCatalog,
    AuthenticationUnavailable,
    Authenticator,
    Credentials,
    Principal,
    ScopeCheck,
    audience_allows,
    check_auth_mode,
    enforce_audience,
    js_trim,
    missing_scopes,
    resolve_tenant,
)
from .context import (
    CancelSignal,
    LogSink,
    ProgressSink,
    ResumeInfo,
    Sampler,
    ToolContext,
    discard_after_commit,
)
from .errors import ConfigurationError, ErrorCode, StoreBusy, StoreUnavailable, ToolError
from .ledger import (
    ActionStatus,
    ApprovalRecord,
    Approvals,
    FaultHook,
    LedgerGate,
    LedgerKey,
    LedgerStore,
    MemoryStore,
)
from .ledger._answers import confirmation_required
from .manifest import RegisteredTool, deprecation_warnings
from .outcome import (
    Completed,
    Continuation,
    Denied,
    Failed,
    InteractionRequired,
    ToolOutcome,
    failed,
    failed_from_error,
    outcome_adapter,
)
from .policy import CONTROL_FIELD, InvocationControls, command_fingerprint
from .registry import PreparedAction, Registry, finish_output

__all__ = (
    "CallOptions",
    "ContextFactory",
    "Host",
    "PreparedCall",
    "Settlement",
    "canonical_request_id",
    "derive_request_id",
)

logger = logging.getLogger("charter")

ContextFactory = Callable[
    [Principal | None, RegisteredTool, InvocationControls], ToolContext | Awaitable[ToolContext]
]
"""Builds the domain context for a call. Usage ``ContextFactory`` (sync or async)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallOptions:
    """Transport facts about one call: its ids, signals and where progress goes."""

    cancel: CancelSignal | None = None
    progress_sink: ProgressSink | None = None
    log_sink: LogSink | None = None
    sampler: Sampler | None = None
    """Asks the caller's model for a completion (MCP sampling), when the transport can."""
    audience: str | None = None
    """The audience the call is made for; defaults to the principal's actor type."""
    session_id: str | None = None
    turn_id: str | None = None
    step_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None
    resume: ResumeInfo | None = None
    state: object = None


@dataclass(eq=False, kw_only=True, slots=True, weakref_slot=True)
class PreparedCall:
    """A call that passed every check before its handler; ``Host.execute`` runs it once.

    Only the host that prepared it can execute it (identity, not structure, decides), and
    only once.
    """

    action: PreparedAction
    """The validated input and resolved target."""
    context: ToolContext
    """The handler's context, built for this call."""
    principal: Principal | None
    controls: InvocationControls
    fingerprint: str | None
    """The command fingerprint (tools with an action policy)."""
    ledger_key: LedgerKey | None
    """The ledger row the call will claim, or None when it runs unledgered."""
    trace: _Trace = field(repr=False)

    @property
    def tool(self) -> RegisteredTool:
        """The tool the call runs."""
        return self.action.tool

    @property
    def name(self) -> str:
        """The tool's canonical name."""
        return self.action.tool.name

    @property
    def input(self) -> BaseModel:
        """The validated input model."""
        return self.action.input

    @property
    def target(self) -> str | None:
        """The resolved action target, when the policy has one."""
        return self.action.target

    @property
    def request_id(self) -> str | None:
        """The request id in canonical form, if the call has one."""
        return self.controls.request_key


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """What ``Host.settle`` did: whether it stored the outcome and, if not, why."""

    settled: bool
    stored: ToolOutcome | None = None
    """The outcome as stored (a completed output in its validated, serialised form)."""
    refused: Failed | None = None
    """Why nothing was stored (unknown call, already settled, output that breaks the schema)."""

    def __bool__(self) -> bool:
        return self.settled


class Host:
    """Runs every tool call through one pipeline: auth, tenancy, controls, ledger, audit."""

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
        clock: Callable[[], datetime] | None = None,
        fault_hook: FaultHook | None = None,
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
            clock: the current UTC time (injected by tests).
            fault_hook: called at named points of a ledgered call, for crash-injection
                tests only (see ``charter.ledger.FaultPoint``).

        Raises:
            ConfigurationError: retention is shorter than the approval lifetime.
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
        self._context_factory = context_factory
        self._scope_checks: dict[
            tuple[frozenset[str], tuple[str, ...], AccessCatalog | None, str], ScopeCheck
        ] = {}
        self._clock = clock or (lambda: datetime.now(UTC))
        self._prepared: weakref.WeakSet[PreparedCall] = weakref.WeakSet()
        self._refusals = (
            RefusalAggregator(anonymous_audit_window, self._clock)
            if anonymous_audit_window > timedelta(0)
            else None
        )
        store_sink = self.store if isinstance(self.store, _StoreAuditSink) else None
        # ``is not None``, not ``or``: a sink that defines ``__len__`` is falsy when empty.
        if audit is not None:
            self.audit: AuditSink = audit
        elif store_sink is not None:
            self.audit = store_sink
        else:
            self.audit = MemoryAuditSink()
        self._telemetry = Telemetry()
        self.approvals = Approvals(
            self.store,
            registry=registry,
            approver_scope=approver_scope,
            admin_scope=admin_scope,
            admin_may_approve=admin_may_approve,
            allow_self_approval=allow_self_approval,
            audit=self.audit,
            clock=self._clock,
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
        )

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

    def callable_tools(
        self, principal: Principal | None, audience: str | None = None
    ) -> list[RegisteredTool]:
        """The registered tools ``principal`` may call, in registration order."""
        caller_audience = _caller_audience(principal, audience)
        return [
            t
            for t in self.registry.tools()
            if _visible(t, caller_audience) and self._authorized(t, principal)
        ]

    def _authorized(self, registered: RegisteredTool, principal: Principal | None) -> bool:
        tool = registered.tool
        if not check_auth_mode(tool.auth, principal, admin_scope=self.admin_scope).ok:
            return False
        if tool.auth == "public" or principal is None:
            return True
        return self._scope_check(principal, registered).allowed

    def _scope_check(self, principal: Principal, registered: RegisteredTool) -> ScopeCheck:
        """``missing_scopes`` for this caller and tool, remembered per set of scopes.

        The decision is a pure function of the key, and every part of the key is
        immutable (the principal's frozenset, the tool's tuple, the frozen catalog, the
        admin scope), so a remembered answer is the answer. The cache is bounded: past
        ``_SCOPE_CACHE_SIZE`` entries it starts again.
        """
        key = (principal.scopes, registered.required_scopes, self.access_catalog, self.admin_scope)
        check = self._scope_checks.get(key)
        if check is None:
            check = missing_scopes(
                principal.scopes,
                registered.required_scopes,
                self.access_catalog,
                admin_scope=self.admin_scope,
            )
            if len(self._scope_checks) >= _SCOPE_CACHE_SIZE:
                self._scope_checks.clear()
            self._scope_checks[key] = check
        return check

    # -- the pipeline -----------------------------------------------------------------------

    async def invoke(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        controls: InvocationControls | None = None,
        *,
        call: CallOptions | None = None,
    ) -> ToolOutcome:
        """Run one call through the pipeline; always returns an outcome, never raises one.

        ``prepare`` then ``execute``, under one trace span and one audit event.

        Args:
            name: the tool's canonical name or alias.
            arguments: the arguments as parsed JSON, or raw JSON text/bytes (then parsed
                here under the payload limits).
            principal: the authenticated caller, or None for anonymous.
            controls: controls the transport took from its own fields (HTTP headers);
                merged with ``_charter`` in the arguments, which must agree.
            call: transport facts (cancel signal, progress and log sinks, ids).
        """
        call = call or _NO_CALL_OPTIONS
        trace = _Trace(tool=name, principal=principal)
        with self._telemetry.span(trace.tool, call.call_id) as span:
            prepared = await self._guarded(
                trace, self._prepare(name, arguments, principal, controls, call, trace)
            )
            if isinstance(prepared, PreparedCall):
                outcome = await self._guarded(trace, self._execute(prepared))
            else:
                outcome = prepared
            self._finish(span, trace, outcome)
        await self._audit(trace, outcome)
        return outcome

    async def prepare(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        controls: InvocationControls | None = None,
        *,
        call: CallOptions | None = None,
    ) -> PreparedCall | ToolOutcome:
        """Run every check a call needs before its handler; never runs a handler.

        Payload limits, lookup, auth mode and scopes, actor types, controls, tenancy, the
        context, input validation and the target, the request id, the fingerprint, and the
        gates: a committed request's replay, confirmation, and the request's approval
        (created here when the call is confirmed and has none). Returns a ``PreparedCall``
        for ``execute`` when the call may run now, else the outcome to answer with (audited
        like any call). Arguments as for ``invoke``.
        """
        call = call or _NO_CALL_OPTIONS
        trace = _Trace(tool=name, principal=principal)
        with self._telemetry.span(trace.tool, call.call_id) as span:
            prepared = await self._guarded(
                trace, self._prepare(name, arguments, principal, controls, call, trace)
            )
            if isinstance(prepared, PreparedCall):
                return prepared
            self._finish(span, trace, prepared)
        await self._audit(trace, prepared)
        return prepared

    async def execute(self, prepared: PreparedCall) -> ToolOutcome:
        """Run a call ``prepare`` admitted: the ledger, the handler, output validation, audit.

        A prepared call runs once, and only on the host that prepared it; anything else is
        ``ACTION_POLICY_REQUIRED`` (``prepared_call_not_admitted``).
        """
        trace = prepared.trace
        with self._telemetry.span(trace.tool, prepared.context.call_id) as span:
            outcome = await self._guarded(trace, self._execute(prepared))
            self._finish(span, trace, outcome)
        await self._audit(trace, outcome)
        return outcome

    def discard(self, prepared: PreparedCall) -> None:
        """Drop a prepared call that will not run (nothing was written for it)."""
        self._prepared.discard(prepared)
        discard_after_commit(prepared.context.after_commit)

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
        call = call or _NO_CALL_OPTIONS
        if paused.gate == "handler":
            resume = ResumeInfo(
                interaction_id=paused.interaction.id,
                kind=paused.interaction.kind,
                approved=approved,
                value=value,
                token=paused.token,
            )
            return await self.invoke(
                name, arguments, principal, controls, call=replace(call, resume=resume)
            )
        if not approved:
            what = "confirm" if paused.gate == "confirmation" else "go ahead with"
            return Denied(
                reason=f"The user declined to {what} this action; it did not run.",
                cause="user_declined",
                approval_id=paused.approval_id,
                request_id=paused.request_id,
                next_steps=("Do not retry this action unless the user asks for it again.",),
            )
        payload = self._check_payload(arguments)
        if isinstance(payload, Failed):
            return await self.invoke(name, arguments, principal, controls, call=call)
        sent = payload.get(CONTROL_FIELD)
        mismatch = _foreign_pause(paused, controls, sent)
        if mismatch is not None:
            return mismatch
        # The continuation's controls win over what the paused call sent (say an explicit
        # "confirmed": false), so the retry is exactly the paused call, now confirmed.
        continuation = paused.continuation or Continuation(confirmed=True)
        resumed = {
            **payload,
            CONTROL_FIELD: {**sent, **continuation.controls()}
            if isinstance(sent, Mapping)
            else continuation.controls()
            if sent is None
            else sent,
        }
        return await self.invoke(name, resumed, principal, controls, call=call)

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
        try:
            controls = InvocationControls(
                request_id=request_id,
                confirmed=True,
                reason_code=reason_code,
            )
        except ValidationError:
            return failed(
                ErrorCode.INVALID_INPUT,
                "The requestId must be a UUID you generate once for the action.",
                reason="invalid_controls",
                issues=[],
            )
        prepared = await self.prepare(name, arguments, principal, controls, call=call)
        if isinstance(prepared, PreparedCall):
            self.discard(prepared)
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Tool {prepared.name!r} does not need an approval for this call; make the "
                "call itself (with the confirmation it asks for).",
                reason="approval_not_required",
            )
        if isinstance(prepared, InteractionRequired) and prepared.approval_id is not None:
            record = await self.store.get_approval(prepared.approval_id)
            if record is not None:
                return record
        return prepared

    async def _guarded(self, trace: _Trace, step: Awaitable[_StepT]) -> _StepT | Failed:
        """Await a pipeline step; a raised bug or store fault becomes a coded outcome."""
        try:
            return await step
        except ToolError as exc:  # raised by a context factory
            return failed_from_error(exc)
        except Exception:
            # A bug or an unreachable dependency (a context factory, the store): the
            # caller gets a coded outcome with an error id, the details go to the log.
            return _internal_error(trace.tool)

    def _finish(self, span: Any, trace: _Trace, outcome: ToolOutcome) -> None:
        trace.seconds = trace.elapsed()
        self._telemetry.finish(
            span,
            tool=trace.registered.name if trace.registered is not None else None,
            outcome=outcome.kind,
            code=outcome.code.value if isinstance(outcome, Failed) else None,
            seconds=trace.seconds,
        )

    async def _audit(self, trace: _Trace, outcome: ToolOutcome) -> None:
        if trace.audited:
            return
        event = trace.event(outcome, trace.seconds, self._clock())
        events = [event]
        if self._refusals is not None and trace.principal is None and outcome.kind in _REFUSED:
            events = self._refusals.admit(event, known_tool=trace.registered is not None)
        for each in events:
            await self._record(each)

    async def _record(self, event: AuditEvent) -> None:
        try:
            await self.audit.record(event)
        except Exception:
            # The outcome stands either way: failing the call now would make a caller
            # retry an action that may have taken effect.
            log_exception(logger, "could not record the audit event of a call to %r", event.tool)

    async def _prepare(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        controls: InvocationControls | None,
        call: CallOptions,
        trace: _Trace,
    ) -> PreparedCall | ToolOutcome:
        payload = self._check_payload(arguments)
        if isinstance(payload, Failed):
            return payload
        audience = _caller_audience(principal, call.audience)
        registered = self.registry.get(name) if isinstance(name, str) else None
        if registered is None or not _visible(registered, audience):
            # A tool outside the caller's audience answers exactly like an unknown one,
            # and near matches come only from the tools the caller may call.
            visible = [
                n for t in self.callable_tools(principal, audience) for n in (t.name, *t.aliases)
            ]
            return self.registry.not_found(str(name), visible)
        trace.registered = registered
        trace.tool = registered.name
        denied = self._authorize(registered, principal, trace)
        if denied is not None:
            return denied
        policy = registered.action_policy
        if policy is not None and policy.allowed_actor_types:
            actor = principal.actor if principal is not None else None
            if actor not in policy.allowed_actor_types:
                return failed(
                    ErrorCode.AUTHORIZATION_DENIED,
                    f"Tool {registered.name!r} is not for {actor or 'anonymous'} callers.",
                    reason="actor_not_allowed",
                    allowed=list(policy.allowed_actor_types),
                )
        parsed_controls = self._controls(registered, payload, controls)
        if isinstance(parsed_controls, Failed):
            return parsed_controls
        arguments_only, controls = parsed_controls
        trace.request_id = controls.request_key
        trace.approval_id = controls.approval_id
        tenant = self._tenant(registered, principal, arguments_only, controls, trace)
        if isinstance(tenant, Failed):
            return tenant
        ctx = await self._context(registered, principal, controls, call, audience, tenant, trace)
        action = await self.registry.prepare_action(registered.name, arguments_only, ctx)
        if isinstance(action, Failed):
            return action
        request_key = controls.request_key
        if "requestId" in registered.controls.required and request_key is None:
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Tool {registered.name!r} changes data and needs a requestId (a UUID you "
                "generate once per action and reuse on retries).",
                reason="request_id_required",
                next_steps=(
                    'Generate a UUID and retry with "_charter": {"requestId": "<uuid>"}; '
                    "reuse it if you retry this same action.",
                ),
            )
        fingerprint: str | None = None
        if policy is not None:
            try:
                fingerprint = command_fingerprint(
                    capability_id=registered.capability_id,
                    capability_version=registered.capability_version,
                    tenant_id=tenant,
                    target=action.target,
                    arguments=action.canonical_input,
                )
            except NonCanonicalValueError as exc:
                return failed(
                    ErrorCode.INVALID_INPUT,
                    f"The arguments cannot be fingerprinted: {exc}",
                    reason="not_canonical",
                    issues=[],
                )
        confirmation_missing = (
            "confirmed" in registered.controls.required and not controls.is_confirmed
        )
        key: LedgerKey | None = None
        if (
            policy is not None
            and fingerprint is not None
            and request_key is not None
            and policy.ledger != "never"
        ):
            key = LedgerKey(
                tenant_id=tenant, principal_id=_principal_id(principal), request_id=request_key
            )
            early = await self._gate.admit(
                prepared=action,
                key=key,
                controls=controls,
                principal_tenant=principal.tenant_id if principal is not None else "",
                fingerprint=fingerprint,
                confirmation_missing=confirmation_missing,
            )
            if early is not None:
                return early
        elif confirmation_missing:
            return confirmation_required(action, fingerprint, request_key)
        prepared = PreparedCall(
            action=action,
            context=ctx,
            principal=principal,
            controls=controls,
            fingerprint=fingerprint,
            ledger_key=key,
            trace=trace,
        )
        self._prepared.add(prepared)
        return prepared

    def _check_payload(self, arguments: object) -> Mapping[str, Any] | Failed:
        try:
            if isinstance(arguments, (bytes, bytearray, memoryview, str)):
                value = parse_json(
                    bytes(arguments) if not isinstance(arguments, str) else arguments, self.limits
                )
            else:
                check_value(arguments, self.limits)
                value = arguments
        except PayloadRejected as exc:
            return failed(
                ErrorCode.INVALID_INPUT,
                f"The arguments were rejected: {exc}",
                reason=exc.reason,
                issues=[],
            )
        if not isinstance(value, Mapping):
            return failed(
                ErrorCode.INVALID_INPUT,
                "The arguments must be a JSON object.",
                reason="not_an_object",
                issues=[],
            )
        return value

    def _authorize(
        self, registered: RegisteredTool, principal: Principal | None, trace: _Trace
    ) -> Failed | None:
        tool = registered.tool
        decision = check_auth_mode(tool.auth, principal, admin_scope=self.admin_scope)
        if not decision.ok:
            if decision.code == "UNAUTHENTICATED":
                return failed(
                    ErrorCode.UNAUTHENTICATED,
                    f"Tool {registered.name!r} requires an authenticated caller.",
                    reason=decision.reason,
                )
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Tool {registered.name!r} requires the admin scope.",
                reason=decision.reason,
                required=[self.admin_scope],
                missing=[self.admin_scope],
            )
        trace.admin_used = decision.admin_used
        if tool.auth == "public" or principal is None:
            return None
        check = self._scope_check(principal, registered)
        if not check.allowed:
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Tool {registered.name!r} needs scopes the caller lacks: "
                f"{', '.join(check.missing)}.",
                reason="insufficient_scope",
                required=list(registered.required_scopes),
                granted=sorted(principal.scopes),
                missing=list(check.missing),
            )
        trace.admin_used = trace.admin_used or check.admin_used
        return None

    def _controls(
        self,
        registered: RegisteredTool,
        payload: Mapping[str, Any],
        given: InvocationControls | None,
    ) -> tuple[dict[str, Any], InvocationControls] | Failed:
        arguments = dict(payload)
        if CONTROL_FIELD not in arguments and given is None:
            return arguments, _NO_CONTROLS
        raw = arguments.pop(CONTROL_FIELD, None)
        try:
            body = _NO_CONTROLS if raw is None else InvocationControls.model_validate(raw)
        except ValidationError as exc:
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Invalid {CONTROL_FIELD} controls: "
                + "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
                    for e in exc.errors(include_input=False, include_url=False)
                ),
                reason="invalid_controls",
                issues=[
                    {
                        "loc": [CONTROL_FIELD, *map(str, e["loc"])],
                        "msg": e["msg"],
                        "type": e["type"],
                    }
                    for e in exc.errors(
                        include_input=False, include_url=False, include_context=False
                    )
                ],
            )
        merged = _merge_controls(body, given)
        if isinstance(merged, Failed):
            return merged
        unaccepted = merged.given() - registered.controls.accepted - {"onBehalfOf"}
        if unaccepted:
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Tool {registered.name!r} does not accept the control(s) "
                f"{', '.join(sorted(unaccepted))}.",
                reason="control_not_accepted",
                accepted=sorted(registered.controls.accepted),
            )
        return arguments, merged

    def _tenant(
        self,
        registered: RegisteredTool,
        principal: Principal | None,
        arguments: dict[str, Any],
        controls: InvocationControls,
        trace: _Trace,
    ) -> str | Failed:
        tool = registered.tool
        if principal is None:
            # An anonymous caller has no tenant to act for: naming one is refused, never
            # passed to the handler untouched.
            named = arguments.get(tool.tenant_field) if tool.tenant_field is not None else None
            if controls.on_behalf_of is not None or named is not None:
                return _tenant_forbidden(registered)
            return ""
        field_name = tool.tenant_field
        requested: object = controls.on_behalf_of
        if field_name is not None and arguments.get(field_name) is not None:
            from_input = arguments[field_name]
            # Both name the tenant; they must agree after trimming ('  B ' is 'B').
            if requested is not None and _trimmed(from_input) != _trimmed(requested):
                return _tenant_forbidden(registered)
            requested = from_input
        decision = resolve_tenant(
            principal=principal,
            requested=requested,
            delegable=tool.delegable,
            admin_scope=self.admin_scope,
        )
        if decision.denied:
            return _tenant_forbidden(registered)
        if field_name is not None:
            arguments[field_name] = decision.tenant_id
        trace.tenant = decision.tenant_id
        trace.delegated = decision.delegated
        trace.admin_used = trace.admin_used or decision.delegated
        return decision.tenant_id

    async def _context(
        self,
        registered: RegisteredTool,
        principal: Principal | None,
        controls: InvocationControls,
        call: CallOptions,
        audience: str | None,
        tenant: str,
        trace: _Trace,
    ) -> ToolContext:
        if self._context_factory is None:
            ctx = ToolContext()
        else:
            made = self._context_factory(principal, registered, controls)
            ctx = await made if inspect.isawaitable(made) else made
        ctx.tenant_id = tenant
        ctx.principal = principal
        ctx.actor = principal.actor if principal is not None else None
        ctx.audience = audience
        ctx.delegated = trace.delegated
        ctx.request_id = controls.request_key
        # A caller-supplied admission is never trusted; the gate mints one when needed.
        ctx.handler_action_policy = None
        ctx.session_id = call.session_id
        ctx.turn_id = call.turn_id
        ctx.step_id = call.step_id
        ctx.call_id = call.call_id
        ctx.invocation_id = call.invocation_id or _random_id()
        ctx.resume = call.resume
        ctx.state = call.state
        ctx.progress_sink = call.progress_sink
        ctx.log_sink = call.log_sink
        ctx.sampler = call.sampler
        if call.cancel is not None:
            ctx.cancel = call.cancel
        return ctx

    async def _execute(self, prepared: PreparedCall) -> ToolOutcome:
        if prepared not in self._prepared:
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                "The prepared call was not prepared by this host or already ran.",
                reason="prepared_call_not_admitted",
            )
        self._prepared.discard(prepared)
        key = prepared.ledger_key
        if key is None:
            return await self._gate.run_unledgered(prepared.action, prepared.context)
        assert prepared.fingerprint is not None
        trace = prepared.trace
        outcome, audited = await self._gate.run(
            prepared=prepared.action,
            ctx=prepared.context,
            controls=prepared.controls,
            key=key,
            fingerprint=prepared.fingerprint,
            approval_id=prepared.controls.approval_id,
            audit=lambda o: trace.event(o, trace.elapsed(), self._clock()),
        )
        trace.audited = audited
        return outcome

    # -- where requests stand ---------------------------------------------------------------

    async def audit_events(
        self, principal: Principal, *, tenant: str | None = None, limit: int = 100
    ) -> AuditTrail | Failed:
        """Recent audit events the caller may read, newest first.

        The caller's own tenant by default; only the admin scope may name another tenant.
        Approvers and admins see every event of the tenant, other callers their own.
        """
        decision = resolve_tenant(
            principal=principal, requested=tenant, delegable=True, admin_scope=self.admin_scope
        )
        if decision.denied:
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                "Only the admin scope may read another tenant's audit events.",
                reason="tenant_forbidden",
            )
        events = await self.audit.events(tenant=decision.tenant_id, limit=limit)
        if not self.approvals.oversees(principal):
            events = [
                e
                for e in events
                if (e.subject, e.principal_tenant) == (principal.subject, principal.tenant_id)
            ]
        return AuditTrail(tenant=decision.tenant_id, events=events)

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
        return await self._gate.status(where, _principal_id(principal), key)

    async def settle(self, invocation_id: str, outcome: ToolOutcome) -> Settlement:
        """Complete a deferred call once with a completed, denied or failed outcome.

        A completed outcome's output is validated like every completed call's: output that
        does not match the tool's output model is refused (``INVALID_OUTPUT``) and nothing
        is stored. The result is falsy when nothing was stored, with the reason.
        """
        record = await self.store.get_deferred(invocation_id)
        if record is None:
            return Settlement(
                settled=False,
                refused=failed(
                    ErrorCode.NOT_FOUND,
                    f"No deferred call {invocation_id[:200]!r} to settle.",
                    reason="deferred_not_found",
                ),
            )
        if isinstance(outcome, Completed):
            registered = self.registry.get(record.tool)
            checked = finish_output(registered, outcome) if registered is not None else outcome
            if not isinstance(checked, Completed):
                return Settlement(settled=False, refused=_as_failed(checked))
            outcome = checked
        elif not isinstance(outcome, Denied | Failed):
            return Settlement(
                settled=False,
                refused=failed(
                    ErrorCode.INVALID_INPUT,
                    "A deferred call settles with a completed, denied or failed outcome.",
                    reason="invalid_settlement",
                ),
            )
        stored = await self.store.settle_deferred(
            invocation_id, outcome_adapter.dump_json(outcome).decode(), self._clock()
        )
        if stored:
            return Settlement(settled=True, stored=outcome)
        return Settlement(
            settled=False,
            refused=failed(
                ErrorCode.IDEMPOTENCY_CONFLICT,
                f"The deferred call {invocation_id[:200]!r} was already settled.",
                reason="already_settled",
            ),
        )

    async def aclose(self) -> None:
        """Record pending audit counts; release the store's connections and worker threads."""
        if self._refusals is not None:
            for event in self._refusals.drain():
                await self._record(event)
        self.registry.close()
        close = getattr(self.store, "aclose", None)
        if close is not None:
            await close()


@runtime_checkable
class _StoreAuditSink(AuditSink, Protocol):
    """A store that also keeps audit events (then they commit with the action)."""


_StepT = TypeVar("_StepT")

_REFUSED = frozenset({"failed", "denied"})
"""Outcome kinds that, for an anonymous caller, are refusals (aggregated in the audit)."""

_SCOPE_CACHE_SIZE = 4096
"""How many scope decisions a host remembers (distinct scope sets times tools)."""

_NO_CALL_OPTIONS = CallOptions()
"""The transport facts of a call that gave none (frozen, so one instance serves all)."""

_NO_CONTROLS = InvocationControls()
"""The controls of a call that sent none (frozen, so one instance serves every call)."""


def _caller_audience(principal: Principal | None, requested: str | None) -> str | None:
    """The audience a call is made for.

    The transport's audience counts when the principal may query it (``enforce_audience``:
    staff may use any audience, anyone else only its own); otherwise, and when the
    transport names none, the principal's own actor type. Anonymous callers get the
    transport's audience as is.
    """
    if principal is None:
        return requested
    if requested is not None and enforce_audience(principal.actor, [requested]):
        return requested
    return principal.actor


def _visible(registered: RegisteredTool, audience: str | None) -> bool:
    """Whether a tool is visible to ``audience`` (a tool without an audience list is public)."""
    allowed = registered.tool.audience
    if not allowed:
        return True
    return audience is not None and audience_allows(allowed, audience)


_REQUEST_NAMESPACE = uuid.UUID("6b0d4a52-8f55-4f0a-9a63-3c2f3f0c1a77")
"""The namespace of derived request ids (the harness's since its first release)."""


def derive_request_id(scope: str, call_id: str) -> str:
    """The request id of a call whose caller sends none: a UUID from two stable ids.

    For callers that make a call on someone's behalf and can name it stably across
    retries, pauses and restarts (the harness: session and invocation ids; the bridges:
    their session and the model's tool call id). The same two ids always give the same
    request id, so a re-run reaches the same ledger row and replays.
    """
    return str(uuid.uuid5(_REQUEST_NAMESPACE, f"{scope}\x1f{call_id}"))


def canonical_request_id(value: object) -> str | None:
    """A request id as a canonical lower-case UUID, or None when it is not a UUID."""
    try:
        return str(uuid.UUID(str(value))) if isinstance(value, str | uuid.UUID) else None
    except ValueError:
        return None


def _foreign_pause(
    paused: InteractionRequired, controls: InvocationControls | None, sent: object
) -> Failed | None:
    """Refuse continuing a pause under another request id than the one it belongs to."""
    if paused.request_id is None:
        return None
    given = controls.request_key if controls is not None else None
    if given is None and isinstance(sent, Mapping):
        given = canonical_request_id(sent.get("requestId"))
    if given is None or given == paused.request_id:
        return None
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        "This pause belongs to another request; it cannot continue this one.",
        reason="request_id_mismatch",
        approvalId=paused.approval_id,
    )


def _principal_id(principal: Principal | None) -> str:
    """How the ledger and approvals store a caller: its key (home tenant and subject)."""
    return principal.key if principal is not None else "anonymous"


def _as_failed(outcome: ToolOutcome) -> Failed:
    if isinstance(outcome, Failed):
        return outcome
    return failed(ErrorCode.INVALID_OUTPUT, "The settled outcome is not valid.")


def _trimmed(value: object) -> object:
    return js_trim(value) if isinstance(value, str) else value


def _internal_error(tool: str) -> Failed:
    error_id = "err_" + secrets.token_hex(8)
    log_exception(logger, "invocation of %r failed inside the host (error id %s)", tool, error_id)
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"The call to {tool!r} failed inside the server. Error id: {error_id}.",
        errorId=error_id,
    )


def _tenant_forbidden(registered: RegisteredTool) -> Failed:
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        f"Tool {registered.name!r} may only act on the caller's own tenant.",
        reason="tenant_forbidden",
    )


def _merge_controls(
    body: InvocationControls, given: InvocationControls | None
) -> InvocationControls | Failed:
    """Merge transport controls (headers) with ``_charter``; a value in both must agree."""
    if given is None:
        return body
    if body is _NO_CONTROLS:
        return given
    merged: dict[str, Any] = {}
    for field_name in InvocationControls.model_fields:
        a, b = getattr(body, field_name), getattr(given, field_name)
        if a is not None and b is not None and a != b:
            alias = InvocationControls.model_fields[field_name].alias or field_name
            return failed(
                ErrorCode.INVALID_INPUT,
                f"The control {alias!r} was given twice with different values.",
                reason="controls_conflict",
                control=alias,
            )
        value = a if a is not None else b
        if value is not None:
            merged[field_name] = value
    return InvocationControls.model_validate(
        {InvocationControls.model_fields[k].alias or k: v for k, v in merged.items()}
    )


class _Trace:
    """What the pipeline learned about a call, for its audit event."""

    def __init__(self, *, tool: str, principal: Principal | None) -> None:
        self.tool = str(tool)[:200]
        self.principal = principal
        self.registered: RegisteredTool | None = None
        self.tenant: str | None = principal.tenant_id if principal is not None else None
        self.delegated = False
        self.admin_used = False
        self.request_id: str | None = None
        self.approval_id: str | None = None
        self.audited = False
        self.seconds = 0.0
        self._started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def event(self, outcome: ToolOutcome, seconds: float, now: datetime) -> AuditEvent:
        registered = self.registered
        principal = self.principal
        return _audit_event(
            id="aud_" + _random_id(),
            time=now,
            subject=principal.subject if principal is not None else None,
            principal_tenant=principal.tenant_id if principal is not None else None,
            tenant=self.tenant,
            delegated=self.delegated,
            admin_used=self.admin_used,
            tool=self.tool,
            capability_id=registered.capability_id if registered else None,
            capability_version=registered.capability_version if registered else None,
            request_id=self.request_id,
            approval_id=self.approval_id,
            outcome=outcome.kind,
            code=outcome.code.value if isinstance(outcome, Failed) else None,
            reason=outcome.reason if isinstance(outcome, Failed) else None,
            replayed=bool(getattr(outcome, "replayed", False)),
            duration_ms=round(seconds * 1000, 3),
        )


def _audit_event(**fields: Any) -> AuditEvent:
    """``AuditEvent(**fields)`` for values the host computed itself, with the right types.

    ``model_construct`` (pydantic's public way to skip validation): validating values the
    host just computed would cost more than the rest of the audit work of a call.
    """
    return AuditEvent.model_construct(**fields)


class _RandomIds:
    """Random 128-bit ids as hex, read from the OS 4 KiB at a time instead of per id.

    ``secrets.token_hex`` makes a system call per id, and every call needs two. Ids stay
    unpredictable (the bytes come from ``os.urandom``); a forked child starts a fresh
    pool, so parent and child never hand out the same ids.
    """

    _SIZE = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._offset = 0

    def next(self) -> str:
        with self._lock:
            offset = self._offset
            if offset >= len(self._pool):
                self._pool = os.urandom(self._SIZE)
                offset = 0
            self._offset = offset + 16
            return self._pool[offset : offset + 16].hex()

    def reset(self) -> None:
        self._pool = b""
        self._offset = 0


_IDS = _RandomIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_IDS.reset)


def _random_id() -> str:
    """A fresh random id of 32 hex characters."""
    return _IDS.next()
