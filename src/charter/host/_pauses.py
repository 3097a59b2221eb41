"""A call's pauses for a person: continuing one, or asking an approval before the call.

``Host.resume`` continues a paused call with the person's answer;
``Host.request_approval`` asks a person's approval of one exact call before making it.

A handler's own question is answered through ``CallOptions.resume``; a gate's pause
(confirmation, approval) is the paused call again with the continuation's controls, which
win over what the paused call sent, so the retry is exactly that call, now confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pydantic import ValidationError

from .._limits import PayloadLimits
from ..auth import Principal
from ..context import ResumeInfo
from ..errors import ErrorCode
from ..ledger import ApprovalRecord, LedgerStore
from ..outcome import Continuation, Denied, Failed, InteractionRequired, ToolOutcome, failed
from ..policy import CONTROL_FIELD, InvocationControls
from ._arguments import check_payload, foreign_pause, invalid_controls, merge_controls
from ._calls import CallOptions, PreparedCall
from ._pipeline import Pipeline

__all__ = ("request_approval", "resume")


async def resume(
    pipeline: Pipeline,
    limits: PayloadLimits,
    paused: InteractionRequired,
    name: str,
    arguments: object,
    principal: Principal | None,
    *,
    approved: bool,
    value: object,
    controls: InvocationControls | None,
    call: CallOptions,
) -> ToolOutcome:
    """The paused call's outcome now, with the person's answer (``Host.resume``)."""
    if paused.gate == "handler":
        answer = ResumeInfo(
            interaction_id=paused.interaction.id,
            kind=paused.interaction.kind,
            approved=approved,
            value=value,
            token=paused.token,
        )
        call = replace(call, resume=answer)
        if paused.continuation is None:  # the call passed no gate: nothing to carry
            return await pipeline.invoke(name, arguments, principal, controls, call=call)
        # Else the call runs again past the gates it passed (its continuation), and the
        # person's answer, whatever it is, goes to the handler.
    elif not approved:
        what = "confirm" if paused.gate == "confirmation" else "go ahead with"
        return Denied(
            reason=f"The user declined to {what} this action; it did not run.",
            cause="user_declined",
            approval_id=paused.approval_id,
            request_id=paused.request_id,
            next_steps=("Do not retry this action unless the user asks for it again.",),
        )
    payload = check_payload(arguments, limits)
    if isinstance(payload, Failed):
        return await pipeline.invoke(name, arguments, principal, controls, call=call)
    sent = payload.get(CONTROL_FIELD)
    mismatch = foreign_pause(paused, controls, sent)
    if mismatch is not None:
        return mismatch
    continuation = paused.continuation or Continuation(confirmed=True)
    if sent is None:
        # Nothing in the arguments to override: the continuation joins the transport's
        # controls as they are, not written into ``_charter`` to be parsed back out.
        merged = merge_controls(
            InvocationControls.model_validate(continuation.controls()), controls
        )
        if isinstance(merged, Failed):
            return merged
        return await pipeline.invoke(name, payload, principal, merged, call=call)
    # The continuation's controls win over what the paused call sent (say an explicit
    # "confirmed": false), so the retry is exactly the paused call, now confirmed.
    resumed = {
        **payload,
        CONTROL_FIELD: {**sent, **continuation.controls()} if isinstance(sent, Mapping) else sent,
    }
    return await pipeline.invoke(name, resumed, principal, controls, call=call)


async def request_approval(
    pipeline: Pipeline,
    store: LedgerStore,
    name: str,
    arguments: object,
    principal: Principal | None,
    *,
    request_id: str,
    reason_code: str | None,
    call: CallOptions | None,
) -> ApprovalRecord | ToolOutcome:
    """The call's approval record, or why there is none (``Host.request_approval``)."""
    try:
        controls = InvocationControls(
            request_id=request_id,
            confirmed=True,
            reason_code=reason_code,
        )
    except ValidationError as exc:
        return invalid_controls(exc)
    prepared = await pipeline.prepare(name, arguments, principal, controls, call=call)
    if isinstance(prepared, PreparedCall):
        pipeline.discard(prepared)
        return failed(
            ErrorCode.INVALID_INPUT,
            f"Tool {prepared.name!r} does not need an approval for this call; make the "
            "call itself (with the confirmation it asks for).",
            reason="approval_not_required",
        )
    if isinstance(prepared, InteractionRequired) and prepared.approval_id is not None:
        record = await store.get_approval(prepared.approval_id)
        if record is not None:
            return record
    return prepared
