"""Declared risk: tiers, risk policies, side effects and deployment risk."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args

from .errors import ConfigurationError

__all__ = (
    "DEFAULT_DEPLOYMENT_RISK",
    "DEPLOYMENT_RISKS",
    "EXTERNAL_SIDE_EFFECTS",
    "READ_ONLY_RISK",
    "SIDE_EFFECTS",
    "DeploymentRisk",
    "RiskPolicy",
    "RiskTier",
    "SideEffect",
    "risk_allows_tier",
)


class RiskTier(StrEnum):
    """How much harm a call can do, from reading to destroying."""

    READ = "read"
    WRITE = "write"
    SENSITIVE = "sensitive"
    DESTRUCTIVE = "destructive"


SideEffect = Literal[
    "payment", "refund", "email", "sms", "push", "external-booking", "data-write", "data-delete"
]
"""An effect a call has beyond returning data."""

SIDE_EFFECTS: frozenset[str] = frozenset(get_args(SideEffect))

#: Side effects that reach outside the system (they make a tool "open world").
EXTERNAL_SIDE_EFFECTS: frozenset[str] = frozenset(
    {"payment", "refund", "email", "sms", "push", "external-booking"}
)

DeploymentRisk = Literal["low", "medium", "high", "critical"]
"""The risk an operator assigns to a deployed tool; must be compatible with its tier."""

DEPLOYMENT_RISKS: tuple[str, ...] = get_args(DeploymentRisk)

DEFAULT_DEPLOYMENT_RISK: dict[RiskTier, DeploymentRisk] = {
    RiskTier.READ: "low",
    RiskTier.WRITE: "medium",
    RiskTier.SENSITIVE: "high",
    RiskTier.DESTRUCTIVE: "critical",
}

_ALLOWED_TIERS: dict[str, frozenset[RiskTier]] = {
    "low": frozenset({RiskTier.READ}),
    "medium": frozenset({RiskTier.WRITE}),
    "high": frozenset({RiskTier.WRITE, RiskTier.SENSITIVE, RiskTier.DESTRUCTIVE}),
    "critical": frozenset({RiskTier.WRITE, RiskTier.SENSITIVE, RiskTier.DESTRUCTIVE}),
}


def risk_allows_tier(risk: DeploymentRisk, tier: RiskTier) -> bool:
    """Return whether a deployment risk is compatible with a tier.

    low allows read only; medium allows write only; high and critical allow write,
    sensitive and destructive. Nothing above low allows read.
    """
    return tier in _ALLOWED_TIERS[risk]


@dataclass(frozen=True, kw_only=True, slots=True)
class RiskPolicy:
    """Declarative risk data that lets a host gate a call without running it."""

    destructive: bool
    """The call destroys or irreversibly changes data."""
    reversible: bool
    """The effect can be undone by another command."""
    dry_run_supported: bool
    """The tool can preview its effect without making it."""
    confirmation_required: bool = False
    """The caller must confirm explicitly (``_charter.confirmed: true``)."""
    side_effects: tuple[SideEffect, ...] = ()
    """Effects beyond returning data."""

    def __post_init__(self) -> None:
        unknown = [effect for effect in self.side_effects if effect not in SIDE_EFFECTS]
        if unknown:
            raise ConfigurationError(
                f"unknown side effect(s) {unknown}; use one of {sorted(SIDE_EFFECTS)}"
            )


READ_ONLY_RISK = RiskPolicy(destructive=False, reversible=True, dry_run_supported=False)
"""The risk policy of a tool that only reads."""
