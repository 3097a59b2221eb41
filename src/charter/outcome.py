"""The five outcomes of a tool call, one value every transport renders."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter
from pydantic_core import to_jsonable_python

from .errors import DEFAULT_NEXT_STEPS, ErrorCode, ToolError

__all__ = (
    "Completed",
    "Deferred",
    "Denied",
    "Failed",
    "Interaction",
    "InteractionRequired",
    "ToolOutcome",
    "failed",
    "failed_from_error",
    "outcome_adapter",
)

_frozen = ConfigDict(frozen=True, extra="forbid")


class Interaction(BaseModel):
    """A request for a person's approval or answer before a tool can continue."""

    model_config = _frozen

    id: str
    """Stable id; for approvals it is the ``approvalId`` an approver grants."""
    kind: Literal["approval", "response"]
    """``approval``: a yes/no decision; ``response``: an answer the tool needs."""
    prompt: str
    """What to show the person."""
    metadata: dict[str, JsonValue] | None = None
    """Structured details (the action, target, why it is needed)."""


class Completed(BaseModel):
    """The tool ran and produced output that matches its output schema."""

    model_config = _frozen

    kind: Literal["completed"] = "completed"
    output: JsonValue
    """The validated output, as JSON-compatible data."""
    replayed: bool = False
    """True when this is the stored outcome of an earlier identical request."""


class Denied(BaseModel):
    """The call was refused as a decision, not an error (e.g. a person rejected it)."""

    model_config = _frozen

    kind: Literal["denied"] = "denied"
    reason: str


class Failed(BaseModel):
    """The call failed with a coded error a caller (or model) can act on."""

    model_config = _frozen

    kind: Literal["failed"] = "failed"
    code: ErrorCode
    message: str
    retryable: bool = False
    next_steps: tuple[str, ...] = ()
    meta: dict[str, JsonValue] | None = None
    replayed: bool = False

    @property
    def reason(self) -> str | None:
        """The finer cause in ``meta["reason"]``, if any."""
        value = (self.meta or {}).get("reason")
        return value if isinstance(value, str) else None


class InteractionRequired(BaseModel):
    """The call is paused until a person approves or answers."""

    model_config = _frozen

    kind: Literal["interaction-required"] = "interaction-required"
    interaction: Interaction
    token: JsonValue = None
    """Opaque state the tool wants back when it resumes."""


class Deferred(BaseModel):
    """The work continues elsewhere; the host settles it later."""

    model_config = _frozen

    kind: Literal["deferred"] = "deferred"
    token: JsonValue = None


ToolOutcome = Annotated[
    Completed | Denied | Failed | InteractionRequired | Deferred, Field(discriminator="kind")
]
"""Any outcome, discriminated by ``kind``; round-trips through JSON."""

outcome_adapter: TypeAdapter[ToolOutcome] = TypeAdapter(ToolOutcome)
"""Validates and serialises outcomes (``outcome_adapter.validate_json(...)``)."""


def failed(
    code: ErrorCode,
    message: str,
    *,
    retryable: bool | None = None,
    next_steps: tuple[str, ...] = (),
    **meta: Any,
) -> Failed:
    """Build a ``Failed`` with default next steps and retryability for ``code``."""
    error = ToolError(code, message, retryable=retryable, next_steps=next_steps, meta=meta or None)
    return failed_from_error(error)


def failed_from_error(error: ToolError) -> Failed:
    """Turn a raised ``ToolError`` into a ``Failed`` outcome."""
    return Failed(
        code=error.code,
        message=error.message,
        retryable=error.retryable,
        next_steps=error.next_steps or DEFAULT_NEXT_STEPS[error.code],
        meta=to_jsonable_python(error.meta, fallback=str) if error.meta else None,
    )
