from __future__ import annotations

import pytest
from harness_support import World, build_world


@pytest.fixture
def world() -> World:
    """A registry of small tools, a host on an in-memory ledger, and a hand-moved clock."""
    return build_world()
