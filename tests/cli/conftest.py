"""Fixtures for the `charter` command's tests (the parts live in ``cli_support``)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_support import TravelFiles, notes_host, serve, sqlite
from tests.store.conftest import seed_migrated_sqlite

from charter.http import create_app


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run each command in tmp_path, so a default `.charter/` never lands in the repo."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHARTER_DEMO_KEYS", str(tmp_path / "default-demo-keys.json"))


@pytest.fixture
def travel(tmp_path: Path) -> TravelFiles:
    """The demo's files; its database starts at head (no test here is about migrating it)."""
    seed_migrated_sqlite(tmp_path / "travel.db")
    return TravelFiles(db=sqlite(tmp_path / "travel.db"), keys_file=tmp_path / "keys.json")


@pytest.fixture
def write_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module into tmp_path under a fresh name; returns the name to import."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str) -> str:
        name = f"cli_target_{tmp_path.name}_{len(written)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def notes_url() -> Iterator[str]:
    """A live server (REST only) for `--url`: an echo tool and an approval-gated one."""
    with serve(create_app(notes_host(), mcp=False, console=False)) as url:
        yield url
