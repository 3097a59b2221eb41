"""What the gate answers instead of running a call: pauses, refusals, replays.

Each function builds one outcome the ledger gate returns before (or instead of) a
handler: the confirmation or approval a call waits for, the final ``Denied`` of a request
a person refused or whose approval expired, a stored outcome replayed, a request still in
flight, a database that went away.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from ..errors import ErrorCode, StoreUnavailable
from ..outcome import (
    Completed,
    Continuation,
    Denied,
    Failed,
    Interaction,
    InteractionRequired,
    ToolOutcome,
    failed,
    outcome_adapter,
)
from ..policy import CONTROL_FIELD
from ..registry import PreparedAction
from .approvals import ApprovalRecord
from .records import LedgerEntry

__all__ = (
    "already_executed",
    "approval_paused",
    "approval_refusal",
    "confirmation_required",
    "effect_key_in_use",
    "in_progress",
    "replay",
    "unavailable",
)


def approval_paused(record: ApprovalRecord, *, replayed: bool) -> InteractionRequired:
    """The ``InteractionRequired`` a caller gets while its approval is pending or unused."""
    continuation = Continuation(request_id=record.request_id, confirmed=True, approval_id=record.id)
    retry = f'"{CONTROL_FIELD}": {json.dumps(continuation.controls())}'
    on = f" on {record.target!r}" if record.target else ""
    if record.status == "approved":
        prompt = f"Approval {record.id} for {record.tool!r}{on} was granted."
        steps = [f"Retry the same call with {retry} to run it."]
    else:
        prompt = (
            f"Approval {record.id} is needed before {record.tool!r} runs{on}; a person "
            "who may approve must grant it."
        )
        steps = [
            f"Ask an approver to grant approval {record.id} (do not request another).",
            f"Then retry the same call with {retry}.",
        ]
    return InteractionRequired(
        interaction=Interaction(
            id=record.id,
            kind="approval",
            prompt=prompt,
            metadata={
                "code": ErrorCode.APPROVAL_REQUIRED.value,
                "approvalId": record.id,
                "status": record.status,
                "replayed": replayed,
                "tool": record.tool,
                "target": record.target,
                "requestId": record.request_id,
                "expiresAt": record.expires_at.isoformat(),
                "nextSteps": steps,
            },
        ),
        gate="approval",
        request_id=record.request_id,
        approval_id=record.id,
        approval_status=record.status,
        expires_at=record.expires_at,
        continuation=continuation,
        next_steps=tuple(steps),
    )


def approval_refusal(record: ApprovalRecord, now: datetime) -> Denied | None:
    """The final ``Denied`` of a request whose approval was denied or expired unused."""
    if record.status == "denied":
        reason = (
            f"A person ({record.decided_by}) denied approval {record.id} for {record.tool!r}"
            + (f": {record.decision_reason}" if record.decision_reason else "")
            + ". This request will not run; do not retry it unless the person changes their "
            "mind (then make a new request with a new requestId)."
        )
        cause, at, decision_reason = "approval_denied", record.decided_at, record.decision_reason
        step = "Tell the user the action was denied and why; do not retry this request."
    elif record.status_at(now) == "expired":
        reason = (
            f"Approval {record.id} for {record.tool!r} expired at "
            f"{record.expires_at.isoformat()} before it was "
            + ("used" if record.status == "approved" else "decided")
            + ". This request will not run; to try again, make a new request with a new "
            "requestId."
        )
        cause, at, decision_reason = "approval_expired", record.expires_at, None
        step = (
            "If the action is still wanted, make the call again with a new requestId; "
            "it asks for a new approval."
        )
    else:
        return None
    return Denied(
        reason=reason,
        cause=cause,
        approval_id=record.id,
        request_id=record.request_id,
        decided_by=record.decided_by,
        decided_at=at,
        decision_reason=decision_reason,
        next_steps=(step,),
    )


def confirmation_required(
    prepared: PreparedAction, fingerprint: str | None, request_id: str | None
) -> InteractionRequired:
    """The ``InteractionRequired`` of a call that needs the caller's ``confirmed: true``."""
    registered = prepared.tool
    digest = fingerprint or "sha256:" + uuid.uuid4().hex
    continuation = Continuation(request_id=request_id, confirmed=True)
    return InteractionRequired(
        interaction=Interaction(
            id="confirm_" + digest.removeprefix("sha256:")[:24],
            kind="approval",
            prompt=f"Allow {registered.name!r} to run"
            + (f" on {prepared.target!r}" if prepared.target else "")
            + "?",
            metadata={
                "code": ErrorCode.CONFIRMATION_REQUIRED.value,
                "tool": registered.name,
                "target": prepared.target,
                "retryWith": {CONTROL_FIELD: continuation.controls()},
            },
        ),
        gate="confirmation",
        request_id=request_id,
        continuation=continuation,
        next_steps=(
            "Ask the user to confirm this exact action.",
            f'Once they agree, retry the same call with "{CONTROL_FIELD}": '
            f"{json.dumps(continuation.controls())}.",
        ),
    )


def replay(entry: LedgerEntry, fingerprint: str) -> ToolOutcome:
    if entry.fingerprint != fingerprint:
        return failed(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "This requestId was already used for a different call; the stored call is not shown.",
            reason="idempotency_key_reused",
        )
    if entry.status == "in_progress" or entry.outcome is None:
        return in_progress(entry.request_id)
    stored = outcome_adapter.validate_json(entry.outcome)
    if isinstance(stored, (Completed, Failed)):
        return stored.model_copy(update={"replayed": True})
    return stored


def effect_key_in_use(key: str) -> Failed:
    """An effect key already in the outbox: the call rolls back rather than lose its effect.

    Never expected (the key names the call's ledger entry), but a skipped insert would
    commit the call without its effect.
    """
    return failed(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "An effect this call staged has the key of an effect already in the outbox; the call "
        "was rolled back so that its effect is not lost.",
        next_steps=("Report the effect key to the operator; retry with a new requestId.",),
        reason="effect_key_in_use",
        effectKey=key,
    )


def in_progress(request_id: str) -> Failed:
    """The answer to a retry of ``request_id`` while the request still runs (retryable)."""
    return failed(
        ErrorCode.REQUEST_IN_PROGRESS,
        "The same request is still running; retry with the same requestId shortly.",
        reason="request_in_progress",
        requestId=request_id,
    )


def unavailable(exc: StoreUnavailable) -> Failed:
    if exc.commit_unknown:
        return failed(
            ErrorCode.PROVIDER_UNAVAILABLE,
            "The database connection was lost while the call was committing, so it may or "
            "may not have taken effect.",
            retryable=True,
            next_steps=(
                "Retry the same call with the same requestId (not a new one): if it took "
                "effect you get its stored result, otherwise it runs now.",
            ),
            reason="commit_outcome_unknown",
        )
    return failed(
        ErrorCode.PROVIDER_UNAVAILABLE,
        "The database is unreachable or dropped the connection before the call committed; "
        "nothing was stored.",
        retryable=True,
        next_steps=("Retry the same call with the same requestId shortly; it runs afresh.",),
        reason="store_unavailable",
    )


def already_executed(approval_id: str) -> Failed:
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        "The approval does not authorise this exact call.",
        reason="already_executed",
        approvalId=approval_id,
    )
