"""What a PostgreSQL store sends on the wire: libpq's protocol trace of its connections."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from charter.store import SqlStore


@dataclass
class Wire:
    """The frontend messages of the traced connections, once the block ended."""

    messages: list[str] = field(default_factory=list)

    @property
    def round_trips(self) -> int:
        """Each ``Sync`` (extended protocol) or ``Query`` (simple) waits for the server."""
        return sum(1 for m in self.messages if m.split("\t")[3] in ("Sync", "Query"))

    @property
    def statements(self) -> list[str]:
        """The first word of each statement parsed (a fresh connection prepares none)."""
        words = []
        for message in self.messages:
            _, _, _, kind, *rest = message.split("\t", 4)
            if kind in ("Parse", "Query"):
                text = rest[0].split('"', 3)[3] if kind == "Parse" else rest[0].strip(' "')
                words.append(text.split(None, 1)[0].strip('"').upper())
        return words


@asynccontextmanager
async def wire(store: SqlStore) -> AsyncIterator[Wire]:
    """Trace the connections the store checks out while the block runs (PostgreSQL).

    The pool is emptied first, so every traced connection is new and prepares nothing yet.
    """
    seen = Wire()
    await store.engine.dispose()
    engine = store.engine.sync_engine
    with tempfile.TemporaryFile("w+b") as trace:

        def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            dbapi_connection.driver_connection.pgconn.trace(trace.fileno())

        def checkin(dbapi_connection: Any, record: Any) -> None:
            if dbapi_connection is not None:
                dbapi_connection.driver_connection.pgconn.untrace()

        sa.event.listen(engine.pool, "checkout", checkout)
        sa.event.listen(engine.pool, "checkin", checkin)
        try:
            yield seen
        finally:
            sa.event.remove(engine.pool, "checkout", checkout)
            sa.event.remove(engine.pool, "checkin", checkin)
        trace.seek(0)
        lines = trace.read().decode(errors="replace").splitlines()
    # timestamp, direction (F: frontend, from the client), length, message type, contents
    seen.messages = [line for line in lines if line.split("\t")[1:2] == ["F"]]
