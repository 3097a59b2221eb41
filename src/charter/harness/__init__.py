"""The harness: model tool-calling loops with sealed calls, capabilities, pause and resume.

Every tool call goes through ``Host.invoke``, so scopes, tenancy, the ledger and
approvals apply to model calls exactly as to MCP or HTTP calls. See ``docs/harness.md``.
"""

from __future__ import annotations

from .definitions import (
    BoundToolDefinition,
    Capability,
    JsonObjectOutput,
    SealedToolCall,
    StateFactory,
    ToolOwner,
    ToolSchema,
    tool,
)
from .messages import (
    AssistantMessage,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolResultsMessage,
    UserMessage,
    result_text,
)
from .seal import CallMiddleware, SealCodes
from .session import Harness, Session
from .store import MemorySessionStore, SessionRecord, SessionStore, SqliteSessionStore
from .turns import (
    Approve,
    Decision,
    DeferredCall,
    HarnessEvent,
    Observer,
    PendingInteraction,
    Respond,
    ResumeCodes,
    Settle,
    TurnResult,
)

__all__ = (
    "Approve",
    "AssistantMessage",
    "BoundToolDefinition",
    "CallMiddleware",
    "Capability",
    "Decision",
    "DeferredCall",
    "Harness",
    "HarnessEvent",
    "JsonObjectOutput",
    "MemorySessionStore",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "Observer",
    "PendingInteraction",
    "Respond",
    "ResumeCodes",
    "SealCodes",
    "SealedToolCall",
    "Session",
    "SessionRecord",
    "SessionStore",
    "Settle",
    "SqliteSessionStore",
    "StateFactory",
    "ToolCall",
    "ToolOwner",
    "ToolResult",
    "ToolResultsMessage",
    "ToolSchema",
    "TurnResult",
    "UserMessage",
    "result_text",
    "tool",
)
