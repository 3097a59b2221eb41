"""``SqlEventStore``: resumable streams' events in charter's SQL store, not in memory.

The store (``charter.store.SqlStore``) keeps opaque rows; this module turns them into the
SDK's JSON-RPC messages. It is what ``streamable_http_app`` uses by itself when the
host's store is a ``SqlStore``: the events then expire (``charter db prune`` deletes
them), and each stream keeps only its newest events.

Events are written behind the stream, in batches, by a task of their own: the SDK stores
each event before it sends it, and a handler's log or progress message is sent while its
ledgered call holds its write transaction, which on SQLite is the database's one write
lock. Waiting for the database there would stall the call's stream until the call ends.
An event not written yet is replayed from memory; at most ``max_unwritten`` wait (the
oldest is dropped past that, losing only its replay).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from mcp.server.streamable_http import EventCallback, EventMessage
from mcp.types import JSONRPCMessage

from .._safe_log import log_exception
from ..errors import ConfigurationError
from ._events import SessionEventStore, event_message, event_text

__all__ = ("SqlEventStore", "StreamEventStorage")

logger = logging.getLogger("charter.mcp")

_BATCH = 500
"""Events written in one transaction at most."""
_RETRY_SECONDS = (0.05, 5.0)
"""The first and the longest wait before writing again after the database refused."""


@dataclass(frozen=True, slots=True)
class _Event:
    event_id: str
    session_id: str
    stream_id: str
    message: str | None
    """The JSON-RPC message as JSON; None for a stream's priming event."""
    expires_at: datetime


@runtime_checkable
class StreamEventStorage(Protocol):
    """Protocol: where ``SqlEventStore`` keeps events (``charter.store.SqlStore`` is one)."""

    async def store_stream_events(self, events: Sequence[_Event], *, keep: int) -> int:
        """Keep a batch of events (each stream its newest ``keep``); how many were kept."""
        ...

    async def stream_events_after(
        self, *, session_id: str, event_id: str, now: datetime
    ) -> tuple[str, list[tuple[str, str]]] | None:
        """The session's stream of ``event_id`` and its later ``(id, message)`` events."""
        ...


class SqlEventStore(SessionEventStore):
    """Stateful sessions' SSE events in the store, each session's apart.

    Args:
        store: an open ``SqlStore`` (anything with its stream-event methods).
        retention: how long an event can be replayed; ``charter db prune`` (or
            ``SqlStore.prune``) deletes it after that.
        max_events_per_stream: the newest events one stream keeps; a client that falls
            further behind gets only those.
        max_unwritten: events waiting to be written at most (while the database is
            locked or unreachable); past it the oldest is dropped.
        clock: the current time (UTC), for tests.
    """

    def __init__(
        self,
        store: StreamEventStorage,
        *,
        retention: timedelta = timedelta(hours=1),
        max_events_per_stream: int = 1000,
        max_unwritten: int = 10_000,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Keep events in ``store`` for ``retention``, at most ``max_events_per_stream`` each."""
        if retention <= timedelta(0):
            raise ConfigurationError("retention must be a positive duration")
        if max_events_per_stream < 1 or max_unwritten < 1:
            raise ConfigurationError("max_events_per_stream and max_unwritten must be at least 1")
        self.store = store
        self.retention = retention
        self.max_events_per_stream = max_events_per_stream
        self.max_unwritten = max_unwritten
        self._clock = clock or (lambda: datetime.now(UTC))
        self._unwritten: deque[_Event] = deque()
        """Oldest first; the first ``_writing`` are in the transaction under way."""
        self._writing = 0
        self._writer: asyncio.Task[None] | None = None

    async def store_session_event(
        self, session_id: str, stream_id: str, message: JSONRPCMessage | None
    ) -> str:
        """Keep one event of a session's stream (None: a priming event); its new id."""
        event = _Event(
            event_id=secrets.token_hex(16),
            session_id=session_id,
            stream_id=stream_id,
            message=None if message is None else event_text(message),
            expires_at=self._clock() + self.retention,
        )
        self._unwritten.append(event)
        if len(self._unwritten) - self._writing > self.max_unwritten:
            del self._unwritten[self._writing]  # the oldest not being written
            logger.warning("an SSE event was dropped unwritten: the database is behind")
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())
        return event.event_id

    async def replay_session_events_after(
        self, session_id: str, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the later events of ``last_event_id``'s stream, if it is ``session_id``'s."""
        before = self._unwritten_of(session_id)
        for index, event in enumerate(before):
            if event.event_id == last_event_id:
                await self._send(before[index + 1 :], event.stream_id, send_callback)
                return event.stream_id
        found = await self.store.stream_events_after(
            session_id=session_id, event_id=last_event_id, now=self._clock()
        )
        if found is None:
            return None
        stream_id, written = found
        for event_id, text in written:
            await send_callback(EventMessage(event_message(text), event_id))
        # What was still unwritten before the read and is not in it, then what came since.
        seen = {event_id for event_id, _ in written}
        later = [
            e
            for e in dict.fromkeys([*before, *self._unwritten_of(session_id)])
            if e.event_id not in seen
        ]
        await self._send(later, stream_id, send_callback)
        return stream_id

    async def flush(self) -> None:
        """Wait until every event stored so far is written (for tests and shutdown)."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    def close(self) -> None:
        """Stop writing (the server stopped: its sessions, and so their streams, are over)."""
        if self._writer is not None:
            self._writer.cancel()
        self._unwritten.clear()
        self._writing = 0

    def _unwritten_of(self, session_id: str) -> list[_Event]:
        return [e for e in self._unwritten if e.session_id == session_id]

    async def _send(self, events: list[_Event], stream_id: str, send: EventCallback) -> None:
        for event in events:
            if event.stream_id == stream_id and event.message is not None:
                await send(EventMessage(event_message(event.message), event.event_id))

    async def _write(self) -> None:
        """Write the unwritten events in batches, retrying while the database refuses."""
        wait = _RETRY_SECONDS[0]
        while self._unwritten:
            batch = [self._unwritten[i] for i in range(min(_BATCH, len(self._unwritten)))]
            self._writing = len(batch)
            try:
                await self.store.store_stream_events(batch, keep=self.max_events_per_stream)
            except Exception as exc:
                self._writing = 0
                # Once per streak: a long ledgered call on SQLite holds the lock a while.
                first = wait == _RETRY_SECONDS[0]
                level = logging.WARNING if first else logging.DEBUG
                message = "SSE events could not be written yet; trying again"
                log_exception(logger, message, exc=exc, level=level)
                await asyncio.sleep(wait)
                wait = min(wait * 2, _RETRY_SECONDS[1])
                continue
            for _ in range(min(len(batch), len(self._unwritten))):
                self._unwritten.popleft()
            self._writing = 0
            wait = _RETRY_SECONDS[0]
