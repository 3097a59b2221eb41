"""What a comparison found: judged changes, per tool and per manifest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from charter.evolution._schema_diff import Severity

__all__ = ("Change", "ManifestDiff", "ToolDiff", "ToolStatus")

ToolStatus: TypeAlias = Literal["added", "removed", "renamed", "changed", "unchanged"]
"""What happened to a tool between two manifests."""


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
