"""The context a handler sees: the domain's services, then who is calling and for whom."""

from __future__ import annotations

import inspect

from ..auth import Principal
from ..context import CancelSignal, ToolContext
from ..manifest import RegisteredTool
from ..policy import InvocationControls
from ._calls import CallOptions, ContextFactory
from ._ids import random_id

__all__ = ("build_context", "plain_context")


def plain_context(
    principal: Principal | None,
    controls: InvocationControls,
    call: CallOptions,
    *,
    audience: str | None,
    tenant: str,
    delegated: bool,
) -> ToolContext:
    """The handler's context of a host without a context factory: the host's facts alone.

    The same context ``build_context`` makes from a plain ``ToolContext``, built in one
    call (and with the transport's cancel signal, if it has one, instead of a new one).
    """
    cancel = call.cancel
    return ToolContext(
        tenant_id=tenant,
        actor=principal.actor if principal is not None else None,
        audience=audience,
        principal=principal,
        delegated=delegated,
        request_id=controls.request_key,
        session_id=call.session_id,
        turn_id=call.turn_id,
        step_id=call.step_id,
        call_id=call.call_id,
        invocation_id=call.invocation_id or random_id(),
        cancel=cancel if cancel is not None else CancelSignal(),
        state=call.state,
        resume=call.resume,
        progress_sink=call.progress_sink,
        log_sink=call.log_sink,
        sampler=call.sampler,
    )


async def build_context(
    factory: ContextFactory,
    registered: RegisteredTool,
    principal: Principal | None,
    controls: InvocationControls,
    call: CallOptions,
    *,
    audience: str | None,
    tenant: str,
    delegated: bool,
) -> ToolContext:
    """The handler's context: the factory's, then the host's facts."""
    made = factory(principal, registered, controls)
    ctx = await made if inspect.isawaitable(made) else made
    ctx.tenant_id = tenant
    ctx.principal = principal
    ctx.actor = principal.actor if principal is not None else None
    ctx.audience = audience
    ctx.delegated = delegated
    ctx.request_id = controls.request_key
    # A caller-supplied admission is never trusted; the gate mints one when needed.
    ctx.handler_action_policy = None
    ctx.effect_stager = None
    ctx.session_id = call.session_id
    ctx.turn_id = call.turn_id
    ctx.step_id = call.step_id
    ctx.call_id = call.call_id
    ctx.invocation_id = call.invocation_id or random_id()
    ctx.resume = call.resume
    ctx.state = call.state
    ctx.progress_sink = call.progress_sink
    ctx.log_sink = call.log_sink
    ctx.sampler = call.sampler
    if call.cancel is not None:
        ctx.cancel = call.cancel
    return ctx
