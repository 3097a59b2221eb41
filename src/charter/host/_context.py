"""The context a handler sees: the domain's services, then who is calling and for whom."""

from __future__ import annotations

import inspect
from typing import Any

from ..auth import Principal
from ..context import CancelSignal, ToolContext
from ..manifest import RegisteredTool
from ..policy import InvocationControls
from ._calls import CallOptions, ContextFactory
from ._ids import random_id

__all__ = ("build_context", "host_facts", "plain_context")


def host_facts(
    principal: Principal | None,
    controls: InvocationControls,
    call: CallOptions,
    *,
    audience: str | None,
    tenant: str,
    delegated: bool,
) -> dict[str, Any]:
    """What the host sets on every handler's context, by field: who calls, for whom, how."""
    return {
        "tenant_id": tenant,
        "actor": principal.actor if principal is not None else None,
        "audience": audience,
        "principal": principal,
        "delegated": delegated,
        "request_id": controls.request_key,
        # A caller-supplied admission is never trusted; the gate mints one when needed.
        "handler_action_policy": None,
        "effect_stager": None,
        "session_id": call.session_id,
        "turn_id": call.turn_id,
        "step_id": call.step_id,
        "call_id": call.call_id,
        "invocation_id": call.invocation_id or random_id(),
        "state": call.state,
        "resume": call.resume,
        "progress_sink": call.progress_sink,
        "log_sink": call.log_sink,
        "sampler": call.sampler,
    }


def plain_context(facts: dict[str, Any], call: CallOptions) -> ToolContext:
    """The handler's context of a host without a context factory: the host's ``facts`` alone.

    The same context ``build_context`` makes from a plain ``ToolContext``, built in one
    call (with the transport's cancel signal, if it has one, instead of a new one).
    """
    cancel = call.cancel
    return ToolContext(**facts, cancel=cancel if cancel is not None else CancelSignal())


async def build_context(
    factory: ContextFactory,
    registered: RegisteredTool,
    principal: Principal | None,
    controls: InvocationControls,
    call: CallOptions,
    facts: dict[str, Any],
) -> ToolContext:
    """The handler's context: the factory's, then the host's ``facts``."""
    made = factory(principal, registered, controls)
    ctx = await made if inspect.isawaitable(made) else made
    for name, value in facts.items():
        setattr(ctx, name, value)
    if call.cancel is not None:
        ctx.cancel = call.cancel
    return ctx
