"""docs/operations.md: its factory example is a TARGET the command serves as written."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from cli_support import ROOT, charter, parse, sqlite

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_factory_in_operations_md_is_a_target(
    write_target: Callable[[str], str], tmp_path: Path
) -> None:
    (block,) = PYTHON_BLOCK.findall((ROOT / "docs" / "operations.md").read_text("utf-8"))
    module = write_target(block)
    db = sqlite(tmp_path / "c.db")
    listed = charter("tools", f"{module}:build", "--db", db, "--json")
    called = charter("call", f"{module}:build", "status", "--db", db)
    assert [entry["name"] for entry in parse(listed)] == ["status"]
    assert called.exit_code == 0, called.output
    assert parse(called) == {"ok": True}


def test_every_serve_option_is_in_the_operations_table() -> None:
    import typer

    from charter.cli import app

    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    # --debug and --help are every command's (documented once, above the table).
    options = {o for p in serve.params for o in p.opts if o.startswith("--")} - {
        "--help",
        "--debug",
    }
    page = (ROOT / "docs" / "operations.md").read_text("utf-8")
    assert sorted(o for o in options if f"| `{o}" not in page) == []
