"""Connections in a transaction that always ends: commit, or rollback even when cancelled.

Every database operation of the store runs to its end once started, and a cancellation
that arrives meanwhile is delivered when it returns. Interrupting SQLAlchemy mid-statement
makes it terminate the connection; under repeated cancellation (an anyio cancel scope)
that can abandon an aiosqlite worker thread, and the event loop then never closes. Waiting
instead costs at most the lock wait of the statement in flight.

The protection is a task of its own per operation (``to_completion``); operations nested
inside one (a store method's connection, its statements, its commit) run in that task
directly, since nothing can cancel them there but their own timeouts.

SQLite write transactions of one store also queue in the process (``WriteQueue``) before
``BEGIN IMMEDIATE``, so they take the database's write lock in arrival order (audit events
written on their own first) instead of polling for it in SQLite's busy handler.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .._completion import to_completion
from ..errors import StoreBusy
from ..ledger._scope import Scope
from ._dialects import READ_ONLY_OPTION, begin_deferred, begin_write, execution_options
from ._errors import translated
from ._pipelined import drop_pending

__all__ = ("ConnectionScope", "Prelude", "WriteQueue", "run_to_completion", "to_completion")

_T = TypeVar("_T")
_P = ParamSpec("_P")


def run_to_completion(
    method: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """Decorate an async method so each call runs to its end (see ``to_completion``)."""

    @functools.wraps(method)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await to_completion(method(*args, **kwargs))

    return run


class _Turns:
    """One event loop's write turn: whether it is held, and who waits for it."""

    __slots__ = ("held", "urgent", "waiting")

    def __init__(self) -> None:
        self.held = False
        # Futures of the waiting writers, oldest first; set when the turn passes to one.
        self.urgent: deque[asyncio.Future[None]] = deque()
        self.waiting: deque[asyncio.Future[None]] = deque()

    def release(self) -> None:
        """Pass the turn to the next writer still waiting (urgent first), or free it."""
        for line in (self.urgent, self.waiting):
            while line:
                granted = line.popleft()
                if not granted.done():  # not cancelled meanwhile
                    granted.set_result(None)
                    return
        self.held = False


class WriteQueue:
    """The in-process line of one SQLite store's write transactions, in order of arrival.

    SQLite lets one writer in at a time, and a writer that finds the lock taken sleeps
    and polls (1, 2, 5, … 100 ms) in the busy handler: under contention the lock sits
    idle between polls and goes to whoever polls first. Writers of the same store in this
    process instead wait here, in order, and are woken the moment the previous one
    commits or rolls back; only writers of other processes (or other engines) meet in
    the busy handler. One line per event loop, since a future belongs to one.

    An ``urgent`` writer goes before the writers already waiting (after the other urgent
    ones): the audit events of calls that wrote nothing else, one short INSERT whose calls
    are waiting to answer, which would otherwise wait for every ledgered call ahead.
    """

    def __init__(self) -> None:
        """Create an empty queue."""
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = (
            weakref.WeakKeyDictionary()
        )

    async def enter(self, wait: float, *, urgent: bool = False) -> tuple[Callable[[], None], float]:
        """Wait for this loop's turn at most ``wait`` seconds; return its release and the rest.

        The caller releases the turn once its transaction ended. Cancellation while waiting
        leaves the queue as it was.

        Raises:
            StoreBusy: The turn did not come within ``wait``.
        """
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            turns = self._turns.setdefault(loop, _Turns())
        if not turns.held:
            turns.held = True
            return turns.release, wait
        started = loop.time()
        granted: asyncio.Future[None] = loop.create_future()
        (turns.urgent if urgent else turns.waiting).append(granted)
        try:
            async with asyncio.timeout(wait):
                await granted
        except BaseException as exc:
            if granted.done() and not granted.cancelled():
                turns.release()  # the turn came just as the wait ended: pass it on
            else:
                granted.cancel()  # skipped when the turn is passed on
            if isinstance(exc, TimeoutError):
                raise StoreBusy(
                    "the database stayed locked by this process's other writers while "
                    "waiting for the write lock"
                ) from None
            raise
        return turns.release, max(0.0, wait - (loop.time() - started))


Prelude = Callable[[AsyncConnection], Awaitable[None]]
"""Work a write connection does before its transaction begins (it commits on its own)."""


async def _open(
    engine: AsyncEngine,
    wait: float | None,
    prelude: Prelude | None = None,
    *,
    deferred: bool = False,
) -> AsyncConnection:
    with translated("connecting", connecting=True):
        conn = await engine.connect()
    try:
        if prelude is not None:
            await prelude(conn)
        with translated("beginning a transaction"):
            if wait is None:
                if not execution_options(conn).get(READ_ONLY_OPTION):
                    await conn.execution_options(**{READ_ONLY_OPTION: True})
                await conn.begin()
            elif deferred:
                await begin_deferred(conn, wait)
            else:
                await begin_write(conn, wait)
    except BaseException:
        await _discard(conn)
        raise
    return conn


class ConnectionScope(Scope[AsyncConnection]):
    """A connection in a transaction: a write one (``wait`` seconds for locks) or a read.

    Reads are cheaper from an engine with ``READ_ONLY_OPTION`` set already
    (``engine.execution_options(...)``, sharing the pool).

    A write transaction first takes its turn in ``queue`` (SQLite), within the same
    ``wait``, and runs its ``prelude`` before it begins (with that turn). Commits when the
    block ends normally; rolls back on any exception, cancellation included, and always
    returns the connection to the pool (and the turn to the queue). (A class rather than
    ``@asynccontextmanager``: it runs on every call.)

    Raises:
        StoreBusy: A lock was not granted within ``wait``, or no pooled connection freed up.
        StoreUnavailable: The database cannot be reached, or the connection was lost.
    """

    __slots__ = (
        "_conn",
        "_deferred",
        "_engine",
        "_prelude",
        "_queue",
        "_release",
        "_urgent",
        "_wait",
    )

    def __init__(
        self,
        engine: AsyncEngine,
        wait: float | None,
        queue: WriteQueue | None = None,
        prelude: Prelude | None = None,
        *,
        deferred: bool = False,
        urgent: bool = False,
    ) -> None:
        """Describe the transaction; it begins on entry."""
        self._engine = engine
        self._deferred = deferred
        self._wait = wait
        self._queue = queue if wait is not None else None
        self._urgent = urgent
        self._prelude = prelude
        self._release: Callable[[], None] | None = None
        self._conn: AsyncConnection | None = None

    async def __aenter__(self) -> AsyncConnection:
        wait = self._wait
        if self._queue is not None:
            assert wait is not None
            self._release, wait = await self._queue.enter(wait, urgent=self._urgent)
        try:
            self._conn = await to_completion(
                _open(self._engine, wait, self._prelude, deferred=self._deferred),
                on_cancel=_discard,
            )
        except BaseException:
            self._give_back()
            raise
        return self._conn

    async def _exit(self, failed: BaseException | None) -> None:
        conn = self._conn
        assert conn is not None
        self._conn = None
        try:
            await to_completion(_commit(conn) if failed is None else _discard(conn))
        finally:
            self._give_back()

    def _give_back(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None


async def _commit(conn: AsyncConnection) -> None:
    """Commit, then return the connection to the pool (rolled back if the commit failed)."""
    try:
        with translated("committing", committing=True):
            await conn.commit()
    except BaseException:
        await _discard(conn)
        raise
    await conn.close()


async def _discard(conn: AsyncConnection) -> None:
    """Roll back what is left of the transaction and return the connection to the pool."""
    drop_pending(conn)
    try:
        await conn.rollback()
    except Exception:
        # The connection is broken: keep it out of the pool; the database discards the
        # transaction when the connection drops.
        try:
            await conn.invalidate()
        except Exception:
            pass
    await conn.close()
