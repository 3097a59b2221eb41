"""``SqlStore``'s stream events: what ``charter.mcp.SqlEventStore`` keeps for resumable streams.

The store knows nothing of MCP: an event is a session's, a stream's, and an opaque text
(the JSON-RPC message, or None for a stream's priming event).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from . import _stream_rows as rows
from ._connections import run_to_completion
from ._errors import translated
from ._types import is_storable

__all__ = ("SqlStreamEvents",)


class SqlStreamEvents:
    """The stream-event half of ``SqlStore``: append under a per-stream cap, replay."""

    busy_timeout: float

    def _connection(self, wait: float | None) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError  # SqlStore's

    @run_to_completion
    async def store_stream_event(
        self,
        *,
        session_id: str,
        stream_id: str,
        message: str | None,
        expires_at: datetime,
        keep: int,
    ) -> str:
        """Keep one event of a session's stream (its newest ``keep`` stay); its new id.

        Raises:
            UnstorableValue: an id or the message holds a NUL or an unpaired surrogate.
            ValueError: ``keep`` is less than 1.
        """
        if keep < 1:
            raise ValueError("keep must be at least 1")
        async with self._connection(self.busy_timeout) as conn:
            with translated("storing a stream event"):
                return await rows.append(
                    conn,
                    session_id=session_id,
                    stream_id=stream_id,
                    message=message,
                    expires_at=expires_at,
                    keep=keep,
                )

    @run_to_completion
    async def stream_events_after(
        self, *, session_id: str, event_id: str, now: datetime
    ) -> rows.StreamReplay | None:
        """The stream of ``event_id`` and its later events, oldest first.

        None when the event is unknown, expired, or another session's: a client resumes
        only its own session's streams.
        """
        if not is_storable(session_id, event_id):
            return None
        async with self._connection(None) as conn:
            with translated("reading stream events"):
                return await rows.replay(conn, session_id=session_id, event_id=event_id, now=now)
