from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from charter import (
    ConfigurationError,
    Registry,
    RiskPolicy,
    RiskTier,
    Tool,
    ToolAnnotations,
    ToolBinding,
    define_tool,
)
from charter.risk import DEFAULT_DEPLOYMENT_RISK, risk_allows_tier


class In(BaseModel):
    text: str


class Out(BaseModel):
    text: str


def handler(args: In) -> Out:
    return Out(text=args.text)


THING: dict[str, Any] = {
    "name": "thing",
    "description": "Do a thing.",
    "input_schema": In,
    "output_schema": Out,
    "handler": handler,
}
"""Everything of the test tool but its tier and policies."""


def make_tool(
    tier: Any = "write",
    risk: RiskPolicy | None = None,
    annotations: ToolAnnotations | None = None,
) -> Tool[Any, Any, Any]:
    if risk is None and tier != "read":
        risk = RiskPolicy(destructive=False, reversible=True, dry_run_supported=False)
    return define_tool(**THING, tier=tier, risk_policy=risk, annotations=annotations)


# (deployment risk, tier) -> compatible?
MATRIX = {
    ("low", "read"): True,
    ("low", "write"): False,
    ("low", "sensitive"): False,
    ("low", "destructive"): False,
    ("medium", "read"): False,
    ("medium", "write"): True,
    ("medium", "sensitive"): False,
    ("medium", "destructive"): False,
    ("high", "read"): False,
    ("high", "write"): True,
    ("high", "sensitive"): True,
    ("high", "destructive"): True,
    ("critical", "read"): False,
    ("critical", "write"): True,
    ("critical", "sensitive"): True,
    ("critical", "destructive"): True,
}


def test_the_matrix_covers_every_deployment_risk_and_tier() -> None:
    assert {tier for _, tier in MATRIX} == {t.value for t in RiskTier}
    assert len(MATRIX) == 16


@pytest.mark.parametrize(("risk", "tier"), sorted(MATRIX))
def test_deployment_risk_and_tier_compatibility_matrix(risk: Any, tier: str) -> None:
    assert risk_allows_tier(risk, RiskTier(tier)) is MATRIX[(risk, tier)]
    registry = Registry()
    binding = ToolBinding(deployment_risk=risk)
    if MATRIX[(risk, tier)]:
        assert registry.register(make_tool(tier), binding).deployment_risk == risk
    else:
        with pytest.raises(
            ConfigurationError,
            match=f"tier '{tier}' is incompatible with deployment risk '{risk}'",
        ):
            registry.register(make_tool(tier), binding)
        assert registry.names() == []


@pytest.mark.parametrize(
    ("tier", "risk"),
    [("read", "low"), ("write", "medium"), ("sensitive", "high"), ("destructive", "critical")],
)
def test_deployment_risk_defaults_from_the_tier(tier: str, risk: str) -> None:
    assert DEFAULT_DEPLOYMENT_RISK[RiskTier(tier)] == risk
    registered = Registry().register(make_tool(tier))
    assert registered.deployment_risk == risk
    assert registered.entry["deploymentRisk"] == risk


def test_a_read_tool_without_side_effects_is_read_only_and_closed_world() -> None:
    annotations = Registry().register(make_tool("read")).annotations
    assert annotations == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}


def test_a_read_tool_with_a_side_effect_is_not_read_only() -> None:
    risk = RiskPolicy(
        destructive=False, reversible=True, dry_run_supported=False, side_effects=("data-write",)
    )
    annotations = Registry().register(make_tool("read", risk)).annotations
    assert annotations["readOnlyHint"] is False
    assert annotations["openWorldHint"] is False


def test_a_write_tool_is_not_read_only() -> None:
    assert Registry().register(make_tool("write")).annotations["readOnlyHint"] is False


def test_a_destructive_risk_sets_the_destructive_hint() -> None:
    risk = RiskPolicy(destructive=True, reversible=False, dry_run_supported=True)
    annotations = Registry().register(make_tool("destructive", risk)).annotations
    assert annotations["destructiveHint"] is True


@pytest.mark.parametrize(
    "effect", ["payment", "refund", "email", "sms", "push", "external-booking"]
)
def test_an_external_side_effect_makes_the_tool_open_world(effect: Any) -> None:
    risk = RiskPolicy(
        destructive=False, reversible=False, dry_run_supported=False, side_effects=(effect,)
    )
    assert Registry().register(make_tool("write", risk)).annotations["openWorldHint"] is True


@pytest.mark.parametrize("effect", ["data-write", "data-delete"])
def test_an_internal_side_effect_keeps_the_tool_closed_world(effect: Any) -> None:
    risk = RiskPolicy(
        destructive=False, reversible=False, dry_run_supported=False, side_effects=(effect,)
    )
    assert Registry().register(make_tool("write", risk)).annotations["openWorldHint"] is False


def test_definition_annotations_override_the_derived_ones() -> None:
    defined = make_tool("read", annotations=ToolAnnotations(title="Thing", open_world_hint=True))
    annotations = Registry().register(defined).annotations
    assert annotations == {
        "title": "Thing",
        "readOnlyHint": True,
        "destructiveHint": False,
        "openWorldHint": True,
    }


def test_binding_annotations_override_the_definition_ones() -> None:
    defined = make_tool("read", annotations=ToolAnnotations(title="Thing", idempotent_hint=False))
    binding = ToolBinding(
        annotations=ToolAnnotations(title="Bound thing", idempotent_hint=True, read_only_hint=False)
    )
    registered = Registry().register(defined, binding)
    assert registered.annotations == {
        "title": "Bound thing",
        "readOnlyHint": False,
        "destructiveHint": False,
        "openWorldHint": False,
        "idempotentHint": True,
    }
    assert registered.entry["annotations"] == registered.annotations


def test_an_unknown_side_effect_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown side effect\(s\) \['teleport'\]"):
        RiskPolicy(
            destructive=False,
            reversible=True,
            dry_run_supported=False,
            side_effects=("teleport",),  # type: ignore[arg-type]
        )
