"""Sealing a model step: each tool call becomes an immediate result or an executable call.

Immediate results are decided in this order (the seed's ``seal.ts``):

1. empty call id → failed ``tool.invalid-call-id``;
2. a call id seen earlier in the step → failed ``tool.duplicate-call-id``;
3. a tool the session may not use → failed ``tool.unknown``;
4. arguments that are not a JSON object, break the payload limits, carry the reserved
   ``_charter`` controls, or fail the input model → failed ``tool.invalid-arguments``
   with ``details = {"phase": "input", "issues": [...]}`` (values are never echoed);
5. a middleware denies the call → ``denied`` with its reason.

Everything else is executable, with a fresh invocation id. The model's order is kept.
With a ``CallPreparer`` (the harness's turns use ``HostPreparer``) step 4's input check is
the host's ``prepare``, and the prepared call is what runs: each call is parsed once and
validated once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import JsonValue

from .._limits import PayloadLimits, PayloadRejected, check_value, parse_json
from ..auth import Principal
from ..errors import ErrorCode
from ..outcome import Denied, Failed, Interaction, failed
from ..policy import CONTROL_FIELD
from ..registry import Registry
from .definitions import BoundToolDefinition, SealedToolCall, bound_names, lookup
from .messages import ToolCall, ToolResult
from .names import ModelNames

__all__ = (
    "CallMiddleware",
    "CallPreparer",
    "PlannedCall",
    "SealCodes",
    "model_controls_refused",
    "seal_calls",
)


class SealCodes:
    """The failure codes sealing and execution give tool results (the seed's vocabulary)."""

    INVALID_CALL_ID = "tool.invalid-call-id"
    DUPLICATE_CALL_ID = "tool.duplicate-call-id"
    UNKNOWN = "tool.unknown"
    INVALID_ARGUMENTS = "tool.invalid-arguments"
    INVALID_OUTPUT = "tool.invalid-output"
    INVALID_TOOL_RESULT = "tool.invalid-tool-result"
    EXECUTION_FAILED = "tool.execution-failed"
    CANCELLED = "tool.cancelled"


class CallMiddleware(Protocol):
    """Protocol: reviews each sealed call before it runs.

    Return None to let the call run, a ``Denied`` to refuse it (the model gets a denied
    result), or an ``Interaction`` to pause the session before anything in the step runs
    (resumed like any other interaction; a rejected approval becomes "Approval rejected").
    Approvals bound to the exact arguments belong in the tool's action policy instead.
    """

    id: str
    """The middleware id, reported as the ``middleware_id`` of interactions it raises."""

    async def review(
        self, call: SealedToolCall, tool: BoundToolDefinition, principal: Principal | None
    ) -> Denied | Interaction | None:
        """Decide whether the call may run."""
        ...


class CallPreparer(Protocol):
    """Protocol: validates a sealed call once, on the host, and keeps it for execution.

    ``prepare`` returns the ``Failed`` (``INVALID_INPUT``) that makes the arguments
    invalid, or None when the call was prepared (or answered) and is kept under its
    invocation id; ``discard`` drops a kept call that will not run.
    """

    async def prepare(
        self,
        call: ToolCall,
        tool: BoundToolDefinition,
        arguments: dict[str, JsonValue],
        invocation_id: str,
    ) -> Failed | None:
        """Prepare the call; the failure that makes its arguments invalid, else None."""
        ...

    def discard(self, invocation_id: str) -> None:
        """Drop the call kept under ``invocation_id`` (nothing when there is none)."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedCall:
    """One model tool call after sealing: an immediate result or an executable call."""

    call: ToolCall
    result: ToolResult | None = None
    sealed: SealedToolCall | None = None
    tool: BoundToolDefinition | None = None
    invocation_id: str | None = None
    interaction: Interaction | None = None
    """A before-execution interaction a middleware attached."""
    middleware_id: str | None = None


async def seal_calls(
    calls: Sequence[ToolCall],
    *,
    tools: Mapping[str, BoundToolDefinition],
    registry: Registry,
    limits: PayloadLimits,
    principal: Principal | None,
    middleware: Sequence[CallMiddleware] = (),
    new_id: Callable[[], str],
    preparer: CallPreparer | None = None,
    names: ModelNames | None = None,
) -> list[PlannedCall]:
    """Seal one step's tool calls, in the model's order (see the module docstring).

    With a ``preparer`` the arguments are validated by the host's ``prepare`` (once:
    the prepared call is what later runs); without one, by the registry. ``names`` are
    the tools' model-facing names (``bound_names(tools)``, computed here when not given;
    a turn computes them once).
    """
    seen: set[str] = set()
    names = names if names is not None else bound_names(tools)
    planned: list[PlannedCall] = []
    for call in calls:
        planned.append(
            await _seal_one(
                call, seen, tools, names, registry, limits, principal, middleware, new_id, preparer
            )
        )
    return planned


async def _seal_one(
    call: ToolCall,
    seen: set[str],
    tools: Mapping[str, BoundToolDefinition],
    names: ModelNames,
    registry: Registry,
    limits: PayloadLimits,
    principal: Principal | None,
    middleware: Sequence[CallMiddleware],
    new_id: Callable[[], str],
    preparer: CallPreparer | None,
) -> PlannedCall:
    call_id = call.call_id
    if not isinstance(call_id, str) or not call_id.strip():
        return _immediate(call, SealCodes.INVALID_CALL_ID, "The tool call has an empty id.")
    if call_id in seen:
        return _immediate(
            call,
            SealCodes.DUPLICATE_CALL_ID,
            f"The tool call id {call_id!r} was already used in this step.",
        )
    seen.add(call_id)
    name = lookup(tools, registry, call.name, names)
    if name is None:
        shown = call.name if len(call.name) <= 128 else call.name[:125] + "..."
        return _immediate(
            call,
            SealCodes.UNKNOWN,
            f"Unknown tool {shown!r}. Available tools: {', '.join(sorted(names.by_model))}.",
        )
    bound = tools[name]
    args = _arguments(call, bound, registry, limits, validate=preparer is None)
    if isinstance(args, ToolResult):
        return PlannedCall(call=call, result=args)
    invocation_id = new_id()
    if preparer is not None:
        refused = await preparer.prepare(call, bound, args, invocation_id)
        if refused is not None:
            return PlannedCall(call=call, result=_invalid(call, bound, _issues(refused), refused))
    sealed = SealedToolCall(call_id=call_id, tool_name=name, args=args)
    for reviewer in middleware:
        verdict = await reviewer.review(sealed, bound, principal)
        if verdict is not None and preparer is not None:
            preparer.discard(invocation_id)
        if isinstance(verdict, Denied):
            return PlannedCall(
                call=call,
                result=ToolResult(
                    kind="denied",
                    call_id=call_id,
                    tool_name=name,
                    model_name=call.name,
                    reason=verdict.reason,
                ),
            )
        if isinstance(verdict, Interaction):
            return PlannedCall(
                call=call,
                sealed=sealed,
                tool=bound,
                invocation_id=invocation_id,
                interaction=verdict,
                middleware_id=reviewer.id,
            )
    return PlannedCall(call=call, sealed=sealed, tool=bound, invocation_id=invocation_id)


def _arguments(
    call: ToolCall,
    bound: BoundToolDefinition,
    registry: Registry,
    limits: PayloadLimits,
    *,
    validate: bool,
) -> dict[str, JsonValue] | ToolResult:
    try:
        if isinstance(call.arguments, str):
            value = parse_json(call.arguments or "{}", limits)
        else:
            check_value(call.arguments, limits)
            value = json.loads(json.dumps(call.arguments, allow_nan=False))
    except (PayloadRejected, ValueError, TypeError) as exc:
        reason = exc.reason if isinstance(exc, PayloadRejected) else "invalid_json"
        return _invalid(call, bound, [{"path": [], "code": "invalid_json", "message": reason}])
    if not isinstance(value, dict):
        return _invalid(
            call,
            bound,
            [{"path": [], "code": "invalid_type", "message": "Arguments must be a JSON object"}],
        )
    reserved = model_controls_refused(value)
    if reserved is not None:
        return _invalid(call, bound, _issues(reserved))
    if validate:
        parsed = registry.validate_input(bound.registered, value)
        if isinstance(parsed, Failed):
            return _invalid(call, bound, _issues(parsed))
    return value


def model_controls_refused(arguments: Mapping[str, object]) -> Failed | None:
    """Why a model's tool arguments are refused for carrying ``_charter``; None if they do not.

    The model never supplies invocation controls: a model that could send
    ``"confirmed": true`` would confirm (or approve) its own calls, and one sending
    ``onBehalfOf`` or ``reasonCode`` would choose the tenant a delegable tool acts for or
    the reason a person reads. The harness and the framework bridges refuse them alike.
    """
    if CONTROL_FIELD not in arguments:
        return None
    message = "This field is reserved for the host and cannot be sent"
    return failed(
        ErrorCode.INVALID_INPUT,
        f"{CONTROL_FIELD}: {message}",
        reason="reserved",
        issues=[{"loc": [CONTROL_FIELD], "type": "reserved", "msg": message}],
    )


def _issues(failed: Failed) -> list[dict[str, Any]]:
    raw = (failed.meta or {}).get("issues")
    return [
        {"path": _path(i.get("loc")), "code": i.get("type"), "message": i.get("msg")}
        for i in (raw if isinstance(raw, list) else [])
        if isinstance(i, dict)
    ]


def _path(loc: object) -> list[str]:
    return [str(part) for part in loc] if isinstance(loc, list) else []


def _invalid(
    call: ToolCall,
    bound: BoundToolDefinition,
    issues: list[dict[str, Any]],
    failed: Failed | None = None,
) -> ToolResult:
    text = "; ".join(
        f"{'.'.join(str(p) for p in issue['path']) or '(root)'}: {issue['message']}"
        for issue in issues
    )
    if not text and failed is not None:
        text = failed.message
    return ToolResult(
        kind="failed",
        call_id=call.call_id,
        tool_name=bound.name,
        model_name=call.name,
        code=SealCodes.INVALID_ARGUMENTS,
        message=text or "The arguments are invalid.",
        retryable=True,
        next_steps=("Fix the arguments so they match the tool's parameters, then call again.",),
        details={"phase": "input", "issues": issues},
    )


def _immediate(call: ToolCall, code: str, message: str) -> PlannedCall:
    return PlannedCall(
        call=call,
        result=ToolResult(
            kind="failed",
            call_id=call.call_id,
            tool_name=call.name,
            model_name=call.name,
            code=code,
            message=message,
            retryable=code != SealCodes.INVALID_CALL_ID,
        ),
    )
