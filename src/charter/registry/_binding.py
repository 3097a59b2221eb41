"""Binding a tool definition to a registration: identity, scopes, risk, action policy.

A ``ToolBinding`` given at registration may supply what the definition leaves open; a
value set in both places must agree, or registration fails naming the field. Versions of
one capability are ordered as semver orders them.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ConfigurationError
from ..manifest import RegisteredTool, derive_annotations
from ..policy import ControlSpec, TargetResolution, default_action_policy
from ..risk import DEFAULT_DEPLOYMENT_RISK, risk_allows_tier
from ..tool import NAME_PATTERN, Tool, ToolBinding, check_action_policy

__all__ = ("resolve_binding", "version_key")


_VERSION_NUMBERS = re.compile(r"\d+")


def version_key(version: str) -> tuple[tuple[int, ...], int, tuple[tuple[int, int, str], ...]]:
    """Order versions as semver does: numbers first, then a release above its pre-releases.

    ``v2`` and ``2.0.0`` both read as numbers; ``2.0.0-rc.1`` sorts below ``2.0.0`` and its
    identifiers compare numerically when numeric, else as text (numeric ones first). Build
    metadata (``+...``) is ignored. A version with no number sorts lowest.
    """
    main, _, _build = version.partition("+")
    core, dash, prerelease = main.partition("-")
    numbers = tuple(int(n) for n in _VERSION_NUMBERS.findall(core)) or (-1,)
    identifiers = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in prerelease.split(".")
        if part
    )
    return numbers, 0 if dash else 1, identifiers


def resolve_binding(tool: Tool[Any, Any, Any], binding: ToolBinding) -> RegisteredTool:
    """Merge a definition with its binding; every value set in both places must agree."""
    for field_name in ("name", "capability_id", "owner", "capability_version"):
        defined = getattr(tool, field_name)
        bound = getattr(binding, field_name)
        if defined is not None and bound is not None and defined != bound:
            raise ConfigurationError(
                f"tool {tool.name!r}: {field_name} {defined!r} does not match the binding's "
                f"{bound!r}"
            )
    if binding.required_scopes is not None and set(binding.required_scopes) != set(
        tool.required_scopes
    ):
        raise ConfigurationError(
            f"tool {tool.name!r}: required_scopes {sorted(tool.required_scopes)} do not match "
            f"the binding's {sorted(binding.required_scopes)}"
        )
    if (
        tool.action_policy is not None
        and binding.action_policy is not None
        and tool.action_policy != binding.action_policy
    ):
        raise ConfigurationError(
            f"tool {tool.name!r}: action_policy does not match the binding's action_policy"
        )
    aliases = tuple(dict.fromkeys((*binding.aliases, *tool.aliases)))
    for alias in binding.aliases:
        if not isinstance(alias, str) or not NAME_PATTERN.fullmatch(alias):
            raise ConfigurationError(
                f"tool {tool.name!r}: the binding's alias {alias!r} must use 1-128 letters, "
                "digits, '_', '.' or '-'"
            )
    if tool.name in aliases:
        raise ConfigurationError(f"tool {tool.name!r}: an alias repeats the canonical name")
    identity: dict[str, str] = {
        "capability_id": binding.capability_id or tool.capability_id or tool.name,
        "owner": binding.owner or tool.owner or "unbound",
        "capability_version": binding.capability_version or tool.capability_version or "v1",
    }
    for field_name, value in identity.items():
        if not value.strip():
            raise ConfigurationError(f"tool {tool.name!r}: {field_name} must be non-empty")
    risk = binding.deployment_risk or DEFAULT_DEPLOYMENT_RISK[tool.tier]
    if not risk_allows_tier(risk, tool.tier):
        raise ConfigurationError(
            f"tool {tool.name!r}: tier {tool.tier.value!r} is incompatible with deployment "
            f"risk {risk!r}"
        )
    policy = tool.action_policy or binding.action_policy
    if policy is None and tool.enforcement == "generic":
        policy = default_action_policy(tool.tier, identity["capability_id"])
    if policy is not None:
        check_action_policy(tool.name, policy, tool.enforcement)
        target_field = policy.command_target_field
        if target_field is not None and target_field not in tool.input_model.model_fields:
            raise ConfigurationError(
                f"tool {tool.name!r}: command_target_field {target_field!r} is not a field of "
                "the input model"
            )
    elif tool.enforcement == "handler":
        raise ConfigurationError(
            f'tool {tool.name!r}: enforcement="handler" needs an action_policy'
        )
    return RegisteredTool(
        tool=tool,
        aliases=aliases,
        required_scopes=tool.required_scopes,
        deployment_risk=risk,
        annotations=derive_annotations(
            tool.tier, tool.risk_policy, tool.annotations, binding.annotations
        ),
        action_policy=policy,
        target_resolution=_target_resolution(tool, policy),
        controls=ControlSpec.for_policy(policy, tool.risk_policy),
        **identity,
    )


def _target_resolution(tool: Tool[Any, Any, Any], policy: Any) -> TargetResolution | None:
    if policy is None or tool.enforcement != "generic":
        return None
    resolution = _generic_target_resolution(tool, policy)
    if tool.auth == "public" and resolution == "tenant-collection":
        # The default target is "{target_type}:{tenant}", and an anonymous caller has no
        # tenant: every anonymous call would fail with target_unresolved. Say so now.
        raise ConfigurationError(
            f"tool {tool.name!r}: a public tool with an action policy needs a target an "
            "anonymous caller can name: set the policy's command_target_field, give the "
            "tool a resolve_action_target, or make it auth='identity' (the default target "
            "is the caller's tenant, which an anonymous call does not have)"
        )
    return resolution


def _generic_target_resolution(tool: Tool[Any, Any, Any], policy: Any) -> TargetResolution:
    if tool.resolve_action_target is not None:
        return "package-resolver"
    if policy.command_target_field is not None:
        return "command-target-field"
    return "tenant-collection"
