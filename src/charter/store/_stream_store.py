"""``SqlStore``'s stream events: what ``charter.mcp.SqlEventStore`` keeps for resumable streams.

The store knows nothing of MCP: an event is a session's, a stream's, and an opaque text
(the JSON-RPC message, or None for a stream's priming event). Its id is the caller's
(random, unguessable); ``seq`` orders a stream's events as they were written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._access import SqlAccess
from ._connections import run_to_completion
from ._errors import translated
from ._schema import stream_events
from ._types import is_storable

__all__ = ("SqlStreamEvents", "StreamEventRow", "StreamReplay", "prune_stream_events")

StreamReplay = tuple[str, list[tuple[str, str]]]
"""A replay: the stream's id, then its later events as ``(event id, message)``."""

_t = stream_events.c


class StreamEventRow(Protocol):
    """Protocol: one event to keep (``charter.mcp.SqlEventStore`` builds them)."""

    @property
    def event_id(self) -> str:
        """Its unguessable id, as the client sees it."""
        ...

    @property
    def session_id(self) -> str:
        """The session it belongs to."""
        ...

    @property
    def stream_id(self) -> str:
        """The stream within the session."""
        ...

    @property
    def message(self) -> str | None:
        """The message as JSON text; None for a stream's priming event."""
        ...

    @property
    def expires_at(self) -> datetime:
        """When it may no longer be replayed (and ``prune`` deletes it)."""
        ...


class SqlStreamEvents(SqlAccess):
    """The stream-event half of ``SqlStore``: append under a per-stream cap, replay."""

    @run_to_completion
    async def store_stream_events(self, events: Sequence[StreamEventRow], *, keep: int) -> int:
        """Keep a batch of events in one transaction; each stream keeps its newest ``keep``.

        An event whose ids or message the database cannot hold (a NUL, an unpaired
        surrogate) is skipped: only its replay is lost. Returns how many were kept.

        Raises:
            ValueError: ``keep`` is less than 1.
            StoreBusy, StoreUnavailable: nothing was kept; the caller may try again.
        """
        if keep < 1:
            raise ValueError("keep must be at least 1")
        rows = [
            {
                "event_id": e.event_id,
                "session_id": e.session_id,
                "stream_id": e.stream_id,
                "message": e.message,
                "expires_at": e.expires_at,
            }
            for e in events
            if is_storable(e.event_id, e.session_id, e.stream_id, e.message)
        ]
        if not rows:
            return 0
        streams = list({(row["session_id"], row["stream_id"]) for row in rows})
        async with self._connection(self.busy_timeout) as conn:
            with translated("storing stream events"):
                await conn.execute(sa.insert(stream_events), rows)
                await conn.execute(
                    _TRIM,
                    {
                        "sessions": list({session for session, _ in streams}),
                        "stream_ids": list({stream for _, stream in streams}),
                        "streams": streams,
                        "keep": keep,
                    },
                )
        return len(rows)

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


def _trim() -> sa.Delete:
    """Delete, in each stream of ``:streams``, the events older than its newest ``:keep``.

    One statement for a whole batch, however many streams it touches (a handshake-era call
    is a stream of its own, so a statement per stream was one more per call). The two
    plain ``IN`` lists are there for SQLite, which looks up ``(session_id, stream_id)``
    pairs in the index only through them (it scans the whole index for a row-value
    ``IN``); the row-value ``IN`` then keeps exactly the batch's pairs.
    """
    pair = sa.tuple_(_t.session_id, _t.stream_id)
    newest_first = (
        sa.select(
            _t.seq,
            sa.func.row_number()
            .over(partition_by=(_t.session_id, _t.stream_id), order_by=_t.seq.desc())
            .label("place"),
        )
        .where(
            _t.session_id.in_(sa.bindparam("sessions", expanding=True)),
            _t.stream_id.in_(sa.bindparam("stream_ids", expanding=True)),
            pair.in_(sa.bindparam("streams", expanding=True)),
        )
        .subquery()
    )
    older = sa.select(newest_first.c.seq).where(newest_first.c.place > sa.bindparam("keep"))
    return sa.delete(stream_events).where(_t.seq.in_(older))


_TRIM = _trim()
