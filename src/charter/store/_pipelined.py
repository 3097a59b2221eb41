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

A statement that waits may be watched (``watch``): once the waiting statements were sent,
the watcher reads what they did (``Sent``) before anything else sees the results, and may
raise instead. A spending transaction's rate-limit spend waits this way, ahead of its
``BEGIN`` (``_budget_postgres``).

Outside ``BEGIN``, the statements a pipeline sends up to a ``Sync`` share one implicit
transaction, which the server commits at the ``Sync`` (or rolls back, when one of them
failed). ``SYNC`` puts a ``Sync`` among the waiting statements, so statements that must
commit on their own need no ``BEGIN`` or ``COMMIT`` of their own (``syncs``). psycopg's
public ``Pipeline.sync()`` waits for every result so far, a round trip; ``SYNC`` queues
the ``Sync`` as the pipeline's own ending does, and sends it with what follows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util import await_only

if TYPE_CHECKING:
    import psycopg

__all__ = (
    "BEGIN",
    "COMMIT",
    "NO_CLAIMED_ROW",
    "PENDING",
    "Raw",
    "Sent",
    "Watcher",
    "defer",
    "drop_pending",
    "install",
    "nothing_sent",
    "SYNC",
    "pipelined",
    "raw",
    "syncs",
    "watch",
)

PENDING = "charter_pending_statements"
"""Connection info: the ``Raw`` statements to send before the connection's next one."""

WATCHER = "charter_pending_watcher"
"""Connection info: the ``Watcher`` of the statements waiting in ``PENDING``."""

NO_CLAIMED_ROW = "22012"
"""SQLSTATE division_by_zero: the outcome ``UPDATE``'s check found no claimed row."""


@dataclass(frozen=True, slots=True)
class Raw:
    """A statement as psycopg takes it: SQL with ``%(name)s`` placeholders and its values."""

    sql: str
    parameters: Mapping[str, Any] | None = None
    opens: bool = False
    """It only opens the transaction (``BEGIN``, its settings): alone, nothing to commit."""
    sync: bool = False
    """Not a statement: a ``Sync`` (``SYNC``)."""


BEGIN = Raw("BEGIN ISOLATION LEVEL READ COMMITTED", opens=True)
"""The gate's transaction (``make_engine`` sets the same isolation for every connection)."""
COMMIT = Raw("COMMIT")
SYNC = Raw("", sync=True)
"""A ``Sync``: the implicit transaction of the statements since the last one ends there."""


@dataclass(frozen=True, slots=True)
class Sent:
    """What a waiting statement did once sent."""

    status: str | None
    """Its command tag (``INSERT 0 1``, ``COMMIT``); None when it did not run.

    A ``SYNC``'s is ``SYNC`` once the server went past it: nothing failed, or a statement
    after it ran. It committed what came before it if those statements all ran: a commit
    there fails only with the connection, and then nothing after it runs either."""
    rowcount: int
    """The rows it returned or changed; -1 when it did not run or has no count."""


Watcher = Callable[[Sequence[Sent], "sa.exc.DBAPIError | None"], Awaitable[None]]
"""Reads what the waiting statements did, once they were sent.

Given one ``Sent`` per waiting statement (in ``defer`` order) and the error the
statements sent with them raised, if any (raised after the watcher returns). It may send
statements of its own (``pipelined``), and raise instead.
"""


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


def defer(conn: AsyncConnection, *statements: Raw) -> int:
    """Send ``statements`` with the connection's next one (no round trip of their own).

    Returns the place of the first of them among the waiting statements.
    """
    pending: list[Raw] = conn.info.setdefault(PENDING, [])
    first = len(pending)
    pending.extend(statements)
    return first


@cache
def syncs() -> bool:
    """Whether ``SYNC`` ends an implicit transaction: psycopg pipelines, and queues a ``Sync``.

    Without a pipeline (libpq before 14) each statement commits on its own, and ``SYNC``
    does nothing.
    """
    import psycopg

    return psycopg.Pipeline.is_supported() and hasattr(psycopg.AsyncPipeline, "_enqueue_sync")


def watch(conn: AsyncConnection, watcher: Watcher) -> None:
    """Have ``watcher`` read the waiting statements' results once they are sent."""
    info = conn.info
    assert WATCHER not in info, "one watcher per transaction"
    info[WATCHER] = watcher


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
    sync.info.pop(WATCHER, None)


async def pipelined(conn: AsyncConnection, statements: Sequence[Raw]) -> list[int]:
    """Send the waiting statements and ``statements`` in one pipeline; their row counts.

    Returns the row count of each of ``statements`` (not of the waiting ones).

    Raises:
        sqlalchemy.exc.DBAPIError: A statement failed (the ones after it did not run).
        Exception: What the waiting statements' watcher raised.
    """
    sync = conn.sync_connection
    assert sync is not None, "the connection is not open"
    return await _send(sync, statements)


async def _send(sync: Connection, statements: Sequence[Raw]) -> list[int]:
    import psycopg

    fairy = sync.connection
    driver = cast("psycopg.AsyncConnection[Any]", fairy.driver_connection)
    info = sync.info
    pending: list[Raw] = info.pop(PENDING, None) or []
    watcher: Watcher | None = info.pop(WATCHER, None)
    cursors: list[psycopg.AsyncCursor[Any] | None] = []
    together: AbstractAsyncContextManager[psycopg.AsyncPipeline | None] = (
        driver.pipeline() if psycopg.Pipeline.is_supported() else nullcontext()
    )
    current = statements[0] if statements else None
    error: sa.exc.DBAPIError | None = None
    try:
        async with together as pipeline:
            for current in (*pending, *statements):
                if current.sync:
                    if pipeline is not None and syncs():
                        pipeline._enqueue_sync()
                    cursors.append(None)
                    continue
                cursor = driver.cursor()
                cursors.append(cursor)
                await cursor.execute(current.sql, current.parameters)
    except psycopg.Error as exc:
        shown = current.sql if current is not None else ""
        wrapped = sa.exc.DBAPIError.instance(
            shown,
            None,
            exc,
            psycopg.Error,
            connection_invalidated=sync.dialect.is_disconnect(
                cast(Any, exc), fairy.dbapi_connection, None
            ),
        )
        assert isinstance(wrapped, sa.exc.DBAPIError)
        wrapped.__cause__ = exc
        error = wrapped
    if watcher is not None:
        await watcher(_sent(cursors, len(pending), error is None), error)
    if error is not None:
        raise error
    return [cursor.rowcount if cursor else -1 for cursor in cursors[len(pending) :]]


def _sent(
    cursors: Sequence[psycopg.AsyncCursor[Any] | None], count: int, succeeded: bool
) -> list[Sent]:
    """What the first ``count`` statements did (None stands for a ``SYNC``)."""
    sent = []
    for index, cursor in enumerate(cursors[:count]):
        if cursor is not None:
            status = cursor.statusmessage
            sent.append(Sent(status, cursor.rowcount if status else -1))
            continue
        after = next((c for c in cursors[index + 1 :] if c is not None), None)
        passed = succeeded or (after is not None and after.statusmessage is not None)
        sent.append(Sent("SYNC" if passed else None, -1))
    return sent + [Sent(None, -1)] * (count - len(sent))


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
        if PENDING in conn.info:
            # On psycopg's connection directly, as the claim's are; SQLAlchemy reads this
            # statement's results from ``cursor``, which they leave alone.
            try:
                await_only(_send(conn, ()))
            except sa.exc.DBAPIError as exc:
                # The driver's error, which SQLAlchemy wraps (and flags a disconnect) itself.
                raise exc.orig from None  # type: ignore[misc]
