"""Resuming a paused turn: matching a decision to the call it continues, and applying it.

A decision matches exactly one open call of the paused step: an ``Approve`` or a
``Respond`` the call whose interaction has that id (and kind), a ``Settle`` the deferred
call with that invocation id. Anything else is rejected before the session is claimed,
so nothing executes and the model is not called. The decided call runs again on the
next step of the turn, continuing the host's pause (``Host.resume``).
"""

from __future__ import annotations

from ..auth import Principal
from ..host import Host
from ..outcome import Completed, Denied, Failed, ToolOutcome
from ..registry import finish_output
from .dispatch import outcome_result, settle
from .lease import SessionLease
from .messages import ToolResult
from .runtime import Runtime
from .store import CallRecord, PendingStep, ResumeRecord, SessionRecord
from .turn import Turn
from .turns import Approve, Decision, Rejected, Respond, ResumeCodes, Settle

__all__ = ("resume_turn",)


async def resume_turn(
    runtime: Runtime,
    *,
    lease: SessionLease,
    principal: Principal | None,
    record: SessionRecord,
    decision: Decision,
) -> Turn:
    """Apply ``decision`` to the paused step and claim the session for the turn it resumes.

    A session left running by a process that died (its lease over) may be resumed too.

    Raises:
        Rejected: the session is not paused, another resume holds it, or no open call
            matches ``decision``.
    """
    pending = record.pending
    now = runtime.clock()
    crashed = record.status == "running" and (
        record.lease_until is None or record.lease_until <= now
    )
    if pending is None or (record.status != "paused" and not crashed):
        if record.status == "running" and not crashed:
            raise Rejected(ResumeCodes.CONFLICT, "Another resume holds this session.")
        raise Rejected(ResumeCodes.INVALID_INPUT, _no_match(decision))
    index = _match(pending, decision, crashed)
    call = pending.calls[index]
    updated, settled = _apply(runtime.host, call, decision)
    calls = list(pending.calls)
    calls[index] = updated
    claimed = await lease.claim(record, pending=pending.model_copy(update={"calls": tuple(calls)}))
    turn = Turn(runtime, lease=lease, principal=principal, record=claimed, turn_id=pending.turn_id)
    try:
        await turn.emit(
            "interaction.resumed",
            step_id=pending.step_id,
            call=updated,
            data={"decision": type(decision).__name__.lower()},
        )
        if settled is not None and isinstance(decision, Settle):
            # The ledger's deferred record ends as the call did: the validated output, or
            # the INVALID_OUTPUT failure the model was given.
            await runtime.host.settle(decision.invocation_id, settled)
    except BaseException:
        turn.end()  # the turn will not run: the session must not look busy here forever
        raise
    return turn


def _no_match(decision: Decision) -> str:
    if isinstance(decision, Settle):
        return f"No deferred call {decision.invocation_id!r} is waiting to be settled."
    return f"No open interaction {decision.interaction_id!r} in this session."


def _match(pending: PendingStep, decision: Decision, crashed: bool) -> int:
    """The index of the call ``decision`` resumes; raises ``Rejected`` when none does."""
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
                raise Rejected(
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
    raise Rejected(ResumeCodes.INVALID_INPUT, _no_match(decision))


def _apply(
    host: Host, call: CallRecord, decision: Decision
) -> tuple[CallRecord, ToolOutcome | None]:
    """The call's state after ``decision`` (before it runs again), and a settled outcome."""
    if call.status == "pending":
        return call, None
    if isinstance(decision, Settle):
        registered = host.registry.get(call.tool_name)
        outcome = decision.outcome
        if not isinstance(outcome, Completed | Denied | Failed):
            raise Rejected(
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
            model_name=call.call.name,
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
