"""The `charter` Typer application: every command group mounted on one app, and `main`."""

from __future__ import annotations

import os
import sys

try:
    import rich  # noqa: F401 - every command prints with it
    import typer
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the charter command needs the cli extra: pip install 'charter[cli]'"
    ) from exc

from charter.cli.approvals import approvals_app
from charter.cli.diff import diff, lock
from charter.cli.effects import effects_app, worker
from charter.cli.limits import limits
from charter.cli.serve import serve
from charter.cli.store import db_app, keys_app
from charter.cli.tools import call, tools

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
app.command("limits")(limits)
app.command("worker")(worker)
app.add_typer(effects_app, name="effects")
app.command("diff")(diff)
app.command("lock")(lock)


def main() -> None:
    """Run the `charter` command."""
    # Like uvicorn: a TARGET such as `myapp.tools:registry` imports from the current directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    app()
