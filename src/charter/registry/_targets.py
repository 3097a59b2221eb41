"""What an action acts on: its target, resolved the way the tool declares."""

from __future__ import annotations

import inspect

from pydantic import BaseModel

from ..auth import js_trim
from ..context import ToolContext
from ..errors import ErrorCode, ToolError
from ..manifest import RegisteredTool
from ..outcome import Failed, failed, failed_from_error
from ._execution import provider_error

__all__ = ("resolve_target",)


async def resolve_target(
    registered: RegisteredTool, parsed: BaseModel, ctx: ToolContext
) -> str | Failed | None:
    """The action's target, trimmed, as the tool's ``targetResolution`` says (or None).

    The package resolver's answer, the command target field's value, or the tenant
    collection ``"{target_type}:{tenant}"``.
    """
    mode = registered.target_resolution
    tool = registered.tool
    policy = registered.action_policy
    value: object = None
    try:
        if tool.resolve_action_target is not None and mode in (None, "package-resolver"):
            value = tool.resolve_action_target(parsed, ctx)
            if inspect.isawaitable(value):
                value = await value
        elif mode == "command-target-field" and policy is not None:
            value = getattr(parsed, policy.command_target_field or "", None)
        elif mode == "tenant-collection" and policy is not None:
            tenant = js_trim(ctx.tenant_id or "")
            value = f"{policy.target_type}:{tenant}" if tenant else None
    except ToolError as exc:
        return failed_from_error(exc)
    except Exception:
        return provider_error(registered.name, "target resolver")
    if value is None and mode is None:
        return None
    if not isinstance(value, str) or not js_trim(value):
        return failed(
            ErrorCode.ACTION_POLICY_REQUIRED,
            f"Tool {registered.name!r} could not resolve a valid action target.",
            reason="target_unresolved",
            capabilityId=registered.capability_id,
            targetResolution=mode,
            commandTargetField=policy.command_target_field if policy else None,
        )
    return js_trim(value)
