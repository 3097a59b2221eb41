"""docs/versioning.md's worked example, as written: its module, its three ways to ship the
change and the reports `charter lock` prints for each, run with the real command in bash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import doc_blocks

PAGE = doc_blocks.ROOT / "docs" / "versioning.md"
CHARTER_BIN = str(Path(sys.executable).parent)
V1_DECORATOR = '@charter.tool(tier="read", name="flights.search", capability_version="v1")\n'


def transcript(block: doc_blocks.Block, cwd: Path) -> tuple[str, str]:
    """Run a ```console``` block's ``$ `` commands in one bash; return what it printed and
    what the block shows (both with trailing spaces dropped)."""
    lines = block.code.splitlines()
    commands = [line.removeprefix("$ ") for line in lines if line.startswith("$ ")]
    shown = [line for line in lines if not line.startswith("$ ")]
    return run(";\n".join(commands), cwd), "\n".join(line.rstrip() for line in shown)


def run(script: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{CHARTER_BIN}:{os.environ['PATH']}", "COLUMNS": "100"}
    env.pop("CHARTER_DB", None)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    return "\n".join(line.rstrip() for line in done.stdout.rstrip("\n").splitlines())


def test_the_worked_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    blocks = doc_blocks.runnable(PAGE, doc_blocks.PYTHON | doc_blocks.SHELL)
    module, v2, renamed, in_tests = (b for b in blocks if b.language == "python")
    locked, caught, bumped, aliased = (b for b in blocks if b.language == "console")
    (in_ci,) = (b for b in blocks if b.language == "sh")
    flights = tmp_path / "flights.py"

    flights.write_text(module.code)
    assert transcript(locked, tmp_path) == ("wrote charter.lock.json (1 tool)",) * 2
    # "someone removes "premium" from the Literal"
    narrowed = module.code.replace('"premium", ', "")
    assert narrowed != module.code and V1_DECORATOR in narrowed
    flights.write_text(narrowed)
    printed, shown = transcript(caught, tmp_path)
    assert printed == shown

    # 1. the major version bumped
    flights.write_text(narrowed.replace(V1_DECORATOR, v2.code))
    printed, shown = transcript(bumped, tmp_path)
    assert printed == shown

    # 2. a new name, the old one a deprecated alias
    flights.write_text(narrowed.replace(V1_DECORATOR, renamed.code))
    printed, shown = transcript(aliased, tmp_path)
    assert printed == shown

    # In CI and in the tests: the same module as myapp.tools passes both.
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "tools.py").write_text(flights.read_text())
    assert run(in_ci.code + "echo exit=$?", tmp_path).endswith("exit=0")
    (tmp_path / "test_contract.py").write_text(in_tests.code)
    tested = run(f"{sys.executable} -m pytest -q -p no:cacheprovider test_contract.py", tmp_path)
    assert "1 passed" in tested, tested
