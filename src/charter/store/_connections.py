"""Connections in a transaction that always ends: commit, or rollback even when cancelled.

Every database operation of the store runs to its end once started, and a cancellation
that arrives meanwhile is delivered when it returns. Interrupting SQLAlchemy mid-statement
makes it terminate the connection; under repeated cancellation (an anyio cancel scope)
that can abandon an aiosqlite worker thread, and the event loop then never closes. Waiting
instead costs at most the lock wait of the statement in flight.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._dialects import READ_ONLY_OPTION, begin_write
from ._errors import translated

__all__ = ("connection", "run_to_completion", "to_completion")

_T = TypeVar("_T")
_P = ParamSpec("_P")


async def to_completion(
    work: Awaitable[_T], *, on_cancel: Callable[[_T], Awaitable[object]] | None = None
) -> _T:
    """Await ``work`` in its own task, so a cancellation cannot cut it short.

    A cancellation that arrives meanwhile is re-raised once the work is done; ``on_cancel``
    then receives the result it would have returned (to release it).
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done():
                raise
            cancelled = exc
        except BaseException:
            if cancelled is not None:
                raise cancelled from None
            raise
        else:
            break
    if cancelled is not None:
        if on_cancel is not None:
            await to_completion(on_cancel(result))
        raise cancelled
    return result


def run_to_completion(
    method: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """Decorate an async method so each call runs to its end (see ``to_completion``)."""

    @functools.wraps(method)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await to_completion(method(*args, **kwargs))

    return run


async def _open(engine: AsyncEngine, wait: float | None) -> AsyncConnection:
    with translated("connecting"):
        conn = await engine.connect()
    try:
        with translated("beginning a transaction"):
            if wait is None:
                await conn.execution_options(**{READ_ONLY_OPTION: True})
                await conn.begin()
            else:
                await begin_write(conn, wait)
    except BaseException:
        await _discard(conn)
        raise
    return conn


@asynccontextmanager
async def connection(engine: AsyncEngine, wait: float | None) -> AsyncIterator[AsyncConnection]:
    """A connection in a transaction: a write one (``wait`` seconds for locks) or a read.

    Commits when the block ends normally; rolls back on any exception, cancellation
    included, and always returns the connection to the pool.

    Raises:
        StoreBusy: A lock was not granted within ``wait``, or no pooled connection freed up.
    """
    conn = await to_completion(_open(engine, wait), on_cancel=_discard)
    try:
        yield conn
    except BaseException:
        await to_completion(_discard(conn))
        raise
    try:
        with translated("committing"):
            await to_completion(conn.commit())
    finally:
        await to_completion(_discard(conn))


async def _discard(conn: AsyncConnection) -> None:
    """Roll back what is left of the transaction and return the connection to the pool."""
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
