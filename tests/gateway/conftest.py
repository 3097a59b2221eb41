"""Fixtures for the gateway tests: real upstream MCP servers, installed from the registries."""

from __future__ import annotations

from pathlib import Path

import pytest
from examples.gateway import RegistryUnreachable, install_npm_servers


@pytest.fixture(scope="session")
def npm_servers() -> dict[str, Path]:
    """The npm servers' entry scripts (installed into the cache on first use)."""
    try:
        return install_npm_servers()
    except RegistryUnreachable as exc:
        pytest.skip(f"the npm servers could not be installed (registry unreachable?): {exc}")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A folder the filesystem server may read and write, with one note in it."""
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "itinerary.md").write_text("# Lisbon\n\nFlight TP1351 on 14 March.\n")
    return folder.resolve()
