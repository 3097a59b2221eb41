"""What a tool declares besides its models and handler, and what a registration binds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from ..policy import ActionPolicy
from ..risk import DeploymentRisk

__all__ = ("Alias", "Deprecation", "ToolAnnotations", "ToolBinding")


@dataclass(frozen=True, kw_only=True, slots=True)
class Deprecation:
    """Marks a tool (or its old name) as on its way out."""

    since_version: str
    message: str
    replacement_capability_id: str | None = None
    sunset_date: date | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Alias:
    """An older name that still dispatches to the tool, optionally deprecated.

    ``aliases=["trips.find"]`` and ``aliases=[Alias(name="trips.find", deprecation=...)]``
    both work; the second says when callers should stop using the old name.
    """

    name: str
    deprecation: Deprecation | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolAnnotations:
    """MCP hints that override the ones derived from the risk policy."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolBinding:
    """Deployment facts supplied at registration; each must agree with the definition."""

    name: str | None = None
    capability_id: str | None = None
    owner: str | None = None
    capability_version: str | None = None
    required_scopes: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    deployment_risk: DeploymentRisk | None = None
    action_policy: ActionPolicy | None = None
    annotations: ToolAnnotations | None = None
