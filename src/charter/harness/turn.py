"""One turn in progress: the loop of model steps, sealing, running the calls, pausing.

The model takes a step; its tool calls are sealed (``seal.py``) and recorded; the
executable ones run concurrently through the host (``dispatch.py``) and their results go
back in the model's call order; the model takes the next step, until it answers with
text alone, runs out of steps, is cancelled, or a call pauses the turn (``pause.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, Literal

from .._safe_log import log_exception
from ..auth import Principal
from ..context import CancelSignal
from ..errors import ErrorCode
from ..outcome import Failed
from .definitions import bound_names
from .dispatch import (
    HostPreparer,
    absorb,
    call_options,
    call_record,
    cancelled,
    committed,
    execute_prepared,
    failure,
    invoke_call,
    settle,
)
from .lease import SessionLease
from .messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ToolResult,
    ToolResultsMessage,
    UserMessage,
)
from .pause import deferred_calls, open_interactions, unique_interactions
from .runtime import Runtime
from .seal import SealCodes, seal_calls
from .store import CallRecord, PendingStep, SessionRecord
from .turns import HarnessEvent, HarnessEventType, Rejected, TurnResult, TurnStatus

__all__ = ("Turn",)

logger = logging.getLogger("charter.harness")


class Turn:
    """One turn of a session, from a prompt (or a resume) to its end or its next pause."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        lease: SessionLease,
        principal: Principal | None,
        record: SessionRecord,
        turn_id: str | None = None,
    ) -> None:
        """Take over the session in this process (its cancel signal is this turn's).

        Args:
            runtime: the harness the turn runs with.
            lease: writes the session's record.
            principal: whose calls these are.
            record: the session's record, claimed for this turn.
            turn_id: the turn to continue; None starts a new one.
        """
        self.runtime = runtime
        self.lease = lease
        self.principal = principal
        self.session_id = lease.session_id
        self.record = record
        self.turn_id = turn_id or "trn_" + runtime.new_id()
        self.messages: list[Message] = list(record.messages)
        self.settled: list[ToolResult] = []
        self.cancel = CancelSignal()
        self.live = runtime.live.start(self.session_id, self.cancel, lease.owner)
        self.tools = runtime.bound_tools(principal)
        # The same every step of the turn: computed once, not for each model request.
        self.names = bound_names(self.tools)
        self.schemas = tuple(t.schema for t in self.tools.values())
        self.preparer: HostPreparer | None = None
        """The step's calls the host prepared at sealing, until they run."""

    # -- entry points ---------------------------------------------------------------------

    async def run(self, prompt: UserMessage) -> TurnResult:
        """Start the turn with ``prompt``."""
        self.messages.append(prompt)
        return await self._guarded(self._loop(0))

    async def continue_step(self) -> TurnResult:
        """Run the paused step's calls that can run now, then go on with the loop."""
        pending = self.record.pending
        assert pending is not None
        return await self._guarded(self._advance_then_loop(pending))

    async def cancel_open(self, pending: PendingStep | None) -> TurnResult:
        """End the turn as cancelled, settling the step's open calls as ``tool.cancelled``."""
        assert pending is not None
        return await self._guarded(self._cancel_open(pending))

    def end(self) -> None:
        """Give up the session in this process (its cancel signal no longer reaches it)."""
        self.runtime.live.finish(self.session_id, self.live, self.cancel)

    async def emit(
        self,
        type_: HarnessEventType,
        *,
        step_id: str | None = None,
        call: CallRecord | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Report a ``HarnessEvent`` of this turn (about ``call``, when given)."""
        if self.runtime.observer is None:
            return  # nobody listens: a turn would build a dozen events for nothing
        await self.runtime.emit(
            HarnessEvent(
                type=type_,
                session_id=self.session_id,
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

    # -- the loop -------------------------------------------------------------------------

    async def _guarded(self, work: Awaitable[TurnResult]) -> TurnResult:
        try:
            return await work
        except Rejected as rejected:
            return rejected.result(self.session_id)
        except asyncio.CancelledError:
            # The task running the turn was cancelled (not ``session.cancel()``): give the
            # lease up now, the step kept, so ``stop`` can settle it at once.
            await asyncio.shield(asyncio.ensure_future(self._give_up_lease()))
            raise
        finally:
            self.end()

    async def _give_up_lease(self) -> None:
        """End this run's lease, keeping the record's step for ``stop`` to settle."""
        try:
            self.record = await self.lease.write(self.record, lease_until=self.runtime.clock())
        except Exception:  # another run wrote first, or the store is down: the lease ends
            log_exception(logger, "harness: giving up the lease of session %r", self.session_id)

    async def _advance_then_loop(self, pending: PendingStep) -> TurnResult:
        paused = await self._advance(pending)
        if paused is not None:
            return paused
        return await self._loop(pending.step)

    async def _loop(self, steps: int) -> TurnResult:
        runtime = self.runtime
        text: str | None = None
        while True:
            if self.cancel.is_set():
                return await self._finish("cancelled", text)
            if steps >= runtime.max_steps:
                return await self._finish("max_steps", text)
            steps += 1
            step_id = "stp_" + runtime.new_id()
            response = await self._model_step(step_id)
            if response is None:
                return await self._finish("cancelled", text)
            text = response.text
            calls = tuple(response.tool_calls)
            self.messages.append(AssistantMessage(text=text, tool_calls=calls))
            if not calls:
                return await self._finish("completed", text)
            # Sealing prepares each call on the host (parse, validate, gates) once; the
            # prepared call is what runs, so nothing is validated twice.
            self.preparer = HostPreparer(
                runtime.host,
                principal=self.principal,
                session_id=self.session_id,
                turn_id=self.turn_id,
                step_id=step_id,
                audience=runtime.audience,
                state=lambda bound: self.live.state(bound.capability),
            )
            planned = await seal_calls(
                calls,
                tools=self.tools,
                registry=runtime.host.registry,
                limits=runtime.host.limits,
                principal=self.principal,
                middleware=runtime.middleware,
                new_id=lambda: "inv_" + runtime.new_id(),
                preparer=self.preparer,
                names=self.names,
            )
            pending = PendingStep(
                turn_id=self.turn_id,
                step_id=step_id,
                step=steps,
                calls=tuple(
                    call_record(p, session_id=self.session_id, new_id=runtime.new_id)
                    for p in planned
                ),
            )
            # Written before the calls run: a run cut short (its task cancelled, its
            # process dead) leaves the step and its invocation ids in the record, so
            # ``stop`` settles each call with what the ledger committed for it, and the
            # model never asks again for an action that ran.
            self.record = await self.lease.write(
                self.record, messages=tuple(self.messages), pending=pending
            )
            paused = await self._advance(pending)
            if paused is not None:
                return paused

    async def _model_step(self, step_id: str) -> ModelResponse | None:
        """The model's answer to the transcript so far; None when the turn was cancelled."""
        request = ModelRequest(
            messages=tuple(self.messages),
            tools=self.schemas,
            session_id=self.session_id,
            turn_id=self.turn_id,
            step_id=step_id,
        )
        await self.emit("model.step", step_id=step_id)
        if self.cancel.is_set():
            return None
        loop = asyncio.get_running_loop()
        step = asyncio.ensure_future(self.runtime.model.step(request))

        def stop() -> None:  # the signal may be set from any thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(step.cancel)

        # The signal cancels the step's task itself: no second task waits on the signal.
        unsubscribe = self.cancel.subscribe(stop)
        try:
            response = await step
        except asyncio.CancelledError:
            if not step.cancelled() or _cancelling():
                raise  # this task itself is being cancelled, not (only) the model step
            return None
        finally:
            unsubscribe()
        if _cancelling():
            # A model that swallowed the cancellation must not swallow this task's too.
            raise asyncio.CancelledError
        return None if self.cancel.is_set() else response

    async def _advance(self, pending: PendingStep) -> TurnResult | None:
        """Run the step's pending calls; pause, or append the results and return None."""
        calls = list(pending.calls)
        waiting_before = any(c.status == "interaction" and c.phase == "before" for c in calls)
        if not waiting_before and not self.cancel.is_set():
            runnable = [i for i, c in enumerate(calls) if c.status == "pending"]
            done = await asyncio.gather(*(self._execute(pending, calls[i]) for i in runnable))
            for i, updated in zip(runnable, done, strict=True):
                calls[i] = updated
        if self.preparer is not None:
            # Calls that will not run now (a pause before the step, a cancellation) are
            # prepared again, from their record, when they do.
            self.preparer.discard_all()
            self.preparer = None
        if self.cancel.is_set():
            calls = [cancelled(c) for c in calls]
        calls = unique_interactions(calls)
        pending = pending.model_copy(update={"calls": tuple(calls)})
        if any(c.status != "settled" for c in calls):
            return await self._pause(pending)
        self._append_results(calls)
        self.record = await self.lease.write(
            self.record,
            messages=tuple(self.messages),
            pending=None,
            lease_until=self.runtime.clock() + self.runtime.lease,
        )
        return None

    def _append_results(self, calls: list[CallRecord]) -> None:
        results = tuple(c.result for c in calls if c.result is not None)
        self.settled.extend(results)
        self.messages.append(ToolResultsMessage(results=results))

    # -- one call -------------------------------------------------------------------------

    async def _execute(self, pending: PendingStep, call: CallRecord) -> CallRecord:
        await self.emit("tool.started", step_id=pending.step_id, call=call)
        updated = await self._run_call(pending, call)
        kind = updated.result.kind if updated.result is not None else updated.status
        await self.emit("tool.finished", step_id=pending.step_id, call=updated, data={"kind": kind})
        return updated

    async def _run_call(self, pending: PendingStep, call: CallRecord) -> CallRecord:
        kept = self.preparer.take(call.invocation_id) if self.preparer is not None else None
        if kept is not None:
            prepared, signal = kept
            unsubscribe = self.cancel.subscribe(signal.set)
            try:
                return absorb(call, await execute_prepared(self.runtime.host, call, prepared))
            finally:
                unsubscribe()
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
                self.runtime.host,
                call,
                principal=self.principal,
                options=call_options(
                    call.call,
                    call.invocation_id,
                    session_id=self.session_id,
                    turn_id=pending.turn_id,
                    step_id=pending.step_id,
                    cancel=signal,
                    audience=self.runtime.audience,
                    state=state,
                ),
            )
        finally:
            unsubscribe()
        return absorb(call, outcome)

    # -- how a turn ends ------------------------------------------------------------------

    async def _cancel_open(self, pending: PendingStep) -> TurnResult:
        host = self.runtime.host
        calls = [await committed(host, self.principal, c) or cancelled(c) for c in pending.calls]
        for before in pending.calls:
            if before.status == "deferred" and before.invocation_id is not None:
                await host.settle(
                    before.invocation_id,
                    Failed(code=ErrorCode.CANCELLED, message="The session was stopped."),
                )
        self._append_results(calls)
        return await self._finish("cancelled", None)

    async def _pause(self, pending: PendingStep) -> TurnResult:
        await self._release("paused", pending)
        for call in pending.calls:
            if call.status == "interaction" and call.interaction is not None:
                await self.emit(
                    "interaction.required",
                    step_id=pending.step_id,
                    call=call,
                    data={"interactionId": call.interaction.id, "gate": call.gate},
                )
            elif call.status == "deferred":
                await self.emit("tool.deferred", step_id=pending.step_id, call=call)
        await self.emit("session.paused", step_id=pending.step_id)
        return TurnResult(
            status="paused",
            session_id=self.session_id,
            turn_id=self.turn_id,
            results=tuple(self.settled),
            interactions=open_interactions(pending.calls),
            deferred=deferred_calls(pending.calls),
        )

    async def _finish(self, status: TurnStatus, text: str | None) -> TurnResult:
        await self._release("idle", None)
        await self.emit("turn.finished", data={"status": status})
        return TurnResult(
            status=status,
            session_id=self.session_id,
            turn_id=self.turn_id,
            text=text if status == "completed" else None,
            results=tuple(self.settled),
        )

    async def _release(
        self, status: Literal["paused", "idle"], pending: PendingStep | None
    ) -> None:
        """Save the transcript as ``status`` with ``pending`` (or none), giving up the lease."""
        self.record = await self.lease.write(
            self.record,
            status=status,
            lease_until=None,
            messages=tuple(self.messages),
            pending=pending,
        )


def _cancelling() -> bool:
    """True when the running task has been asked to cancel (``Task.cancel``)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
