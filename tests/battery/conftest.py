"""Fixtures of the reliability battery: the shared SQL backends of ``tests/store``.

Every battery test asks for ``store_url`` or ``make_sql_store`` and so runs twice: on
SQLite (a new file in ``tmp_path``) and on PostgreSQL (a new schema), skipping the latter
when the server is unreachable, or failing under ``CI=true``. The fixtures are the ones
``tests/store/conftest.py`` defines, imported here rather than copied.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from battery_support import Clock, Env, EnvFactory, Observer, battery_host

ROOT = Path(__file__).resolve().parents[2]
# ``python -m pytest`` puts the repository root on sys.path; the ``pytest`` script does not.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.store.conftest import SqlStoreFactory as SqlStoreFactory  # noqa: E402
from tests.store.conftest import make_sql_store as make_sql_store  # noqa: E402
from tests.store.conftest import migrated_sqlite_dir as migrated_sqlite_dir  # noqa: E402
from tests.store.conftest import sql_store as sql_store  # noqa: E402
from tests.store.conftest import store_backend as store_backend  # noqa: E402
from tests.store.conftest import store_url as store_url  # noqa: E402


@pytest.fixture
async def observer(store_url: str) -> AsyncIterator[Observer]:
    """Reads the test's database from outside charter (see ``Observer``)."""
    seen = Observer(store_url)
    try:
        yield seen
    finally:
        await seen.aclose()


@pytest.fixture
async def make_env(make_sql_store: SqlStoreFactory) -> EnvFactory:
    """Build an ``Env``: a store (``pool_size``), the battery's tools, a host on a clock.

    Host options pass through (``in_progress_wait=…``, ``approval_ttl=…``); the host's
    clock is a hand-moved ``Clock`` unless ``clock`` is given.
    """

    async def make(*, pool_size: int = 10, **options: Any) -> Env:
        # The store's own writes (audit events) wait for a lock as long as the host's calls
        # do: the battery judges exactly-once, not the machine's speed, and on a loaded
        # machine a burst can hold SQLite's write lock past the default 5 s.
        busy_timeout = options.get("in_progress_wait", 5.0)
        store = await make_sql_store(pool_size=pool_size, busy_timeout=busy_timeout)
        clock = options.pop("clock", None) or Clock()
        battery, host = await battery_host(store, clock=clock, **options)
        return Env(store=store, battery=battery, host=host, clock=clock)

    return make
