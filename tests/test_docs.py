from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from pydantic import BaseModel
from tests import doc_blocks
from tests.builders import risk, tiered_tool

from charter import ActionPolicy, Deprecation, Registry, ToolBinding

TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
DOCS = Path(__file__).resolve().parent.parent / "docs"
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```$", re.DOTALL | re.MULTILINE)
RUN_ELSEWHERE = {
    # README.md: tests/test_readme.py runs its Python blocks and checks what they print.
    "README.md",
    # The worked example edits one module between its blocks: tests/cli/test_versioning_page.py.
    "docs/versioning.md",
}
OWN_PROCESS = {
    # Installs OpenTelemetry's process-wide providers, which can be set once per process:
    # in a test process another test may have set them first.
    "docs/host.md",
}
PYTHON_PAGES = [
    page
    for page in doc_blocks.pages()
    if doc_blocks.runnable(page, doc_blocks.PYTHON)
    and str(page.relative_to(doc_blocks.ROOT)) not in RUN_ELSEWHERE
]


def test_every_not_run_marker_says_why_and_precedes_a_block() -> None:
    marked = [b for page in doc_blocks.pages() for b in doc_blocks.blocks(page) if b.not_run]
    assert all(b.not_run for b in marked)


def test_a_marker_skips_exactly_the_block_after_it_and_must_say_why(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- not-run: a sketch -->\n```python\n...\n```\n\n```bash\ntrue\n```\n")
    sketch, shell = doc_blocks.blocks(page, root=tmp_path)
    assert (sketch.not_run, shell.not_run) == ("a sketch", None)
    assert doc_blocks.runnable(page, doc_blocks.SHELL, root=tmp_path) == [shell]
    for wrong in ("<!-- not-run: -->\n```python\n1\n```\n", "<!-- not-run: x -->\ntext\n"):
        page.write_text(wrong)
        with pytest.raises(ValueError, match="not-run marker"):
            doc_blocks.blocks(page, root=tmp_path)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda page: page.name)
def test_the_python_in_the_docs_runs_as_written(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every Python block of the page that has no not-run marker, from an empty directory
    (``doc_blocks.run_python``)."""
    monkeypatch.chdir(tmp_path)
    if str(page.relative_to(doc_blocks.ROOT)) not in OWN_PROCESS:
        doc_blocks.run_python(page)
        return
    script = "import sys, pathlib, tests.doc_blocks as d; d.run_python(pathlib.Path(sys.argv[1]))"
    env = {**os.environ, "PYTHONPATH": str(doc_blocks.ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(page)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


class Rename(BaseModel):
    trip_id: str
    title: str
    tenant_id: str


class Trip(BaseModel):
    trip_id: str
    title: str


def rename(args: Rename) -> Trip:
    return Trip(trip_id=args.trip_id, title=args.title)


def test_the_manifest_format_example_is_a_real_entry() -> None:
    text = (DOCS / "manifest-format.md").read_text(encoding="utf-8")
    example = json.loads(JSON_BLOCK.findall(text)[0])
    deprecation = Deprecation(
        since_version="2",
        message="Use trips.update.",
        replacement_capability_id="trips.update",
        sunset_date=date(2027, 1, 31),
    )
    tool = tiered_tool(
        "trips.rename",
        "write",
        rename,
        Rename,
        Trip,
        description="Rename a trip.",
        risk_policy=risk("data-write"),
        aliases=["trip_rename"],
        deprecation=deprecation,
        required_scopes=["trips:write"],
        audience=["staff"],
        tenant_field="tenant_id",
        action_policy=ActionPolicy(target_type="trip", command_target_field="trip_id"),
    )
    binding = ToolBinding(
        capability_id="travel.trips.rename", owner="travel", capability_version="1.0.0"
    )
    entry = Registry().register(tool, binding).entry
    # The example elides the schemas; everything else is exactly what the code produces.
    for key in ("inputSchema", "outputSchema"):
        assert example[key]["$schema"] == entry[key]["$schema"]
        assert example[key]["type"] == entry[key]["type"]
        example[key] = entry[key]
    assert example == entry
