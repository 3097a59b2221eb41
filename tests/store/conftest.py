"""SQL backends for tests: every test that asks for them runs on SQLite and on PostgreSQL.

Reuse (the reliability battery, benchmarks): put the test module anywhere under
``tests/store/`` and ask for a fixture; pytest hands conftest fixtures to every test below
this directory.

- ``store_url`` — a database URL for a fresh, empty database, parametrised as
  ``sqlite`` (a new file in ``tmp_path``; never ``:memory:``, which is private to one
  connection and cannot exercise races) and ``postgres`` (a new schema per test on
  ``CHARTER_TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/test``,
  dropped at teardown). The postgres param carries the ``postgres`` marker, so
  ``pytest -m "not postgres"`` runs SQLite only.
- ``store_backend`` — ``"sqlite"`` or ``"postgres"`` for the current param; a test
  marked ``@SQLITE_ONLY`` gets ``"sqlite"`` alone.
- ``fresh_database(backend, path)`` and ``SQL_BACKENDS`` — the same fresh database for a
  fixture of another folder: ``@pytest.fixture(params=SQL_BACKENDS)`` around
  ``with fresh_database(request.param, tmp_path / "x.db") as url``.
- ``sql_store`` (async) — an open ``SqlStore`` on ``store_url``, closed at teardown.
- ``make_sql_store`` (async) — a factory for more stores on the same database, with
  options (``await make_sql_store(pool_size=64)``); all are closed at teardown. On SQLite
  the first store finds the database already at the head revision when the test has not
  created the file itself: a copy of one migrated per pytest process (running the
  migrations costs about 70 ms of CPU a database, hundreds of times in the suite; the
  migrations themselves are tested on ``store_url`` in ``test_sql_migrations.py``). On
  PostgreSQL the first store finds its schema at head too: ``migrate_postgres`` replays
  the statements one migration sent, recorded once per process (``postgres_migrations``).
  ``seed_migrated_sqlite(path)`` puts the same copy where a server the test starts will
  open its database (``live_server.charter_serve``, ``examples/demo_server.py``): a child
  process would import Alembic and migrate, about 0.4 s of CPU a start. A
  PostgreSQL store with a pool over ``LARGE_POOL`` connections holds a lock file until
  teardown, so two such tests on different xdist workers never run at once: together
  they would pass the server's ``max_connections`` (100 by default) and fail with "too
  many clients already". A test that opens such a store itself holds
  ``large_pool_lock(url, pool_size)`` around it.

When PostgreSQL is unreachable the postgres param SKIPS with the reason, except under
``CI=true``, where it FAILS: a silently skipped backend is how a green CI hides a
regression. The plain helpers (``postgres_unavailable_reason``, ``postgres_schema``) work
outside fixtures too.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from charter.store import SqlStore, sqlite_url
from charter.store._migrate import upgrade

POSTGRES_URL = os.environ.get(
    "CHARTER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
"""The server and database the postgres param uses (a plain libpq URL)."""

SqlStoreFactory = Callable[..., Awaitable[SqlStore]]
"""``await make_sql_store(**options)`` → an open ``SqlStore`` on the test's database."""

LARGE_POOL = 20
"""Pools larger than this take the PostgreSQL pool lock (the module doc says why)."""
_POOL_LOCK = Path(tempfile.gettempdir()) / "charter-tests-postgres-pools.lock"


@cache
def postgres_unavailable_reason(url: str = POSTGRES_URL) -> str | None:
    """Why PostgreSQL at ``url`` cannot be used, or None when it answers (checked once)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install 'charter[postgres]'"
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        shown = sa.make_url(url).render_as_string(hide_password=True)
        return f"PostgreSQL at {shown} is unreachable: {str(exc).strip().splitlines()[0]}"
    return None


def require_postgres(url: str = POSTGRES_URL) -> None:
    """Skip the test when PostgreSQL is unreachable; fail it instead under ``CI=true``."""
    reason = postgres_unavailable_reason(url)
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires PostgreSQL: {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def postgres_schema(url: str = POSTGRES_URL) -> Iterator[str]:
    """Create a fresh schema, yield a ``postgresql+psycopg`` URL whose search_path is it,
    then drop it (ending any connection a test left behind first)."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    base = url.split("://", 1)[1]
    separator = "&" if "?" in base else "?"
    options = quote(f"-csearch_path={schema}")
    try:
        yield (
            f"postgresql+psycopg://{base}{separator}options={options}"
            f"&application_name=charter-test-{schema}"
        )
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (f"charter-test-{schema}",),
            )
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


SQL_BACKENDS = [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
"""The params of a fixture that runs its tests on each SQL backend (``fresh_database``)."""


SQLITE_ONLY = pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
"""Runs a test of these fixtures on SQLite alone, for a test of SQLite's own locking: no
PostgreSQL schema is made and migrated only for the test to skip."""


@contextmanager
def fresh_database(backend: str, path: Path) -> Iterator[str]:
    """The URL of a fresh, empty database: a SQLite file at ``path``, or a PostgreSQL
    schema (skipped, or failed under ``CI=true``, when PostgreSQL does not answer)."""
    if backend == "sqlite":
        yield sqlite_url(path)
        return
    require_postgres()
    with postgres_schema() as url:
        yield url


@pytest.fixture(params=SQL_BACKENDS)
def store_backend(request: pytest.FixtureRequest) -> str:
    """The backend of this run of the test: ``sqlite`` or ``postgres``."""
    backend: str = request.param
    if backend == "postgres":
        require_postgres()
    return backend


def _sqlite_file(tmp_path: Path) -> Path:
    return tmp_path / "charter.db"


@pytest.fixture
def store_url(store_backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL for a fresh, empty database on the current backend (see the module doc)."""
    with fresh_database(store_backend, _sqlite_file(tmp_path)) as url:
        yield url


@asynccontextmanager
async def large_pool_lock(url: str, pool_size: int) -> AsyncIterator[None]:
    """Hold the PostgreSQL pool lock while a store of ``pool_size`` connections is open.

    A no-op for SQLite and for pools of ``LARGE_POOL`` or fewer (the module doc says why).
    """
    if pool_size <= LARGE_POOL or not url.startswith("postgresql"):
        yield
        return
    descriptor = os.open(_POOL_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        await anyio.to_thread.run_sync(fcntl.flock, descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the descriptor releases the lock


@cache
def _migrated_dir() -> Path:
    """This pytest process's folder for its SQLite database at head, removed at exit."""
    directory = Path(tempfile.mkdtemp(prefix="charter-migrated-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


@pytest.fixture(scope="session")
def migrated_sqlite_dir() -> Path:
    """Where this pytest process keeps its SQLite database at the head revision."""
    return _migrated_dir()


async def migrated_sqlite(directory: Path) -> Path:
    """A SQLite database at charter's head revision in ``directory``, built on first use."""
    template = directory / "charter.db"
    if not template.exists():
        building = directory / f"building-{uuid.uuid4().hex}.db"
        async with SqlStore(sqlite_url(building)):
            pass  # opening a fresh database migrates it; closing checkpoints the WAL
        os.replace(building, template)
    return template


def seed_migrated_sqlite(path: Path) -> None:
    """Copy the SQLite database at head to ``path`` unless a file is there: a server the
    test starts on it then skips the migrations (about 0.4 s of CPU to import Alembic and
    run them). Callable from sync code, inside an event loop or not."""
    if path.exists():
        return
    template = _migrated_dir() / "charter.db"
    if not template.exists():
        with ThreadPoolExecutor(1) as pool:  # a thread of its own: the caller may be async
            pool.submit(anyio.run, migrated_sqlite, _migrated_dir()).result()
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)


Statement = tuple[str, Any]
"""One statement as SQLAlchemy sent it to psycopg: its text and its parameters."""


async def _record_migrations() -> tuple[Statement, ...]:
    statements: list[Statement] = []
    with postgres_schema() as url:
        engine = create_async_engine(url)

        def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            statements.append((statement, parameters))

        sa.event.listen(engine.sync_engine, "before_cursor_execute", record)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()
    return tuple(statements)


@cache
def postgres_migrations() -> tuple[Statement, ...]:
    """What migrating an empty PostgreSQL schema to head sends, recorded once per process.

    Replayed by ``migrate_postgres``: Alembic's own work (loading the revisions, building
    each operation) costs about 80 ms of CPU a schema, in hundreds of tests. The statements
    name no schema (each test's ``search_path`` is its own).
    """
    with ThreadPoolExecutor(1) as pool:  # a thread of its own: the caller may be async
        return pool.submit(anyio.run, _record_migrations).result()


def migrate_postgres(url: str) -> None:
    """Bring the empty schema of ``url`` (a ``postgres_schema`` URL) to head, in one
    transaction, by replaying ``postgres_migrations``."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        for statement, parameters in postgres_migrations():
            conn.execute(statement, parameters or None)


@pytest.fixture
async def make_sql_store(
    store_url: str, store_backend: str, tmp_path: Path, migrated_sqlite_dir: Path
) -> AsyncIterator[SqlStoreFactory]:
    """Open more stores on the test's database; every one is closed at teardown."""
    database = _sqlite_file(tmp_path) if store_backend == "sqlite" else None
    template = await migrated_sqlite(migrated_sqlite_dir) if database else None
    async with AsyncExitStack() as stack:
        locked = False
        migrated = False

        async def make(**options: Any) -> SqlStore:
            nonlocal locked, migrated
            # No await between the check and the copy: a second store opened beside the
            # first (asyncio.gather) finds the file and never copies over it.
            if database and template and not database.exists():
                shutil.copyfile(template, database)
            if database is None and not migrated:
                migrated = True
                migrate_postgres(store_url)
            pool_size = options.get("pool_size", 0)
            if pool_size > LARGE_POOL and not locked:  # one lock per test, however many
                await stack.enter_async_context(large_pool_lock(store_url, pool_size))
                locked = True
            return await stack.enter_async_context(SqlStore(store_url, **options))

        yield make


@pytest.fixture
async def sql_store(make_sql_store: SqlStoreFactory) -> SqlStore:
    """An open ``SqlStore`` on a fresh database (migrated on open), closed at teardown."""
    return await make_sql_store()
