"""The discovery manifest: what a registered tool tells callers about itself."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from .policy import ActionPolicy, ControlSpec, TargetResolution
from .risk import EXTERNAL_SIDE_EFFECTS, DeploymentRisk, RiskPolicy, RiskTier
from .tool import Deprecation, Tool, ToolAnnotations

__all__ = (
    "CONTRACT_VERSION",
    "RegisteredTool",
    "build_entry",
    "deprecation_warnings",
    "derive_annotations",
    "manifest_json",
)

CONTRACT_VERSION = "2026-11-30"
"""Version of the manifest format; transports stamp it on their discovery output."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RegisteredTool:
    """A tool with its deployment identity resolved, as the registry holds it."""

    tool: Tool[Any, Any, Any]
    capability_id: str
    owner: str
    capability_version: str
    aliases: tuple[str, ...]
    required_scopes: tuple[str, ...]
    deployment_risk: DeploymentRisk
    annotations: dict[str, Any]
    action_policy: ActionPolicy | None
    target_resolution: TargetResolution | None
    controls: ControlSpec
    entry: dict[str, Any] = field(init=False, compare=False)
    """The manifest entry (JSON-compatible, camelCase), computed once from the fields above."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "entry", build_entry(self))

    @property
    def name(self) -> str:
        """The canonical invocation name."""
        return self.tool.name

    @property
    def ledgered(self) -> bool:
        """Whether every call goes through the action ledger (``ledger="required"``)."""
        return self.action_policy is not None and self.action_policy.ledger == "required"

    @property
    def evaluated_risk(self) -> DeploymentRisk:
        """The action policy's risk, else the deployment risk."""
        policy = self.action_policy
        return policy.risk if policy is not None and policy.risk else self.deployment_risk


def derive_annotations(
    tier: RiskTier, risk: RiskPolicy, *overrides: ToolAnnotations | None
) -> dict[str, Any]:
    """Derive MCP hints from the risk policy, then apply overrides in order."""
    hints: dict[str, Any] = {
        "readOnlyHint": tier is RiskTier.READ and not risk.side_effects,
        "destructiveHint": risk.destructive,
        "openWorldHint": any(effect in EXTERNAL_SIDE_EFFECTS for effect in risk.side_effects),
    }
    for override in overrides:
        if override is None:
            continue
        for key, value in (
            ("title", override.title),
            ("readOnlyHint", override.read_only_hint),
            ("destructiveHint", override.destructive_hint),
            ("idempotentHint", override.idempotent_hint),
            ("openWorldHint", override.open_world_hint),
        ):
            if value is not None:
                hints[key] = value
    return hints


def build_entry(registered: RegisteredTool) -> dict[str, Any]:
    """Build a registered tool's manifest entry (see docs/manifest-format.md)."""
    tool, risk, controls = registered.tool, registered.tool.risk_policy, registered.controls
    action_policy, deployment_risk = registered.action_policy, registered.deployment_risk
    entry: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "aliases": list(registered.aliases),
        "capabilityId": registered.capability_id,
        "capabilityVersion": registered.capability_version,
        "owner": registered.owner,
        "contractVersion": CONTRACT_VERSION,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "requiredScopes": list(registered.required_scopes),
        "tier": tool.tier.value,
        "deploymentRisk": deployment_risk,
        "riskPolicy": {
            "destructive": risk.destructive,
            "reversible": risk.reversible,
            "dryRunSupported": risk.dry_run_supported,
            "confirmationRequired": risk.confirmation_required,
            "sideEffects": list(risk.side_effects),
        },
        "annotations": dict(registered.annotations),
        "auth": tool.auth,
        "delegable": tool.delegable,
        "controls": {"required": list(controls.required), "optional": list(controls.optional)},
    }
    if tool.deprecation is not None:
        entry["deprecation"] = _deprecation(tool.deprecation)
    if tool.alias_deprecations:
        entry["aliasDeprecations"] = {
            alias: _deprecation(deprecation)
            for alias, deprecation in sorted(tool.alias_deprecations.items())
        }
    if tool.audience is not None:
        entry["audience"] = list(tool.audience)
    if tool.tenant_field is not None:
        entry["tenantField"] = tool.tenant_field
    if tool.model_name is not None:
        # Only the author's own choice: the derived name is the harness's, not the contract's.
        entry["modelName"] = tool.model_name
    if action_policy is not None:
        entry["actionPolicy"] = _action_policy(
            action_policy, tool, deployment_risk, registered.target_resolution, controls
        )
    return entry


def _deprecation(deprecation: Deprecation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sinceVersion": deprecation.since_version,
        "message": deprecation.message,
    }
    if deprecation.replacement_capability_id is not None:
        out["replacementCapabilityId"] = deprecation.replacement_capability_id
    if deprecation.sunset_date is not None:
        out["sunsetDate"] = deprecation.sunset_date.isoformat()
    return out


def _action_policy(
    policy: ActionPolicy,
    tool: Tool[Any, Any, Any],
    deployment_risk: DeploymentRisk,
    target_resolution: TargetResolution | None,
    controls: ControlSpec,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": policy.kind,
        "targetType": policy.target_type,
        "targetLifecycle": policy.target_lifecycle,
        "ledger": policy.ledger,
        "approval": policy.approval,
        "confirmation": "required" if "confirmed" in controls.required else "never",
        "allowedActorTypes": list(policy.allowed_actor_types),
        "risk": policy.risk or deployment_risk,
        "enforcement": tool.enforcement,
    }
    if policy.command_target_field is not None:
        out["commandTargetField"] = policy.command_target_field
    if policy.created_target is not None:
        created = policy.created_target
        out["createdTarget"] = {
            "commandTargetType": created.command_target_type,
            "resultReferenceType": created.result_reference_type,
            "durability": created.durability,
        }
    if target_resolution is not None:
        out["targetResolution"] = target_resolution
    return out


def deprecation_warnings(entry: Mapping[str, Any], today: date) -> list[str]:
    """Warnings for a tool, or an alias of it, whose ``sunsetDate`` is before ``today``.

    Covers the entry's ``deprecation`` and its ``aliasDeprecations``. A sunset date that
    is not an ISO date gets a warning too, so it is fixed.
    """
    name = str(entry.get("name"))
    found: list[tuple[str, object]] = [(f"tool {name!r}", entry.get("deprecation"))]
    aliases = entry.get("aliasDeprecations")
    if isinstance(aliases, Mapping):
        found += [(f"alias {alias!r} of {name!r}", d) for alias, d in sorted(aliases.items())]
    warnings = []
    for what, deprecation in found:
        if not isinstance(deprecation, Mapping) or deprecation.get("sunsetDate") is None:
            continue
        raw = str(deprecation["sunsetDate"])
        try:
            sunset = date.fromisoformat(raw)
        except ValueError:
            warnings.append(f"{what} has a sunsetDate that is not an ISO date: {raw!r}")
            continue
        if sunset < today:
            message = deprecation.get("message")
            warnings.append(
                f"{what} is deprecated and past its sunset date {sunset.isoformat()}"
                + (f" ({message})" if isinstance(message, str) and message else "")
                + "; remove it or move the date"
            )
    return warnings


def manifest_json(entries: Iterable[Mapping[str, Any]]) -> str:
    """Serialise manifest entries as stable JSON (sorted keys, two-space indent)."""
    return json.dumps(list(entries), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
