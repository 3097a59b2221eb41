"""The transcript a model reads, the tool results it gets back, and the ``Model`` protocol."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .._wording import heading, with_next_steps
from .definitions import ToolSchema

__all__ = (
    "AssistantMessage",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ToolCall",
    "ToolResult",
    "ToolResultsMessage",
    "UserMessage",
    "result_text",
)


class ToolCall(BaseModel):
    """A tool call exactly as a model produced it, before sealing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    name: str
    arguments: str | dict[str, Any]
    """JSON text (what most providers send) or an already-decoded object."""

    def arguments_text(self) -> str:
        """The arguments as JSON text, for transcripts and provider formats."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"), default=str)


class ToolResult(BaseModel):
    """What the model gets back for one tool call: completed, denied or failed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["completed", "denied", "failed"]
    call_id: str
    tool_name: str
    """The canonical tool name (what the host ran)."""
    model_name: str | None = None
    """The name the model called the tool by (``charter.harness.names``), when known."""
    output: JsonValue = None
    """Completed: the validated output."""
    reason: str | None = None
    """Denied: why."""
    code: str | None = None
    """Failed: ``tool.*`` for harness failures, else the charter ``ErrorCode``."""
    message: str | None = None
    """Failed: what went wrong, safe to show the model."""
    retryable: bool = False
    next_steps: tuple[str, ...] = ()
    details: dict[str, JsonValue] | None = None
    """Failed: structured details (``phase`` and ``issues`` for argument errors)."""
    replayed: bool = False
    """True when the host returned a stored outcome instead of running the tool again."""


def result_text(result: ToolResult) -> str:
    """Render a result as the text a model reads (providers put it in the tool message)."""
    if result.kind == "completed":
        return json.dumps(result.output, ensure_ascii=False, separators=(",", ":"))
    if result.kind == "denied":
        return f"Denied: {result.reason}"
    return with_next_steps(heading(str(result.code), result.message or ""), result.next_steps)


class UserMessage(BaseModel):
    """Text from the person (or the application) driving the session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(BaseModel):
    """One model step: its text and the tool calls it made, in its order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["assistant"] = "assistant"
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolResultsMessage(BaseModel):
    """The results of one step's tool calls, in the model's call order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["tool"] = "tool"
    results: tuple[ToolResult, ...]


Message = Annotated[
    UserMessage | AssistantMessage | ToolResultsMessage, Field(discriminator="role")
]
"""One transcript entry, discriminated by ``role``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRequest:
    """One model step's input: the transcript so far and the tools it may call."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    session_id: str
    turn_id: str
    step_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponse:
    """One model step's output: text, tool calls, or both."""

    text: str | None = None
    tool_calls: Sequence[ToolCall] = ()


class Model(Protocol):
    """Protocol: a chat model taking one step (a provider adapter, or a scripted test model)."""

    async def step(self, request: ModelRequest) -> ModelResponse:
        """Answer the transcript with text and/or tool calls."""
        ...
