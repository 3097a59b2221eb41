"""Running one call through the host's steps: ``prepare`` (every check and gate), ``execute``.

``prepare`` runs steps 1-6, ``execute`` steps 7-8; checks before the ledger never leave a
row, so a corrected retry with the same request id works:

1. Limits on the raw payload (size, depth, width, NaN/Infinity, duplicate keys).
2. Find the tool. A tool outside the caller's audience answers like an unknown one.
3. Auth mode, required scopes (AND; the admin scope satisfies scope checks only, and
   each such use is audited) and actor types (``_access``).
4. Reserved controls: ``_charter`` is taken out of the arguments and parsed strictly,
   and merged with the transport's controls (which must agree) (``_arguments``).
5. Tenancy: the principal's tenant, or, for a delegable tool called with the admin
   scope, the tenant named in ``tenant_field`` or ``_charter.onBehalfOf`` (audited as
   delegated). Any other foreign tenant is ``AUTHORIZATION_DENIED`` (``_tenancy``).
6. The context (``_context``); input validation and target resolution
   (``Registry.prepare_action``); the request id a write needs; the command
   fingerprint; the gates (``LedgerGate.admit``): a committed request's replay,
   confirmation, the request's approval, a person's final denial.
7. Budgets (``_budgets``): the tool's and the host's rate limits, quotas and in-flight
   caps, spent on the store and given back if the handler then does not run (a ledgered
   call's rate limits on ``SqlStore``: by its transaction, as it opens). Then the
   ledger transaction (``LedgerGate.run``): claim, approval consumed, the handler under
   its timeout and cancellation, output validation, stored outcome.
8. Audit event, trace span and metrics; return the outcome.

Each step is a function of its own module (``_arguments``, ``_access``, ``_tenancy``,
``_context``, ``_budgets``); the gates are the ledger's. The pipeline adds what every
call gets whichever way it ends: one trace span, one audit event (anonymous refusals
aggregated), and an outcome, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from .._canonical import NonCanonicalValueError
from .._limits import PayloadLimits
from .._refusals import RefusalAggregator
from .._safe_log import log_exception
from .._single_use import SingleUse
from .._telemetry import Telemetry
from .._wording import new_error_id
from ..audit import AuditEvent, AuditSink
from ..auth import Principal
from ..context import discard_after_commit
from ..errors import ErrorCode, StoreBusy, StoreUnavailable, ToolError
from ..ledger import LedgerGate, LedgerKey, confirmation_required, in_progress
from ..ledger.budgets import BudgetRefused, BudgetUnavailable, Charge
from ..manifest import RegisteredTool
from ..outcome import (
    Completed,
    Continuation,
    Failed,
    InteractionRequired,
    ReportsToolError,
    ToolOutcome,
    failed,
    failed_from_error,
)
from ..policy import InvocationControls, command_fingerprint
from ..registry import Registry
from ._access import ScopeChecks, caller_audience, visible
from ._arguments import check_payload, split_controls
from ._budgets import Budgets
from ._calls import NO_CALL_OPTIONS, CallOptions, ContextFactory, PreparedCall
from ._context import build_context, host_facts, plain_context
from ._tenancy import call_tenant
from ._trace import Trace

__all__ = ("Pipeline", "principal_id")

logger = logging.getLogger("charter")

_StepT = TypeVar("_StepT")

_REFUSED = frozenset({"failed", "denied"})
"""Outcome kinds that, for an anonymous caller, are refusals (aggregated in the audit)."""


class Pipeline:
    """Runs the calls of one host: prepares them, executes them once, audits every one.

    ``Host`` is a pipeline built with its parts; these are its call methods.
    """

    def __init__(
        self,
        *,
        registry: Registry,
        gate: LedgerGate,
        access: ScopeChecks,
        limits: PayloadLimits,
        context_factory: ContextFactory | None,
        audit: AuditSink,
        refusals: RefusalAggregator | None,
        rate_refusals: RefusalAggregator | None,
        budgets: Budgets,
        clock: Callable[[], datetime],
    ) -> None:
        """Run calls on ``registry`` through ``gate``, auditing to ``audit``."""
        self.registry = registry
        self._gate = gate
        self._access = access
        self._limits = limits
        self._context_factory = context_factory
        self._audit_sink = audit
        self._refusals = refusals
        self._rate_refusals = rate_refusals
        self._budgets = budgets
        self._clock = clock
        self._telemetry = Telemetry()
        # The calls prepared here and not yet run.
        self._prepared: SingleUse[PreparedCall] = SingleUse()
        # Calls of tools that are not cancellable, in flight (``_execute_to_end``).
        self._running_on: set[asyncio.Future[Any]] = set()

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
        call = call or NO_CALL_OPTIONS
        trace = Trace(tool=name, principal=principal, model_name=call.model_name)
        with self._telemetry.span(trace.tool, call.call_id) as span:
            # One guard around both steps (``_guarded``'s, without a coroutine per step).
            try:
                prepared = await self._prepare(name, arguments, principal, controls, call, trace)
                if isinstance(prepared, PreparedCall):
                    if prepared.action.tool.tool.cancellable:
                        outcome = await self._execute(prepared)
                    else:
                        outcome = await self._execute_to_end(prepared)
                    outcome = past_the_gates(outcome, prepared.controls)
                else:
                    outcome = prepared
            except Exception as exc:
                outcome = _fault(trace, exc)
            outcome = reported_failure(trace, outcome)
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
        call = call or NO_CALL_OPTIONS
        trace = Trace(tool=name, principal=principal, model_name=call.model_name)
        with self._telemetry.span(trace.tool, call.call_id) as span:
            prepared = await self._guarded(
                trace, self._prepare(name, arguments, principal, controls, call, trace)
            )
            if isinstance(prepared, PreparedCall):
                return prepared
            prepared = reported_failure(trace, prepared)
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
            if prepared.action.tool.tool.cancellable:
                step = self._guarded(trace, self._execute(prepared))
            else:
                step = self._guarded(trace, self._execute_to_end(prepared))
            outcome = past_the_gates(await step, prepared.controls)
            outcome = reported_failure(trace, outcome)
            self._finish(span, trace, outcome)
        await self._audit(trace, outcome)
        return outcome

    def discard(self, prepared: PreparedCall) -> None:
        """Drop a prepared call that will not run (nothing was written for it)."""
        self._prepared.discard(prepared)
        discard_after_commit(prepared.context.after_commit)

    async def _guarded(self, trace: Trace, step: Awaitable[_StepT]) -> _StepT | Failed:
        """Await a pipeline step; a raised bug or store fault becomes a coded outcome."""
        try:
            return await step
        except Exception as exc:
            return _fault(trace, exc)

    def _finish(self, span: Any, trace: Trace, outcome: ToolOutcome) -> None:
        trace.seconds = trace.elapsed()
        self._telemetry.finish(
            span,
            # The tool found (trace.tool is its canonical name from then on), or None.
            tool=trace.tool if trace.registered is not None else None,
            outcome=outcome.kind,
            code=outcome.code.value if isinstance(outcome, Failed) else None,
            seconds=trace.seconds,
        )

    async def _audit(self, trace: Trace, outcome: ToolOutcome) -> None:
        if trace.audited:
            return
        event = trace.event(outcome, trace.seconds, self._clock())
        events: Sequence[AuditEvent]
        if self._refusals is not None and trace.principal is None and outcome.kind in _REFUSED:
            events = self._refusals.admit(event, known_tool=trace.registered is not None)
        elif self._rate_refusals is not None and event.code == ErrorCode.RATE_LIMITED:
            # An agent in a loop is refused many times a second: one row per window each.
            events = self._rate_refusals.admit(event, known_tool=True)
        else:
            events = (event,)
        for each in events:  # each recorded here, without a coroutine of its own
            try:
                await self._audit_sink.record(each)
            except Exception:
                _audit_lost(each)

    async def _record(self, event: AuditEvent) -> None:
        try:
            await self._audit_sink.record(event)
        except Exception:
            _audit_lost(event)

    async def _prepare(
        self,
        name: str,
        arguments: object,
        principal: Principal | None,
        controls: InvocationControls | None,
        call: CallOptions,
        trace: Trace,
    ) -> PreparedCall | ToolOutcome:
        payload = check_payload(arguments, self._limits)
        if isinstance(payload, Failed):
            return payload
        audience = caller_audience(principal, call.audience)
        registered = self.registry.get(name) if isinstance(name, str) else None
        if registered is None or not visible(registered, audience):
            # A tool outside the caller's audience answers exactly like an unknown one,
            # and near matches come only from the tools the caller may call.
            names = [
                n for t in self.callable_tools(principal, audience) for n in (t.name, *t.aliases)
            ]
            return self.registry.not_found(str(name), names)
        trace.registered = registered
        trace.tool = registered.name
        denied = self._access.refusal(registered, principal, trace)
        if denied is not None:
            return denied
        parsed_controls = split_controls(registered, payload, controls)
        if isinstance(parsed_controls, Failed):
            return parsed_controls
        arguments_only, controls = parsed_controls
        trace.request_id = controls.request_key
        trace.approval_id = controls.approval_id
        tenant = call_tenant(
            registered,
            principal,
            arguments_only,
            controls,
            trace,
            admin_scope=self._access.admin_scope,
        )
        if isinstance(tenant, Failed):
            return tenant
        facts = host_facts(
            principal, controls, call, audience=audience, tenant=tenant, delegated=trace.delegated
        )
        if self._context_factory is None:
            ctx = plain_context(facts, call)
        else:
            factory = self._context_factory
            ctx = await build_context(factory, registered, principal, controls, call, facts)
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
        policy = registered.action_policy
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
                tenant_id=tenant, principal_id=principal_id(principal), request_id=request_key
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
        self._prepared.issue(prepared)
        return prepared

    async def _execute(self, prepared: PreparedCall) -> ToolOutcome:
        if not self._prepared.spend(prepared):
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                "The prepared call was not prepared by this host or already ran.",
                reason="prepared_call_not_admitted",
            )
        budgets = self._budgets
        if not budgets.applies(prepared):
            if prepared.ledger_key is None:  # ``_run``'s first case, without its coroutine
                return await self._gate.run_unledgered(prepared.action, prepared.context)
            return await self._run(prepared)
        spent = await budgets.spend(prepared)
        if isinstance(spent, Failed):
            discard_after_commit(prepared.context.after_commit)
            return await self._refused_by_budget(prepared, spent)
        try:
            outcome = await self._run(prepared, spent.charge)
        except (BudgetRefused, BudgetUnavailable) as error:
            return await self._refused_by_budget(prepared, await budgets.refusal(spent, error))
        except BaseException:
            budgets.release(spent)
            raise
        await budgets.settle(spent, outcome)
        return outcome

    async def _execute_to_end(self, prepared: PreparedCall) -> ToolOutcome:
        """``_execute`` for a tool that is not cancellable: its caller cannot cut it short.

        The call runs in a task of its own. A caller cancelled meanwhile (an MCP
        ``notifications/cancelled``, a task group's cancellation) gets its cancellation and
        sets the call's ``ctx.cancel``: a handler not started yet does not start (the
        call rolls back), one running runs on to its end, its ledger transaction commits
        the outcome, and its audit event is recorded then. Closing the host waits for
        every such call (``_drain``).
        """
        trace = prepared.trace
        call = asyncio.ensure_future(self._guarded(trace, self._execute(prepared)))
        self._track(call)
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            prepared.context.cancel.set()
            self._track(asyncio.ensure_future(self._audit_when_done(trace, call)))
            raise

    def _track(self, running: asyncio.Future[Any]) -> None:
        """Keep ``running`` in ``_running_on`` until it is done."""
        self._running_on.add(running)
        running.add_done_callback(self._running_on.discard)

    async def _audit_when_done(self, trace: Trace, call: asyncio.Future[ToolOutcome]) -> None:
        """Audit a call its caller left, once it ends (``_execute_to_end``)."""
        outcome = reported_failure(trace, await call)
        trace.seconds = trace.elapsed()
        await self._audit(trace, outcome)

    async def _refused_by_budget(self, prepared: PreparedCall, refusal: Failed) -> ToolOutcome:
        """A refused call's answer: the stored outcome when it is a replay (always free).

        A retry of a request still running on this host is answered as the ledger answers
        one: it waits for the request (up to ``in_progress_wait``) and replays its stored
        outcome, or is ``REQUEST_IN_PROGRESS`` when it still runs. (A ``SpendingStore``'s
        transaction waits so for the request's claim; a ``MemoryStore`` shows no claim
        before it commits, and an ``InFlight`` cap refuses before any transaction.)
        """
        key = prepared.ledger_key
        fingerprint = prepared.fingerprint
        if key is not None and fingerprint is not None:
            replay = await self._stored(key, fingerprint)
            budgets = self._budgets
            if replay is None and budgets.running(key):
                if await budgets.until_ended(key, self._gate.in_progress_wait):
                    replay = await self._stored(key, fingerprint)
                else:
                    replay = in_progress(key.request_id)
            if replay is not None:
                return replay
        if refusal.code is ErrorCode.RATE_LIMITED:
            limit = str((refusal.meta or {}).get("limit"))
            self._telemetry.rate_limited(tool=prepared.name, limit=limit)
        return refusal

    async def _stored(self, key: LedgerKey, fingerprint: str) -> ToolOutcome | None:
        """The replay of the request's stored outcome, if it has one (None when unreadable)."""
        try:
            return await self._gate.replay_of(key, fingerprint)
        except (StoreBusy, StoreUnavailable):
            return None

    async def _run(self, prepared: PreparedCall, charge: Charge | None = None) -> ToolOutcome:
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
            # Audited as it is answered (an upstream's reported error as failed).
            audit=lambda o: trace.event(reported_failure(trace, o), trace.elapsed(), self._clock()),
            charge=charge,
        )
        trace.audited = audited
        return outcome

    def callable_tools(
        self, principal: Principal | None, audience: str | None = None
    ) -> list[RegisteredTool]:
        """The registered tools ``principal`` may call, in registration order."""
        seen_by = caller_audience(principal, audience)
        return [
            t
            for t in self.registry.tools()
            if visible(t, seen_by) and self._access.tool_allows(t, principal)
        ]

    async def _drain(self) -> None:
        """Let calls of tools that are not cancellable end; record the audit counts pending."""
        while self._running_on:
            await asyncio.gather(*self._running_on, return_exceptions=True)
        for refusals in (self._refusals, self._rate_refusals):
            if refusals is not None:
                for event in refusals.drain():
                    await self._record(event)


def _audit_lost(event: AuditEvent) -> None:
    """Log an event the sink refused; call it in the ``except`` block (it logs the error)."""
    # The outcome stands either way: failing the call now would make a caller retry an
    # action that may have taken effect.
    log_exception(logger, "could not record the audit event of a call to %r", event.tool)


def principal_id(principal: Principal | None) -> str:
    """How the ledger and approvals store a caller: its key (home tenant and subject)."""
    return principal.key if principal is not None else "anonymous"


def _fault(trace: Trace, exc: Exception) -> Failed:
    """The outcome of a step that raised; call it in the ``except`` block (it logs)."""
    if isinstance(exc, ToolError):  # raised by a context factory
        return failed_from_error(exc)
    # A bug or an unreachable dependency (a context factory, the store): the caller gets
    # a coded outcome with an error id, the details go to the log.
    return _internal_error(trace.tool)


def _internal_error(tool: str) -> Failed:
    error_id = new_error_id()
    log_exception(logger, "invocation of %r failed inside the host (error id %s)", tool, error_id)
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"The call to {tool!r} failed inside the server. Error id: {error_id}.",
        errorId=error_id,
    )


def past_the_gates(outcome: ToolOutcome, controls: InvocationControls) -> ToolOutcome:
    """A handler's own pause, with the controls that took its call past the host's gates.

    Continuing it runs the call again: without the confirmation and the approval that let
    it through, it would stop at its gate again and the handler never get its answer. Any
    other outcome is returned as it is.
    """
    if not isinstance(outcome, InteractionRequired) or outcome.gate != "handler":
        return outcome
    continuation = Continuation(
        request_id=controls.request_key,
        confirmed=True if controls.is_confirmed else None,
        approval_id=controls.approval_id,
    )
    if continuation == _NOTHING_TO_CONTINUE:
        return outcome
    return outcome.model_copy(
        update={
            "continuation": continuation,
            "request_id": outcome.request_id or controls.request_key,
        }
    )


_NOTHING_TO_CONTINUE = Continuation()


def reported_failure(trace: Trace, outcome: ToolOutcome) -> ToolOutcome:
    """A completed output that says its tool failed (an upstream's ``isError``), as ``Failed``.

    The ledger keeps the output as completed (the tool ran and may have had an effect);
    every answer, the first and each replay, is ``UPSTREAM_ERROR`` with it in
    ``meta["result"]``, so REST, the CLI and models see an error and MCP can send the
    upstream's own result again.
    """
    if not isinstance(outcome, Completed) or trace.registered is None:
        return outcome
    model = trace.registered.tool.output_model
    if not (isinstance(model, type) and issubclass(model, ReportsToolError)):
        return outcome
    message = model.reported_error(outcome.output)
    if message is None:
        return outcome
    answer = failed(
        ErrorCode.UPSTREAM_ERROR, message, reason="upstream_tool_error", result=outcome.output
    )
    return answer.model_copy(update={"replayed": outcome.replayed})
