"""Entries no registry would write, and documents too deep to compare: exit 2, never a verdict.

A wrong-typed field read leniently turned into a judgement (a string of scopes read as no
scopes, a number for `capabilityVersion` read as a major bump that excused everything), and
deep nesting crashed with a traceback and exit 1, which CI reads as "breaking".
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict
from tests.builders import WRITE_RISK
from typer.testing import CliRunner

import charter
from charter.cli import app
from charter.evolution import ManifestError, diff_manifests, parse_manifest
from charter.testing import assert_compatible_with_lock

runner = CliRunner()


class RenameIn(BaseModel):
    trip_id: str
    style: Literal["plain", "bold"] = "plain"


class NarrowRenameIn(BaseModel):
    model_config = ConfigDict(title="RenameIn")
    trip_id: str
    style: Literal["plain"] = "plain"


class RenameOut(BaseModel):
    trip_id: str


def rename_tool(input_schema: type[BaseModel] = RenameIn) -> charter.Tool[Any, Any, Any]:
    return charter.define_tool(
        name="trips.rename",
        description="Rename a trip.",
        input_schema=input_schema,
        output_schema=RenameOut,
        handler=lambda args: RenameOut(trip_id=args.trip_id),
        tier="write",
        risk_policy=WRITE_RISK,
        action_policy=charter.ActionPolicy(target_type="trip", command_target_field="trip_id"),
        required_scopes=["trips:write"],
        aliases=["trip_rename"],
    )


def manifest(tool: charter.Tool[Any, Any, Any]) -> list[dict[str, Any]]:
    registry = charter.Registry()
    registry.register(tool)
    entries: list[dict[str, Any]] = json.loads(registry.manifest_json())
    return entries


BASE = manifest(rename_tool())[0]
NAME = BASE["name"]


def entry_with(path: str, value: Any) -> dict[str, Any]:
    """The base entry with one field (`controls.required`) set to `value`."""
    entry = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = entry
    for parent in parents:
        node = node.setdefault(parent, {})
    node[last] = value
    return entry


WRONG = [
    ("capabilityVersion", 1, "'capabilityVersion' must be a non-empty string, not 1"),
    ("capabilityVersion", None, "'capabilityVersion' must be a non-empty string, not null"),
    ("capabilityVersion", "", "'capabilityVersion' must be a non-empty string, not \"\""),
    ("requiredScopes", "trips:read", "'requiredScopes' must be a list of strings"),
    ("requiredScopes", [1], "'requiredScopes' must be a list of strings, not [1]"),
    ("aliases", {"a": 1}, "'aliases' must be a list of strings, not an object"),
    ("delegable", "yes", "'delegable' must be true or false, not \"yes\""),
    ("audience", "staff", "'audience' must be a list of strings"),
    ("tier", 3, "'tier' must be a string, not 3"),
    ("inputSchema", "x", "'inputSchema' must be a JSON Schema"),
    ("outputSchema", None, "'outputSchema' must be a JSON Schema"),
    ("controls", "x", "'controls' must be an object"),
    ("controls.required", "requestId", "'controls.required' must be a list of strings"),
    ("riskPolicy.confirmationRequired", "no", "'riskPolicy.confirmationRequired' must be true"),
    ("actionPolicy.allowedActorTypes", "agent", "'actionPolicy.allowedActorTypes' must be a list"),
    ("deprecation", "soon", "'deprecation' must be an object"),
    ("aliasDeprecations", {"old": "x"}, "'aliasDeprecations['old']' must be an object"),
    ("name", "", "'name' must be a non-empty string"),
]


@pytest.mark.parametrize(("path", "value", "message"), WRONG, ids=[w[0] for w in WRONG])
def test_an_entry_with_a_wrong_typed_field_is_an_invalid_document(
    path: str, value: Any, message: str
) -> None:
    bad = entry_with(path, value)
    with pytest.raises(ManifestError, match=r"^lock\.json: tool '.*': ") as raised:
        parse_manifest([bad], source="lock.json")
    assert message in str(raised.value)
    # In-memory manifests (a live registry's, the pytest helper's) are checked the same way.
    with pytest.raises(ManifestError, match="new manifest: tool"):
        diff_manifests([BASE], [bad])
    with pytest.raises(ManifestError, match="old manifest: tool"):
        diff_manifests([bad], [BASE])


def test_fields_a_registry_omits_may_be_absent() -> None:
    minimal = {"name": "t", "inputSchema": {"type": "object"}}
    assert parse_manifest([minimal]) == [minimal]
    assert diff_manifests([minimal], [minimal]).unversioned_breaking() == ()


@pytest.mark.parametrize("side", ["old", "new"])
def test_a_missing_capability_version_is_never_a_major_bump(side: str) -> None:
    old = manifest(rename_tool())[0]
    new = manifest(rename_tool(input_schema=NarrowRenameIn))[0]
    del (old if side == "old" else new)["capabilityVersion"]
    diff = diff_manifests([old], [new])
    [tool] = diff.unversioned_breaking()
    assert tool.excuse is None
    assert tool.changes[0].kind == "version-changed"
    assert "a missing version is not a major bump" in tool.changes[0].detail


# --- through the CLI: exit 2 and one line -------------------------------------------------


def _run_diff(old: object, new: object, tmp_path: Path) -> Any:
    paths = []
    for name, document in (("old.json", old), ("new.json", new)):
        path = tmp_path / name
        text = document if isinstance(document, str) else json.dumps(document)
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return runner.invoke(app, ["diff", *paths])


def _assert_one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]


@pytest.mark.parametrize("version", [1, None])
def test_a_breaking_change_behind_a_malformed_version_exits_2(
    tmp_path: Path, version: object
) -> None:
    new = entry_with("capabilityVersion", version)
    new["requiredScopes"] = [*new["requiredScopes"], "trips:admin"]
    result = _run_diff([BASE], [new], tmp_path)
    _assert_one_line_error(result, f"new.json: tool '{NAME}': 'capabilityVersion' must be")


def test_a_breaking_change_behind_a_missing_version_fails_the_check(tmp_path: Path) -> None:
    new = copy.deepcopy(BASE)
    del new["capabilityVersion"]
    new["requiredScopes"] = [*new["requiredScopes"], "trips:admin"]
    result = _run_diff([BASE], [new], tmp_path)
    assert result.exit_code == 1, result.output
    assert "0 without a major version bump" not in result.output


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _nested_text(levels: int) -> str:
    """A manifest whose input schema nests `levels` objects, as text (json.dumps would
    recurse too deeply to write it)."""
    schema = '{"type": "object", "properties": {"a": ' * levels + "{}" + "}}" * levels
    return json.dumps([entry_with("inputSchema", "SCHEMA")]).replace('"SCHEMA"', schema)


@pytest.mark.parametrize("levels", [100, 900, 5000])
def test_a_schema_nested_too_deeply_exits_2(tmp_path: Path, levels: int) -> None:
    # The parser itself gives up beyond about 500 levels; below that, the entry check does.
    deep = _nested_text(levels)
    for old, new in (([BASE], deep), (deep, [BASE])):
        _assert_one_line_error(_run_diff(old, new, tmp_path), "nest")


def test_a_schema_nested_moderately_is_compared(tmp_path: Path) -> None:
    old, new = entry_with("inputSchema", _nested(40)), entry_with("inputSchema", _nested(41))
    assert _run_diff([old], [new], tmp_path).exit_code == 1


def _chain(length: int, values: list[str]) -> dict[str, Any]:
    """Definitions each holding the next: deep to compare, shallow as JSON."""
    defs: dict[str, Any] = {
        f"D{i}": {"type": "object", "properties": {"n": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(length)
    }
    defs[f"D{length}"] = {"type": "object", "properties": {"s": {"enum": values}}}
    return {"$defs": defs, "type": "object", "properties": {"a": {"$ref": "#/$defs/D0"}}}


def test_a_chain_of_definitions_too_long_to_compare_exits_2(tmp_path: Path) -> None:
    old = entry_with("inputSchema", _chain(400, ["x", "y"]))
    new = entry_with("inputSchema", _chain(400, ["x"]))
    result = _run_diff([old], [new], tmp_path)
    _assert_one_line_error(result, f"tool '{NAME}': its schemas nest too deeply to compare")
    with pytest.raises(ManifestError, match="too deeply to compare"):
        diff_manifests([old], [new])


def test_a_wrong_typed_field_exits_2_naming_the_tool_and_field(tmp_path: Path) -> None:
    result = _run_diff([BASE], [entry_with("requiredScopes", "trips:read")], tmp_path)
    _assert_one_line_error(result, f"tool '{NAME}': 'requiredScopes' must be a list of strings")


def test_the_pytest_helper_refuses_a_lock_file_no_registry_would_write(tmp_path: Path) -> None:
    lock = tmp_path / "charter.lock.json"
    bad = entry_with("capabilityVersion", 2)
    lock.write_text(json.dumps({"lockVersion": 1, "tools": [bad]}), encoding="utf-8")
    registry = charter.Registry()
    registry.register(rename_tool())
    with pytest.raises(AssertionError, match="'capabilityVersion' must be a non-empty string"):
        assert_compatible_with_lock(registry, lock)
