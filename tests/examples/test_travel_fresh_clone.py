"""A fresh clone has everything the README's two commands need.

`git clone` of the committed HEAD into tmp_path (untracked files stay behind, which is
the point), then: every file the Makefile's `run` and `test` targets, `.ci/run`,
pyproject.toml and the README name is there; `make -n run` and `make -n test` resolve;
and the clone's own `src/` and `examples/` import and serve the travel tools, run with
this virtualenv's packages (building a new one is too slow for the suite).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from travel_support import ROOT

pytestmark = pytest.mark.slow

MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)")
REPO_PATH = re.compile(r"`((?:src|examples|docs|tests|bench|scripts|\.ci)/[\w./-]*)`")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("clone") / "charter"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return target


def make_dry_run(clone: Path, target: str) -> list[str]:
    result = subprocess.run(
        ["make", "-n", target], cwd=clone, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def referenced_by_commands(lines: list[str]) -> set[str]:
    """Paths in the working tree and `-m` modules that the commands name."""
    names: set[str] = set()
    for line in lines:
        words = shlex.split(line, comments=True)
        for before, word in zip(["", *words], words, strict=False):
            if before == "-m":
                names.add(word.replace(".", "/"))
            elif ":" in word and re.fullmatch(r"[\w.]+:\w+", word):
                names.add(word.split(":")[0].replace(".", "/"))  # a charter TARGET
            elif (ROOT / word).exists() and not word.startswith(".venv"):
                names.add(word)
    return {name for name in names if _in_working_tree(name)}


def _in_working_tree(name: str) -> bool:
    return any((ROOT / f"{name}{suffix}").exists() for suffix in ("", ".py"))


def _present(clone: Path, name: str) -> bool:
    return any((clone / f"{name}{suffix}").exists() for suffix in ("", ".py"))


@pytest.mark.parametrize("target", ["run", "test"])
def test_make_resolves_and_every_file_it_names_is_committed(clone: Path, target: str) -> None:
    lines = make_dry_run(clone, target)
    named = referenced_by_commands(lines)
    assert named, lines
    missing = sorted(name for name in named if not _present(clone, name))
    assert missing == [], f"`make {target}` needs files that are not committed: {missing}"


def test_make_run_serves_the_travel_example(clone: Path) -> None:
    commands = "\n".join(make_dry_run(clone, "run"))
    assert "-m examples.travel" in commands
    assert "charter serve examples.travel:host" in commands
    assert (clone / "examples" / "travel" / "__main__.py").is_file()


def test_make_test_and_ci_run_the_same_setup_script(clone: Path) -> None:
    # One place installs what the suite needs (the venv, Chromium): a fresh clone's
    # `make test` must not depend on having run `.ci/run` first.
    assert any(line.endswith("scripts/setup") for line in make_dry_run(clone, "test"))
    assert "\nscripts/setup\n" in (clone / ".ci" / "run").read_text()
    assert os.access(clone / "scripts" / "setup", os.X_OK)


def test_ci_and_pyproject_name_only_committed_files(clone: Path) -> None:
    ci = clone / ".ci" / "run"
    assert ci.is_file() and os.access(ci, os.X_OK)
    assert "make test" in ci.read_text()
    project = tomllib.loads((clone / "pyproject.toml").read_text())
    assert (clone / project["project"]["readme"]).is_file()
    for package in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        assert (clone / package / "__init__.py").is_file()
    for script in project["project"]["scripts"].values():
        module = clone / "src" / script.split(":")[0].replace(".", "/")
        assert module.with_suffix(".py").is_file() or (module / "__init__.py").is_file(), script


def test_every_path_the_readme_and_docs_index_name_is_committed(clone: Path) -> None:
    missing = []
    for page in ("README.md", "docs/index.md", "docs/transports.md", "docs/operations.md"):
        text = (clone / page).read_text(encoding="utf-8")
        links = MARKDOWN_LINK.findall(text)
        paths = [p for p in REPO_PATH.findall(text) if (ROOT / p).exists()]
        for link in links:
            if link.startswith(("http://", "https://")):
                continue
            if not (clone / page).parent.joinpath(link).exists():
                missing.append(f"{page}: {link}")
        missing += [f"{page}: {path}" for path in paths if not (clone / path).exists()]
    assert missing == []


def test_the_clones_sources_import_and_list_the_travel_tools(clone: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(clone / "src"),
        "CHARTER_DEMO_KEYS": str(tmp_path / "keys.json"),
    }
    env.pop("CHARTER_DB", None)

    def python(*args: str) -> str:
        """The output of this Python run with ``args`` in the clone; it must exit 0."""
        run = subprocess.run(
            [sys.executable, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=180
        )
        assert run.returncode == 0, run.stderr
        return run.stdout

    where = python("-c", "import charter, examples.travel; print(charter.__file__)")
    assert Path(where.strip()).is_relative_to(clone / "src")
    db = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    listed = python("-m", "charter.cli", "tools", "examples.travel:host", "--json", "--db", db)
    assert '"name": "bookings.refund"' in listed
