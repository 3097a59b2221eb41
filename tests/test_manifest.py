from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel
from tests.builders import destructive_risk, risk, tiered_tool

from charter import CONTRACT_VERSION, Deprecation, Registry, Tool, ToolBinding, define_tool
from charter.context import ToolContext
from charter.policy import ActionPolicy, CreatedTarget
from charter.risk import RiskPolicy

SAFE_WRITE = risk("data-write")
DESTROY = destructive_risk("data-delete")


class TripRef(BaseModel):
    trip_id: str


class Rename(BaseModel):
    trip_id: str
    title: str
    tenant_id: str | None = None


class Trip(BaseModel):
    trip_id: str
    title: str


def get_trip(args: TripRef) -> Trip:
    return Trip(trip_id=args.trip_id, title="Lisbon")


def rename_trip(args: Rename) -> Trip:
    return Trip(trip_id=args.trip_id, title=args.title)


def resolve_trip(args: Rename, ctx: ToolContext) -> str:
    return args.trip_id


def trips_get() -> Tool[Any, Any, Any]:
    return tiered_tool(
        "trips.get",
        "read",
        get_trip,
        TripRef,
        Trip,
        description="Get a trip.",
        required_scopes=["trips:read"],
        capability_id="travel.trips.get",
        owner="travel",
        capability_version="1.0.0",
    )


def trips_rename(**options: Any) -> Tool[Any, Any, Any]:
    options.setdefault("tier", "write")
    options.setdefault("risk_policy", SAFE_WRITE)
    return define_tool(
        name="trips.rename",
        description="Rename a trip.",
        input_schema=Rename,
        output_schema=Trip,
        handler=rename_trip,
        **options,
    )


def entry(tool: Tool[Any, Any, Any], binding: ToolBinding | None = None) -> dict[str, Any]:
    return Registry().register(tool, binding).entry


def test_a_read_tool_entry_has_identity_schemas_risk_and_no_action_policy() -> None:
    got = entry(trips_get())
    assert got["name"] == "trips.get"
    assert got["description"] == "Get a trip."
    assert got["aliases"] == []
    assert got["capabilityId"] == "travel.trips.get"
    assert got["capabilityVersion"] == "1.0.0"
    assert got["owner"] == "travel"
    assert got["contractVersion"] == CONTRACT_VERSION
    assert got["requiredScopes"] == ["trips:read"]
    assert got["tier"] == "read"
    assert got["deploymentRisk"] == "low"
    assert got["riskPolicy"] == {
        "destructive": False,
        "reversible": True,
        "dryRunSupported": False,
        "confirmationRequired": False,
        "sideEffects": [],
    }
    assert got["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "openWorldHint": False,
    }
    assert got["auth"] == "identity"
    assert got["delegable"] is False
    for absent in ("actionPolicy", "deprecation", "audience", "tenantField"):
        assert absent not in got
    for key in ("inputSchema", "outputSchema"):
        jsonschema.Draft202012Validator.check_schema(got[key])


def test_a_ledgered_write_tool_entry_requires_a_request_id() -> None:
    policy = ActionPolicy(target_type="trip", command_target_field="trip_id")
    got = entry(trips_rename(action_policy=policy))
    assert got["actionPolicy"] == {
        "kind": "execute",
        "targetType": "trip",
        "commandTargetField": "trip_id",
        "targetLifecycle": "existing",
        "ledger": "required",
        "approval": "never",
        "confirmation": "never",
        "allowedActorTypes": [],
        "risk": "medium",
        "enforcement": "generic",
        "targetResolution": "command-target-field",
    }
    assert got["controls"] == {"required": ["requestId"], "optional": ["confirmed", "reasonCode"]}


@pytest.mark.parametrize(
    ("tier", "risk", "required", "optional", "approval"),
    [
        ("write", SAFE_WRITE, ["requestId"], ["confirmed", "reasonCode"], "never"),
        ("sensitive", SAFE_WRITE, ["requestId", "confirmed"], ["reasonCode"], "never"),
        (
            "destructive",
            DESTROY,
            ["requestId", "confirmed"],
            ["approvalId", "reasonCode"],
            "required",
        ),
    ],
)
def test_the_default_policy_per_tier_sets_the_controls(
    tier: str, risk: RiskPolicy, required: list[str], optional: list[str], approval: str
) -> None:
    got = entry(trips_rename(tier=tier, risk_policy=risk))
    policy = got["actionPolicy"]
    assert policy["ledger"] == "required"
    assert policy["approval"] == approval
    assert got["controls"] == {"required": required, "optional": optional}
    assert policy["targetType"] == "trips.rename"


def test_a_confirmation_required_risk_requires_confirmed_on_a_write() -> None:
    got = entry(trips_rename(risk_policy=risk(confirmation_required=True)))
    assert got["controls"]["required"] == ["requestId", "confirmed"]
    assert got["actionPolicy"]["confirmation"] == "required"


def test_a_ledgered_read_accepts_but_does_not_require_a_request_id() -> None:
    policy = ActionPolicy(kind="read", target_type="trip")
    got = entry(trips_rename(tier="read", risk_policy=None, action_policy=policy))
    assert got["controls"] == {
        "required": [],
        "optional": ["requestId", "reasonCode"],
    }
    assert got["actionPolicy"]["risk"] == "low"


def test_an_optional_ledger_makes_the_request_id_optional() -> None:
    policy = ActionPolicy(target_type="trip", ledger="optional")
    controls = entry(trips_rename(action_policy=policy))["controls"]
    assert controls == {"required": [], "optional": ["requestId", "confirmed", "reasonCode"]}


def test_conditional_approval_accepts_an_approval_id_and_requires_confirmation() -> None:
    policy = ActionPolicy(target_type="trip", approval="conditional")
    controls = entry(trips_rename(action_policy=policy))["controls"]
    assert controls == {
        "required": ["requestId", "confirmed"],
        "optional": ["approvalId", "reasonCode"],
    }


def test_target_resolution_prefers_the_resolver_then_the_field_then_the_tenant() -> None:
    with_field = ActionPolicy(target_type="trip", command_target_field="trip_id")
    resolver_and_field = trips_rename(action_policy=with_field, resolve_action_target=resolve_trip)
    assert entry(resolver_and_field)["actionPolicy"]["targetResolution"] == "package-resolver"
    assert entry(trips_rename(action_policy=with_field))["actionPolicy"]["targetResolution"] == (
        "command-target-field"
    )
    assert entry(trips_rename())["actionPolicy"]["targetResolution"] == "tenant-collection"


def test_a_handler_enforced_policy_has_no_target_resolution() -> None:
    policy = ActionPolicy(
        target_type="trip",
        target_lifecycle="created",
        created_target=CreatedTarget(
            command_target_type="trip-create-command", result_reference_type="trip"
        ),
    )
    got = entry(trips_rename(action_policy=policy, enforcement="handler"))["actionPolicy"]
    assert "targetResolution" not in got
    assert got["enforcement"] == "handler"
    assert got["targetLifecycle"] == "created"
    assert got["createdTarget"] == {
        "commandTargetType": "trip-create-command",
        "resultReferenceType": "trip",
        "durability": "handler-command-claim-v1",
    }


def test_deprecation_audience_tenant_field_and_aliases_are_listed() -> None:
    tool = trips_rename(
        aliases=["trip_rename"],
        deprecation=Deprecation(
            since_version="2.1",
            message="Use trips.edit.",
            replacement_capability_id="trips.edit",
            sunset_date=date(2027, 6, 30),
        ),
        audience=["staff"],
        tenant_field="tenant_id",
        delegable=True,
        auth="admin",
    )
    got = entry(tool, ToolBinding(aliases=("rename_trip",)))
    assert got["aliases"] == ["rename_trip", "trip_rename"]
    assert got["deprecation"] == {
        "sinceVersion": "2.1",
        "message": "Use trips.edit.",
        "replacementCapabilityId": "trips.edit",
        "sunsetDate": "2027-06-30",
    }
    assert got["audience"] == ["staff"]
    assert got["tenantField"] == "tenant_id"
    assert got["delegable"] is True
    assert got["auth"] == "admin"


def test_a_deprecation_without_replacement_or_sunset_omits_them() -> None:
    got = entry(trips_rename(deprecation=Deprecation(since_version="3", message="Going away.")))
    assert got["deprecation"] == {"sinceVersion": "3", "message": "Going away."}


def test_the_binding_deployment_risk_is_the_entry_and_policy_risk() -> None:
    got = entry(trips_rename(), ToolBinding(deployment_risk="high"))
    assert got["deploymentRisk"] == "high"
    assert got["actionPolicy"]["risk"] == "high"


def test_the_policy_risk_overrides_the_deployment_risk_in_the_policy() -> None:
    policy = ActionPolicy(target_type="trip", risk="critical")
    got = entry(trips_rename(action_policy=policy))
    assert got["deploymentRisk"] == "medium"
    assert got["actionPolicy"]["risk"] == "critical"


def test_manifest_json_is_stable_sorted_json() -> None:
    registry = Registry()
    registry.register_all([trips_rename(), trips_get()])
    text = registry.manifest_json()
    assert text == registry.manifest_json()
    assert json.loads(text) == registry.manifest()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    # Entries stay in registration order; keys inside them are sorted.
    assert [e["name"] for e in json.loads(text)] == ["trips.rename", "trips.get"]


def test_the_manifest_is_the_list_of_every_entry() -> None:
    registry = Registry()
    registry.register_all([trips_get(), trips_rename(audience=["staff"])])
    assert registry.manifest() == registry.list()
    assert [e["name"] for e in registry.list("customer")] == ["trips.get"]


class Ping(BaseModel):
    """A ping."""

    message: str = "ping"


class Pong(BaseModel):
    reply: str


def pong(args: Ping) -> Pong:
    return Pong(reply=args.message)


SNAPSHOT = Path(__file__).with_name("manifest_snapshot.json")
"""The whole manifest of a read and a ledgered write tool, as ``manifest_json`` writes it."""


def test_manifest_json_snapshot() -> None:
    registry = Registry()
    registry.register(
        define_tool(
            name="ping",
            description="Answer a ping.",
            input_schema=Ping,
            output_schema=Pong,
            handler=pong,
            tier="read",
            required_scopes=["demo:ping"],
        )
    )
    registry.register(
        define_tool(
            name="pong.send",
            description="Send a pong.",
            input_schema=Ping,
            output_schema=Pong,
            handler=pong,
            tier="write",
            risk_policy=risk("push", reversible=False),
            action_policy=ActionPolicy(target_type="ping", command_target_field="message"),
        ),
        ToolBinding(capability_id="demo.pong", owner="demo", capability_version="2.1.0"),
    )
    assert registry.manifest_json() == SNAPSHOT.read_text(encoding="utf-8")
