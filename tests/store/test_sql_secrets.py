"""The shared request-state key: created once per database, the same for every process."""

from __future__ import annotations

import anyio
import pytest
import sqlalchemy as sa

from charter.store import SchemaMismatch, SqlStore, _migrate

pytestmark = pytest.mark.anyio


async def test_stores_opened_at_once_agree_on_one_key(store_url: str) -> None:
    stores = [SqlStore(store_url) for _ in range(4)]
    keys: list[bytes] = []
    try:
        for store in stores:
            await store.open()

        async def ask(store: SqlStore) -> None:
            keys.append(await store.request_state_key())

        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(ask, store)
    finally:
        for store in stores:
            await store.aclose()
    async with SqlStore(store_url) as later:
        keys.append(await later.request_state_key())
        async with later.engine.connect() as conn:
            rows = (await conn.execute(sa.text("SELECT count(*) FROM charter_secrets"))).scalar()
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert rows == 1


async def test_a_database_at_0001_is_upgraded_to_hold_the_key(store_url: str) -> None:
    older = SqlStore(store_url)
    await _migrate.upgrade(older.engine, "0001")  # as the previous release left it
    await older.aclose()
    with pytest.raises(SchemaMismatch, match="charter db upgrade"):
        async with SqlStore(store_url):
            pass
    upgrader = SqlStore(store_url)
    await upgrader.upgrade()
    await upgrader.aclose()
    async with SqlStore(store_url) as store:
        assert len(await store.request_state_key()) == 32
