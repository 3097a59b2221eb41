"""What charter makes of an upstream tool: its tier, risk, action policy and access.

The configured policy wins field by field; what it leaves unset comes from the
upstream's annotations: ``readOnlyHint`` → read; ``destructiveHint`` → destructive
(ledger, confirmation and approval); anything else → write with confirmation (ledger).
The MCP specification reads a missing ``destructiveHint`` as "may destroy"; charter reads
it as a write, which still needs a confirmed, ledgered call (docs/gateway.md).
"""

from __future__ import annotations

from typing import Literal, TypedDict

import mcp.types as types

from ..auth import AuthMode
from ..policy import ActionPolicy
from ..risk import READ_ONLY_RISK, RiskPolicy, RiskTier
from ._config import ToolPolicy

__all__ = ("Governed", "govern")

_RISK: dict[RiskTier, RiskPolicy] = {
    RiskTier.READ: READ_ONLY_RISK,
    RiskTier.WRITE: RiskPolicy(
        destructive=False, reversible=False, dry_run_supported=False, side_effects=("data-write",)
    ),
    RiskTier.SENSITIVE: RiskPolicy(
        destructive=False,
        reversible=False,
        dry_run_supported=False,
        confirmation_required=True,
        side_effects=("data-write",),
    ),
    RiskTier.DESTRUCTIVE: RiskPolicy(
        destructive=True, reversible=False, dry_run_supported=False, side_effects=("data-delete",)
    ),
}


class Governed(TypedDict):
    """How one upstream tool is declared to charter: ``define_tool``'s policy arguments."""

    tier: RiskTier
    risk_policy: RiskPolicy
    action_policy: ActionPolicy | None
    required_scopes: tuple[str, ...]
    auth: AuthMode
    audience: tuple[str, ...] | None


def annotated_tier(tool: types.Tool) -> RiskTier:
    """The tier an upstream tool's annotations suggest."""
    hints = tool.annotations
    if hints is not None and hints.read_only_hint is True:
        return RiskTier.READ
    if hints is not None and hints.destructive_hint is True:
        return RiskTier.DESTRUCTIVE
    return RiskTier.WRITE


def govern(tool: types.Tool, policy: ToolPolicy, target_type: str) -> Governed:
    """Declare an upstream tool under ``policy`` (unset fields from its annotations)."""
    tier = RiskTier(policy.tier) if policy.tier is not None else annotated_tier(tool)
    return Governed(
        tier=tier,
        risk_policy=_RISK[tier],
        action_policy=_action_policy(tier, policy, target_type),
        required_scopes=policy.scopes or (),
        auth=policy.auth or "identity",
        audience=policy.audience,
    )


def _action_policy(tier: RiskTier, policy: ToolPolicy, target_type: str) -> ActionPolicy | None:
    """The tier's defaults (write: confirmation too), with the policy's explicit choices."""
    approval = policy.approval if policy.approval is not None else tier is RiskTier.DESTRUCTIVE
    confirmation = (
        policy.confirmation if policy.confirmation is not None else tier is not RiskTier.READ
    )
    if (
        tier is RiskTier.READ
        and not approval
        and not confirmation
        and policy.ledger in (None, "never")
    ):
        return None
    ledger: Literal["required", "optional", "never"] = policy.ledger or (
        "optional" if tier is RiskTier.READ else "required"
    )
    return ActionPolicy(
        kind="read" if tier is RiskTier.READ else "execute",
        target_type=target_type,
        ledger=ledger,
        approval="required" if approval else "never",
        confirmation="required" if confirmation or approval else "never",
    )
