"""What ``SqlStore``'s groups of methods share: its connections, reads and batch-wise pruning."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._errors import translated
from ._retention import PruneBatch

__all__ = ("SqlAccess",)


class SqlAccess:
    """What every group of ``SqlStore``'s methods (approvals, keys, effects …) builds on."""

    busy_timeout: float
    """Seconds a write outside the gate waits for a lock."""

    def _connection(
        self, wait: float | None, *, urgent: bool = False
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write connection waiting ``wait`` seconds for locks, or a read one (None).

        ``urgent``: on SQLite it goes before the write transactions waiting in the process.
        """
        raise NotImplementedError  # SqlStore's

    def _statement(
        self, action: str, *, urgent: bool = False
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for one write statement that commits on its own (``action``: errors).

        ``urgent`` as for ``_connection``.
        """
        raise NotImplementedError  # SqlStore's

    async def _read(
        self, statement: sa.Executable, parameters: dict[str, Any] | None = None
    ) -> list[sa.Row[Any]]:
        """The rows of one read statement."""
        async with self._connection(None) as conn:
            with translated("reading"):
                return list(await conn.execute(statement, parameters))

    async def _prune_in_batches(self, batch: PruneBatch, before: datetime, batch_size: int) -> int:
        """Run ``batch`` in short write transactions until one deletes less than a full batch.

        Returns how many rows were deleted in all.

        Raises:
            ValueError: ``batch_size`` is less than 1.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        total = 0
        while True:
            async with self._connection(self.busy_timeout) as conn:
                with translated("pruning"):
                    deleted = await batch(conn, before, batch_size)
            total += deleted
            if deleted < batch_size:
                return total
