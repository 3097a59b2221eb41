"""Group commit of audit events: the events recorded while one write is in flight share the next.

Every call a host serves records an audit event, most of them outside any ledger
transaction (reads, refusals); one INSERT per event is, on PostgreSQL, a round trip and a
commit each, and a connection checkout with the SQLAlchemy work around it. Here an event
recorded while no write is in flight is written at once (nothing waits for a timer); the
events recorded meanwhile wait for that write to end and then go together, one multi-row
INSERT that commits once. Under load the batches grow with the concurrency, and the cost
per event falls.

Losing an event stays never silent (docs/host.md, "Audit events that cannot be recorded"):
every recorder waits for its own event to be written and gets the write's error when it
fails. A batch that fails for another reason than an unreachable or busy database is
retried event by event, so one event the database refuses does not take the others with it.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..audit import AuditEvent
from ..errors import StoreBusy, StoreUnavailable
from ._connections import to_completion

__all__ = ("AuditBatches",)

_MAX_BATCH = 500
"""The most events one INSERT carries; more wait for the next write."""

Write = Callable[[list[AuditEvent]], Awaitable[None]]
"""Writes events in one statement that commits on its own."""


@dataclass(slots=True)
class _Line:
    """One event loop's events waiting to be written, and the task writing them."""

    waiting: list[tuple[AuditEvent, asyncio.Future[None]]] = field(default_factory=list)
    writer: asyncio.Task[None] | None = None


class AuditBatches:
    """Writes the audit events of one store, each batch in one statement (one line per loop)."""

    __slots__ = ("_lines", "_write")

    def __init__(self, write: Write) -> None:
        """Batch events for ``write``."""
        self._write = write
        # A future belongs to one event loop: one line per loop, like the SQLite WriteQueue.
        self._lines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Line] = (
            weakref.WeakKeyDictionary()
        )

    async def record(self, event: AuditEvent) -> None:
        """Write ``event``, with the others recorded meanwhile; return once it is stored.

        A cancellation while it is written is delivered once the write ended, as every
        store operation (``run_to_completion``).

        Raises:
            StoreError: The event was not written (``StoreUnavailable``, ``StoreBusy`` …).
        """
        loop = asyncio.get_running_loop()
        line = self._lines.get(loop)
        if line is None:
            line = self._lines.setdefault(loop, _Line())
        written: asyncio.Future[None] = loop.create_future()
        line.waiting.append((event, written))
        if line.writer is None:
            # A fresh context: the batch is no one request's work (its spans, its variables).
            line.writer = loop.create_task(self._drain(line), context=contextvars.Context())
        await to_completion(written)

    async def _drain(self, line: _Line) -> None:
        """Write what waits, batch after batch, until nothing does."""
        try:
            while line.waiting:
                batch = line.waiting[:_MAX_BATCH]
                del line.waiting[:_MAX_BATCH]
                await self._write_batch(batch)
        except BaseException as exc:
            # Cancelled (the loop shuts down): nobody waits forever for an unwritten event.
            for _, written in line.waiting:
                _settle(written, exc)
            line.waiting.clear()
            raise
        finally:
            line.writer = None

    async def _write_batch(self, batch: list[tuple[AuditEvent, asyncio.Future[None]]]) -> None:
        try:
            try:
                await self._write([event for event, _ in batch])
            except (StoreUnavailable, StoreBusy):
                raise
            except Exception:
                if len(batch) == 1:
                    raise
                # Maybe one event the database refuses: the others are still written.
                for one in batch:
                    await self._write_batch([one])
                return
        except BaseException as exc:
            for _, written in batch:
                _settle(written, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for _, written in batch:
            _settle(written, None)


def _settle(written: asyncio.Future[None], exc: BaseException | None) -> None:
    if written.done():
        return
    if exc is None:
        written.set_result(None)
    elif isinstance(exc, Exception):
        written.set_exception(exc)
    else:
        written.set_exception(
            StoreUnavailable("the audit writer stopped before the event was written")
        )
