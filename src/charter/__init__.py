"""charter: agent tools authored once and exposed anywhere.

The contract, registry, policy, auth and host are importable from here; transports
and storage are extras (``charter.mcp``, ``charter.http``, ``charter.store``,
``charter.cli``) and are never imported by ``import charter``.
"""

from __future__ import annotations

from .auth import AccessCatalog, Authenticator, Principal, has_permission
from .context import CancelSignal, ResumeInfo, ToolContext
from .effects import Effect, effect
from .errors import CharterError, ConfigurationError, ErrorCode, ToolError
from .host import CallOptions, Host
from .limits import InFlight, RateLimit
from .manifest import CONTRACT_VERSION, RegisteredTool
from .outcome import (
    Completed,
    Continuation,
    Deferred,
    Denied,
    Failed,
    Interaction,
    InteractionRequired,
    ToolOutcome,
)
from .policy import (
    ActionPolicy,
    CommandClaim,
    CreatedTarget,
    HandlerActionPolicy,
    InvocationControls,
)
from .registry import PreparedAction, Registry
from .resources import Prompt, PromptMessage, Resource, prompt, resource
from .risk import READ_ONLY_RISK, DeploymentRisk, RiskPolicy, RiskTier, SideEffect
from .tool import (
    Alias,
    Deprecation,
    FunctionInput,
    FunctionOutput,
    Tool,
    ToolAnnotations,
    ToolBinding,
    define_tool,
    tool,
)

__version__ = "0.1.0"

__all__ = (
    "CONTRACT_VERSION",
    "READ_ONLY_RISK",
    "AccessCatalog",
    "ActionPolicy",
    "Alias",
    "Authenticator",
    "CallOptions",
    "CancelSignal",
    "CharterError",
    "CommandClaim",
    "Completed",
    "ConfigurationError",
    "Continuation",
    "CreatedTarget",
    "Deferred",
    "Denied",
    "DeploymentRisk",
    "Deprecation",
    "Effect",
    "ErrorCode",
    "Failed",
    "FunctionInput",
    "FunctionOutput",
    "HandlerActionPolicy",
    "Host",
    "InFlight",
    "Interaction",
    "InteractionRequired",
    "InvocationControls",
    "PreparedAction",
    "Principal",
    "Prompt",
    "PromptMessage",
    "RateLimit",
    "RegisteredTool",
    "Registry",
    "Resource",
    "ResumeInfo",
    "RiskPolicy",
    "RiskTier",
    "SideEffect",
    "Tool",
    "ToolAnnotations",
    "ToolBinding",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "__version__",
    "define_tool",
    "effect",
    "has_permission",
    "prompt",
    "resource",
    "tool",
)
