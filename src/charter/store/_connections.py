"""Connections in a transaction that always ends: commit, or rollback even when cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._dialects import READ_ONLY_OPTION, begin_write
from ._errors import translated

__all__ = ("connection", "to_completion")

_T = TypeVar("_T")


async def to_completion(work: Awaitable[_T]) -> _T:
    """Await ``work`` in its own task so a cancellation cannot cut it short.

    Commit, rollback and close must finish once begun: a rollback abandoned halfway
    would hand a connection in an unknown state back to the pool. A cancellation that
    arrives meanwhile is re-raised once the work is done.
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
        else:
            break
    if cancelled is not None:
        raise cancelled
    return result


@asynccontextmanager
async def connection(engine: AsyncEngine, wait: float | None) -> AsyncIterator[AsyncConnection]:
    """A connection in a transaction: a write one (``wait`` seconds for locks) or a read.

    Commits when the block ends normally; rolls back on any exception, cancellation
    included, and always returns the connection to the pool.

    Raises:
        StoreBusy: A lock was not granted within ``wait``, or no pooled connection freed up.
    """
    with translated("connecting"):
        conn = await engine.connect()
    try:
        with translated("beginning a transaction"):
            if wait is None:
                await conn.execution_options(**{READ_ONLY_OPTION: True})
                await conn.begin()
            else:
                await begin_write(conn, wait)
        yield conn
        with translated("committing"):
            await to_completion(conn.commit())
    except BaseException:
        await to_completion(_rollback(conn))
        raise
    finally:
        await to_completion(conn.close())


async def _rollback(conn: AsyncConnection) -> None:
    # A failed rollback means the connection is broken; invalidating it keeps it out of
    # the pool, and the database discards the transaction when the connection drops.
    try:
        await conn.rollback()
    except Exception:
        try:
            await conn.invalidate()
        except Exception:
            pass
