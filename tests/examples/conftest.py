"""Fixtures for the travel example's tests (the parts live in ``travel_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from travel_support import Travel, open_travel


@pytest.fixture
async def travel(tmp_path: Path) -> AsyncIterator[Travel]:
    """The travel host on a fresh SQLite file, with the demo data and no API keys."""
    async with open_travel(tmp_path / "travel.db") as opened:
        yield opened
