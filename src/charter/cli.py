"""The `charter` command (the `cli` extra: Typer and Rich).

Each command is a function (`_diff` for `charter diff`, `serve` in `_cli_serve`) that
maps its arguments onto library calls and renders the result; the logic lives in the
library (`charter.diff`, `charter.host`, `charter.store`, `charter.http`). Commands that
need more than the `cli` extra import it when they run, so `charter diff` works without
a database driver or a web server installed.

Exit status: 0 success; 1 the check failed, or the call failed or was denied; 2 the input
could not be used (one line on stderr; `--debug` shows the traceback); 3 the call waits
for a person (confirmation, approval) or continues elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

try:
    import typer
    from rich.table import Table
    from rich.text import Text
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the charter command needs the cli extra: pip install 'charter[cli]'"
    ) from exc

from charter._cli_approvals import approvals_app
from charter._cli_common import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    DebugOption,
    JsonOption,
    console,
    unusable_input,
)
from charter._cli_serve import serve
from charter._cli_store import db_app, keys_app
from charter._cli_tools import call, tools
from charter._target import load_target, manifest_of
from charter.diff import (
    ManifestDiff,
    ManifestError,
    ToolDiff,
    diff_manifests,
    lock_json,
    parse_manifest,
    read_manifest,
    summary_line,
    tool_verdict,
)
from charter.errors import ConfigurationError

__all__ = ("app", "main")

app = typer.Typer(
    name="charter",
    help="Agent tools authored once and exposed anywhere.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)

app.command("serve")(serve)
app.command("tools")(tools)
app.command("call")(call)
app.add_typer(approvals_app, name="approvals")
app.add_typer(keys_app, name="keys")
app.add_typer(db_app, name="db")

_SEVERITY_STYLE = {"breaking": "bold red", "undecidable": "yellow", "compatible": "green"}


def main() -> None:
    """Run the `charter` command."""
    # Like uvicorn: a TARGET such as `myapp.tools:registry` imports from the current directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    app()


# --- charter diff ---------------------------------------------------------------------------


@app.command("diff")
def _diff(
    old: Annotated[str, typer.Argument(help="The manifest callers know: a file or URL.")],
    new: Annotated[str, typer.Argument(help="The manifest that replaces it: a file or URL.")],
    json_output: JsonOption = False,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="'Name: value' header for URL sources; repeatable."),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Compare two tool manifests and report changes that break callers.

    OLD and NEW are manifest JSON files (a list of entries or a `charter.lock.json`) or
    http(s) URLs that return one. Exits 1 when a breaking change comes without a major
    capabilityVersion bump or a deprecated alias.
    """
    with unusable_input(debug):
        headers = _parse_headers(header or [])
        result = diff_manifests(_load(old, headers), _load(new, headers))
    _report(result, json_output)


def _load(source: str, headers: dict[str, str]) -> list[dict[str, object]]:
    if source.startswith(("http://", "https://")):
        return parse_manifest(_fetch(source, headers), source=source)
    return read_manifest(source)


def _fetch(url: str, headers: dict[str, str]) -> object:
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


def _parse_headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise ConfigurationError(f"--header {value!r} must look like 'Name: value'")
        headers[name.strip()] = content.strip()
    return headers


# --- charter lock ---------------------------------------------------------------------------


@app.command("lock")
def _lock(
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
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Record the tools' contract in a lock file, or check the live tools against it.

    With --check, exits 1 when a tool changed incompatibly since the lock was written
    without a major capabilityVersion bump or a deprecated alias.
    """
    with unusable_input(debug):
        live = manifest_of(load_target(target))
        locked = _read_lock(output, target) if check else None
    if locked is not None:
        _report(diff_manifests(locked, live), json_output)
    output.write_text(lock_json(live), encoding="utf-8")
    count = "1 tool" if len(live) == 1 else f"{len(live)} tools"
    console().print(Text(f"wrote {output} ({count})"), soft_wrap=True)  # a path stays whole


def _read_lock(path: Path, target: str) -> list[dict[str, object]]:
    if not path.exists():
        raise ManifestError(
            f"no lock file at {path}; run `charter lock {target}` first and commit the file"
        )
    return read_manifest(path)


# --- rendering ------------------------------------------------------------------------------


def _report(result: ManifestDiff, json_output: bool) -> NoReturn:
    """Print a diff and exit: 1 when a breaking change is unversioned, else 0."""
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


if __name__ == "__main__":
    main()
