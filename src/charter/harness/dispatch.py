"""A call's states: recording a sealed call, running it through the host, settling it.

A sealed call becomes a ``CallRecord`` (``call_record``); ``invoke_call`` runs it through
``Host.invoke``, or continues its pause through ``Host.resume``; ``absorb`` turns the
outcome into the call's next state.

How a charter outcome becomes a harness call state (seed-semantics §7.14):

| host outcome                                   | call state / model-visible result        |
|------------------------------------------------|------------------------------------------|
| ``Completed``                                  | completed (output already validated)     |
| ``Denied``, or ``Failed(AUTHORIZATION_DENIED)``| denied, with the reason / message        |
| ``InteractionRequired``, gate ``approval``     | paused; interaction id = the approval id |
| ``InteractionRequired``, gate ``confirmation`` | paused; approve = the person confirms    |
| ``InteractionRequired``, gate ``handler``      | paused; resumed with ``ctx.resume``      |
| ``Deferred``                                   | paused until ``Settle``                  |
| ``Failed(CANCELLED)``                          | failed ``tool.cancelled``                |
| ``Failed(INVALID_OUTPUT)``                     | failed ``tool.invalid-output``           |
| ``Failed(INVALID_INPUT)``                      | failed ``tool.invalid-arguments``        |
| ``Failed(PROVIDER_ERROR)`` (unexpected raise)  | failed ``tool.execution-failed``         |
| any other ``Failed``                           | failed with the charter code             |
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from .._redaction import redact
from .._safe_log import log_exception
from .._wording import new_error_id
from ..auth import Principal
from ..context import CancelSignal
from ..errors import ErrorCode
from ..host import CallOptions, Host, PreparedCall, derive_request_id
from ..outcome import (
    Completed,
    Deferred,
    Denied,
    Failed,
    Interaction,
    InteractionRequired,
    ToolOutcome,
    outcome_adapter,
)
from ..policy import InvocationControls
from .definitions import BoundToolDefinition
from .messages import ToolCall, ToolResult
from .seal import PlannedCall, SealCodes
from .store import CallRecord

__all__ = (
    "HostPreparer",
    "absorb",
    "call_options",
    "call_record",
    "cancelled",
    "committed",
    "execute_prepared",
    "failure",
    "invoke_call",
    "outcome_result",
    "request_id_for",
    "settle",
)

logger = logging.getLogger("charter.harness")

_CODE_MAP = {
    ErrorCode.CANCELLED: SealCodes.CANCELLED,
    ErrorCode.INVALID_OUTPUT: SealCodes.INVALID_OUTPUT,
    ErrorCode.INVALID_INPUT: SealCodes.INVALID_ARGUMENTS,
}


@functools.lru_cache(maxsize=1024)
def request_id_for(session_id: str, invocation_id: str) -> str:
    """The ledger request id of a call, derived from the session and invocation ids.

    The invocation id stays the same across pauses, resumes and restarts (it is in the
    session record), so a re-invocation reaches the same ledger row and replays.
    Cached: sealing (``HostPreparer``) and the call's record both ask for it.
    """
    return derive_request_id(session_id, invocation_id)


def call_record(planned: PlannedCall, *, session_id: str, new_id: Callable[[], str]) -> CallRecord:
    """The record of one sealed call: settled already, pending, or paused before it runs.

    Args:
        planned: the call as sealing left it.
        session_id: the session, from which the ledger request id is derived.
        new_id: makes the invocation id of a call sealing gave none.
    """
    call = planned.call
    if planned.result is not None:
        return CallRecord(
            call=call,
            tool_name=planned.result.tool_name,
            status="settled",
            result=planned.result,
        )
    assert planned.sealed is not None and planned.tool is not None
    invocation_id = planned.invocation_id or "inv_" + new_id()
    owner = planned.tool.owner
    interaction = planned.interaction
    return CallRecord(
        call=call,
        tool_name=planned.sealed.tool_name,
        args=planned.sealed.args,
        invocation_id=invocation_id,
        request_id=request_id_for(session_id, invocation_id),
        middleware_id=owner.middleware_id,
        slot=owner.slot,
        status="interaction" if interaction is not None else "pending",
        phase="before" if interaction is not None else "execute",
        interaction=_with_id(interaction, invocation_id) if interaction else None,
    )


def _with_id(interaction: Interaction, invocation_id: str) -> Interaction:
    if interaction.id:
        return interaction
    return interaction.model_copy(update={"id": "int_" + invocation_id})


@dataclass(frozen=True, slots=True, eq=False)
class HostPreparer:
    """Prepares a step's sealed calls on the host once, keeping them for ``execute``.

    The ``CallPreparer`` the harness's turns seal with: ``host.prepare`` parses the
    arguments (already JSON), validates them, resolves the target and passes the gates;
    the ``PreparedCall`` (or the outcome that ended the call) is kept under the call's
    invocation id until ``take`` hands it to ``execute_prepared``. One prepares the calls
    of one step of ``session_id`` for ``principal``.
    """

    host: Host
    _: KW_ONLY
    principal: Principal | None
    session_id: str
    turn_id: str
    step_id: str
    audience: str | None
    state: Callable[[BoundToolDefinition], Awaitable[object]] | None = None
    _kept: dict[str, tuple[PreparedCall | ToolOutcome, CancelSignal]] = field(
        default_factory=dict, init=False, repr=False
    )

    async def prepare(
        self,
        call: ToolCall,
        tool: BoundToolDefinition,
        arguments: dict[str, JsonValue],
        invocation_id: str,
    ) -> Failed | None:
        """Prepare the call; the ``INVALID_INPUT`` failure of bad arguments, else None."""
        try:
            state = await self.state(tool) if self.state is not None else None
        except Exception:
            # The call runs (and fails) the ordinary way, which reports the factory's error.
            return None
        request_id = request_id_for(self.session_id, invocation_id)
        cancel = CancelSignal()
        options = call_options(
            call,
            invocation_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            step_id=self.step_id,
            cancel=cancel,
            audience=self.audience,
            state=state,
        )
        controls = InvocationControls.model_validate({"requestId": request_id})
        try:
            prepared = await self.host.prepare(
                tool.name, arguments, self.principal, controls, call=options
            )
        except Exception:
            return None  # invoked later the ordinary way, which reports the fault
        if isinstance(prepared, Failed) and prepared.code is ErrorCode.INVALID_INPUT:
            return prepared
        self._kept[invocation_id] = (prepared, cancel)
        return None

    def take(
        self, invocation_id: str | None
    ) -> tuple[PreparedCall | ToolOutcome, CancelSignal] | None:
        """The prepared call (or its outcome) and its cancel signal, once."""
        return self._kept.pop(invocation_id, None) if invocation_id is not None else None

    def discard(self, invocation_id: str) -> None:
        """Drop a kept call that will not run."""
        kept = self._kept.pop(invocation_id, None)
        if kept is not None and isinstance(kept[0], PreparedCall):
            self.host.discard(kept[0])

    def discard_all(self) -> None:
        """Drop every call still kept (the step paused or was cancelled before they ran)."""
        for invocation_id in list(self._kept):
            self.discard(invocation_id)


async def execute_prepared(
    host: Host, call: CallRecord, prepared: PreparedCall | ToolOutcome
) -> ToolOutcome:
    """Run a call ``HostPreparer`` prepared (or answer the outcome that ended it)."""
    if not isinstance(prepared, PreparedCall):
        return prepared
    try:
        return await host.execute(prepared)
    except Exception:
        return _crashed(call, "executing")


async def invoke_call(
    host: Host,
    call: CallRecord,
    *,
    principal: Principal | None,
    options: CallOptions,
) -> ToolOutcome:
    """Invoke one call through the host, or continue its pause with the person's decision."""
    controls = (
        InvocationControls.model_validate({"requestId": call.request_id})
        if call.request_id
        else None
    )
    arguments = call.args or {}
    try:
        if call.paused is not None and call.resume is not None:
            return await host.resume(
                call.paused,
                call.tool_name,
                arguments,
                principal,
                approved=call.resume.approved is not False,
                value=call.resume.value,
                controls=controls,
                call=options,
            )
        return await host.invoke(call.tool_name, arguments, principal, controls, call=options)
    except Exception:
        return _crashed(call, "invoking")


def _crashed(call: CallRecord, doing: str) -> Failed:
    """The ``PROVIDER_ERROR`` of a call the host raised on, logged under a new error id.

    The host answers every expected failure with an outcome; this is a bug in it or in a
    store. One failing call never crashes the loop.
    """
    error_id = new_error_id()
    log_exception(logger, "harness: %s %r failed (error id %s)", doing, call.tool_name, error_id)
    return Failed(
        code=ErrorCode.PROVIDER_ERROR,
        message=f"Tool {call.tool_name!r} failed. Error id: {error_id}.",
        meta={"errorId": error_id},
    )


def call_options(
    call: ToolCall,
    invocation_id: str | None,
    *,
    session_id: str,
    turn_id: str,
    step_id: str,
    cancel: CancelSignal,
    audience: str | None,
    state: object,
) -> CallOptions:
    """The transport facts of one call: its ids and its own cancel signal."""
    return CallOptions(
        cancel=cancel,
        audience=audience,
        session_id=session_id,
        turn_id=turn_id,
        step_id=step_id,
        call_id=call.call_id,
        invocation_id=invocation_id,
        state=state,
        model_name=call.name,
    )


def absorb(call: CallRecord, outcome: ToolOutcome) -> CallRecord:
    """The call's next state after the host answered ``outcome`` (see the module table)."""
    base: dict[str, Any] = {"resume": None}
    if isinstance(outcome, InteractionRequired):
        interaction = outcome.interaction
        if not interaction.id.strip():
            # A tool may leave the id to the harness (the seed generates one).
            interaction = interaction.model_copy(update={"id": f"int_{call.invocation_id}"})
        return call.model_copy(
            update={
                **base,
                "status": "interaction",
                "phase": "execute",
                "interaction": interaction,
                "gate": None if outcome.gate == "handler" else outcome.gate,
                "token": outcome.token,
                "paused": outcome,
            }
        )
    if isinstance(outcome, Deferred):
        return call.model_copy(
            update={**base, "status": "deferred", "interaction": None, "token": outcome.token}
        )
    return settle(call, outcome_result(call, outcome))


def cancelled(call: CallRecord) -> CallRecord:
    """The call settled as ``tool.cancelled`` (a settled call stays as it is)."""
    if call.status == "settled":
        return call
    return settle(call, failure(call, SealCodes.CANCELLED, "The session was cancelled."))


async def committed(host: Host, principal: Principal | None, call: CallRecord) -> CallRecord | None:
    """A call a dead process was running, settled with its result if the ledger committed one."""
    if call.status != "pending" or call.request_id is None or principal is None:
        return None
    status = await host.action_status(principal, call.request_id)
    if status is None or status.status != "completed" or status.outcome is None:
        return None
    stored = outcome_adapter.validate_python(status.outcome)
    if isinstance(stored, Completed | Failed):
        stored = stored.model_copy(update={"replayed": True})
    return settle(call, outcome_result(call, stored))


def settle(call: CallRecord, result: ToolResult) -> CallRecord:
    """The call, settled with ``result``."""
    return call.model_copy(
        update={"status": "settled", "result": result, "resume": None, "interaction": None}
    )


def outcome_result(call: CallRecord, outcome: ToolOutcome) -> ToolResult:
    """The model-visible result of a terminal outcome."""
    if isinstance(outcome, Completed):
        return _result(call, "completed", output=outcome.output, replayed=outcome.replayed)
    if isinstance(outcome, Denied):
        return _result(call, "denied", reason=outcome.reason)
    if isinstance(outcome, Failed):
        return _failed_result(call, outcome)
    # Interactions and deferrals are not terminal; a settle that tries one is refused
    # before it gets here, so this is a tool answering with something it may not.
    return failure(
        call,
        SealCodes.INVALID_TOOL_RESULT,
        f"Tool {call.tool_name!r} returned a {outcome.kind!r} outcome where a result was needed.",
    )


def _result(
    call: CallRecord, kind: Literal["completed", "denied", "failed"], **fields: Any
) -> ToolResult:
    """A ``kind`` result for ``call`` (its call id and names) with the kind's ``fields``."""
    return ToolResult(
        kind=kind,
        call_id=call.call.call_id,
        tool_name=call.tool_name,
        model_name=call.call.name,
        **fields,
    )


def _failed_result(call: CallRecord, outcome: Failed) -> ToolResult:
    if outcome.code is ErrorCode.AUTHORIZATION_DENIED:
        return _result(call, "denied", reason=outcome.message)
    code = _CODE_MAP.get(outcome.code, outcome.code.value)
    if outcome.code is ErrorCode.PROVIDER_ERROR and outcome.reason == "unhandled_exception":
        # The registry's answer to an unexpected exception (a raised ToolError keeps its
        # code): the message is redacted to an error id, never the exception text.
        code = SealCodes.EXECUTION_FAILED
    # The model (and its provider) reads this: a server fault shows its code and error id
    # only, as on every transport (charter._redaction).
    outcome = redact(outcome)
    meta = dict(outcome.meta or {})
    details: dict[str, Any] = {"charterCode": outcome.code.value, **meta}
    if outcome.code is ErrorCode.INVALID_INPUT:
        details["phase"] = "input"
    if outcome.code is ErrorCode.INVALID_OUTPUT:
        details["phase"] = "output"
    return _result(
        call,
        "failed",
        code=code,
        message=outcome.message,
        retryable=outcome.retryable,
        next_steps=outcome.next_steps,
        details=details,
        replayed=outcome.replayed,
    )


def failure(call: CallRecord, code: str, message: str) -> ToolResult:
    """A harness-level failed result for ``call``."""
    return _result(call, "failed", code=code, message=message)
