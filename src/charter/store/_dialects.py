"""What differs between SQLite and PostgreSQL: engine setup, lock waits and busy errors."""

from __future__ import annotations

import asyncio
import math
import sqlite3
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import await_
from sqlalchemy.util.concurrency import in_greenlet

__all__ = (
    "BUSY_OPTION",
    "READ_ONLY_OPTION",
    "begin_write",
    "configure_sqlite",
    "is_busy",
)

READ_ONLY_OPTION = "charter_read_only"
"""Execution option: this connection only reads, so SQLite may begin it deferred."""

BUSY_OPTION = "charter_busy_timeout_ms"
"""Execution option: how long SQLite waits for the write lock in this transaction."""

_BUSY_SQLSTATES = frozenset(
    {
        "55P03",  # lock_not_available: SET LOCAL lock_timeout expired
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
    }
)
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def configure_sqlite(engine: AsyncEngine, *, busy_timeout_ms: int) -> None:
    """Install the connect and begin hooks every charter SQLite engine needs.

    On connect: WAL (readers never block the writer, nor it them); ``busy_timeout`` (wait
    for the write lock instead of failing at once); ``synchronous=NORMAL``, which in WAL
    mode never corrupts the database and loses no commit on an application crash, only
    possibly the last commits on a power loss or OS crash, together with the handler's
    writes of the same transactions (so no half action) — FULL would fsync on every
    commit for that last bit; ``foreign_keys=ON`` for the application's own tables.
    ``isolation_level = None`` stops the driver from issuing its own implicit, *deferred*
    BEGIN: a deferred transaction that reads before it writes fails with ``database is
    locked`` on the lock upgrade without honouring ``busy_timeout``.

    On begin (SQLAlchemy's documented recipe): ``BEGIN IMMEDIATE``, which takes the write
    lock up front and waits for it under ``busy_timeout``. A connection marked
    ``READ_ONLY_OPTION`` emits no BEGIN: WAL readers need no lock, and each of its
    statements reads a consistent snapshot on its own.
    """
    sync_engine = engine.sync_engine

    @sa.event.listens_for(sync_engine, "connect")
    def _connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()
        connection_record.info[BUSY_OPTION] = busy_timeout_ms

    @sa.event.listens_for(sync_engine, "begin")
    def _begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        wanted = int(options.get(BUSY_OPTION, busy_timeout_ms))
        info = conn.connection.info
        if info.get(BUSY_OPTION) != wanted:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {wanted:d}")
            info[BUSY_OPTION] = wanted
        if not options.get(READ_ONLY_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        # A read runs its statements in autocommit mode: each SELECT is its own consistent
        # snapshot and takes no lock, and skipping BEGIN saves a round trip to the thread.

    @sa.event.listens_for(sync_engine, "invalidate")
    def _invalidate(dbapi_connection: Any, connection_record: Any, exception: Any) -> None:
        _release_write_lock(dbapi_connection)


def _release_write_lock(dbapi_connection: Any) -> None:
    """Stop the statement a dropped connection still runs, and roll its transaction back.

    SQLAlchemy drops (invalidates) a connection whose statement was cut short, e.g. by a
    handler's timeout or a cancellation. The aiosqlite thread would still finish that
    statement, and closing a sqlite3 connection that has unfinalized statements is
    deferred, open transaction included, until garbage collection: the write lock would
    outlive the call and every other writer would get ``database is locked``.
    ``interrupt()`` is thread-safe and stops the statement now; the rollback, queued
    behind it, releases the lock before the connection is closed.
    """
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is None or not in_greenlet():
        return  # garbage collection of an unreferenced connection: nothing to wait for
    try:
        await_(driver.interrupt())
        dbapi_connection.rollback()
    except (Exception, asyncio.CancelledError):
        # The connection is closed next anyway; a repeated cancellation is delivered
        # again at the caller's next await.
        pass


async def begin_write(conn: AsyncConnection, wait: float) -> None:
    """Begin a write transaction whose lock waits last at most ``wait`` seconds.

    SQLite: ``BEGIN IMMEDIATE`` under a busy timeout of ``wait`` (the begin hook applies
    it); when another writer holds the lock longer, the BEGIN fails with ``database is
    locked``. PostgreSQL: ``BEGIN`` then ``SET LOCAL lock_timeout``; a statement that waits
    longer on another transaction's row (a concurrent claim of the same request) fails
    with SQLSTATE 55P03. ``is_busy`` recognises both.
    """
    # lock_timeout = 0 means "wait forever" on PostgreSQL, hence the floor of 1 ms.
    millis = max(1, math.ceil(wait * 1000))
    if conn.dialect.name == "sqlite":
        await conn.execution_options(**{BUSY_OPTION: millis})
        await conn.begin()
        return
    await conn.begin()
    await conn.execute(
        sa.text("SELECT set_config('lock_timeout', :value, true)"), {"value": f"{millis}ms"}
    )


def is_busy(exc: BaseException) -> bool:
    """Tell whether a driver error means "locked, try again" rather than a failure."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return True
        return "database is locked" in str(orig) or "database table is locked" in str(orig)
    return getattr(orig, "sqlstate", None) in _BUSY_SQLSTATES
