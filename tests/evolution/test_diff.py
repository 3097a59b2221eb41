"""Manifest comparison: tool-level rules, version and alias excuses, sunsets, documents."""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from tests.builders import WRITE_RISK

import charter
from charter.evolution import (
    ManifestDiff,
    ManifestError,
    diff_manifests,
    format_report,
    lock_json,
    parse_manifest,
    sunset_warnings,
)

TODAY = datetime.date(2027, 6, 1)


class RenameIn(BaseModel):
    trip_id: str
    title: str
    style: Literal["plain", "bold", "italic"] = "plain"


class RenameOut(BaseModel):
    trip_id: str
    title: str


def rename(args: RenameIn) -> RenameOut:
    return RenameOut(trip_id=args.trip_id, title=args.title)


def rename_tool(**options: Any) -> charter.Tool[Any, Any, Any]:
    settings: dict[str, Any] = {
        "name": "trips.rename",
        "description": "Rename a trip.",
        "input_schema": RenameIn,
        "output_schema": RenameOut,
        "handler": rename,
        "tier": "write",
        "risk_policy": WRITE_RISK,
        "action_policy": charter.ActionPolicy(target_type="trip", command_target_field="trip_id"),
        "required_scopes": ["trips:write"],
        "aliases": ["trip_rename"],
    }
    settings.update(options)
    return charter.define_tool(**settings)


def manifest(*tools: charter.Tool[Any, Any, Any]) -> list[dict[str, Any]]:
    registry = charter.Registry()
    registry.register_all(tools)
    entries: list[dict[str, Any]] = json.loads(registry.manifest_json())
    return entries


BASE = manifest(rename_tool())[0]


def kinds(diff: ManifestDiff) -> dict[str, str]:
    return {c.kind: c.severity for t in diff.tools for c in t.changes}


# --- tool-level rules, each in both directions --------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(entry: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = entry
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return mutate


_DELETE = object()

# (name, mutation applied to BASE to get NEW, kind and severity old→new, kind and severity new→old)
RULES = [
    (
        "scope added",
        _set("requiredScopes", ["trips:write", "trips:admin"]),
        "scopes-added",
        "breaking",
        "scopes-removed",
        "compatible",
    ),
    (
        "tier raised",
        _set("tier", "destructive"),
        "tier-raised",
        "breaking",
        "tier-lowered",
        "compatible",
    ),
    (
        "deployment risk raised",
        _set("deploymentRisk", "critical"),
        "deployment-risk-raised",
        "breaking",
        "deployment-risk-lowered",
        "compatible",
    ),
    (
        "auth made stricter",
        _set("auth", "admin"),
        "auth-raised",
        "breaking",
        "auth-lowered",
        "compatible",
    ),
    (
        "approval required",
        _set("actionPolicy.approval", "required"),
        "approval-raised",
        "breaking",
        "approval-lowered",
        "compatible",
    ),
    (
        "approval conditional",
        _set("actionPolicy.approval", "conditional"),
        "approval-raised",
        "breaking",
        "approval-lowered",
        "compatible",
    ),
    (
        "confirmation required by the action policy",
        _set("actionPolicy.confirmation", "required"),
        "confirmation-required",
        "breaking",
        "confirmation-dropped",
        "compatible",
    ),
    (
        "control required",
        _set("controls.required", ["requestId", "confirmed"]),
        "control-required",
        "breaking",
        "control-no-longer-required",
        "compatible",
    ),
    (
        "risk policy requires confirmation",
        _set("riskPolicy.confirmationRequired", True),
        "confirmation-required",
        "breaking",
        "confirmation-dropped",
        "compatible",
    ),
    (
        "action policy removed",
        _set("actionPolicy", _DELETE),
        "action-policy-removed",
        "compatible",
        "action-policy-added",
        "breaking",
    ),
    (
        "alias added",
        _set("aliases", ["trip_rename", "rename_trip"]),
        "alias-added",
        "compatible",
        "alias-removed",
        "breaking",
    ),
    (
        "description changed",
        _set("description", "Give a trip a new title."),
        "description-changed",
        "compatible",
        "description-changed",
        "compatible",
    ),
    (
        "deprecated",
        _set("deprecation", {"sinceVersion": "v1", "message": "Use trips.update."}),
        "deprecation-added",
        "compatible",
        "deprecation-removed",
        "compatible",
    ),
    (
        "audience limited",
        _set("audience", ["staff"]),
        "audience-narrowed",
        "breaking",
        "audience-widened",
        "compatible",
    ),
    (
        "delegation",
        _set("delegable", True),
        "delegation-added",
        "compatible",
        "delegation-removed",
        "breaking",
    ),
    (
        "actor types limited",
        _set("actionPolicy.allowedActorTypes", ["human"]),
        "actor-types-narrowed",
        "breaking",
        "actor-types-widened",
        "compatible",
    ),
    (
        "action risk raised",
        _set("actionPolicy.risk", "high"),
        "action-risk-raised",
        "breaking",
        "action-risk-lowered",
        "compatible",
    ),
    (
        "capability id changed",
        _set("capabilityId", "travel.trips.rename"),
        "capability-id-changed",
        "compatible",
        "capability-id-changed",
        "compatible",
    ),
    (
        "owner changed",
        _set("owner", "travel"),
        "owner-changed",
        "compatible",
        "owner-changed",
        "compatible",
    ),
    (
        "unknown tier",
        _set("tier", "galactic"),
        "tier-changed",
        "undecidable",
        "tier-changed",
        "undecidable",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "forward", "forward_severity", "backward", "backward_severity"),
    [r[1:] for r in RULES],
    ids=[r[0] for r in RULES],
)
def test_tool_level_rule_in_both_directions(
    mutate: Callable[[dict[str, Any]], None],
    forward: str,
    forward_severity: str,
    backward: str,
    backward_severity: str,
) -> None:
    new = copy.deepcopy(BASE)
    mutate(new)
    assert kinds(diff_manifests([BASE], [new], today=TODAY)).get(forward) == forward_severity
    assert kinds(diff_manifests([new], [BASE], today=TODAY)).get(backward) == backward_severity


def test_auth_order_is_public_identity_admin() -> None:
    public = {**BASE, "auth": "public"}
    assert kinds(diff_manifests([public], [BASE], today=TODAY))["auth-raised"] == "breaking"
    assert kinds(diff_manifests([BASE], [public], today=TODAY))["auth-lowered"] == "compatible"


def test_an_action_policy_that_requires_nothing_may_be_added() -> None:
    relaxed = {**BASE, "controls": {"required": [], "optional": ["requestId", "reasonCode"]}}
    old = {k: v for k, v in relaxed.items() if k != "actionPolicy"}
    assert kinds(diff_manifests([old], [relaxed], today=TODAY)) == {
        "action-policy-added": "compatible"
    }


def test_controls_nested_in_an_older_action_policy_are_still_compared() -> None:
    old = copy.deepcopy(BASE)
    old["actionPolicy"]["controls"] = old.pop("controls")
    new = copy.deepcopy(BASE)
    new["controls"]["required"] = ["requestId", "confirmed"]
    assert kinds(diff_manifests([old], [new], today=TODAY))["control-required"] == "breaking"


def test_discovery_warnings_are_not_a_change() -> None:
    discovered = {**BASE, "warnings": ["tool 'trips.rename' passed its sunset date"]}
    assert diff_manifests([BASE], [discovered], today=TODAY).tools[0].changes == ()


def test_a_tool_with_no_change_is_unchanged() -> None:
    diff = diff_manifests([BASE], [copy.deepcopy(BASE)], today=TODAY)
    assert [(t.name, t.status, t.changes) for t in diff.tools] == [
        ("trips.rename", "unchanged", ())
    ]
    assert diff.unversioned_breaking() == ()


# --- schemas through real registries --------------------------------------------------------


class NarrowRenameIn(BaseModel):
    trip_id: str
    title: str
    style: Literal["plain", "bold"] = "plain"


def test_an_enum_that_loses_a_value_is_an_unversioned_breaking_change() -> None:
    diff = diff_manifests(
        manifest(rename_tool()), manifest(rename_tool(input_schema=NarrowRenameIn))
    )
    [tool] = diff.unversioned_breaking()
    [change] = tool.breaking
    assert (change.tool, change.path, change.kind) == (
        "trips.rename",
        "inputSchema.style",
        "enum-values-removed",
    )
    assert "italic" in change.detail


def test_output_field_removed_is_breaking_and_input_field_added_optional_is_not() -> None:
    class RenameOutV2(BaseModel):
        trip_id: str

    class RenameInV2(RenameIn):
        note: str | None = None

    diff = diff_manifests(
        manifest(rename_tool()),
        manifest(rename_tool(input_schema=RenameInV2, output_schema=RenameOutV2)),
    )
    by_path = {c.path: (c.kind, c.severity) for c in diff.tools[0].changes}
    assert by_path["inputSchema.note"] == ("property-added", "compatible")
    assert by_path["outputSchema.title"] == ("property-removed", "breaking")


# --- the version-bump excuse ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old_version", "new_version", "excused"),
    [
        ("v1", "v2", True),
        ("1", "2", True),
        ("1.2.3", "2.0.0", True),
        ("v2.0", "v3", True),
        ("v1", "1.0.0", False),
        ("1.2.3", "1.3.0", False),
        ("v2", "v1", False),
        ("v1", "v1", False),
        ("alpha", "beta", True),
    ],
)
def test_a_major_capability_version_bump_excuses_breaking_changes(
    old_version: str, new_version: str, excused: bool
) -> None:
    old = manifest(rename_tool(capability_version=old_version))
    new = manifest(rename_tool(capability_version=new_version, input_schema=NarrowRenameIn))
    diff = diff_manifests(old, new)
    assert bool(diff.unversioned_breaking()) is not excused
    [tool] = diff.tools
    assert (tool.old_version, tool.new_version) == (old_version, new_version)
    if excused:
        assert tool.excuse is not None and new_version in tool.excuse


def test_an_unreadable_version_change_says_it_counted_as_a_major_bump() -> None:
    old = manifest(rename_tool(capability_version="alpha"))
    new = manifest(rename_tool(capability_version="beta"))
    [change] = diff_manifests(old, new).tools[0].changes
    assert change.kind == "major-version-bump"
    assert "not a readable version" in change.detail


# --- renames and aliases ----------------------------------------------------------------------


def test_a_rename_that_keeps_the_old_name_as_an_alias_is_compatible() -> None:
    old = manifest(rename_tool())
    new = manifest(rename_tool(name="trips.retitle", aliases=["trips.rename", "trip_rename"]))
    diff = diff_manifests(old, new)
    [tool] = diff.tools
    assert (tool.name, tool.status, tool.renamed_to) == ("trips.rename", "renamed", "trips.retitle")
    assert kinds(diff)["tool-renamed"] == "compatible"
    assert diff.unversioned_breaking() == ()


def test_a_breaking_change_behind_a_new_name_with_the_old_one_a_deprecated_alias_is_excused() -> (
    None
):
    deprecation = charter.Deprecation(since_version="v1", message="Use trips.retitle.")
    new_tool = rename_tool(
        name="trips.retitle",
        aliases=["trips.rename", "trip_rename"],
        input_schema=NarrowRenameIn,
        deprecation=deprecation,
    )
    diff = diff_manifests(manifest(rename_tool()), manifest(new_tool))
    [tool] = diff.tools
    assert (
        tool.breaking
        and tool.excuse == "old name 'trips.rename' kept as a deprecated alias of 'trips.retitle'"
    )
    assert diff.unversioned_breaking() == ()


def test_the_old_name_may_be_deprecated_as_an_alias_alone() -> None:
    old_name = charter.Alias(
        name="trips.rename",
        deprecation=charter.Deprecation(since_version="v1", message="Use trips.retitle."),
    )
    new_tool = rename_tool(
        name="trips.retitle", aliases=[old_name, "trip_rename"], input_schema=NarrowRenameIn
    )
    diff = diff_manifests(manifest(rename_tool()), manifest(new_tool))
    assert diff.tools[0].excuse == (
        "old name 'trips.rename' kept as a deprecated alias of 'trips.retitle'"
    )
    assert diff.unversioned_breaking() == ()


def test_a_breaking_change_behind_a_new_name_without_deprecation_is_not_excused() -> None:
    new_tool = rename_tool(
        name="trips.retitle", aliases=["trips.rename"], input_schema=NarrowRenameIn
    )
    diff = diff_manifests(manifest(rename_tool()), manifest(new_tool))
    assert [t.name for t in diff.unversioned_breaking()] == ["trips.rename"]
    # The old alias `trip_rename` was dropped on the way: that alone is breaking too.
    assert kinds(diff)["alias-removed"] == "breaking"


def test_keeping_the_old_tool_deprecated_beside_a_new_one_is_compatible() -> None:
    deprecation = charter.Deprecation(since_version="v1", message="Use trips.retitle.")
    new = manifest(
        rename_tool(deprecation=deprecation),
        rename_tool(name="trips.retitle", aliases=[], input_schema=NarrowRenameIn),
    )
    diff = diff_manifests(manifest(rename_tool()), new)
    assert [(t.name, t.status) for t in diff.tools] == [
        ("trips.rename", "changed"),
        ("trips.retitle", "added"),
    ]
    assert kinds(diff) == {"deprecation-added": "compatible", "tool-added": "compatible"}
    assert diff.unversioned_breaking() == ()


# --- removal and the sunset ---------------------------------------------------------------------


def test_a_removed_tool_is_breaking() -> None:
    diff = diff_manifests(manifest(rename_tool()), [])
    [tool] = diff.unversioned_breaking()
    assert (tool.status, tool.new_version, kinds(diff)) == (
        "removed",
        None,
        {"tool-removed": "breaking"},
    )


def test_a_tool_removed_after_its_sunset_date_is_excused() -> None:
    sunset = charter.Deprecation(
        since_version="v1", message="Gone.", sunset_date=datetime.date(2027, 1, 31)
    )
    old = manifest(rename_tool(deprecation=sunset))
    assert diff_manifests(old, [], today=datetime.date(2027, 1, 31)).unversioned_breaking() == ()
    assert diff_manifests(old, [], today=datetime.date(2027, 1, 30)).unversioned_breaking() != ()


def test_sunset_warnings_name_deprecated_tools_past_their_date() -> None:
    sunset = charter.Deprecation(
        since_version="v1", message="Use trips.retitle.", sunset_date=datetime.date(2027, 1, 31)
    )
    entries = manifest(rename_tool(deprecation=sunset))
    [warning] = sunset_warnings(entries, datetime.date(2027, 2, 1))
    assert warning == (
        "tool 'trips.rename' is deprecated and past its sunset date 2027-01-31 "
        "(Use trips.retitle.); remove it or move the date"
    )
    assert sunset_warnings(entries, datetime.date(2027, 1, 31)) == []
    assert diff_manifests(entries, entries, today=datetime.date(2027, 2, 1)).warnings == (warning,)


def test_sunset_warnings_cover_deprecated_aliases() -> None:
    alias = charter.Alias(
        name="trip_rename",
        deprecation=charter.Deprecation(
            since_version="v1", message="Say trips.rename.", sunset_date=datetime.date(2027, 1, 31)
        ),
    )
    entries = manifest(rename_tool(aliases=[alias]))
    assert sunset_warnings(entries, datetime.date(2027, 2, 1)) == [
        "alias 'trip_rename' of 'trips.rename' is deprecated and past its sunset date "
        "2027-01-31 (Say trips.rename.); remove it or move the date"
    ]


def test_an_alias_removed_after_its_sunset_date_is_excused() -> None:
    alias = charter.Alias(
        name="trip_rename",
        deprecation=charter.Deprecation(
            since_version="v1", message="m", sunset_date=datetime.date(2027, 1, 31)
        ),
    )
    old, new = manifest(rename_tool(aliases=[alias])), manifest(rename_tool(aliases=[]))
    after = diff_manifests(old, new, today=datetime.date(2027, 1, 31))
    assert after.tools[0].excuse == "removed after the sunset date 2027-01-31"
    assert after.unversioned_breaking() == ()
    before = diff_manifests(old, new, today=datetime.date(2027, 1, 30))
    assert [t.name for t in before.unversioned_breaking()] == ["trips.rename"]
    assert [c.path for c in before.tools[0].breaking] == ["aliases['trip_rename']"]


def test_an_unreadable_sunset_date_is_a_warning() -> None:
    entry = {**BASE, "deprecation": {"sinceVersion": "v1", "message": "m", "sunsetDate": "soon"}}
    [warning] = sunset_warnings([entry], TODAY)
    assert "not an ISO date" in warning


def test_a_new_tool_is_compatible() -> None:
    diff = diff_manifests([], manifest(rename_tool()))
    assert [(t.name, t.status) for t in diff.tools] == [("trips.rename", "added")]
    assert kinds(diff) == {"tool-added": "compatible"}


# --- documents ---------------------------------------------------------------------------------


def test_to_json_is_stable_and_serialisable() -> None:
    diff = diff_manifests(
        manifest(rename_tool()), manifest(rename_tool(input_schema=NarrowRenameIn))
    )
    document = diff.to_json()
    assert json.loads(json.dumps(document)) == document
    assert document["ok"] is False
    assert document["summary"] == {
        "tools": 1,
        "changed": 1,
        "breaking": 1,
        "unversionedBreaking": 1,
        "undecidable": 0,
    }
    tools = document["tools"]
    assert isinstance(tools, list) and len(tools) == 1
    tool = tools[0]
    assert tool["unversionedBreaking"] is True
    assert [c for c in tool["changes"] if c["severity"] != "compatible"] == [
        {
            "path": "inputSchema.style",
            "kind": "enum-values-removed",
            "severity": "breaking",
            "detail": 'values removed: "italic"',
        }
    ]


def test_format_report_names_the_tool_the_change_and_the_fix() -> None:
    diff = diff_manifests(
        manifest(rename_tool()), manifest(rename_tool(input_schema=NarrowRenameIn))
    )
    report = format_report(diff)
    assert "trips.rename (v1): BREAKING" in report
    assert "[breaking] inputSchema.style: values removed" in report
    assert report.endswith(
        "FAIL: 1 tool compared, 1 changed, 1 breaking (1 without a major version bump), "
        "0 undecidable"
    )


def test_lock_json_round_trips_through_parse_manifest() -> None:
    entries = manifest(rename_tool())
    text = lock_json(entries)
    assert text.endswith("}\n") and '\n  "lockVersion": 1' in text
    assert parse_manifest(json.loads(text)) == entries
    assert parse_manifest({"tools": entries}) == entries
    assert parse_manifest(entries) == entries


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"lockVersion": 2, "tools": []}, "lockVersion 2 is not supported"),
        ({"items": []}, "expected a list of tool entries"),
        ([{"description": "x"}], "entry 0 is not an object with a string 'name'"),
        ([{"name": "a"}, {"name": "a"}], "tool 'a' appears twice"),
        ("nope", "expected a list"),
    ],
)
def test_parse_manifest_rejects_what_is_not_a_manifest(document: object, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifest(document, source="lock.json")


def test_diff_manifests_rejects_entries_without_a_name() -> None:
    with pytest.raises(ManifestError, match="old manifest: entry 0"):
        diff_manifests([{"description": "x"}], [])
