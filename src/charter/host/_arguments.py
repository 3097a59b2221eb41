"""A call's arguments: the payload under its limits, and the reserved controls in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .._limits import PayloadLimits, PayloadRejected, check_value, parse_json
from ..errors import ErrorCode
from ..manifest import RegisteredTool
from ..outcome import Failed, InteractionRequired, failed
from ..policy import CONTROL_FIELD, InvocationControls
from ._calls import canonical_request_id

__all__ = (
    "NO_CONTROLS",
    "check_payload",
    "foreign_pause",
    "invalid_controls",
    "merge_controls",
    "split_controls",
)

NO_CONTROLS = InvocationControls()
"""The controls of a call that sent none (frozen, so one instance serves every call)."""


def check_payload(arguments: object, limits: PayloadLimits) -> Mapping[str, Any] | Failed:
    """The arguments as a JSON object, parsed (raw JSON) or checked under ``limits``."""
    try:
        if type(arguments) is bytes or isinstance(arguments, str):
            value = parse_json(arguments, limits)
        elif isinstance(arguments, (bytes, bytearray, memoryview)):  # a subclass, a view
            value = parse_json(bytes(arguments), limits)
        else:
            check_value(arguments, limits)
            value = arguments
    except PayloadRejected as exc:
        return failed(
            ErrorCode.INVALID_INPUT,
            f"The arguments were rejected: {exc}",
            reason=exc.reason,
            issues=[],
        )
    if type(value) is not dict and not isinstance(value, Mapping):
        return failed(
            ErrorCode.INVALID_INPUT,
            "The arguments must be a JSON object.",
            reason="not_an_object",
            issues=[],
        )
    return value


def split_controls(
    registered: RegisteredTool,
    payload: Mapping[str, Any],
    given: InvocationControls | None,
) -> tuple[dict[str, Any], InvocationControls] | Failed:
    """Take ``_charter`` out of the arguments, parse it strictly, merge the transport's."""
    arguments = dict(payload)
    if CONTROL_FIELD not in arguments and given is None:
        return arguments, NO_CONTROLS
    sent = CONTROL_FIELD in arguments
    raw = arguments.pop(CONTROL_FIELD, None)
    try:
        # Sent, it must be an object, as the manifest publishes it: ``null`` is refused.
        body = InvocationControls.model_validate(raw) if sent else NO_CONTROLS
    except ValidationError as exc:
        return invalid_controls(exc)
    merged = merge_controls(body, given)
    if isinstance(merged, Failed):
        return merged
    unaccepted = merged.given() - registered.controls.accepted - {"onBehalfOf"}
    if unaccepted:
        return failed(
            ErrorCode.INVALID_INPUT,
            f"Tool {registered.name!r} does not accept the control(s) "
            f"{', '.join(sorted(unaccepted))}.",
            reason="control_not_accepted",
            accepted=sorted(registered.controls.accepted),
        )
    return arguments, merged


def merge_controls(
    body: InvocationControls, given: InvocationControls | None
) -> InvocationControls | Failed:
    """Merge transport controls (headers) with ``_charter``; a value in both must agree."""
    if given is None:
        return body
    if body is NO_CONTROLS:
        return given
    merged: dict[str, Any] = {}
    for field_name in InvocationControls.model_fields:
        a, b = getattr(body, field_name), getattr(given, field_name)
        if a is not None and b is not None and a != b:
            alias = InvocationControls.model_fields[field_name].alias or field_name
            return failed(
                ErrorCode.INVALID_INPUT,
                f"The control {alias!r} was given twice with different values.",
                reason="controls_conflict",
                control=alias,
            )
        value = a if a is not None else b
        if value is not None:
            merged[field_name] = value
    return InvocationControls.model_validate(
        {InvocationControls.model_fields[k].alias or k: v for k, v in merged.items()}
    )


def invalid_controls(exc: ValidationError) -> Failed:
    """``INVALID_INPUT`` (``invalid_controls``) naming each control ``exc`` refused, and why."""
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    return failed(
        ErrorCode.INVALID_INPUT,
        f"Invalid {CONTROL_FIELD} controls: "
        + "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in errors),
        reason="invalid_controls",
        issues=[
            {"loc": [CONTROL_FIELD, *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]}
            for e in errors
        ],
    )


def foreign_pause(
    paused: InteractionRequired, controls: InvocationControls | None, sent: object
) -> Failed | None:
    """Refuse continuing a pause under another request id than the one it belongs to."""
    if paused.request_id is None:
        return None
    given = controls.request_key if controls is not None else None
    if given is None and isinstance(sent, Mapping):
        given = canonical_request_id(sent.get("requestId"))
    if given is None or given == paused.request_id:
        return None
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        "This pause belongs to another request; it cannot continue this one.",
        reason="request_id_mismatch",
        approvalId=paused.approval_id,
    )
