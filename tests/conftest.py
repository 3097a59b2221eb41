from __future__ import annotations

import os

import pytest

# `make test` lets the pytest processes cache bytecode (they import every test module), but
# the programs tests start must not: several tests rewrite a module and run a command on it
# again within the same second, at times at the same size, and a cached .pyc (keyed by the
# source's mtime in seconds and its size) would then be taken for the new source.
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio: the core uses the standard library's asyncio tools."""
    return "asyncio"
