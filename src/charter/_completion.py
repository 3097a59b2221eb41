"""Work that runs to its end once started: a cancellation waits for it, then is raised.

The store runs every database operation so (interrupting SQLAlchemy mid-statement makes it
terminate the connection), and the host spends budgets so (a spend cut short between two
buckets would keep what it spent with no one to give it back).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ("to_completion",)

_T = TypeVar("_T")

_shielded: contextvars.ContextVar[bool] = contextvars.ContextVar("charter_shielded", default=False)
"""True inside the task ``to_completion`` runs its work in."""


async def _run_shielded(work: Awaitable[_T]) -> _T:
    _shielded.set(True)  # in the task's own copy of the context
    return await work


async def to_completion(
    work: Awaitable[_T], *, on_cancel: Callable[[_T], Awaitable[object]] | None = None
) -> _T:
    """Await ``work`` in its own task, so a cancellation cannot cut it short.

    A cancellation that arrives meanwhile is re-raised once the work is done; ``on_cancel``
    then receives the result it would have returned (to release it). Inside such a task
    already, ``work`` is awaited directly: nothing outside can cancel it there.
    """
    if _shielded.get():
        return await work
    task = asyncio.ensure_future(_run_shielded(work))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            cancelled = exc
        except BaseException:
            break  # the work failed: its exception is raised below
    if cancelled is None:
        return task.result()
    # Cancelled meanwhile, possibly just as the work finished: release what it returned.
    if not task.cancelled() and task.exception() is None and on_cancel is not None:
        await to_completion(on_cancel(task.result()))
    raise cancelled
