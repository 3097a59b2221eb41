"""`charter diff` and `charter lock`: a tool contract compared with the one callers know.

The judging is `charter.evolution`'s; these commands read manifests (files, URLs, a lock
file or the live tools of a TARGET), print the report as tables or JSON, and exit 1 when
a breaking change comes without a major `capabilityVersion` bump or a deprecated alias.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.table import Table
from rich.text import Text

from charter.cli._common import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    Reach,
    console,
    unusable_input,
    with_reach,
)
from charter.errors import ConfigurationError

if TYPE_CHECKING:  # charter.evolution loads when diff or lock runs, not for other commands
    from charter.evolution import ManifestDiff, ToolDiff

__all__ = ("diff", "lock")

_SEVERITY_STYLE = {"breaking": "bold red", "undecidable": "yellow", "compatible": "green"}


# --- charter diff ---------------------------------------------------------------------------


@with_reach("json_output")
def diff(
    old: Annotated[str, typer.Argument(help="The manifest callers know: a file or URL.")],
    new: Annotated[str, typer.Argument(help="The manifest that replaces it: a file or URL.")],
    *,
    reach: Reach,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="'Name: value' header for URL sources; repeatable."),
    ] = None,
) -> None:
    """Compare two tool manifests and report changes that break callers.

    OLD and NEW are manifest JSON files (a list of entries or a `charter.lock.json`) or
    http(s) URLs that return one. Exits 1 when a breaking change comes without a major
    capabilityVersion bump or a deprecated alias.
    """
    from charter.evolution import diff_manifests

    with unusable_input(reach.debug):
        headers = _parse_headers(header or [])
        result = diff_manifests(_load(old, headers), _load(new, headers))
    _report(result, reach.json_output)


def _load(source: str, headers: dict[str, str]) -> list[dict[str, object]]:
    from charter.evolution import parse_manifest, read_manifest

    if source.startswith(("http://", "https://")):
        return parse_manifest(_fetch(source, headers), source=source)
    return read_manifest(source)


def _fetch(url: str, headers: dict[str, str]) -> object:
    from charter.evolution import ManifestError

    try:
        import httpx
    except ImportError as exc:
        raise ManifestError(f"reading {url} needs httpx: pip install 'charter[http]'") from exc
    try:
        response = httpx.get(url, headers=headers, timeout=30.0, follow_redirects=True)
        response.raise_for_status()
        return response.json()
    except httpx.HTTPError as exc:
        raise ManifestError(f"cannot fetch {url}: {exc}") from exc
    except ValueError as exc:
        raise ManifestError(f"{url} did not return JSON: {exc}") from exc
    except RecursionError:
        # The JSON parser recurses per level; a traceback would exit 1, read as "breaking".
        raise ManifestError(f"{url} returned JSON nested too deeply to read") from None


def _parse_headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise ConfigurationError(f"--header {value!r} must look like 'Name: value'")
        headers[name.strip()] = content.strip()
    return headers


# --- charter lock ---------------------------------------------------------------------------


@with_reach("json_output")
def lock(
    target: Annotated[
        str,
        typer.Argument(help="module:attribute naming a Registry, a Host, or a factory of one."),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The lock file to write or check.")
    ] = Path("charter.lock.json"),
    check: Annotated[
        bool, typer.Option("--check", help="Compare with the lock file instead of writing it.")
    ] = False,
    *,
    reach: Reach,
) -> None:
    """Record the tools' contract in a lock file, or check the live tools against it.

    With --check, exits 1 when a tool changed incompatibly since the lock was written
    without a major capabilityVersion bump or a deprecated alias.
    """
    from charter._target import load_target, manifest_of
    from charter.evolution import diff_manifests, lock_json

    with unusable_input(reach.debug):
        live = manifest_of(load_target(target))
        locked = _read_lock(output, target) if check else None
    if locked is not None:
        _report(diff_manifests(locked, live), reach.json_output)
    output.write_text(lock_json(live), encoding="utf-8")
    count = "1 tool" if len(live) == 1 else f"{len(live)} tools"
    console().print(Text(f"wrote {output} ({count})"), soft_wrap=True)  # a path stays whole


def _read_lock(path: Path, target: str) -> list[dict[str, object]]:
    from charter.evolution import ManifestError, read_manifest

    if not path.exists():
        raise ManifestError(
            f"no lock file at {path}; run `charter lock {target}` first and commit the file"
        )
    return read_manifest(path)


# --- rendering ------------------------------------------------------------------------------


def _report(result: ManifestDiff, json_output: bool) -> NoReturn:
    """Print a diff and exit: 1 when a breaking change is unversioned, else 0."""
    from charter.evolution import summary_line, tool_verdict

    if json_output:
        typer.echo(json.dumps(result.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        out = console()
        for tool in result.changed:
            out.print(_tool_table(tool))
            out.print(Text(tool_verdict(tool), style=_verdict_style(tool)))
            out.print()
        for warning in result.warnings:
            out.print(Text(f"warning: {warning}", style="yellow"))
        failed = bool(result.unversioned_breaking())
        out.print(Text(summary_line(result), style="bold red" if failed else "bold green"))
    raise typer.Exit(EXIT_CHECK_FAILED if result.unversioned_breaking() else EXIT_OK)


def _verdict_style(tool: ToolDiff) -> str:
    if tool.unversioned:
        return "bold red"
    return "yellow" if tool.breaking or tool.undecidable else "green"


def _tool_table(tool: ToolDiff) -> Table:
    versions = tool.old_version or "-"
    if tool.new_version != tool.old_version:
        versions += f" → {tool.new_version or '-'}"
    title = Text(tool.name, style="bold")
    title.append(f"  {tool.status}, {versions}", style="dim")
    if tool.renamed_to:
        title.append(f", now {tool.renamed_to}", style="dim")
    table = Table(title=title, title_justify="left")
    table.add_column("severity", no_wrap=True)
    table.add_column("where")
    table.add_column("change")
    for change in tool.changes:
        style = _SEVERITY_STYLE[change.severity]
        table.add_row(Text(change.severity, style=style), Text(change.path), Text(change.detail))
    return table
