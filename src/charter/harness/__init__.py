"""The harness: model tool-calling loops with sealed calls, capabilities, pause and resume.

Every tool call goes through ``Host.invoke``, so scopes, tenancy, the ledger and
approvals apply to model calls exactly as to MCP or HTTP calls. See ``docs/harness.md``.

Where things live, from the top down:

- ``harness``: ``Harness``, the settings every session runs with; ``session``:
  ``Session``, one principal's conversation (run, resume, stop).
- ``resume``: matching a decision to the paused call it continues; ``turn``: one turn's
  loop of model steps; ``pause``: what a paused step reports.
- ``seal``: a model's tool calls, validated; ``dispatch``: a call's states, run through
  the host; ``lease``: claiming and writing a session's record; ``live``: what a
  session keeps in this process; ``runtime``: the protocol sessions see a harness by.
- ``store``: session records and stores; ``turns``: results, decisions and events;
  ``messages``: the transcript and the ``Model`` protocol; ``definitions``: tools as a
  model sees them; ``names``: the model-facing name of each tool, and back.
- ``providers``: OpenAI, Anthropic and Gemini formats (re-exported as
  ``charter.providers``); ``testing``: scripted models.
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
from .harness import Harness
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
from .names import MODEL_NAME_PATTERN, ModelNames, model_name_for, model_names
from .seal import CallMiddleware, SealCodes
from .session import Session
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
    "MODEL_NAME_PATTERN",
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
    "ModelNames",
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
    "model_name_for",
    "model_names",
    "result_text",
    "tool",
)
