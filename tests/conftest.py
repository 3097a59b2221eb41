from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio: the core uses the standard library's asyncio tools."""
    return "asyncio"
