"""Comparing two manifests tool by tool, and deciding which breaking changes are excused.

`diff_manifests` matches tools by name (an old name that survives as an alias of a new
tool counts as a rename), judges each change breaking, compatible or undecidable (the
rules, in `_manifest_rules` and `_schema_diff`, are described in docs/versioning.md), and
says which breaking changes are not excused by a major bump of the tool's
`capabilityVersion`, by the old name being kept as a deprecated alias of a new tool, or by
a removal after the tool's sunset date.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from charter.evolution._documents import ManifestError
from charter.evolution._entries import entry_problem
from charter.evolution._json_schema import mapping
from charter.evolution._manifest_rules import Entry, alias_path, entry_findings, strings
from charter.evolution._results import Change, ManifestDiff, ToolDiff
from charter.evolution._versions import VersionChange, version_change
from charter.manifest import deprecation_warnings

__all__ = ("diff_manifests", "sunset_warnings")


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
        ManifestError: An entry has no string `name`, is one no registry would write (a
            field of the wrong type, too deep), or has schemas too deep to compare.
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
        if (problem := entry_problem(entry)) is not None:
            raise ManifestError(f"{side} manifest: tool {entry['name']!r}: {problem}")
    return list(entries)


def _name(entry: Entry) -> str:
    return str(entry["name"])


def _version(entry: Entry) -> str | None:
    version = entry.get("capabilityVersion")
    return version if isinstance(version, str) else None


def _changes(tool: str, entry_old: Entry, entry_new: Entry) -> list[Change]:
    try:
        findings = entry_findings(entry_old, entry_new)
    except RecursionError:
        # Schemas recurse once per level, and a chain of definitions each referring to the
        # next is deep without nesting deeply; a crash would exit 1, read as "breaking".
        raise ManifestError(f"tool {tool!r}: its schemas nest too deeply to compare") from None
    return [
        Change(tool=tool, path=f.path, kind=f.kind, severity=f.severity, detail=f.detail)
        for f in findings
    ]


def _compare_tool(old: Entry, new: Entry, today: datetime.date) -> ToolDiff:
    name = _name(old)
    changes = _changes(name, old, new)
    bump = version_change(_version(old), _version(new))
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
        mapping(new.get("aliasDeprecations")).get(name), Mapping
    )
    detail = f"renamed to {new_name!r}; the old name still works as its alias" + (
        " (deprecated)" if deprecated else ""
    )
    changes = [
        Change(tool=name, path="name", kind="tool-renamed", severity="compatible", detail=detail)
    ]
    bump = version_change(_version(old), _version(new))
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
    changes: Sequence[Change], bump: VersionChange | None, old: Entry, today: datetime.date
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
        by_alias = mapping(old.get("aliasDeprecations"))
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


# --- deprecation lifecycle ------------------------------------------------------------------


def _sunset(deprecation: object) -> datetime.date | str | None:
    """A deprecation's sunset date; the raw text when it is not an ISO date; None if absent."""
    raw = mapping(deprecation).get("sunsetDate")
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
