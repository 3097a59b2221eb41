"""The statements behind ``SqlStore``'s stream events: append (and trim), replay, prune."""

from __future__ import annotations

import secrets
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ._schema import stream_events

__all__ = ("StreamReplay", "append", "prune", "replay")

StreamReplay = tuple[str, list[tuple[str, str]]]
"""A replay: the stream's id, then its later events as ``(event id, message)``."""

_t = stream_events.c


async def append(
    conn: AsyncConnection,
    *,
    session_id: str,
    stream_id: str,
    message: str | None,
    expires_at: datetime,
    keep: int,
) -> str:
    """Add one event and drop the stream's events older than its newest ``keep``; its id."""
    event_id = secrets.token_hex(16)
    await conn.execute(
        sa.insert(stream_events).values(
            event_id=event_id,
            session_id=session_id,
            stream_id=stream_id,
            message=message,
            expires_at=expires_at,
        )
    )
    same_stream = sa.and_(_t.session_id == session_id, _t.stream_id == stream_id)
    # The ``keep``-th newest event's seq: NULL while the stream has fewer, deleting nothing.
    oldest_kept = (
        sa.select(_t.seq)
        .where(same_stream)
        .order_by(_t.seq.desc())
        .offset(keep - 1)
        .limit(1)
        .scalar_subquery()
    )
    await conn.execute(sa.delete(stream_events).where(same_stream, _t.seq < oldest_kept))
    return event_id


async def replay(
    conn: AsyncConnection, *, session_id: str, event_id: str, now: datetime
) -> StreamReplay | None:
    """The events of ``event_id``'s stream after it, if it is ``session_id``'s and unexpired."""
    found = (
        await conn.execute(
            sa.select(_t.seq, _t.stream_id).where(
                _t.event_id == event_id, _t.session_id == session_id, _t.expires_at >= now
            )
        )
    ).first()
    if found is None:
        return None
    seq, stream_id = found
    later = await conn.execute(
        sa.select(_t.event_id, _t.message)
        .where(
            _t.session_id == session_id,
            _t.stream_id == stream_id,
            _t.seq > seq,
            _t.message.is_not(None),
        )
        .order_by(_t.seq)
    )
    return stream_id, [(row.event_id, row.message) for row in later]


async def prune(conn: AsyncConnection, before: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` events that expired before ``before``; how many went."""
    batch = (
        sa.select(_t.seq).where(_t.expires_at < before).order_by(_t.expires_at).limit(batch_size)
    )
    result = await conn.execute(sa.delete(stream_events).where(_t.seq.in_(batch.scalar_subquery())))
    return result.rowcount
