"""charter: agent tools authored once and exposed anywhere.

The contract, registry, policy, auth and host are importable from here; transports
and storage are extras (``charter.mcp``, ``charter.http``, ``charter.store``,
``charter.cli``) and are never imported by ``import charter``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Imported now, not on first use: the function ``tool`` shares its name with the module
# ``charter.tool``, and importing that module (as charter.manifest does) would bind the
# module to the name before ``__getattr__`` were asked for it.
from .tool import (
    Alias,
    Deprecation,
    FunctionInput,
    FunctionOutput,
    Lax,
    Tool,
    ToolAnnotations,
    ToolBinding,
    define_tool,
    tool,
)

if TYPE_CHECKING:  # the names for type checkers and IDEs; at run time, __getattr__ below
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

_SOURCES: dict[str, str] = {
    "AccessCatalog": "auth",
    "ActionPolicy": "policy",
    "Authenticator": "auth",
    "CONTRACT_VERSION": "manifest",
    "CallOptions": "host",
    "CancelSignal": "context",
    "CharterError": "errors",
    "CommandClaim": "policy",
    "Completed": "outcome",
    "ConfigurationError": "errors",
    "Continuation": "outcome",
    "CreatedTarget": "policy",
    "Deferred": "outcome",
    "Denied": "outcome",
    "DeploymentRisk": "risk",
    "Effect": "effects",
    "ErrorCode": "errors",
    "Failed": "outcome",
    "HandlerActionPolicy": "policy",
    "Host": "host",
    "InFlight": "limits",
    "Interaction": "outcome",
    "InteractionRequired": "outcome",
    "InvocationControls": "policy",
    "PreparedAction": "registry",
    "Principal": "auth",
    "Prompt": "resources",
    "PromptMessage": "resources",
    "READ_ONLY_RISK": "risk",
    "RateLimit": "limits",
    "RegisteredTool": "manifest",
    "Registry": "registry",
    "Resource": "resources",
    "ResumeInfo": "context",
    "RiskPolicy": "risk",
    "RiskTier": "risk",
    "SideEffect": "risk",
    "ToolContext": "context",
    "ToolError": "errors",
    "ToolOutcome": "outcome",
    "effect": "effects",
    "has_permission": "auth",
    "prompt": "resources",
    "resource": "resources",
}
"""Where each exported name lives: ``charter.<module>``, imported when first asked for."""


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use.

    A program that needs a part of charter (the ``charter`` command talking HTTP to a
    server) then loads only that part: importing every module costs about 0.2 s of CPU.
    """
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module 'charter' has no attribute {name!r}")
    value = getattr(import_module(f"charter.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The exported names, listed before any was imported."""
    return sorted({*globals(), *__all__})


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
    "Lax",
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
