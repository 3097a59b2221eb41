"""`capabilityVersion` changes: which count as a major bump, the one excuse for breaking."""

from __future__ import annotations

import re
from dataclasses import dataclass

from charter.evolution._results import Change

__all__ = ("VersionChange", "version_change")


@dataclass(frozen=True, slots=True)
class VersionChange:
    """How a tool's `capabilityVersion` changed between two manifests."""

    major: bool
    """Whether it counts as a major bump (a change to or from a version without an integer
    does; a missing version never does)."""
    detail: str
    """The sentence reported for the change."""
    excuse: str
    """Why a major bump allows the tool's breaking changes ("" when it is not major)."""

    def change(self, tool: str) -> Change:
        """The change reported for `tool`, always compatible in itself."""
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


def version_change(old: str | None, new: str | None) -> VersionChange | None:
    """How `old` became `new`; None when the version did not change."""
    if old == new:
        return None
    shown = f"capabilityVersion {old or '(none)'} → {new or '(none)'}"
    if old is None or new is None:
        # A version that is not there bumps nothing; otherwise dropping it excused anything.
        return VersionChange(False, f"{shown}; a missing version is not a major bump", "")
    before, after = _major(old), _major(new)
    if before is None or after is None:
        detail = f"{shown}; not a readable version, so the change counts as a major bump"
        return VersionChange(True, detail, f"capabilityVersion changed ({shown}, unreadable)")
    if after > before:
        return VersionChange(True, f"{shown} (major bump)", f"major version bump ({shown})")
    return VersionChange(False, f"{shown} (not a major bump)", "")
