"""The harness: a model tool-calling loop whose every call goes through ``Host.invoke``.

One turn: the model takes a step; its tool calls are sealed (``seal.py``); the
executable ones run concurrently through the host, so scopes, tenancy, the ledger and
approvals all apply; their results go back in the model's call order and the model
takes the next step, until it answers with text alone. A call that needs a person
(``InteractionRequired``) or continues elsewhere (``Deferred``) pauses the session: the
step is saved in the ``SessionStore`` and ``Session.resume`` continues it, in this
process or another.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .._safe_log import log_exception
from ..auth import Principal
from ..context import CancelSignal
from ..errors import ConfigurationError, ErrorCode
from ..host import Host
from ..outcome import Completed, Denied, Failed, Interaction, ToolOutcome, outcome_adapter
from ..registry import finish_output
from ._dispatch import (
    absorb,
    call_options,
    failure,
    invoke_call,
    outcome_result,
    request_id_for,
    settle,
)
from .definitions import BoundToolDefinition, Capability, bind_tools
from .messages import (
    AssistantMessage,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolResult,
    ToolResultsMessage,
    UserMessage,
)
from .seal import CallMiddleware, PlannedCall, SealCodes, seal_calls
from .store import (
    RECORD_VERSION,
    CallRecord,
    MemorySessionStore,
    PendingStep,
    ResumeRecord,
    SessionRecord,
    SessionStore,
)
from .turns import (
    Approve,
    Decision,
    DeferredCall,
    HarnessEvent,
    Observer,
    PendingInteraction,
    Respond,
    ResumeCodes,
    Settle,
    TurnResult,
    TurnStatus,
)

__all__ = ("Harness", "Session")

logger = logging.getLogger("charter.harness")


class _Rejected(Exception):
    """Ends a run or resume early with a rejected result (nothing was executed)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Live:
    """What a session keeps in this process: its cancel signal and capability state."""

    def __init__(self) -> None:
        self.cancel: CancelSignal | None = None
        self.states: dict[str, object] = {}
        self.lock = asyncio.Lock()

    async def state(self, capability: Capability[Any] | None) -> object:
        if capability is None or capability.state_factory is None:
            return None
        async with self.lock:
            if capability.id not in self.states:
                self.states[capability.id] = await capability.create_state()
            return self.states[capability.id]


class Harness:
    """Runs model tool-calling loops over one host; ``harness.session(principal)`` opens one."""

    def __init__(
        self,
        host: Host,
        model: Model,
        *,
        capabilities: Sequence[Capability[Any]] = (),
        tools: Sequence[str] | None = None,
        middleware: Sequence[CallMiddleware] = (),
        store: SessionStore | None = None,
        observer: Observer | None = None,
        max_steps: int = 16,
        audience: str | None = None,
        lease: timedelta = timedelta(minutes=5),
        clock: Callable[[], datetime] | None = None,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        """Build a harness.

        Args:
            host: every tool call goes through ``host.invoke``.
            model: takes one step at a time.
            capabilities: tool groups with session-local state; their tools must be
                registered with ``host.registry`` (``capability.register(registry)``).
            tools: the registry tools to offer besides the capabilities' (by name);
                None offers every tool the session's principal may call.
            middleware: reviews each sealed call before it runs.
            store: keeps session records; defaults to memory (not durable).
            observer: receives ``HarnessEvent``s.
            max_steps: model steps per turn before it ends as ``max_steps``.
            audience: the audience calls are made for (defaults to the principal's).
            lease: how long a run holds a session before another process may take over
                (only matters after a crash).
            clock: the current UTC time (injected by tests).
            new_id: makes turn, step and invocation ids (injected by tests).

        Raises:
            ConfigurationError: a capability's tool is not registered, or ``max_steps``
                is not positive.
        """
        if max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        self.host = host
        self.model = model
        self.capabilities = tuple(capabilities)
        self.tool_names = tuple(tools) if tools is not None else None
        self.middleware = tuple(middleware)
        self.store: SessionStore = store if store is not None else MemorySessionStore()
        self.observer = observer
        self.max_steps = max_steps
        self.audience = audience
        self.lease = lease
        self._clock = clock or (lambda: datetime.now(UTC))
        self._new_id = new_id or (lambda: uuid.uuid4().hex)
        self._live: dict[str, _Live] = {}
        # Fail at construction when a capability's tools are not registered.
        bind_tools(host.registry, host.registry.tools(), self.capabilities, ())

    def session(self, principal: Principal | None, session_id: str | None = None) -> Session:
        """A handle on a session of ``principal`` (a new one when ``session_id`` is None)."""
        return Session(self, principal, session_id or "ses_" + self._new_id())

    def bound_tools(self, principal: Principal | None) -> dict[str, BoundToolDefinition]:
        """The tools a session of ``principal`` offers the model, by canonical name."""
        visible = self.host.callable_tools(principal, self.audience)
        return bind_tools(self.host.registry, visible, self.capabilities, self.tool_names)

    def _live_for(self, session_id: str) -> _Live:
        live = self._live.get(session_id)
        if live is None:
            live = self._live[session_id] = _Live()
        return live

    async def _emit(self, event: HarnessEvent) -> None:
        if self.observer is not None:
            result = self.observer(event)
            if inspect.isawaitable(result):
                await result


class Session:
    """One conversation of one principal; its record lives in the harness's store."""

    def __init__(self, harness: Harness, principal: Principal | None, session_id: str) -> None:
        """Bind a session id to its principal (use ``Harness.session``)."""
        self.harness = harness
        self.principal = principal
        self.id = session_id
        self._subject = principal.subject if principal is not None else "anonymous"
        self._tenant = principal.tenant_id if principal is not None else ""

    # -- public API ---------------------------------------------------------------------

    async def run(self, prompt: str) -> TurnResult:
        """Start a turn with ``prompt``; returns when the model answers, or the turn pauses."""
        try:
            record = await self._acquire(for_turn=True)
        except _Rejected as rejected:
            return self._rejected(rejected)
        turn = _Turn(self, record, "trn_" + self.harness._new_id())
        return await turn.run(UserMessage(content=prompt))

    async def resume(self, decision: Decision) -> TurnResult:
        """Continue a paused turn with an approval, an answer, or a deferred call's outcome.

        A decision that matches no open interaction (stale, already used, or of the wrong
        kind) is rejected without executing anything or calling the model. Of two
        concurrent resumes of the same pause, one wins and the other gets a conflict.
        """
        try:
            record = await self._load_owned()
            turn = await _Turn.resumed(self, record, decision)
        except _Rejected as rejected:
            return self._rejected(rejected)
        return await turn.continue_step()

    async def stop(self) -> TurnResult:
        """Stop the session, settling what is open as ``tool.cancelled``.

        A run in this process is cancelled; a paused step's open calls are settled as
        ``tool.cancelled`` without calling the model.
        """
        live = self.harness._live.get(self.id)
        if live is not None and live.cancel is not None and not live.cancel.is_set():
            # The run in progress here ends itself as cancelled, settling its calls.
            live.cancel.set()
            return TurnResult(status="cancelled", session_id=self.id)
        try:
            record = await self._load_owned()
            if record.pending is None:
                return TurnResult(status="cancelled", session_id=self.id)
            # Paused, or left running by a process that died (once its lease is over).
            claimed = await self._claim(record)
        except _Rejected as rejected:
            return self._rejected(rejected)
        turn = _Turn(self, claimed, claimed.pending.turn_id if claimed.pending else None)
        return await turn.cancel_open(claimed.pending)

    def cancel(self) -> None:
        """Cancel the run or resume in progress in this process (tools see ``ctx.cancel``)."""
        live = self.harness._live.get(self.id)
        if live is not None and live.cancel is not None:
            live.cancel.set()

    async def messages(self) -> tuple[Message, ...]:
        """The transcript so far."""
        record = await self.harness.store.load(self.id)
        return record.messages if record is not None else ()

    async def record(self) -> SessionRecord | None:
        """The stored record (for inspection and tests)."""
        return await self.harness.store.load(self.id)

    # -- record handling ----------------------------------------------------------------

    def _rejected(self, rejected: _Rejected) -> TurnResult:
        return TurnResult(
            status="rejected", session_id=self.id, code=rejected.code, reason=rejected.reason
        )

    async def _load_owned(self) -> SessionRecord:
        record = await self.harness.store.load(self.id)
        if record is None:
            raise _Rejected(ResumeCodes.INVALID_INPUT, f"No session {self.id!r}.")
        if record.version != RECORD_VERSION:
            raise _Rejected(
                ResumeCodes.UNSUPPORTED_RECORD,
                f"Session {self.id!r} has record version {record.version}; this harness "
                f"reads version {RECORD_VERSION}.",
            )
        if (record.subject, record.tenant_id) != (self._subject, self._tenant):
            raise _Rejected(ResumeCodes.FORBIDDEN, f"Session {self.id!r} is not yours.")
        return record

    async def _acquire(self, *, for_turn: bool) -> SessionRecord:
        record = await self.harness.store.load(self.id)
        if record is None:
            now = self.harness._clock()
            fresh = SessionRecord(
                session_id=self.id,
                subject=self._subject,
                tenant_id=self._tenant,
                status="running",
                lease_until=now + self.harness.lease,
                updated_at=now,
            )
            if not await self.harness.store.save(fresh, expected_revision=None):
                raise _Rejected(ResumeCodes.CONFLICT, "Another run created this session.")
            return fresh
        record = await self._load_owned()
        if for_turn and (record.status == "paused" or record.pending is not None):
            raise _Rejected(
                ResumeCodes.PAUSED,
                "The session is waiting on an interaction; resume or stop it first.",
            )
        return await self._claim(record)

    async def _claim(self, record: SessionRecord, **changes: Any) -> SessionRecord:
        now = self.harness._clock()
        if (
            record.status == "running"
            and record.lease_until is not None
            and record.lease_until > now
        ):
            raise _Rejected(ResumeCodes.CONFLICT, "Another run or resume holds this session.")
        return await self._write(
            record, status="running", lease_until=now + self.harness.lease, **changes
        )

    async def _write(self, record: SessionRecord, **changes: Any) -> SessionRecord:
        updated = record.model_copy(
            update={
                **changes,
                "revision": record.revision + 1,
                "updated_at": self.harness._clock(),
            }
        )
        if not await self.harness.store.save(updated, expected_revision=record.revision):
            raise _Rejected(
                ResumeCodes.CONFLICT, "Another run or resume changed this session first."
            )
        return updated


class _Turn:
    """One turn in progress: the loop of model steps, sealing, dispatch and pausing."""

    def __init__(self, session: Session, record: SessionRecord, turn_id: str | None) -> None:
        self.session = session
        self.harness = session.harness
        self.record = record
        self.turn_id = turn_id or "trn_" + self.harness._new_id()
        self.messages: list[Message] = list(record.messages)
        self.settled: list[ToolResult] = []
        self.live = self.harness._live_for(session.id)
        self.cancel = CancelSignal()
        self.live.cancel = self.cancel
        self.tools = self.harness.bound_tools(session.principal)

    # -- entry points ---------------------------------------------------------------------

    async def run(self, prompt: UserMessage) -> TurnResult:
        self.messages.append(prompt)
        return await self._guarded(self._loop(0))

    @classmethod
    async def resumed(cls, session: Session, record: SessionRecord, decision: Decision) -> _Turn:
        pending = record.pending
        now = session.harness._clock()
        crashed = record.status == "running" and (
            record.lease_until is None or record.lease_until <= now
        )
        if pending is None or (record.status != "paused" and not crashed):
            if record.status == "running" and not crashed:
                raise _Rejected(ResumeCodes.CONFLICT, "Another resume holds this session.")
            raise _Rejected(ResumeCodes.INVALID_INPUT, _no_match(decision))
        index = _match(pending, decision, crashed)
        call = pending.calls[index]
        updated, settled = await _apply(session, call, decision)
        calls = list(pending.calls)
        calls[index] = updated
        claimed = await session._claim(
            record, pending=pending.model_copy(update={"calls": tuple(calls)})
        )
        turn = cls(session, claimed, pending.turn_id)
        await turn._emit(
            "interaction.resumed",
            step_id=pending.step_id,
            call=updated,
            data={"decision": type(decision).__name__.lower()},
        )
        if settled is not None and isinstance(decision, Settle):
            # The ledger's deferred record ends as the call did: the validated output, or
            # the INVALID_OUTPUT failure the model was given.
            await session.harness.host.settle(decision.invocation_id, settled)
        return turn

    async def continue_step(self) -> TurnResult:
        pending = self.record.pending
        assert pending is not None
        return await self._guarded(self._advance_then_loop(pending))

    async def cancel_open(self, pending: PendingStep | None) -> TurnResult:
        assert pending is not None
        return await self._guarded(self._cancel_open(pending))

    # -- the loop -------------------------------------------------------------------------

    async def _guarded(self, work: Any) -> TurnResult:
        try:
            result: TurnResult = await work
            return result
        except _Rejected as rejected:
            return self.session._rejected(rejected)
        finally:
            if self.live.cancel is self.cancel:
                self.live.cancel = None

    async def _advance_then_loop(self, pending: PendingStep) -> TurnResult:
        paused = await self._advance(pending)
        if paused is not None:
            return paused
        return await self._loop(pending.step)

    async def _loop(self, steps: int) -> TurnResult:
        text: str | None = None
        while True:
            if self.cancel.is_set():
                return await self._finish("cancelled", text)
            if steps >= self.harness.max_steps:
                return await self._finish("max_steps", text)
            steps += 1
            step_id = "stp_" + self.harness._new_id()
            response = await self._model_step(step_id)
            if response is None:
                return await self._finish("cancelled", text)
            text = response.text
            calls = tuple(response.tool_calls)
            self.messages.append(AssistantMessage(text=text, tool_calls=calls))
            if not calls:
                return await self._finish("completed", text)
            planned = await seal_calls(
                calls,
                tools=self.tools,
                registry=self.harness.host.registry,
                limits=self.harness.host.limits,
                principal=self.session.principal,
                middleware=self.harness.middleware,
                new_id=lambda: "inv_" + self.harness._new_id(),
            )
            pending = PendingStep(
                turn_id=self.turn_id,
                step_id=step_id,
                step=steps,
                calls=tuple(self._record(p) for p in planned),
            )
            paused = await self._advance(pending)
            if paused is not None:
                return paused

    async def _model_step(self, step_id: str) -> ModelResponse | None:
        request = ModelRequest(
            messages=tuple(self.messages),
            tools=tuple(t.schema for t in self.tools.values()),
            session_id=self.session.id,
            turn_id=self.turn_id,
            step_id=step_id,
        )
        await self._emit("model.step", step_id=step_id)
        if self.cancel.is_set():
            return None
        step = asyncio.ensure_future(self.harness.model.step(request))
        cancelled = asyncio.ensure_future(self.cancel.wait())
        try:
            await asyncio.wait({step, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (step, cancelled):
                if not task.done():
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await cancelled
        if not step.done() or step.cancelled():
            with contextlib.suppress(asyncio.CancelledError):
                await step
            return None
        return step.result()

    def _record(self, planned: PlannedCall) -> CallRecord:
        call = planned.call
        if planned.result is not None:
            return CallRecord(
                call=call,
                tool_name=planned.result.tool_name,
                status="settled",
                result=planned.result,
            )
        assert planned.sealed is not None and planned.tool is not None
        invocation_id = planned.invocation_id or "inv_" + self.harness._new_id()
        owner = planned.tool.owner
        interaction = planned.interaction
        return CallRecord(
            call=call,
            tool_name=planned.sealed.tool_name,
            args=planned.sealed.args,
            invocation_id=invocation_id,
            request_id=request_id_for(self.session.id, invocation_id),
            middleware_id=owner.middleware_id,
            slot=owner.slot,
            status="interaction" if interaction is not None else "pending",
            phase="before" if interaction is not None else "execute",
            interaction=_with_id(interaction, invocation_id) if interaction else None,
        )

    async def _advance(self, pending: PendingStep) -> TurnResult | None:
        """Run the step's pending calls; pause, or append the results and return None."""
        calls = list(pending.calls)
        waiting_before = any(c.status == "interaction" and c.phase == "before" for c in calls)
        if not waiting_before and not self.cancel.is_set():
            runnable = [i for i, c in enumerate(calls) if c.status == "pending"]
            done = await asyncio.gather(*(self._execute(pending, calls[i]) for i in runnable))
            for i, updated in zip(runnable, done, strict=True):
                calls[i] = updated
        if self.cancel.is_set():
            calls = [self._cancelled(c) for c in calls]
        calls = _unique_interactions(calls)
        pending = pending.model_copy(update={"calls": tuple(calls)})
        if any(c.status != "settled" for c in calls):
            return await self._pause(pending)
        results = tuple(c.result for c in calls if c.result is not None)
        self.settled.extend(results)
        self.messages.append(ToolResultsMessage(results=results))
        self.record = await self.session._write(
            self.record,
            messages=tuple(self.messages),
            pending=None,
            lease_until=self.harness._clock() + self.harness.lease,
        )
        return None

    async def _execute(self, pending: PendingStep, call: CallRecord) -> CallRecord:
        await self._emit("tool.started", step_id=pending.step_id, call=call)
        updated = await self._run_call(pending, call)
        kind = updated.result.kind if updated.result is not None else updated.status
        await self._emit(
            "tool.finished", step_id=pending.step_id, call=updated, data={"kind": kind}
        )
        return updated

    async def _run_call(self, pending: PendingStep, call: CallRecord) -> CallRecord:
        bound = self.tools.get(call.tool_name)
        if bound is None:
            # The principal lost access between sealing and a resume.
            return settle(
                call, failure(call, SealCodes.UNKNOWN, f"Unknown tool {call.tool_name!r}.")
            )
        try:
            state = await self.live.state(bound.capability)
        except Exception:
            log_exception(logger, "harness: the state factory of %r raised", call.tool_name)
            message = f"The state of tool {call.tool_name!r} could not be created."
            return settle(call, failure(call, SealCodes.EXECUTION_FAILED, message))
        signal = CancelSignal()
        unsubscribe = self.cancel.subscribe(signal.set)
        try:
            outcome = await invoke_call(
                self.harness.host,
                call,
                principal=self.session.principal,
                options=call_options(
                    call,
                    session_id=self.session.id,
                    turn_id=pending.turn_id,
                    step_id=pending.step_id,
                    cancel=signal,
                    audience=self.harness.audience,
                    state=state,
                ),
            )
        finally:
            unsubscribe()
        return absorb(call, outcome)

    def _cancelled(self, call: CallRecord) -> CallRecord:
        if call.status == "settled":
            return call
        return settle(call, failure(call, SealCodes.CANCELLED, "The session was cancelled."))

    async def _cancel_open(self, pending: PendingStep) -> TurnResult:
        calls = [await self._committed(c) or self._cancelled(c) for c in pending.calls]
        for before in pending.calls:
            if before.status == "deferred" and before.invocation_id is not None:
                await self.harness.host.settle(
                    before.invocation_id,
                    Failed(code=ErrorCode.CANCELLED, message="The session was stopped."),
                )
        results = tuple(c.result for c in calls if c.result is not None)
        self.settled.extend(results)
        self.messages.append(ToolResultsMessage(results=results))
        return await self._finish("cancelled", None)

    async def _committed(self, call: CallRecord) -> CallRecord | None:
        """A call a dead process was running: its result, if the ledger committed one."""
        principal = self.session.principal
        if call.status != "pending" or call.request_id is None or principal is None:
            return None
        status = await self.harness.host.action_status(principal, call.request_id)
        if status is None or status.status != "completed" or status.outcome is None:
            return None
        stored = outcome_adapter.validate_python(status.outcome)
        if isinstance(stored, Completed | Failed):
            stored = stored.model_copy(update={"replayed": True})
        return settle(call, outcome_result(call, stored))

    async def _pause(self, pending: PendingStep) -> TurnResult:
        self.record = await self.session._write(
            self.record,
            status="paused",
            lease_until=None,
            messages=tuple(self.messages),
            pending=pending,
        )
        interactions: list[PendingInteraction] = []
        deferred: list[DeferredCall] = []
        for call in pending.calls:
            if call.status == "interaction" and call.interaction is not None:
                interactions.append(_pending_interaction(call))
                await self._emit(
                    "interaction.required",
                    step_id=pending.step_id,
                    call=call,
                    data={"interactionId": call.interaction.id, "gate": call.gate},
                )
            elif call.status == "deferred":
                deferred.append(
                    DeferredCall(
                        invocation_id=call.invocation_id or "",
                        call_id=call.call.call_id,
                        tool_name=call.tool_name,
                        token=call.token,
                    )
                )
                await self._emit("tool.deferred", step_id=pending.step_id, call=call)
        await self._emit("session.paused", step_id=pending.step_id)
        return TurnResult(
            status="paused",
            session_id=self.session.id,
            turn_id=self.turn_id,
            results=tuple(self.settled),
            interactions=tuple(interactions),
            deferred=tuple(deferred),
        )

    async def _finish(self, status: TurnStatus, text: str | None) -> TurnResult:
        self.record = await self.session._write(
            self.record,
            status="idle",
            lease_until=None,
            messages=tuple(self.messages),
            pending=None,
        )
        await self._emit("turn.finished", data={"status": status})
        return TurnResult(
            status=status,
            session_id=self.session.id,
            turn_id=self.turn_id,
            text=text if status == "completed" else None,
            results=tuple(self.settled),
        )

    async def _emit(
        self,
        type_: Any,
        *,
        step_id: str | None = None,
        call: CallRecord | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        await self.harness._emit(
            HarnessEvent(
                type=type_,
                session_id=self.session.id,
                turn_id=self.turn_id,
                step_id=step_id,
                call_id=call.call.call_id if call else None,
                invocation_id=call.invocation_id if call else None,
                tool_name=call.tool_name if call else None,
                middleware_id=call.middleware_id if call else None,
                slot=call.slot if call else None,
                data=data,
            )
        )


def _no_match(decision: Decision) -> str:
    if isinstance(decision, Settle):
        return f"No deferred call {decision.invocation_id!r} is waiting to be settled."
    return f"No open interaction {decision.interaction_id!r} in this session."


def _match(pending: PendingStep, decision: Decision, crashed: bool) -> int:
    """The index of the call ``decision`` resumes; raises ``_Rejected`` when none does."""
    for index, call in enumerate(pending.calls):
        if isinstance(decision, Settle):
            if call.status == "deferred" and call.invocation_id == decision.invocation_id:
                return index
            continue
        if call.status == "interaction" and call.interaction is not None:
            if call.interaction.id != decision.interaction_id:
                continue
            wanted = "approval" if isinstance(decision, Approve) else "response"
            if call.interaction.kind != wanted:
                raise _Rejected(
                    ResumeCodes.INVALID_INPUT,
                    f"Interaction {decision.interaction_id!r} asks for a "
                    f"{call.interaction.kind}, not a {wanted}.",
                )
            return index
        if (
            crashed
            and call.status == "pending"
            and call.resume is not None
            and call.resume.interaction_id == decision.interaction_id
        ):
            # The resume that claimed this call died before it saved the result: run it
            # again; the ledger replays it if the first attempt committed.
            return index
    raise _Rejected(ResumeCodes.INVALID_INPUT, _no_match(decision))


async def _apply(
    session: Session, call: CallRecord, decision: Decision
) -> tuple[CallRecord, ToolOutcome | None]:
    """The call's state after ``decision`` (before it runs again), and a settled outcome."""
    if call.status == "pending":
        return call, None
    if isinstance(decision, Settle):
        registered = session.harness.host.registry.get(call.tool_name)
        outcome = decision.outcome
        if not isinstance(outcome, Completed | Denied | Failed):
            raise _Rejected(
                ResumeCodes.INVALID_INPUT,
                "A deferred call settles with completed, denied or failed.",
            )
        if isinstance(outcome, Completed) and registered is not None:
            outcome = finish_output(registered, outcome)
        return settle(call, outcome_result(call, outcome)), outcome
    interaction = call.interaction
    assert interaction is not None
    if isinstance(decision, Approve) and not decision.approved:
        rejected = ToolResult(
            kind="denied",
            call_id=call.call.call_id,
            tool_name=call.tool_name,
            reason="Approval rejected",
        )
        return settle(call, rejected), None
    resume = ResumeRecord(
        interaction_id=interaction.id,
        kind=interaction.kind,
        approved=True if isinstance(decision, Approve) else None,
        value=decision.value if isinstance(decision, Respond) else None,
        token=call.token,
    )
    # The next run continues the host's pause with this decision (``Host.resume``).
    changes = {"status": "pending", "resume": resume, "phase": "execute"}
    return call.model_copy(update=changes), None


def _with_id(interaction: Interaction, invocation_id: str) -> Interaction:
    if interaction.id:
        return interaction
    return interaction.model_copy(update={"id": "int_" + invocation_id})


def _unique_interactions(calls: list[CallRecord]) -> list[CallRecord]:
    """Give every open interaction in the step a distinct id (approval ids are unique)."""
    seen: set[str] = set()
    out: list[CallRecord] = []
    for call in calls:
        interaction = call.interaction
        if call.status == "interaction" and interaction is not None:
            if interaction.id in seen and call.gate != "approval":
                interaction = interaction.model_copy(
                    update={"id": f"{interaction.id}-{(call.invocation_id or '')[-8:]}"}
                )
                call = call.model_copy(update={"interaction": interaction})
            seen.add(interaction.id)
        out.append(call)
    return out


def _pending_interaction(call: CallRecord) -> PendingInteraction:
    assert call.interaction is not None
    return PendingInteraction(
        interaction=call.interaction,
        call_id=call.call.call_id,
        tool_name=call.tool_name,
        invocation_id=call.invocation_id or "",
        middleware_id=call.middleware_id,
        slot=call.slot,
        phase=call.phase,
        gate=call.gate,
    )
