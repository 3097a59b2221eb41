"""What both bridges send the host for one model tool call, and how they settle a deferred one."""

from __future__ import annotations

from dataclasses import dataclass

from ..auth import Principal
from ..host import CallOptions, Host, derive_request_id
from ..host._pipeline import principal_id
from ..manifest import RegisteredTool
from ..outcome import Completed, ToolOutcome
from ..policy import InvocationControls
from ..registry import finish_output

__all__ = ("ModelCall", "model_call", "settle_model_call")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCall:
    """What a bridge sends the host for one model tool call."""

    request_id: str
    """The ledger request id: from the session and the model's tool call id."""
    invocation_id: str
    """Names the call's deferred record: from the caller and the request id."""
    controls: InvocationControls
    options: CallOptions


def model_call(
    principal: Principal | None,
    session_id: str,
    call_id: str,
    *,
    bridge: str,
    audience: str | None,
    model_name: str,
) -> ModelCall:
    """The ledger request id, invocation id, controls and call options of one model tool call.

    The request id derives from the session and the model's tool call id, so a resumed or
    replayed call finds the outcome the first one stored instead of running again. The
    invocation id (``<bridge>_<uuid>``) keys the call's deferred record, which the store
    keeps by that id alone, across tenants and sessions: it derives from the caller and
    the request id, so two threads whose models both name a call ``call_0`` never share
    a record, and a re-run of the same call still names the one it made.
    """
    request_id = derive_request_id(session_id, call_id)
    invocation_id = f"{bridge}_{derive_request_id(principal_id(principal), request_id)}"
    return ModelCall(
        request_id=request_id,
        invocation_id=invocation_id,
        controls=InvocationControls.model_validate({"requestId": request_id}),
        options=CallOptions(
            audience=audience,
            session_id=session_id,
            call_id=call_id,
            invocation_id=invocation_id,
            model_name=model_name,
        ),
    )


async def settle_model_call(
    host: Host,
    registered: RegisteredTool,
    principal: Principal | None,
    invocation_id: str,
    output: object,
) -> ToolOutcome:
    """The outcome of a deferred model call whose work finished with ``output``.

    Settles the host's deferred record as the principal's tenant (a record of another
    tenant is never touched); the output is validated like any tool's output. A call of
    an unledgered tool keeps no record: its output is only validated.
    """
    tenant = principal.tenant_id if principal is not None else ""
    settlement = await host.settle(invocation_id, Completed(output=output), tenant=tenant)
    if settlement.stored is not None:
        return settlement.stored
    refused = settlement.refused
    if refused is not None and refused.reason != "deferred_not_found":
        return refused
    return finish_output(registered, Completed(output=output))
