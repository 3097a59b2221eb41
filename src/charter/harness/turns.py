"""What a turn returns, the decisions that resume it, and the events it reports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from ..outcome import Interaction, ToolOutcome
from .messages import ToolResult

__all__ = (
    "Approve",
    "Decision",
    "DeferredCall",
    "HarnessEvent",
    "HarnessEventType",
    "Observer",
    "PendingInteraction",
    "Rejected",
    "Respond",
    "ResumeCodes",
    "Settle",
    "TurnResult",
    "TurnStatus",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Approve:
    """Resume an approval interaction with a decision.

    For an approval the host's action gate asked for (``APPROVAL_REQUIRED``), an approver
    grants it first with ``host.approvals.grant``; ``approved=True`` then re-invokes the
    call with that approval id, and the host checks it is granted, unexpired, unused and
    bound to these exact arguments. For a confirmation, ``approved=True`` is the person's
    confirmation. ``approved=False`` settles the call as denied ("Approval rejected")
    without running it.
    """

    interaction_id: str
    approved: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Respond:
    """Resume a response interaction with the person's answer (``ctx.resume.value``)."""

    interaction_id: str
    value: JsonValue


@dataclass(frozen=True, kw_only=True, slots=True)
class Settle:
    """Complete a deferred call with its outcome (completed output is validated)."""

    invocation_id: str
    outcome: ToolOutcome


Decision = Approve | Respond | Settle
"""What ``Session.resume`` accepts."""

TurnStatus = Literal["completed", "paused", "cancelled", "rejected", "max_steps"]
"""How a turn (or a resume) ended."""


class ResumeCodes:
    """Why a run or resume was rejected without calling the model."""

    INVALID_INPUT = "execution.invalid-input"
    """No open interaction or deferred call matches, or the decision's kind is wrong."""
    CONFLICT = "execution.conflict"
    """Another run or resume holds the session (or won the race to it)."""
    PAUSED = "execution.paused"
    """A new turn was started while the session waits on an interaction."""
    FORBIDDEN = "execution.forbidden"
    """The session belongs to another principal."""
    UNSUPPORTED_RECORD = "execution.unsupported-record"
    """The stored record has a schema version this harness does not know."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingInteraction:
    """An open interaction: what to ask, and which call waits on it."""

    interaction: Interaction
    call_id: str
    tool_name: str
    invocation_id: str
    middleware_id: str
    slot: str
    phase: Literal["before", "execute"]
    """``before``: a middleware asked before anything ran; ``execute``: the call asked."""
    gate: Literal["approval", "confirmation"] | None
    """Set when the host's action gate asked (then the interaction id is the approval id)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DeferredCall:
    """A call whose work continues elsewhere; settle it with ``Settle(invocation_id=...)``."""

    invocation_id: str
    call_id: str
    tool_name: str
    token: JsonValue = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnResult:
    """How a turn or a resume ended."""

    status: TurnStatus
    session_id: str
    turn_id: str | None = None
    text: str | None = None
    """The model's final text (completed turns)."""
    results: tuple[ToolResult, ...] = ()
    """The tool results this call appended to the transcript (finished steps), in order."""
    interactions: tuple[PendingInteraction, ...] = ()
    """Open interactions (paused turns)."""
    deferred: tuple[DeferredCall, ...] = ()
    """Deferred calls waiting to be settled (paused turns)."""
    code: str | None = None
    """Why it was rejected (``ResumeCodes``)."""
    reason: str | None = None


HarnessEventType = Literal[
    "model.step",
    "tool.started",
    "tool.finished",
    "interaction.required",
    "interaction.resumed",
    "tool.deferred",
    "session.paused",
    "turn.finished",
]
"""What a ``HarnessEvent`` reports."""


class Rejected(Exception):
    """Raised inside the harness to end a run or resume early, with one of ``ResumeCodes``.

    A decision that matches nothing, or a session that is another principal's, is
    rejected before anything executes; a conflict (another writer saved the session's
    record first) may also end a turn after its calls ran. It never reaches the caller:
    ``Session`` returns it as a ``rejected`` ``TurnResult`` (``result``).
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason

    def result(self, session_id: str) -> TurnResult:
        """The ``rejected`` result of ``session_id`` this becomes."""
        return TurnResult(
            status="rejected", session_id=session_id, code=self.code, reason=self.reason
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class HarnessEvent:
    """Something the harness did, for logs and traces (see ``Observer``)."""

    type: HarnessEventType
    session_id: str
    turn_id: str | None = None
    step_id: str | None = None
    call_id: str | None = None
    invocation_id: str | None = None
    tool_name: str | None = None
    middleware_id: str | None = None
    slot: str | None = None
    data: Mapping[str, Any] | None = None


Observer = Callable[[HarnessEvent], Awaitable[None] | None]
"""Receives harness events (sync or async). Usage ``Harness(..., observer=events.append)``."""
