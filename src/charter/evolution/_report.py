"""The plain-text verdicts on a comparison: per tool, one summary line, a whole report."""

from __future__ import annotations

from charter.evolution._results import ManifestDiff, ToolDiff

__all__ = ("format_report", "summary_line", "tool_verdict")


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
