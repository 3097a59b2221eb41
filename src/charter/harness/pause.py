"""A paused step: distinct interaction ids, and what the paused turn reports.

A step pauses while any of its calls is not settled: it waits on an interaction (a
middleware's, before anything in the step runs, or the call's own) or on a deferred
call. The step is saved as it is; the turn reports the open interactions and the
deferred calls, in the model's call order.
"""

from __future__ import annotations

from collections.abc import Iterable

from .store import CallRecord
from .turns import DeferredCall, PendingInteraction

__all__ = ("deferred_calls", "open_interactions", "unique_interactions")


def unique_interactions(calls: Iterable[CallRecord]) -> list[CallRecord]:
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


def open_interactions(calls: Iterable[CallRecord]) -> tuple[PendingInteraction, ...]:
    """The interactions the calls wait on, with the call each one resumes."""
    return tuple(
        PendingInteraction(
            interaction=call.interaction,
            call_id=call.call.call_id,
            tool_name=call.tool_name,
            invocation_id=call.invocation_id or "",
            middleware_id=call.middleware_id,
            slot=call.slot,
            phase=call.phase,
            gate=call.gate,
        )
        for call in calls
        if call.status == "interaction" and call.interaction is not None
    )


def deferred_calls(calls: Iterable[CallRecord]) -> tuple[DeferredCall, ...]:
    """The calls whose work continues elsewhere, to settle with ``Settle``."""
    return tuple(
        DeferredCall(
            invocation_id=call.invocation_id or "",
            call_id=call.call.call_id,
            tool_name=call.tool_name,
            token=call.token,
        )
        for call in calls
        if call.status == "deferred"
    )
