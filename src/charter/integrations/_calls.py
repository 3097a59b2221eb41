"""What both bridges send the host for one model tool call: request id, controls, options."""

from __future__ import annotations

from ..host import CallOptions, derive_request_id
from ..policy import InvocationControls

__all__ = ("model_call",)


def model_call(
    session_id: str, call_id: str, *, invocation_id: str, audience: str | None, model_name: str
) -> tuple[str, InvocationControls, CallOptions]:
    """The ledger request id, controls and call options of one model tool call.

    The request id derives from the session and the model's tool call id, so a resumed or
    replayed call finds the outcome the first one stored instead of running again.
    """
    request_id = derive_request_id(session_id, call_id)
    controls = InvocationControls.model_validate({"requestId": request_id})
    options = CallOptions(
        audience=audience,
        session_id=session_id,
        call_id=call_id,
        invocation_id=invocation_id,
        model_name=model_name,
    )
    return request_id, controls, options
