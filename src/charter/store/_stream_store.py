"""``SqlStore``'s stream events: what ``charter.mcp.SqlEventStore`` keeps for resumable streams.

The store knows nothing of MCP: an event is a session's, a stream's, and an opaque text
(the JSON-RPC message, or None for a stream's priming event). Event ids are random and
unguessable; ``seq`` orders a stream's events.
"""

from __future__ import annotations

import secrets
from contextlib import AbstractAsyncContextManager
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._connections import run_to_completion
from ._errors import translated
from ._schema import stream_events
from ._types import is_storable

__all__ = ("SqlStreamEvents", "StreamReplay", "prune_stream_events")

StreamReplay = tuple[str, list[tuple[str, str]]]
"""A replay: the stream's id, then its later events as ``(event id, message)``."""

_t = stream_events.c


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
        event_id = secrets.token_hex(16)
        same_stream = sa.and_(_t.session_id == session_id, _t.stream_id == stream_id)
        # The ``keep``-th newest event's seq: NULL while the stream has fewer (deletes none).
        oldest_kept = (
            sa.select(_t.seq)
            .where(same_stream)
            .order_by(_t.seq.desc())
            .offset(keep - 1)
            .limit(1)
            .scalar_subquery()
        )
        async with self._connection(self.busy_timeout) as conn:
            with translated("storing a stream event"):
                await conn.execute(
                    sa.insert(stream_events).values(
                        event_id=event_id,
                        session_id=session_id,
                        stream_id=stream_id,
                        message=message,
                        expires_at=expires_at,
                    )
                )
                await conn.execute(
                    sa.delete(stream_events).where(same_stream, _t.seq < oldest_kept)
                )
        return event_id

    @run_to_completion
    async def stream_events_after(
        self, *, session_id: str, event_id: str, now: datetime
    ) -> StreamReplay | None:
        """The stream of ``event_id`` and its later events, oldest first.

        None when the event is unknown, expired, or another session's: a client resumes
        only its own session's streams.
        """
        if not is_storable(session_id, event_id):
            return None
        async with self._connection(None) as conn:
            with translated("reading stream events"):
                found = (
                    await conn.execute(
                        sa.select(_t.seq, _t.stream_id).where(
                            _t.event_id == event_id,
                            _t.session_id == session_id,
                            _t.expires_at >= now,
                        )
                    )
                ).first()
                if found is None:
                    return None
                later = await conn.execute(
                    sa.select(_t.event_id, _t.message)
                    .where(
                        _t.session_id == session_id,
                        _t.stream_id == found.stream_id,
                        _t.seq > found.seq,
                        _t.message.is_not(None),
                    )
                    .order_by(_t.seq)
                )
                return found.stream_id, [(r.event_id, r.message) for r in later]


async def prune_stream_events(conn: AsyncConnection, before: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` stream events that expired before ``before``; how many."""
    batch = (
        sa.select(_t.seq).where(_t.expires_at < before).order_by(_t.expires_at).limit(batch_size)
    )
    result = await conn.execute(sa.delete(stream_events).where(_t.seq.in_(batch.scalar_subquery())))
    return result.rowcount
