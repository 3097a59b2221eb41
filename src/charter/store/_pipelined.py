"""PostgreSQL: a ledgered call's statements sent together, fewer round trips per call.

A ledgered call on PostgreSQL used to take five round trips: ``BEGIN``, the claim, the
handler's statement, the outcome ``UPDATE`` and ``COMMIT``. Two pairs of them need not
wait for each other:

- ``BEGIN`` goes with the first statement of the transaction. The gate's connection is
  in driver autocommit mode (SQLAlchemy's ``AUTOCOMMIT``, reset when it returns to the
  pool), so psycopg sends no ``BEGIN`` of its own; the transaction's ``BEGIN`` waits in
  ``PENDING`` and goes in one pipeline with the claim, or, if another statement runs
  first, just before it (``install``).
- The outcome ``UPDATE`` waits in ``PENDING`` too and goes in one pipeline with
  ``COMMIT``. It carries its own check: it divides by the number of rows it updated, so
  when it finds no claimed row the pipeline aborts and the ``COMMIT`` never runs.

psycopg's pipeline mode sends every queued statement and one ``Sync`` in one write and
reads the results in order; an error aborts the statements after it up to the ``Sync``.
SQLAlchemy reads a statement's results as soon as it executes, which a pipeline defers,
so these statements run on the psycopg connection directly, compiled once by SQLAlchemy
with its bind processors applied (``Raw``); their errors are raised as SQLAlchemy's
``DBAPIError`` so ``translated`` names them like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = (
    "BEGIN",
    "COMMIT",
    "NO_CLAIMED_ROW",
    "Raw",
    "defer",
    "drop_pending",
    "install",
    "nothing_sent",
    "pipelined",
    "raw",
)

PENDING = "charter_pending_statements"
"""Connection info: the ``Raw`` statements to send before the connection's next one."""

NO_CLAIMED_ROW = "22012"
"""SQLSTATE division_by_zero: the outcome ``UPDATE``'s check found no claimed row."""


@dataclass(frozen=True, slots=True)
class Raw:
    """A statement as psycopg takes it: SQL with ``%(name)s`` placeholders and its values."""

    sql: str
    parameters: Mapping[str, Any] | None = None
    opens: bool = False
    """It only opens the transaction (``BEGIN``, its settings): alone, nothing to commit."""


BEGIN = Raw("BEGIN ISOLATION LEVEL READ COMMITTED", opens=True)
"""The gate's transaction (``make_engine`` sets the same isolation for every connection)."""
COMMIT = Raw("COMMIT")


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    compiled: SQLCompiler
    processors: Mapping[str, Callable[[Any], Any]]


@cache
def _compile(statement: sa.Executable, keys: tuple[str, ...], dialect: Dialect) -> _Compiled:
    """``statement`` compiled for ``dialect`` and the parameters ``keys`` (the SET columns)."""
    assert isinstance(statement, sa.ClauseElement)
    compiled = cast(SQLCompiler, statement.compile(dialect=dialect, column_keys=list(keys)))
    processors = {}
    for name, bind in compiled.binds.items():
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            processors[name] = processor
    return _Compiled(compiled.string, compiled, processors)


def raw(conn: AsyncConnection, statement: sa.Executable, values: Mapping[str, Any]) -> Raw:
    """``statement`` with ``values`` as psycopg runs it (SQLAlchemy's bind processors applied).

    Raises:
        UnstorableValue: A value a column type refuses (its bind processor raises it).
    """
    compiled = _compile(statement, tuple(values), conn.dialect)
    parameters = compiled.compiled.construct_params(values)
    processors = compiled.processors
    for name, processor in processors.items():
        parameters[name] = processor(parameters[name])
    return Raw(compiled.sql, parameters)


def defer(conn: AsyncConnection, statement: Raw) -> None:
    """Send ``statement`` with the connection's next one (no round trip of its own)."""
    conn.info.setdefault(PENDING, []).append(statement)


def nothing_sent(conn: AsyncConnection) -> bool:
    """Whether the transaction has sent nothing and has nothing but its opening to send."""
    pending: list[Raw] | None = conn.info.get(PENDING)
    return bool(pending) and all(statement.opens for statement in pending or ())


def drop_pending(conn: AsyncConnection) -> None:
    """Forget the statements waiting to go (the transaction ends without them)."""
    sync = conn.sync_connection
    if sync is None or sync.closed or sync.invalidated:
        return  # the pool clears the info of a connection it replaces
    sync.info.pop(PENDING, None)


async def pipelined(conn: AsyncConnection, statements: Sequence[Raw]) -> list[int]:
    """Send the waiting statements and ``statements`` in one pipeline; their row counts.

    Returns the row count of each of ``statements`` (not of the waiting ones).

    Raises:
        sqlalchemy.exc.DBAPIError: A statement failed (the ones after it did not run).
    """
    import psycopg

    sync = conn.sync_connection
    assert sync is not None, "the connection is not open"
    fairy = sync.connection
    driver = cast("psycopg.AsyncConnection[Any]", fairy.driver_connection)
    pending: list[Raw] = conn.info.pop(PENDING, None) or []
    cursors: list[psycopg.AsyncCursor[Any]] = []
    together: AbstractAsyncContextManager[object] = (
        driver.pipeline() if psycopg.Pipeline.is_supported() else nullcontext()
    )
    current = statements[0] if statements else None
    try:
        async with together:
            for current in (*pending, *statements):
                cursor = driver.cursor()
                await cursor.execute(current.sql, current.parameters)
                cursors.append(cursor)
    except psycopg.Error as exc:
        shown = current.sql if current is not None else ""
        raise sa.exc.DBAPIError.instance(
            shown,
            None,
            exc,
            psycopg.Error,
            connection_invalidated=conn.dialect.is_disconnect(
                cast(Any, exc), fairy.dbapi_connection, None
            ),
        ) from exc
    return [cursor.rowcount for cursor in cursors[len(pending) :]]


def install(engine: sa.Engine) -> None:
    """Send a connection's waiting statements before any statement SQLAlchemy executes on it.

    The handler's own statements through ``ctx.db``, and any ``LedgerTransaction`` method
    that runs through SQLAlchemy, then see the transaction begun and the outcome stored.
    """

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _send_pending(
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        info = conn.info
        if PENDING not in info:
            return
        # A cursor of their own: SQLAlchemy reads the statement's results from ``cursor``.
        own = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            for waiting in info.pop(PENDING):
                own.execute(waiting.sql, waiting.parameters)
        finally:
            own.close()
