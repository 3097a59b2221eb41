"""What differs between SQLite and PostgreSQL: engine setup, lock waits and busy errors."""

from __future__ import annotations

import asyncio
import math
import re
import select
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import await_
from sqlalchemy.util.concurrency import in_greenlet

from ..errors import StoreError
from ._pipelined import BEGIN, Raw, defer, install

__all__ = (
    "BUSY_OPTION",
    "LOCK_TIMEOUT_INFO",
    "READ_ONLY_OPTION",
    "begin_deferred",
    "begin_write",
    "busy_setting",
    "configure_postgresql",
    "configure_sqlite",
    "execution_options",
    "hung_up",
    "is_busy",
    "is_connection_lost",
    "is_unreachable",
    "refuse_writes",
)

READ_ONLY_OPTION = "charter_read_only"
"""Execution option: this connection only reads, so SQLite begins no transaction for it
(``store.reader``'s are; that engine also refuses writes: ``refuse_writes``)."""

BUSY_OPTION = "charter_busy_timeout_ms"
"""Execution option: how long SQLite waits for the write lock in this transaction."""

LOCK_TIMEOUT_INFO = "charter_lock_timeout_ms"
"""Connection info: the PostgreSQL session's ``lock_timeout``, set when it connected."""

_BUSY_SQLSTATES = frozenset(
    {
        "55P03",  # lock_not_available: SET LOCAL lock_timeout expired
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
    }
)
_LOST_SQLSTATES = frozenset(
    {
        "57P01",  # admin_shutdown: the backend was terminated, or the server shuts down
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now: the server is starting up or shutting down
    }
)
_WRITE_WORDS = frozenset(
    {
        *("INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "MERGE", "TRUNCATE", "COPY"),
        *("CREATE", "DROP", "ALTER", "COMMENT", "GRANT", "REVOKE", "ATTACH", "DETACH"),
        *("VACUUM", "REINDEX", "CLUSTER", "REFRESH"),
    }
)
"""The first words of the SQL text a reading connection refuses (``refuse_writes``)."""
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.DOTALL)
"""The statement's first word, past whitespace, comments and opening parentheses."""
_WRITING_CLAUSE = re.compile(
    r"\b(?:INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|MERGE\s+INTO)\b", re.IGNORECASE
)
"""A write inside a ``WITH`` statement (PostgreSQL's data-modifying CTEs)."""
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
    # The default for connections that do not ask for another wait (see ``begin_write``).
    engine.update_execution_options(**{BUSY_OPTION: busy_timeout_ms})

    @sa.event.listens_for(sync_engine, "connect")
    def _connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
            _enter_wal(cursor, busy_timeout_ms)
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()
        connection_record.info[BUSY_OPTION] = busy_timeout_ms

    @sa.event.listens_for(sync_engine, "begin")
    def _begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        wanted = int(options.get(BUSY_OPTION, busy_timeout_ms))
        reading = bool(options.get(READ_ONLY_OPTION))
        info = conn.connection.info
        setting = busy_setting(info.get(BUSY_OPTION), wanted, reading=reading)
        if setting is not None:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {setting:d}")
            info[BUSY_OPTION] = setting
        if not reading:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        # A read runs its statements in autocommit mode: each SELECT is its own consistent
        # snapshot and takes no lock, and skipping BEGIN saves a round trip to the thread.

    @sa.event.listens_for(sync_engine, "invalidate")
    def _invalidate(dbapi_connection: Any, connection_record: Any, exception: Any) -> None:
        _release_write_lock(dbapi_connection)


def busy_setting(current: int | None, wanted: int, *, reading: bool) -> int | None:
    """The busy timeout (ms) to set on a connection about to wait ``wanted`` ms; None: keep.

    A write may wait no longer than ``wanted`` (what is left of its wait after its turn in
    the queue) and should not give up much sooner, so it keeps a setting up to a tenth
    below (at most 100 ms), and sets one rounded down to that grid: the next writers, whose
    waits left differ by a few milliseconds, find it good enough. Setting it is a statement
    through the database's thread, which every queued writer used to pay. A read takes no
    lock and waits only in rare cases (a WAL recovery): it keeps a setting no more than
    that below its wait, or any above it.
    """
    slack = max(0, min(100, wanted // 10))
    if current is not None and wanted - slack <= current and (reading or current <= wanted):
        return None
    return wanted - wanted % slack if slack else wanted


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


def configure_postgresql(engine: AsyncEngine, *, lock_timeout_ms: int) -> None:
    """Install the connect and checkout hooks every charter PostgreSQL engine needs.

    On connect: ``SET lock_timeout`` to the store's busy timeout for the session, once per
    connection, so a write transaction that waits as long needs no statement of its own
    (``begin_write`` sets ``SET LOCAL`` only for another wait). It applies to every
    statement on the engine's connections, the application's included, as SQLite's busy
    timeout does; migrations lift it for their own transaction.

    On checkout: a connection the server has closed (a restart, a terminated backend, an
    idle timeout) is replaced before it is handed out. An idle connection has nothing to
    read, so a socket that is readable means the server sent its goodbye and hung up;
    asking the socket costs a system call, where ``pool_pre_ping`` costs a round trip
    per checkout. A connection lost without a word (a network partition) fails at its
    first statement instead, as ``StoreUnavailable``, and a retry gets a new one.
    """
    sync_engine = engine.sync_engine
    lock_timeout_ms = max(1, lock_timeout_ms)  # 0 would mean "wait forever"
    install(sync_engine)

    @sa.event.listens_for(sync_engine, "connect")
    def _connect(dbapi_connection: Any, connection_record: Any) -> None:
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True  # a session setting, outside any transaction
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET lock_timeout = {lock_timeout_ms:d}")
        finally:
            cursor.close()
        dbapi_connection.autocommit = autocommit
        connection_record.info[LOCK_TIMEOUT_INFO] = lock_timeout_ms

    @sa.event.listens_for(sync_engine, "checkout")
    def _checkout(dbapi_connection: Any, connection_record: Any, connection_proxy: Any) -> None:
        if _hung_up(dbapi_connection.driver_connection):
            raise sa.exc.DisconnectionError("the server closed this pooled connection")


def refuse_writes(reader: AsyncEngine) -> None:
    """Refuse the writes made through ``reader`` (``store.reader``), before they run.

    On SQLite its connections (``READ_ONLY_OPTION``) begin no transaction, so each write
    would commit on its own, outside the store's write queue: a block of them that fails
    half-way would leave its first half written. Refused with ``StoreError``: SQLAlchemy's
    inserts, updates and deletes, and SQL text that writes by its first word past comments
    and parentheses (``writes``), a ``WITH`` holding an ``INSERT INTO``, ``UPDATE … SET``,
    ``DELETE FROM`` or ``MERGE INTO``. A ``PRAGMA`` passes: the store sets the connection's
    own (``busy_timeout``) with one. A guard against a mistake, not a sandbox (a function
    that writes, called from a ``SELECT``, passes). It
    refuses the same on PostgreSQL, so that code written against one database behaves the
    same on the other. The listener belongs to ``reader`` alone (an engine made with
    ``execution_options`` keeps the listeners added to it), so the store's writes never
    run it.
    """

    @sa.event.listens_for(reader.sync_engine, "before_cursor_execute")
    def _refuse(
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        crud = context is not None and (context.isinsert or context.isupdate or context.isdelete)
        if crud or writes(statement):
            raise StoreError(
                "store.reader only reads: write through store.engine (outside a call) "
                "or ctx.db (inside one)"
            )


def writes(statement: str) -> bool:
    """Whether SQL text writes, by its first word (``refuse_writes``); a guard's reading."""
    first = _FIRST_WORD.match(statement)
    if first is None:
        return False
    word = first.group(1).upper()
    if word == "WITH":
        return _WRITING_CLAUSE.search(statement) is not None
    return word in _WRITE_WORDS


def hung_up(conn: AsyncConnection) -> bool:
    """Whether the server closed this psycopg connection while it sat idle in a transaction.

    Asked just before the statements that end with ``COMMIT`` go: a server that hung up
    before then certainly did not commit, where a connection lost once they are on their
    way may have (``commit_unknown``). A system call, no round trip.
    """
    sync = conn.sync_connection
    assert sync is not None, "the connection is not open"
    return _hung_up(sync.connection.driver_connection)


def _hung_up(driver: Any) -> bool:
    """Whether an idle psycopg connection was closed by the server (its socket is readable)."""
    if driver.closed or driver.broken:
        return True
    try:
        fd = driver.pgconn.socket
    except Exception:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - Windows
    return bool(readable)


def execution_options(conn: AsyncConnection) -> Mapping[str, Any]:
    """The execution options of an open connection (read without a round trip)."""
    sync = conn.sync_connection
    assert sync is not None, "the connection is not open"
    return sync.get_execution_options()


async def begin_write(conn: AsyncConnection, wait: float) -> None:
    """Begin a write transaction whose lock waits last at most ``wait`` seconds.

    SQLite: ``BEGIN IMMEDIATE`` under a busy timeout of ``wait`` (the begin hook applies
    it); when another writer holds the lock longer, the BEGIN fails with ``database is
    locked``. PostgreSQL: ``BEGIN``, under the session's ``lock_timeout`` (the store's busy
    timeout) or, for another wait, ``SET LOCAL lock_timeout``; a statement that waits
    longer on another transaction's row (a concurrent claim of the same request) fails
    with SQLSTATE 55P03. ``is_busy`` recognises both.
    """
    # lock_timeout = 0 means "wait forever" on PostgreSQL, hence the floor of 1 ms.
    millis = max(1, math.ceil(wait * 1000))
    if conn.dialect.name == "sqlite":
        if execution_options(conn).get(BUSY_OPTION) != millis:
            await conn.execution_options(**{BUSY_OPTION: millis})
        await conn.begin()
        return
    await conn.begin()
    if conn.info.get(LOCK_TIMEOUT_INFO) != millis:
        await conn.execute(
            sa.text("SELECT set_config('lock_timeout', :value, true)"), {"value": f"{millis}ms"}
        )


async def begin_deferred(conn: AsyncConnection, wait: float) -> None:
    """PostgreSQL: begin a write transaction whose ``BEGIN`` goes with its first statement.

    ``conn`` comes from an ``AUTOCOMMIT`` engine, so psycopg sends no ``BEGIN`` of its own;
    the explicit one (and ``SET LOCAL lock_timeout`` for a wait other than the session's)
    waits in the connection's pending statements (``_pipelined``). SQLAlchemy's own
    transaction only tracks the block: its commit or rollback reaches the driver, which
    ends the server's transaction when there is one.
    """
    millis = max(1, math.ceil(wait * 1000))
    await conn.begin()
    defer(conn, BEGIN)
    if conn.info.get(LOCK_TIMEOUT_INFO) != millis:
        defer(conn, Raw(f"SET LOCAL lock_timeout = {millis:d}", opens=True))


def _enter_wal(cursor: Any, busy_timeout_ms: int) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the lock.

    Switching a database to WAL takes its exclusive lock from a shared one, and SQLite
    answers ``database is locked`` at once, without waiting under ``busy_timeout``, when
    another connection holds the write lock meanwhile (it would otherwise risk a deadlock):
    replicas opening a fresh database together, one of them already migrating it. So this
    retries every 10 ms for up to ``busy_timeout``, asleep on the event loop.
    """
    deadline: float | None = None
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.Error as exc:
            if not is_busy(exc) or not in_greenlet():
                raise
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + busy_timeout_ms / 1000
            if now >= deadline:
                raise
        await_(asyncio.sleep(0.01))


def is_busy(exc: BaseException) -> bool:
    """Tell whether a driver error means "locked, try again" rather than a failure."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return True
        return "database is locked" in str(orig) or "database table is locked" in str(orig)
    return getattr(orig, "sqlstate", None) in _BUSY_SQLSTATES


def is_connection_lost(exc: BaseException) -> bool:
    """Tell whether a driver error means the connection to the server is gone.

    SQLAlchemy flags the errors its dialect recognises as a disconnect (and drops the
    connection from the pool); SQLSTATE class 08 (connection exception) and 57P01 to 57P03
    (the server terminated the backend, crashed, or is restarting) mean the same. A
    transaction on a lost connection did not commit, unless the COMMIT itself was in
    flight. SQLite has no connection to lose.
    """
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.Error):
        return False
    sqlstate = getattr(orig, "sqlstate", None)
    return isinstance(sqlstate, str) and (sqlstate.startswith("08") or sqlstate in _LOST_SQLSTATES)


def is_unreachable(exc: BaseException) -> bool:
    """Tell whether an error raised while connecting means the server cannot be reached.

    Any operational error of the PostgreSQL driver at connect time (refused, timed out,
    starting up, too many connections), except a refused login or an unknown database,
    which are configuration mistakes that a retry does not fix.
    """
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.Error) or type(orig).__name__ != "OperationalError":
        return False
    sqlstate = getattr(orig, "sqlstate", None)
    return not (isinstance(sqlstate, str) and (sqlstate.startswith("28") or sqlstate == "3D000"))
