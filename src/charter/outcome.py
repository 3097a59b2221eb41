"""The five outcomes of a tool call, one value every transport renders."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from ._limits._values import replace_surrogates
from .errors import DEFAULT_NEXT_STEPS, ErrorCode, ToolError

__all__ = (
    "ApprovalStatus",
    "Completed",
    "Continuation",
    "Deferred",
    "DenialCause",
    "Denied",
    "Failed",
    "Gate",
    "Interaction",
    "InteractionRequired",
    "ReportsToolError",
    "ToolOutcome",
    "failed",
    "failed_from_error",
    "not_found",
    "outcome_adapter",
)


Gate: TypeAlias = Literal["confirmation", "approval", "handler"]
"""What paused a call: the host's confirmation gate, its approval gate, or the handler."""

ApprovalStatus: TypeAlias = Literal["pending", "approved", "denied", "consumed"]
"""Where an approval stands; expiry is read from its ``expires_at``, not stored."""

DenialCause: TypeAlias = Literal["user_declined", "approval_denied", "approval_expired"]
"""Why a call was denied: the user declined a confirmation, an approver denied (or
revoked) the approval, or the approval expired before anyone decided or it was used."""


class Interaction(BaseModel):
    """A request for a person's approval or answer before a tool can continue."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["completed"] = "completed"
    output: JsonValue
    """The validated output, as JSON-compatible data."""
    replayed: bool = False
    """True when this is the stored outcome of an earlier identical request."""


class Denied(BaseModel):
    """The call was refused as a decision, not an error (e.g. a person rejected it).

    A denial is final for its request: every retry with the same request id is denied
    again. To try once more, make a new request (a new request id).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["denied"] = "denied"
    reason: str
    """What was decided and why, in words a person and a model can act on."""
    cause: DenialCause | None = None
    approval_id: str | None = None
    """The approval that was denied or expired."""
    request_id: str | None = None
    decided_by: str | None = None
    """Who denied it (``tenant/subject``), when a person did."""
    decided_at: datetime | None = None
    """When it was denied, or when the approval expired."""
    decision_reason: str | None = None
    """The reason the person gave, if any."""
    next_steps: tuple[str, ...] = ()


class Failed(BaseModel):
    """The call failed with a coded error a caller (or model) can act on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


class Continuation(BaseModel):
    """The reserved controls a retry sends in ``_charter`` to continue a paused call.

    ``Host.resume`` sends them for you; a client that retries by hand sends
    ``continuation.controls()`` with the call's unchanged arguments.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    request_id: str | None = Field(default=None, alias="requestId")
    confirmed: Literal[True] | None = None
    approval_id: str | None = Field(default=None, alias="approvalId")

    def controls(self) -> dict[str, JsonValue]:
        """The ``_charter`` object to send, by alias, without the unset controls."""
        return self.model_dump(by_alias=True, exclude_none=True)


class InteractionRequired(BaseModel):
    """The call is paused until a person confirms, an approver decides, or a person answers.

    The typed fields say which gate paused it and exactly what continues it, so no
    transport needs to read ``interaction.metadata``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["interaction-required"] = "interaction-required"
    interaction: Interaction
    token: JsonValue = None
    """Opaque state the tool wants back when it resumes."""
    gate: Gate = "handler"
    """``confirmation``/``approval``: the host's gates; ``handler``: the tool itself asked."""
    request_id: str | None = None
    """The request this pause belongs to (retry with the same one)."""
    approval_id: str | None = None
    """For the approval gate: the approval an approver must grant (``interaction.id``)."""
    approval_status: ApprovalStatus | None = None
    expires_at: datetime | None = None
    """When the approval expires if it is not decided and used by then."""
    continuation: Continuation | None = None
    """What the retry must send once the gate is passed (None for a handler's question,
    which continues through ``Host.resume`` with the answer)."""
    next_steps: tuple[str, ...] = ()
    """What the caller (or model) should do now, in words."""


class Deferred(BaseModel):
    """The work continues elsewhere; the host settles it later."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["deferred"] = "deferred"
    token: JsonValue = None


ToolOutcome = Annotated[
    Completed | Denied | Failed | InteractionRequired | Deferred, Field(discriminator="kind")
]
"""Any outcome, discriminated by ``kind``; round-trips through JSON."""

outcome_adapter: TypeAdapter[ToolOutcome] = TypeAdapter(ToolOutcome)
"""Validates and serialises outcomes (``outcome_adapter.validate_json(...)``)."""


@runtime_checkable
class ReportsToolError(Protocol):
    """An output model whose values may say the tool failed: a gateway's upstream ``isError``.

    The ledger stores such an output as ``Completed`` (the tool ran, and may have had an
    effect), so a replay never runs it again; the host answers it, the first time and on
    every replay, as ``Failed`` with ``UPSTREAM_ERROR`` and the output in ``meta["result"]``.
    """

    @classmethod
    def reported_error(cls, output: JsonValue) -> str | None:
        """What went wrong, in the tool's words, when ``output`` reports an error; else None."""
        ...


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


def not_found(
    what: str, key: str, where: str, *, next_step: str, reason: str | None = None
) -> Failed:
    """The ``NOT_FOUND`` of a key the caller named (``No <what> '<key>' <where>``).

    The key is the caller's own text, so the message shows at most 200 characters of it;
    ``reason`` defaults to ``<what>_not_found``.
    """
    return failed(
        ErrorCode.NOT_FOUND,
        f"No {what} {key[:200]!r} {where}.",
        reason=reason or f"{what}_not_found",
        next_steps=(next_step,),
    )


def failed_from_error(error: ToolError) -> Failed:
    """Turn a raised ``ToolError`` into a ``Failed`` outcome.

    A lone surrogate in its text or meta (a handler quoting a name decoded with
    surrogateescape) becomes U+FFFD: no transport could encode it, and the caller should
    still read why.
    """
    steps = error.next_steps or DEFAULT_NEXT_STEPS[error.code]
    return Failed(
        code=error.code,
        message=replace_surrogates(error.message),
        retryable=error.retryable,
        next_steps=tuple(map(replace_surrogates, steps)),
        meta=_encodable_meta(error.meta) if error.meta else None,
    )


def _encodable_meta(meta: object) -> Any:
    """``meta`` as JSON data; lone surrogates in its strings and keys, if any, as U+FFFD."""
    try:
        data = to_jsonable_python(meta, fallback=str)
        to_json(data)
    except (PydanticSerializationError, UnicodeEncodeError):  # a value's, or a key's
        text = json.dumps(meta, ensure_ascii=False, default=str)
        return json.loads(replace_surrogates(text))
    return data
