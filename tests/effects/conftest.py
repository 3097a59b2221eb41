"""Fixtures of the effect tests: ``outbox_store`` runs a test on every store that keeps the
effect outbox — ``MemoryStore``, SQLite (a new file) and PostgreSQL (a new schema, dropped
at teardown; skipped when the server does not answer, failed under ``CI=true``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.store.conftest import SQL_BACKENDS, fresh_database

from charter.ledger import LedgerStore, MemoryStore
from charter.store import SqlStore


@pytest.fixture(params=[pytest.param("memory"), *SQL_BACKENDS])
async def outbox_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[LedgerStore]:
    """An open store with an effect outbox on each backend (migrated on open)."""
    if request.param == "memory":
        yield MemoryStore()
        return
    with fresh_database(request.param, tmp_path / "effects.db") as url:
        async with SqlStore(url) as store:
            yield store
