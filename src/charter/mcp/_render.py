"""Outcomes as MCP tool results: the one table from ``ErrorCode`` to an MCP rendering."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import mcp.types as types
from pydantic_core import to_json

from .._mcp_config import STATUS_TOOL
from .._redaction import redact
from .._wording import failure_text, heading, scope_challenge, with_next_steps
from ..errors import ErrorCode
from ..manifest import CONTRACT_VERSION
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome

__all__ = ("OUTCOME_META_KEY", "Presenter", "Resolution", "completed_wire", "render_outcome")

OUTCOME_META_KEY = "charter/outcome"
"""``_meta`` key of a non-completed result: the outcome as charter's JSON (``outcome_adapter``)."""

Presenter = Callable[[Mapping[str, Any]], Sequence[types.ContentBlock]]
"""Renders a tool's validated output (JSON-compatible) as MCP content blocks.

Usage ``Presenter``: ``lambda out: [types.ImageContent(type="image", data=..., mimeType=...)]``.
The result still carries the output as ``structuredContent``; only ``content`` changes.
"""

Resolution = Literal["caller", "user", "approver", "retry", "operator"]
"""Who can resolve an error: the calling model (fix the call), the user, an approver,
time (retry later), or the server's operator."""

RESOLUTION: Mapping[ErrorCode, Resolution] = {
    ErrorCode.NOT_FOUND: "caller",
    ErrorCode.INVALID_INPUT: "caller",
    ErrorCode.INVALID_OUTPUT: "operator",
    ErrorCode.UNAUTHENTICATED: "caller",
    ErrorCode.AUTHORIZATION_DENIED: "caller",
    ErrorCode.CONFIRMATION_REQUIRED: "user",
    ErrorCode.APPROVAL_REQUIRED: "approver",
    ErrorCode.ACTION_POLICY_REQUIRED: "caller",
    ErrorCode.IDEMPOTENCY_CONFLICT: "caller",
    ErrorCode.REQUEST_IN_PROGRESS: "retry",
    ErrorCode.TIMEOUT: "retry",
    ErrorCode.CANCELLED: "caller",
    ErrorCode.MISSING_SERVICE: "operator",
    ErrorCode.PROVIDER_ERROR: "operator",
    ErrorCode.PROVIDER_UNAVAILABLE: "retry",
    ErrorCode.RATE_LIMITED: "retry",
    ErrorCode.UPSTREAM_ERROR: "caller",
}
"""Every error code's MCP rendering: who can resolve it (``_meta`` ``resolution``).

Every code renders as an ``isError`` result (``[CODE] message`` and next steps in the
text, the outcome in ``_meta``); JSON-RPC errors are kept for protocol faults.
"""


def render_outcome(
    outcome: ToolOutcome,
    *,
    presenter: Presenter | None = None,
    request_id: str | None = None,
) -> types.CallToolResult:
    """Render an outcome as a ``tools/call`` result.

    A failure the server caused (``PROVIDER_ERROR``, ``INVALID_OUTPUT``) is rendered
    redacted to its code and error id (``charter._redaction``), as on every transport.

    Args:
        outcome: what ``Host.invoke`` returned.
        presenter: renders completed output as content blocks, for this tool.
        request_id: the call's ``_charter.requestId``, named in a deferred result's handle.
    """
    if isinstance(outcome, Completed):
        return _completed(outcome, presenter)
    if isinstance(outcome, Failed):
        return _failed(redact(outcome))
    if isinstance(outcome, InteractionRequired):
        return _interaction(outcome)
    if isinstance(outcome, Denied):
        return _denied(outcome)
    return _deferred(outcome, request_id)


def _completed(outcome: Completed, presenter: Presenter | None) -> types.CallToolResult:
    output = outcome.output
    content: list[types.ContentBlock]
    if presenter is not None and isinstance(output, Mapping):
        content = list(presenter(output))
    else:
        content = [types.TextContent(type="text", text=to_json(output).decode())]
    meta = {"charter/replayed": True} if outcome.replayed else None
    return types.CallToolResult(content=content, structured_content=output, meta=meta)


def completed_wire(outcome: Completed) -> dict[str, Any] | None:
    """A completed outcome's ``tools/call`` result as the SDK sends it, or None.

    The same result as ``render_outcome`` without a presenter (its wire form, as
    ``model_dump(by_alias=True, mode="json", exclude_none=True)`` gives it), for an
    output that is a JSON object, as every tool's is once the host validated it; None
    for any other. A request handler may return this mapping instead of the model (the
    SDK's ``HandlerResult``): the SDK validates it against the protocol version's result
    schema either way, and building and dumping the two models cost about 45,000
    instructions a call (callgrind).
    """
    output = outcome.output
    if not isinstance(output, dict):
        return None
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": to_json(output).decode()}],
        "structuredContent": output,
        "isError": False,
        "resultType": "complete",
    }
    if outcome.replayed:
        result["_meta"] = {"charter/replayed": True}
    return result


def _failed(outcome: Failed) -> types.CallToolResult:
    meta: dict[str, Any] = {
        OUTCOME_META_KEY: outcome.model_dump(mode="json"),
        "charter/error": {
            "contractVersion": CONTRACT_VERSION,
            "code": outcome.code.value,
            "resolution": RESOLUTION[outcome.code],
            "retryable": outcome.retryable,
        },
    }
    retry_after = (outcome.meta or {}).get("retryAfter")
    if outcome.retryable and isinstance(retry_after, int | float):
        # Seconds until the call can succeed (a rate limit): clients back off this long.
        meta["charter/error"]["retryAfter"] = retry_after
    missing = (outcome.meta or {}).get("missing")
    if outcome.reason == "insufficient_scope" and isinstance(missing, list):
        # What an HTTP resource server would put in its 403 challenge (RFC 6750 §3.1).
        meta["charter/challenge"] = scope_challenge(missing)
    text = failure_text(outcome)
    if outcome.replayed:
        text += "\n(This is the stored result of an earlier identical request.)"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True, meta=meta
    )


def _interaction(outcome: InteractionRequired) -> types.CallToolResult:
    interaction = outcome.interaction
    label = _GATE_LABELS[outcome.gate]
    lines = [heading(label, interaction.prompt)]
    if outcome.approval_id is not None:
        lines.append(f"approvalId: {outcome.approval_id} ({outcome.approval_status})")
    next_steps: Sequence[str] = outcome.next_steps or (
        "Ask the user the question above, then call the tool again with their answer "
        "from a client that supports MCP elicitation.",
    )
    return _error_result("\n".join(lines), next_steps, outcome)


_GATE_LABELS: Mapping[str, str] = {
    "confirmation": ErrorCode.CONFIRMATION_REQUIRED.value,
    "approval": ErrorCode.APPROVAL_REQUIRED.value,
    "handler": "INTERACTION_REQUIRED",
}


def _denied(outcome: Denied) -> types.CallToolResult:
    steps = outcome.next_steps or (
        "A person declined this action; do not retry it unless they change their mind.",
    )
    return _error_result(heading("DENIED", outcome.reason), steps, outcome)


def _deferred(outcome: Deferred, request_id: str | None) -> types.CallToolResult:
    if request_id is not None:
        steps: tuple[str, ...] = (
            f'Call {STATUS_TOOL} with {{"requestId": "{request_id}"}} later to get the result; '
            "do not repeat this call with a new requestId.",
        )
    else:
        steps = ("The result will be delivered out of band; this call cannot be polled.",)
    return _error_result(
        heading("DEFERRED", "The call was accepted and continues in the background."),
        steps,
        outcome,
    )


def _error_result(
    first: str, next_steps: Sequence[str], outcome: ToolOutcome
) -> types.CallToolResult:
    # Not a failure, but a tool with an outputSchema must return matching structured
    # content on a non-error result, and this is not its output (see docs/mcp.md).
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=with_next_steps(first, next_steps))],
        is_error=True,
        meta={OUTCOME_META_KEY: outcome.model_dump(mode="json")},
    )
