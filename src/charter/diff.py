"""Contract evolution: compare two tool manifests and judge every change for callers.

A manifest is the list of entries `Registry.manifest()` returns (docs/manifest-format.md),
a lock file written by `charter lock`, or a discovery document. `diff_manifests` matches
tools by name (an old name that survives as an alias of a new tool counts as a rename),
judges each change breaking, compatible or undecidable (the rules are in
docs/versioning.md), and says which breaking changes are not excused by a major bump of
the tool's `capabilityVersion`, by the old name being kept as a deprecated alias of a new
tool, or by a removal after the tool's sunset date. Standard library only.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from charter._manifest_rules import Entry, alias_path, entry_findings, strings
from charter._schema_diff import SchemaChange, Severity, diff_schemas
from charter.errors import ConfigurationError
from charter.manifest import deprecation_warnings

__all__ = (
    "LOCK_VERSION",
    "Change",
    "ManifestDiff",
    "ManifestError",
    "SchemaChange",
    "Severity",
    "ToolDiff",
    "ToolStatus",
    "diff_manifests",
    "diff_schemas",
    "format_report",
    "lock_json",
    "parse_manifest",
    "read_manifest",
    "summary_line",
    "sunset_warnings",
    "tool_verdict",
)

LOCK_VERSION = 1
"""The version of the lock file format `lock_json` writes."""

ToolStatus: TypeAlias = Literal["added", "removed", "renamed", "changed", "unchanged"]
"""What happened to a tool between two manifests."""


class ManifestError(ConfigurationError):
    """Raised when a manifest or lock file cannot be read or does not hold tool entries.

    The message names the source and what is wrong with it.
    """


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One judged difference in one tool."""

    tool: str
    """The tool's name in the old manifest (the new one for an added tool)."""
    path: str
    """The entry key it concerns, e.g. `requiredScopes`, `actionPolicy.approval`, or a
    schema path such as `inputSchema.status` or `outputSchema.items[*].id`."""
    kind: str
    """A stable identifier such as `tool-removed` or `enum-values-removed`."""
    severity: Severity
    """`breaking`, `compatible` or `undecidable` (charter cannot tell)."""
    detail: str
    """A sentence for people."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDiff:
    """Every change to one tool, and whether its breaking changes are excused."""

    name: str
    """The name callers used (the new tool's name when it is new)."""
    old_version: str | None
    """`capabilityVersion` in the old manifest; None when the tool is new or had none."""
    new_version: str | None
    """`capabilityVersion` in the new manifest; None when the tool is gone or has none."""
    changes: tuple[Change, ...]
    status: ToolStatus = "changed"
    renamed_to: str | None = None
    """For a renamed tool, the new tool that now answers to the old name."""
    excuse: str | None = None
    """Why the breaking changes are allowed (a major version bump, a deprecated alias, a
    removal after the sunset date); None when nothing excuses them."""

    @property
    def breaking(self) -> tuple[Change, ...]:
        """The breaking changes."""
        return tuple(c for c in self.changes if c.severity == "breaking")

    @property
    def undecidable(self) -> tuple[Change, ...]:
        """The changes charter could not judge."""
        return tuple(c for c in self.changes if c.severity == "undecidable")

    @property
    def unversioned(self) -> bool:
        """Whether a breaking change is not excused."""
        return bool(self.breaking) and self.excuse is None


@dataclass(frozen=True, kw_only=True, slots=True)
class ManifestDiff:
    """The result of `diff_manifests`: one `ToolDiff` per tool, old order then new tools."""

    tools: tuple[ToolDiff, ...]
    warnings: tuple[str, ...] = ()
    """Deprecated tools of the new manifest that are past their sunset date."""

    @property
    def changed(self) -> tuple[ToolDiff, ...]:
        """The tools with at least one change."""
        return tuple(t for t in self.tools if t.changes)

    def unversioned_breaking(self) -> tuple[ToolDiff, ...]:
        """The tools with a breaking change that nothing excuses; CI fails on these."""
        return tuple(t for t in self.tools if t.unversioned)

    def counts(self) -> dict[str, int]:
        """How many tools were compared, changed, broke, broke unexcused, are undecidable."""
        return {
            "tools": len(self.tools),
            "changed": len(self.changed),
            "breaking": sum(1 for t in self.tools if t.breaking),
            "unversionedBreaking": len(self.unversioned_breaking()),
            "undecidable": sum(1 for t in self.tools if t.undecidable),
        }

    def to_json(self) -> dict[str, object]:
        """A stable JSON-ready summary (what `charter diff --json` prints)."""
        return {
            "ok": not self.unversioned_breaking(),
            "summary": self.counts(),
            "tools": [_tool_json(t) for t in self.tools],
            "warnings": list(self.warnings),
        }


def _tool_json(tool: ToolDiff) -> dict[str, object]:
    return {
        "name": tool.name,
        "status": tool.status,
        "renamedTo": tool.renamed_to,
        "oldVersion": tool.old_version,
        "newVersion": tool.new_version,
        "excuse": tool.excuse,
        "unversionedBreaking": tool.unversioned,
        "changes": [
            {"path": c.path, "kind": c.kind, "severity": c.severity, "detail": c.detail}
            for c in tool.changes
        ],
    }


def diff_manifests(
    old: Sequence[Mapping[str, object]],
    new: Sequence[Mapping[str, object]],
    *,
    today: datetime.date | None = None,
) -> ManifestDiff:
    """Compare two manifests tool by tool.

    Args:
        old: The entries callers know (a lock file's `tools`, or the deployed manifest).
        new: The entries that replace them.
        today: The date sunset dates are compared with; defaults to today.

    Returns:
        The judged differences, with `unversioned_breaking()` for CI.

    Raises:
        ManifestError: An entry has no string `name`.
    """
    today = today or datetime.date.today()
    old_entries, new_entries = _named(old, "old"), _named(new, "new")
    new_by_name = {_name(e): e for e in new_entries}
    alias_owner: dict[str, Entry] = {}
    for entry in new_entries:
        for alias in strings(entry.get("aliases")):
            alias_owner.setdefault(alias, entry)
    tools: list[ToolDiff] = []
    answered: set[str] = set()
    for entry in old_entries:
        name = _name(entry)
        if name in new_by_name:
            tools.append(_compare_tool(entry, new_by_name[name], today))
            answered.add(name)
        elif name in alias_owner:
            tools.append(_renamed_tool(entry, alias_owner[name], today))
            answered.add(_name(alias_owner[name]))
        else:
            tools.append(_removed_tool(entry, today))
    old_names = {_name(e) for e in old_entries}
    for entry in new_entries:
        name = _name(entry)
        if name not in answered and name not in old_names:
            tools.append(_added_tool(entry))
    return ManifestDiff(tools=tuple(tools), warnings=tuple(sunset_warnings(new_entries, today)))


def _named(entries: Sequence[Mapping[str, object]], side: str) -> list[Entry]:
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ManifestError(f"{side} manifest: entry {index} has no string 'name'")
    return list(entries)


def _name(entry: Entry) -> str:
    return str(entry["name"])


def _version(entry: Entry) -> str | None:
    version = entry.get("capabilityVersion")
    return version if isinstance(version, str) else None


def _changes(tool: str, entry_old: Entry, entry_new: Entry) -> list[Change]:
    return [
        Change(tool=tool, path=f.path, kind=f.kind, severity=f.severity, detail=f.detail)
        for f in entry_findings(entry_old, entry_new)
    ]


def _compare_tool(old: Entry, new: Entry, today: datetime.date) -> ToolDiff:
    name = _name(old)
    changes = _changes(name, old, new)
    bump = _version_change(_version(old), _version(new))
    if bump is not None:
        changes.insert(0, bump.change(name))
    return ToolDiff(
        name=name,
        old_version=_version(old),
        new_version=_version(new),
        changes=tuple(changes),
        status="changed" if changes else "unchanged",
        excuse=_excuse(changes, bump, old, today),
    )


def _renamed_tool(old: Entry, new: Entry, today: datetime.date) -> ToolDiff:
    name, new_name = _name(old), _name(new)
    # Deprecated either as a whole or just under the old name (`aliasDeprecations`).
    deprecated = isinstance(new.get("deprecation"), Mapping) or isinstance(
        _mapping(new.get("aliasDeprecations")).get(name), Mapping
    )
    detail = f"renamed to {new_name!r}; the old name still works as its alias" + (
        " (deprecated)" if deprecated else ""
    )
    changes = [
        Change(tool=name, path="name", kind="tool-renamed", severity="compatible", detail=detail)
    ]
    bump = _version_change(_version(old), _version(new))
    if bump is not None:
        changes.append(bump.change(name))
    changes += _changes(name, old, new)
    excuse = _excuse(changes, bump, old, today)
    if excuse is None and deprecated and any(c.severity == "breaking" for c in changes):
        excuse = f"old name {name!r} kept as a deprecated alias of {new_name!r}"
    return ToolDiff(
        name=name,
        old_version=_version(old),
        new_version=_version(new),
        changes=tuple(changes),
        status="renamed",
        renamed_to=new_name,
        excuse=excuse,
    )


def _removed_tool(old: Entry, today: datetime.date) -> ToolDiff:
    name = _name(old)
    detail = "tool removed; callers using it get NOT_FOUND"
    change = Change(tool=name, path="name", kind="tool-removed", severity="breaking", detail=detail)
    return ToolDiff(
        name=name,
        old_version=_version(old),
        new_version=None,
        changes=(change,),
        status="removed",
        excuse=_excuse([change], None, old, today),
    )


def _excuse(
    changes: Sequence[Change], bump: _VersionChange | None, old: Entry, today: datetime.date
) -> str | None:
    """Why a tool's breaking changes are allowed, or None when nothing excuses them."""
    breaking = [c for c in changes if c.severity == "breaking"]
    if not breaking:
        return None
    if bump is not None and bump.major:
        return bump.excuse
    sunsets = [_removed_after_sunset(c, old, today) for c in breaking]
    if all(sunsets):
        return "removed after the sunset date " + ", ".join(sorted(set(filter(None, sunsets))))
    return None


def _removed_after_sunset(change: Change, old: Entry, today: datetime.date) -> str | None:
    """The sunset date that allows this removal (of the tool or an alias), if one does."""
    if change.kind == "tool-removed":
        deprecation = old.get("deprecation")
    elif change.kind == "alias-removed":
        by_alias = _mapping(old.get("aliasDeprecations"))
        alias = next((a for a in by_alias if alias_path(a) == change.path), None)
        deprecation = by_alias.get(alias) if alias is not None else old.get("deprecation")
    else:
        return None
    sunset = _sunset(deprecation)
    if isinstance(sunset, datetime.date) and sunset <= today:
        return sunset.isoformat()
    return None


def _added_tool(new: Entry) -> ToolDiff:
    name = _name(new)
    change = Change(
        tool=name, path="name", kind="tool-added", severity="compatible", detail="new tool"
    )
    return ToolDiff(
        name=name, old_version=None, new_version=_version(new), changes=(change,), status="added"
    )


# --- versions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _VersionChange:
    major: bool
    detail: str
    excuse: str

    def change(self, tool: str) -> Change:
        kind = "major-version-bump" if self.major else "version-changed"
        return Change(
            tool=tool,
            path="capabilityVersion",
            kind=kind,
            severity="compatible",
            detail=self.detail,
        )


def _major(version: str | None) -> int | None:
    """The first integer of a version string (`v2`, `2`, `2.1.0`, `v2.0` all give 2)."""
    found = re.search(r"\d+", version) if version is not None else None
    return int(found.group()) if found else None


def _version_change(old: str | None, new: str | None) -> _VersionChange | None:
    if old == new:
        return None
    shown = f"capabilityVersion {old or '(none)'} → {new or '(none)'}"
    before, after = _major(old), _major(new)
    if before is None or after is None:
        detail = f"{shown}; not a readable version, so the change counts as a major bump"
        return _VersionChange(True, detail, f"capabilityVersion changed ({shown}, unreadable)")
    if after > before:
        return _VersionChange(True, f"{shown} (major bump)", f"major version bump ({shown})")
    return _VersionChange(False, f"{shown} (not a major bump)", "")


# --- deprecation lifecycle ------------------------------------------------------------------


def _sunset(deprecation: object) -> datetime.date | str | None:
    """A deprecation's sunset date; the raw text when it is not an ISO date; None if absent."""
    raw = _mapping(deprecation).get("sunsetDate")
    if raw is None:
        return None
    try:
        return datetime.date.fromisoformat(str(raw))
    except ValueError:
        return str(raw)


def sunset_warnings(manifest: Sequence[Mapping[str, object]], today: datetime.date) -> list[str]:
    """Warnings for deprecated tools and aliases whose `sunsetDate` is before `today`.

    The same warnings `Host.discover` attaches to each entry (`deprecation_warnings`).
    """
    return [warning for entry in manifest for warning in deprecation_warnings(entry, today)]


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


# --- manifest and lock documents ------------------------------------------------------------


def parse_manifest(document: object, *, source: str = "manifest") -> list[dict[str, object]]:
    """Return the tool entries of a manifest document.

    Accepts a list of entries, a discovery document `{"tools": [...]}`, or a lock file
    `{"lockVersion": 1, "tools": [...]}`.

    Raises:
        ManifestError: The document holds no list of named entries, names a tool twice,
            or is a lock file of another version.
    """
    if isinstance(document, Mapping):
        version = document.get("lockVersion", LOCK_VERSION)
        if version != LOCK_VERSION:
            raise ManifestError(
                f"{source}: lockVersion {version!r} is not supported (expected {LOCK_VERSION}); "
                "regenerate it with `charter lock`"
            )
        document = document.get("tools")
    if not isinstance(document, list):
        raise ManifestError(
            f"{source}: expected a list of tool entries or an object with a 'tools' list"
        )
    seen: set[str] = set()
    entries: list[dict[str, object]] = []
    for index, entry in enumerate(document):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ManifestError(f"{source}: entry {index} is not an object with a string 'name'")
        name = str(entry["name"])
        if name in seen:
            raise ManifestError(f"{source}: tool {name!r} appears twice")
        seen.add(name)
        entries.append(dict(entry))
    return entries


def read_manifest(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Read the tool entries of a manifest or lock file.

    Raises:
        ManifestError: The file cannot be read, is not JSON, or holds no tool entries.
    """
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as exc:
        raise ManifestError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ManifestError(f"{os.fspath(path)} is not valid JSON: {exc}") from exc
    return parse_manifest(document, source=os.fspath(path))


def lock_json(entries: Sequence[Mapping[str, object]]) -> str:
    """The lock file for a manifest: stable JSON, sorted keys, two-space indent."""
    document = {"lockVersion": LOCK_VERSION, "tools": list(entries)}
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# --- plain-text report ----------------------------------------------------------------------


def format_report(diff: ManifestDiff) -> str:
    """A plain-text report (the pytest helper's message; the CLI renders its own)."""
    lines: list[str] = []
    for tool in diff.changed:
        lines.append(f"{tool.name}{_versions(tool)}: {tool_verdict(tool)}")
        for change in tool.changes:
            lines.append(f"  [{change.severity}] {change.path}: {change.detail}")
    lines += [f"warning: {w}" for w in diff.warnings]
    lines.append(summary_line(diff))
    return "\n".join(lines)


def _versions(tool: ToolDiff) -> str:
    if tool.old_version == tool.new_version:
        return f" ({tool.old_version})" if tool.old_version else ""
    return f" ({tool.old_version or '-'} → {tool.new_version or '-'})"


def tool_verdict(tool: ToolDiff) -> str:
    """One phrase on a tool: unversioned breaking, excused, undecidable or compatible."""
    if tool.unversioned:
        return (
            "BREAKING without a major capabilityVersion bump "
            "(bump it, or add a new name and keep this one as a deprecated alias)"
        )
    if tool.breaking:
        return f"breaking, allowed: {tool.excuse}"
    if tool.undecidable:
        return "charter cannot decide some changes; review them"
    return "compatible"


def summary_line(diff: ManifestDiff) -> str:
    """One line: how many tools changed, broke, broke without a version, are undecidable."""
    counts = diff.counts()
    verdict = "FAIL" if counts["unversionedBreaking"] else "OK"
    tools = "1 tool" if counts["tools"] == 1 else f"{counts['tools']} tools"
    return (
        f"{verdict}: {tools} compared, {counts['changed']} changed, "
        f"{counts['breaking']} breaking ({counts['unversionedBreaking']} without a major "
        f"version bump), {counts['undecidable']} undecidable"
    )
