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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from ._canonical import NonCanonicalValueError
from ._limits import PayloadLimits, PayloadRejected, check_value, parse_json
from ._telemetry import Telemetry
from .approvals import Approvals
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
    run_after_commit,
)
from .errors import ConfigurationError, ErrorCode, ToolError
from .ledger import ActionStatus, FaultHook, LedgerGate, LedgerStore, StoreBusy, StoreUnavailable
from .manifest import RegisteredTool, deprecation_warnings
from .memory_store import MemoryStore
from .outcome import (
    Completed,
    Failed,
    Interaction,
    InteractionRequired,
    ToolOutcome,
    failed,
    failed_from_error,
)
from .policy import CONTROL_FIELD, InvocationControls, command_fingerprint
from .registry import PreparedAction, Registry

__all__ = ("CallOptions", "ContextFactory", "Host")

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
        access_catalog: AccessCatalog | None = None,
        approval_ttl: timedelta = timedelta(hours=1),
        retention: timedelta = timedelta(hours=24),
        allow_self_approval: bool = False,
        in_progress_wait: float = 5.0,
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
            approver_scope: the scope an approver needs.
            access_catalog: scopes that wildcard grants do not satisfy.
            approval_ttl: how long a pending or granted approval stays usable.
            retention: how long completed outcomes are kept for replay.
            allow_self_approval: let requesters approve their own requests.
            in_progress_wait: seconds a duplicate waits for a running request before
                ``REQUEST_IN_PROGRESS``.
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
            allow_self_approval=allow_self_approval,
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
        # The span opens under the requested name (bounded, always a str) and is renamed
        # to the canonical name once the tool is found.
        with self._telemetry.span(trace.tool, call.call_id) as span:
            try:
                outcome = await self._invoke(name, arguments, principal, controls, call, trace)
            except ToolError as exc:  # raised by a context factory
                outcome = failed_from_error(exc)
            except Exception:
                # A bug or an unreachable dependency (a context factory, the store): the
                # caller gets a coded outcome with an error id, the details go to the log.
                outcome = _internal_error(trace.tool)
            seconds = trace.elapsed()
            self._telemetry.finish(
                span,
                tool=trace.registered.name if trace.registered is not None else None,
                outcome=outcome.kind,
                code=outcome.code.value if isinstance(outcome, Failed) else None,
                seconds=seconds,
            )
        if not trace.audited:
            try:
                await self.audit.record(trace.event(outcome, seconds, self._clock()))
            except Exception:
                # The outcome stands either way: failing the call now would make a caller
                # retry an action that may have taken effect.
                logger.exception("could not record the audit event of a call to %r", trace.tool)
        return outcome

    async def _invoke(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        controls: InvocationControls | None,
        call: CallOptions,
        trace: _Trace,
    ) -> ToolOutcome:
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
        prepared = await self.registry.prepare_action(registered.name, arguments_only, ctx)
        if isinstance(prepared, Failed):
            return prepared
        if "requestId" in registered.controls.required and controls.request_id is None:
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
        if registered.action_policy is not None:
            try:
                fingerprint = command_fingerprint(
                    capability_id=registered.capability_id,
                    capability_version=registered.capability_version,
                    tenant_id=tenant,
                    target=prepared.target,
                    arguments=prepared.canonical_input,
                )
            except NonCanonicalValueError as exc:
                return failed(
                    ErrorCode.INVALID_INPUT,
                    f"The arguments cannot be fingerprinted: {exc}",
                    reason="not_canonical",
                    issues=[],
                )
        if "confirmed" in registered.controls.required and not controls.is_confirmed:
            return self._confirmation_required(registered, prepared, fingerprint)
        return await self._execute(
            registered, prepared, ctx, principal, controls, fingerprint, trace
        )

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
            if controls.on_behalf_of is not None:
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

    def _confirmation_required(
        self, registered: RegisteredTool, prepared: PreparedAction, fingerprint: str | None
    ) -> InteractionRequired:
        digest = fingerprint or "sha256:" + uuid.uuid4().hex
        return InteractionRequired(
            interaction=Interaction(
                id="confirm_" + digest.removeprefix("sha256:")[:24],
                kind="approval",
                prompt=f"Confirm running {registered.name!r}"
                + (f" on {prepared.target!r}" if prepared.target else "")
                + '. Retry the same call with "_charter": {"confirmed": true} once the '
                "user agrees.",
                metadata={
                    "code": ErrorCode.CONFIRMATION_REQUIRED.value,
                    "tool": registered.name,
                    "target": prepared.target,
                    "retryWith": {CONTROL_FIELD: {"confirmed": True}},
                },
            )
        )

    async def _execute(
        self,
        registered: RegisteredTool,
        prepared: PreparedAction,
        ctx: ToolContext,
        principal: Principal | None,
        controls: InvocationControls,
        fingerprint: str | None,
        trace: _Trace,
    ) -> ToolOutcome:
        policy = registered.action_policy
        if (
            fingerprint is not None
            and policy is not None
            and (
                policy.ledger == "required"
                or policy.approval != "never"
                or registered.tool.enforcement == "handler"
            )
        ):
            outcome, audited = await self._gate.execute(
                prepared=prepared,
                ctx=ctx,
                principal=principal,
                controls=controls,
                fingerprint=fingerprint,
                audit=lambda o: trace.event(o, trace.elapsed(), self._clock()),
            )
            trace.audited = audited
            return outcome
        outcome = await self.registry.dispatch_prepared(prepared, ctx)
        if isinstance(outcome, Completed):
            await run_after_commit(ctx.after_commit, registered.name)
        else:
            discard_after_commit(ctx.after_commit)
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
        if not self.approvals.is_approver(principal):
            events = [e for e in events if e.subject == principal.subject]
        return AuditTrail(tenant=decision.tenant_id, events=events)

    async def action_status(self, principal: Principal, request_id: str) -> ActionStatus | None:
        """Where a request stands, scoped to the caller's tenant (None if unknown there)."""
        return await self._gate.status(principal, request_id)

    async def settle(self, invocation_id: str, outcome: ToolOutcome) -> bool:
        """Complete a deferred call once; returns False if it was already settled."""
        return await self._gate.settle(invocation_id, outcome)

    async def aclose(self) -> None:
        """Release the store's connections and the registry's worker threads."""
        self.registry.close()
        close = getattr(self.store, "aclose", None)
        if close is not None:
            await close()


@runtime_checkable
class _StoreAuditSink(AuditSink, Protocol):
    """A store that also keeps audit events (then they commit with the action)."""


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


def _trimmed(value: object) -> object:
    return js_trim(value) if isinstance(value, str) else value


def _internal_error(tool: str) -> Failed:
    error_id = "err_" + secrets.token_hex(8)
    logger.exception("invocation of %r failed inside the host (error id %s)", tool, error_id)
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
    """``AuditEvent(**fields)`` for every field, computed by the host with the right types.

    The instance ``AuditEvent.model_construct(**fields)`` would make, built directly:
    validating values the host just computed would cost more than the rest of the audit
    work of a call.
    """
    event = AuditEvent.__new__(AuditEvent)
    set_ = object.__setattr__
    set_(event, "__dict__", fields)
    set_(event, "__pydantic_fields_set__", set(fields))
    set_(event, "__pydantic_extra__", None)
    set_(event, "__pydantic_private__", None)
    return event


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
