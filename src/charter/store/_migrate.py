"""Run charter's Alembic migrations from code (no ``alembic.ini``) and check the revision."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._dialects import BUSY_OPTION, READ_ONLY_OPTION
from ._schema import VERSION_TABLE
from .errors import SchemaMismatch

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = (
    "MIGRATIONS",
    "REVISIONS",
    "SchemaState",
    "ensure_schema",
    "head_revision",
    "read_schema",
    "upgrade",
)

MIGRATIONS = Path(__file__).with_name("migrations")

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006")
"""The revisions in ``MIGRATIONS``, oldest first (a test checks them against the scripts).

Known without Alembic, so opening a store at the head revision (every ``charter serve``)
does not import it; Alembic is imported only to migrate."""

# Any constant works; it only keeps two processes from creating the tables at once.
_MIGRATION_LOCK = 0x63686172746572  # "charter"


def _config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this charter ships."""
    return REVISIONS[-1]


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaState:
    """What a database holds of charter's schema."""

    revision: str | None
    """The revision in ``charter_alembic_version``, or None."""
    head: str
    """The revision this charter ships."""
    has_tables: bool
    """Whether any ``charter_`` table exists (in the connection's default schema)."""

    @property
    def empty(self) -> bool:
        """No charter table and no revision: a fresh database."""
        return self.revision is None and not self.has_tables

    @property
    def current(self) -> bool:
        """The schema is at this charter's head revision."""
        return self.revision == self.head


def _stored_revision(conn: Connection) -> str | None:
    # The row Alembic keeps, read as Alembic reads it (no Alembic import on this path).
    rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:  # branched heads: let Alembic refuse them in its own words
        from alembic.runtime.migration import MigrationContext

        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
    return rows[0] if rows else None


def _read_sync(conn: Connection) -> SchemaState:
    names = sa.inspect(conn).get_table_names()
    revision = _stored_revision(conn) if VERSION_TABLE in names else None
    return SchemaState(
        revision=revision,
        head=head_revision(),
        has_tables=any(n.startswith("charter_") and n != VERSION_TABLE for n in names),
    )


async def read_schema(engine: AsyncEngine) -> SchemaState:
    """Read the database's charter revision."""
    async with engine.connect() as conn:
        await conn.execution_options(**{READ_ONLY_OPTION: True})
        return await conn.run_sync(_read_sync)


def _upgrade_sync(conn: Connection, revision: str) -> None:
    from alembic import command

    command.upgrade(_config(conn), revision)


_MIGRATION_WAIT_MS = 120_000
"""How long a migration waits on SQLite for another process's to finish."""


async def _lock(conn: AsyncConnection) -> None:
    # SQLite's BEGIN IMMEDIATE already excludes other writers. On PostgreSQL, DDL of a
    # concurrent migration is invisible until it commits, so a transaction-scoped
    # advisory lock makes the second process wait and then find the tables. It guards
    # schema changes only; the ledger's arbiter is its unique keys. The store's session
    # lock_timeout is lifted here: a migration waits for the other one, and for its locks.
    if conn.dialect.name == "postgresql":
        await conn.execute(sa.text("SET LOCAL lock_timeout = 0"))
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate to ``revision`` in one transaction (Alembic is sync: run through ``run_sync``).

    Raises:
        SchemaMismatch: the database was migrated by a newer charter (Alembic would only
            say it cannot find that revision).
    """
    state = await read_schema(engine)
    if revision == "head" and state.current:
        return  # nothing to apply: no need to import Alembic (``charter db upgrade`` twice)
    if state.revision is not None and state.revision not in REVISIONS:
        raise _newer(state)
    # Imported before the lock is taken: the first import is slow, and other processes
    # opening the same database wait for the lock meanwhile.
    import alembic.command
    import alembic.config  # noqa: F401

    async with engine.connect() as conn:
        # SQLite's BEGIN IMMEDIATE waits for another process's migration under the store's
        # busy timeout (5 s by default), which a slow disk or machine outlasts: a migration
        # waits for the other one, as on PostgreSQL (``_lock``).
        await conn.execution_options(**{BUSY_OPTION: _MIGRATION_WAIT_MS})
        await conn.begin()
        await _lock(conn)
        await conn.run_sync(_upgrade_sync, revision)
        await conn.commit()


async def ensure_schema(engine: AsyncEngine) -> None:
    """Create the schema in a fresh database; otherwise insist it is at the head revision.

    Raises:
        SchemaMismatch: The schema is behind (run ``charter db upgrade``), ahead of this
            charter, or has charter tables without a revision.
    """
    state = await read_schema(engine)
    if state.current:
        return
    if state.empty:
        # Re-checked under the migration lock: Alembic reads the revision again there.
        await upgrade(engine)
        return
    if state.revision is None:
        raise SchemaMismatch(
            "The database has charter_ tables but no charter revision in "
            f"{VERSION_TABLE}; it was not created by charter's migrations.",
            current=None,
            head=state.head,
        )
    if state.revision in REVISIONS:
        raise SchemaMismatch(
            f"The charter schema is at revision {state.revision}, behind {state.head}: "
            "run `charter db upgrade` (or `await SqlStore(url).upgrade()`), then start again.",
            current=state.revision,
            head=state.head,
        )
    raise _newer(state)


def _newer(state: SchemaState) -> SchemaMismatch:
    """The refusal of a schema a newer charter migrated."""
    return SchemaMismatch(
        f"The charter schema is at revision {state.revision}, which this charter does not "
        f"know (its newest is {state.head}): the database was migrated by a newer charter. "
        "Upgrade charter.",
        current=state.revision,
        head=state.head,
    )
