"""``SqlEventStore``: resumable streams' events in charter's SQL store, not in memory.

The store (``charter.store.SqlStore``) keeps opaque rows; this module turns them into the
SDK's JSON-RPC messages. It is what ``streamable_http_app`` uses by itself when the
host's store is a ``SqlStore``: the events then take no memory of the process, expire
(``charter db prune`` deletes them), and each stream keeps only its newest events.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from mcp.server.streamable_http import EventCallback, EventMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter

from .._safe_log import log_exception
from ..errors import ConfigurationError
from ._events import SessionEventStore

__all__ = ("SqlEventStore", "StreamEventStorage")

logger = logging.getLogger("charter.mcp")


@runtime_checkable
class StreamEventStorage(Protocol):
    """Protocol: where ``SqlEventStore`` keeps events (``charter.store.SqlStore`` is one)."""

    async def store_stream_event(
        self,
        *,
        session_id: str,
        stream_id: str,
        message: str | None,
        expires_at: datetime,
        keep: int,
    ) -> str:
        """Keep one event (its stream keeps its newest ``keep``); its new, unguessable id."""
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
        clock: the current time (UTC), for tests.
    """

    def __init__(
        self,
        store: StreamEventStorage,
        *,
        retention: timedelta = timedelta(hours=1),
        max_events_per_stream: int = 1000,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Keep events in ``store`` for ``retention``, at most ``max_events_per_stream`` each."""
        if retention <= timedelta(0):
            raise ConfigurationError("retention must be a positive duration")
        if max_events_per_stream < 1:
            raise ConfigurationError("max_events_per_stream must be at least 1")
        self.store = store
        self.retention = retention
        self.max_events_per_stream = max_events_per_stream
        self._clock = clock or (lambda: datetime.now(UTC))

    async def store_session_event(
        self, session_id: str, stream_id: str, message: JSONRPCMessage | None
    ) -> str:
        """Keep one event of a session's stream (None: a priming event); its new id.

        A store that cannot keep it (the database is unreachable, an id it cannot hold)
        costs only the replay of this event: the live stream goes on, so the event gets
        an id that resumes nothing.
        """
        text = (
            None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        )
        try:
            return await self.store.store_stream_event(
                session_id=session_id,
                stream_id=stream_id,
                message=text,
                expires_at=self._clock() + self.retention,
                keep=self.max_events_per_stream,
            )
        except Exception as exc:
            log_exception(
                logger, "an SSE event of stream %r could not be stored", stream_id[:64], exc=exc
            )
            return f"unstored-{secrets.token_hex(8)}"

    async def replay_session_events_after(
        self, session_id: str, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the later events of ``last_event_id``'s stream, if it is ``session_id``'s."""
        found = await self.store.stream_events_after(
            session_id=session_id, event_id=last_event_id, now=self._clock()
        )
        if found is None:
            return None
        stream_id, events = found
        for event_id, text in events:
            message = jsonrpc_message_adapter.validate_json(text, by_name=False)
            await send_callback(EventMessage(message, event_id))
        return stream_id
