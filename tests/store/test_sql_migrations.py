"""Charter's Alembic migrations: a fresh database is migrated on open, an old one is refused
until ``upgrade()``, and the migrations build exactly the schema the code uses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from charter.store import SchemaMismatch, SqlStore, _migrate, sqlite_url
from charter.store._schema import VERSION_TABLE, api_keys, ledger_entries, metadata

pytestmark = pytest.mark.anyio

CHARTER_TABLES = {
    "charter_alembic_version",
    "charter_api_keys",
    "charter_approvals",
    "charter_audit_events",
    "charter_budgets",
    "charter_claims",
    "charter_deferred",
    "charter_effects",
    "charter_ledger_entries",
    "charter_secrets",
    "charter_stream_events",
}

HEAD = _migrate.head_revision()
NEXT = f"{int(HEAD) + 1:04d}"

NEXT_REVISION = f'''"""A later release's migration (test only).

Revision ID: {NEXT}
Revises: {HEAD}
"""

import sqlalchemy as sa
from alembic import op

revision = "{NEXT}"
down_revision = "{HEAD}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("charter_test_future", sa.Column("id", sa.Text(), primary_key=True))


def downgrade() -> None:
    op.drop_table("charter_test_future")
'''


def table_names(conn: Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def schema_diff(conn: Connection) -> list[object]:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return list(compare_metadata(context, metadata))


@pytest.fixture
def next_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Switch to charter's migrations plus one more revision, as a later release ships them."""
    location = tmp_path / "migrations"
    shutil.copytree(_migrate.MIGRATIONS, location, ignore=shutil.ignore_patterns("__pycache__"))
    (location / "versions" / f"r{NEXT}_future.py").write_text(NEXT_REVISION)

    def switch() -> None:
        monkeypatch.setattr(_migrate, "MIGRATIONS", location)
        monkeypatch.setattr(_migrate, "REVISIONS", (*_migrate.REVISIONS, NEXT))

    return switch


def test_the_known_revisions_are_the_shipped_migration_scripts() -> None:
    config = Config()
    config.set_main_option("script_location", str(_migrate.MIGRATIONS))
    scripts = ScriptDirectory.from_config(config)
    shipped = tuple(reversed([script.revision for script in scripts.walk_revisions()]))
    assert _migrate.REVISIONS == shipped
    assert _migrate.head_revision() == scripts.get_current_head()


async def test_a_fresh_database_is_migrated_on_open(store_url: str) -> None:
    async with SqlStore(store_url) as store:
        async with store.engine.connect() as conn:
            assert await conn.run_sync(table_names) >= CHARTER_TABLES
        state = await _migrate.read_schema(store.engine)
    assert state.current and state.revision == _migrate.head_revision() == HEAD


async def test_a_fresh_sqlite_file_is_created_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    assert not path.exists()
    async with SqlStore(sqlite_url(path)) as store:
        async with store.engine.connect() as conn:
            mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
            synchronous = (await conn.exec_driver_sql("PRAGMA synchronous")).scalar_one()
            foreign_keys = (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar_one()
    assert (mode, synchronous, foreign_keys) == ("wal", 1, 1)  # 1 = NORMAL


async def test_the_migrations_build_exactly_the_schema_the_code_uses(sql_store: SqlStore) -> None:
    async with sql_store.engine.connect() as conn:
        assert await conn.run_sync(schema_diff) == []


async def test_opening_again_and_upgrading_at_head_change_nothing(store_url: str) -> None:
    async with SqlStore(store_url) as store:
        await store.upgrade()
    async with SqlStore(store_url) as store:
        assert (await _migrate.read_schema(store.engine)).current


async def test_a_sqlite_store_opened_at_head_loads_neither_alembic_nor_postgresqls_dialect(
    tmp_path: Path,
) -> None:
    # Every `charter serve` on an existing store opens it this way: Alembic is imported only
    # to migrate, PostgreSQL's dialect only for a PostgreSQL store (start-up CPU).
    url = sqlite_url(tmp_path / "charter.db")
    async with SqlStore(url):
        pass
    code = (
        "import asyncio, json, sys\n"
        "from charter.store import SqlStore\n"
        "async def main():\n"
        f"    async with SqlStore({url!r}):\n"
        "        pass\n"
        "asyncio.run(main())\n"
        "print(json.dumps(sorted(name for name in sys.modules\n"
        "    if name == 'alembic' or name.startswith('sqlalchemy.dialects.postgresql'))))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(run.stdout) == []


async def test_an_older_schema_is_refused_until_upgraded(
    store_url: str, next_release: Callable[[], None]
) -> None:
    async with SqlStore(store_url):
        pass  # created at HEAD by this release
    next_release()  # which ships NEXT
    store = SqlStore(store_url)
    with pytest.raises(SchemaMismatch, match="charter db upgrade") as raised:
        await store.open()
    assert (raised.value.current, raised.value.head) == (HEAD, NEXT)
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_entry("a", "b", "c")  # a failed open closes the store

    upgrader = SqlStore(store_url)
    await upgrader.upgrade()  # allowed before open(): this is `charter db upgrade`
    await upgrader.aclose()
    async with SqlStore(store_url) as store:
        async with store.engine.connect() as conn:
            assert "charter_test_future" in await conn.run_sync(table_names)


async def test_a_schema_from_a_newer_charter_is_refused(
    store_url: str, next_release: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = (_migrate.MIGRATIONS, _migrate.REVISIONS)
    next_release()
    async with SqlStore(store_url):
        pass  # created at NEXT by the next release
    monkeypatch.setattr(_migrate, "MIGRATIONS", shipped[0])  # back to this release
    monkeypatch.setattr(_migrate, "REVISIONS", shipped[1])
    with pytest.raises(SchemaMismatch, match="newer charter") as raised:
        async with SqlStore(store_url):
            pass
    assert (raised.value.current, raised.value.head) == (NEXT, HEAD)


async def test_charter_tables_without_a_revision_are_refused(store_url: str) -> None:
    async with SqlStore(store_url) as store:
        async with store.engine.begin() as conn:
            await conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
    with pytest.raises(SchemaMismatch, match="not created by charter"):
        async with SqlStore(store_url):
            pass


async def test_the_applications_own_tables_do_not_count_as_charter_tables(
    store_url: str,
) -> None:
    engine_store = SqlStore(store_url)
    async with engine_store.engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE app_orders (id TEXT PRIMARY KEY)"))
    await engine_store.aclose()
    async with SqlStore(store_url) as store:
        assert (await _migrate.read_schema(store.engine)).current


async def test_replicas_opening_a_fresh_database_at_once_create_it_once(store_url: str) -> None:
    stores = [SqlStore(store_url) for _ in range(4)]
    try:
        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(store.open)
        for store in stores:
            assert (await _migrate.read_schema(store.engine)).current
    finally:
        for store in stores:
            await store.aclose()


async def test_0002_stores_principals_as_home_tenant_and_subject_and_maps_key_kinds(
    store_url: str,
) -> None:
    # A database of the first release, with a request and three API keys in it (these two
    # tables did not change in 0002, so the current Table objects write 0001's rows).
    engine_store = SqlStore(store_url)
    await _migrate.upgrade(engine_store.engine, "0001")
    now = datetime(2030, 1, 1, tzinfo=UTC)
    async with engine_store.engine.begin() as conn:
        await conn.execute(
            sa.insert(ledger_entries).values(
                tenant_id="a/b",
                principal_id="olga",
                request_id="r1",
                tool="t",
                capability_id="c",
                capability_version="1",
                fingerprint="f",
                status="completed",
                invocation_id="i",
                created_at=now,
                expires_at=now,
            )
        )
        for key_id, kind in (("k1", "user"), ("k2", "api_key"), ("k3", "workflow")):
            await conn.execute(
                sa.insert(api_keys).values(
                    id=key_id,
                    tenant_id="acme",
                    subject=key_id,
                    scopes=[],
                    kind=kind,
                    actor="staff",
                    secret_hash="h",
                    created_at=now,
                )
            )
    await _migrate.upgrade(engine_store.engine)
    async with engine_store.engine.connect() as conn:
        principal = (await conn.execute(sa.select(ledger_entries.c.principal_id))).scalar_one()
        kinds = {
            row[0]: row[1] for row in await conn.execute(sa.select(api_keys.c.id, api_keys.c.kind))
        }
    await engine_store.aclose()
    assert principal == "a%2Fb/olga"  # charter.auth.principal_key("a/b", "olga")
    assert kinds == {"k1": "person", "k2": "agent", "k3": "service"}
