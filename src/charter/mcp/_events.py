"""Resumable streams: the SSE events of stateful sessions, kept so a client can catch up.

The SDK's streamable HTTP transport gives each SSE event an id from an ``EventStore`` and,
when a client reconnects with ``Last-Event-ID`` (after a dropped connection, or after the
server closed the stream to make it poll), replays what that stream sent since. This
store keeps the newest events in this process's memory: a client resumes on the replica
that holds its session, which is the one stateful sessions already need.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage

from ..errors import ConfigurationError

__all__ = ("MemoryEventStore", "Resumability")


@dataclass(frozen=True, kw_only=True, slots=True)
class Resumability:
    """How stateful sessions' SSE streams resume (SEP-1699).

    ``event_store`` keeps the events (default: a ``MemoryEventStore`` per app);
    ``retry_ms`` is the reconnection delay the priming event suggests; ``poll_after``
    closes a ``tools/call`` stream once the call has run that many seconds, so a client
    polls (reconnects with ``Last-Event-ID``) instead of holding a connection open.
    Only clients of protocol 2025-11-25 or later get priming events and closed streams.
    """

    event_store: EventStore | None = None
    retry_ms: int | None = 1000
    poll_after: float | None = None

    def __post_init__(self) -> None:
        if self.retry_ms is not None and self.retry_ms < 0:
            raise ConfigurationError("retry_ms must be zero or more milliseconds")
        if self.poll_after is not None and not self.poll_after >= 0:
            raise ConfigurationError("poll_after must be zero or more seconds")


class MemoryEventStore(EventStore):
    """The newest ``max_events`` SSE events of this process, for ``Last-Event-ID`` replays.

    Event ids are unguessable (a random prefix per store, then a counter), so one client
    cannot ask for another's stream by guessing; replay also needs the session the SDK
    checked before it asks the store. The oldest events are dropped past the bound, so a
    client that reconnects too late gets nothing replayed.
    """

    def __init__(self, max_events: int = 10_000) -> None:
        """Keep at most ``max_events`` events (at least 1)."""
        if max_events < 1:
            raise ConfigurationError("max_events must be at least 1")
        self.max_events = max_events
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count(1)
        self._events: OrderedDict[str, tuple[str, JSONRPCMessage | None]] = OrderedDict()

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep one event of ``stream_id`` (None: the stream's priming event); its new id."""
        event_id = f"{self._prefix}-{next(self._counter)}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the events of ``last_event_id``'s stream that came after it; its stream id."""
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        after = False
        for event_id, (stream, message) in list(self._events.items()):
            if event_id == last_event_id:
                after = True
                continue
            if after and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id

    @property
    def size(self) -> int:
        """How many events are kept (not ``__len__``: the SDK tests a store's truth)."""
        return len(self._events)
