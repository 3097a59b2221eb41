"""Contract evolution: compare two tool manifests and judge every change for callers.

A manifest is the list of entries `Registry.manifest()` returns (docs/manifest-format.md),
a lock file written by `charter lock`, or a discovery document. `diff_manifests` judges
every change breaking, compatible or undecidable (docs/versioning.md) and says which
breaking changes nothing excuses; `charter diff`, `charter lock --check` and
`charter.testing.assert_compatible_with_lock` are built on it. Standard library only.

What lives here:

- `_documents`: reading manifests (`read_manifest`, `parse_manifest`), writing lock files
  (`lock_json`), and `ManifestError`.
- `_entries`: the field types a registry writes; an entry with others is an invalid file.
- `_diff`: `diff_manifests` (tool by tool: added, removed, renamed, changed) and the
  excuses for a breaking change; `sunset_warnings`.
- `_versions`: what counts as a major `capabilityVersion` bump.
- `_results`: what a comparison returns (`ManifestDiff`, `ToolDiff`, `Change`).
- `_report`: the plain-text verdicts (`format_report`, `summary_line`, `tool_verdict`).
- `_manifest_rules`: the rules for each part of one tool's manifest entry.
- `_schema_diff`: the structural comparison of two JSON Schemas (`diff_schemas`), with
  `_schema_keywords` judging the keywords that constrain one value and `_json_schema`
  reading schema documents (`$ref`s, unions, types).
"""

from __future__ import annotations

from charter.evolution._diff import diff_manifests, sunset_warnings
from charter.evolution._documents import (
    LOCK_VERSION,
    ManifestError,
    lock_json,
    parse_manifest,
    read_manifest,
)
from charter.evolution._report import format_report, summary_line, tool_verdict
from charter.evolution._results import Change, ManifestDiff, ToolDiff, ToolStatus
from charter.evolution._schema_diff import SchemaChange, Severity, diff_schemas

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
