"""Resumable streams: the SSE events of stateful sessions, kept so a client can catch up.

The SDK's streamable HTTP transport gives each SSE event an id from an ``EventStore`` and,
when a client reconnects with ``Last-Event-ID`` (after a dropped connection, or after the
server closed the stream to make it poll), replays what that stream sent since.

The SDK hands one store to every session and names streams by JSON-RPC request id (or
``_GET_stream``), which two sessions share all the time: a store keyed by those alone
would replay one session's events into another's stream. charter's stores are
``SessionEventStore``s, bound to one session each (``for_session``): an event id resumes
only a stream of the session that asks.
"""

from __future__ import annotations

import itertools
import json
import secrets
from abc import abstractmethod
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter
from pydantic_core import PydanticSerializationError

from .._limits._values import replace_surrogates
from ..errors import ConfigurationError

__all__ = (
    "MemoryEventStore",
    "Resumability",
    "SessionEventStore",
    "event_message",
    "event_text",
)

_UNBOUND = ""
"""The session of events stored through the plain ``EventStore`` methods."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Resumability:
    """How stateful sessions' SSE streams resume (SEP-1699).

    ``event_store`` keeps the events (default: a ``SqlEventStore`` on the host's store
    when it is a ``SqlStore``, else a ``MemoryEventStore`` per app); ``retry_ms`` is the
    reconnection delay the priming event suggests; ``poll_after`` closes a ``tools/call``
    stream once the call has run that many seconds, so a client polls (reconnects with
    ``Last-Event-ID``) instead of holding a connection open. Only clients of protocol
    2025-11-25 or later get priming events and closed streams.
    """

    event_store: EventStore | None = None
    retry_ms: int | None = 1000
    poll_after: float | None = None

    def __post_init__(self) -> None:
        if self.retry_ms is not None and self.retry_ms < 0:
            raise ConfigurationError("retry_ms must be zero or more milliseconds")
        if self.poll_after is not None and not self.poll_after >= 0:
            raise ConfigurationError("poll_after must be zero or more seconds")


class SessionEventStore(EventStore):
    """An event store that keeps each session's streams apart.

    charter's HTTP app gives each session ``for_session(its id)``, so replay finds only
    that session's events. The plain ``EventStore`` methods (for use outside charter's
    app) keep everything in one unnamed session.
    """

    @abstractmethod
    async def store_session_event(
        self, session_id: str, stream_id: str, message: JSONRPCMessage | None
    ) -> str:
        """Keep one event of a session's stream (None: a priming event); its new id."""

    @abstractmethod
    async def replay_session_events_after(
        self, session_id: str, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the later events of ``last_event_id``'s stream, if it is ``session_id``'s.

        Returns the stream's id, or None when the event is unknown, dropped, or another
        session's (nothing is sent then).
        """

    def for_session(self, session_id: str) -> EventStore:
        """This store as one session's transport should see it."""
        return _BoundEvents(self, session_id)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep one event of ``stream_id`` (None: the stream's priming event); its new id."""
        return await self.store_session_event(_UNBOUND, stream_id, message)

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the events of ``last_event_id``'s stream that came after it; its stream id."""
        return await self.replay_session_events_after(_UNBOUND, last_event_id, send_callback)


class _BoundEvents(EventStore):
    """One session's view of a ``SessionEventStore``."""

    def __init__(self, store: SessionEventStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        return await self.store.store_session_event(self.session_id, stream_id, message)

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        return await self.store.replay_session_events_after(
            self.session_id, last_event_id, send_callback
        )


def event_text(message: JSONRPCMessage) -> str:
    """How a store keeps an event's message: its JSON, as the SDK would send it.

    Never raises: the SDK stores each outgoing message in its session's message router,
    and an exception there ends the router, so every later request of the session would
    go unanswered. A message with text UTF-8 cannot encode (an unpaired surrogate, which
    charter keeps out of what its handlers produce) is kept with U+FFFD in its place.
    """
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return replace_surrogates(json.dumps(data, ensure_ascii=False))


def event_message(text: str) -> JSONRPCMessage:
    """The message ``event_text`` kept, for a replay."""
    return jsonrpc_message_adapter.validate_json(text, by_name=False)


class MemoryEventStore(SessionEventStore):
    """The newest ``max_events`` SSE events of this process, for ``Last-Event-ID`` replays.

    Event ids are unguessable (a random prefix per store, then a counter), and replay
    needs the session the SDK checked before it asks the store. The oldest events are
    dropped past the bound, so a client that reconnects too late gets nothing replayed.

    Messages are kept as their JSON text (``event_text``), not as the SDK's models. A kept
    model is half a dozen objects the garbage collector tracks, and ten thousand of them
    made it go through the whole heap every few thousand requests; the collector stops
    tracking a tuple of strings, which is also a few hundred bytes, not a few kilobytes.
    """

    def __init__(self, max_events: int = 10_000) -> None:
        """Keep at most ``max_events`` events (at least 1)."""
        if max_events < 1:
            raise ConfigurationError("max_events must be at least 1")
        self.max_events = max_events
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count(1)
        self._events: OrderedDict[str, tuple[str, str, str | None]] = OrderedDict()

    async def store_session_event(
        self, session_id: str, stream_id: str, message: JSONRPCMessage | None
    ) -> str:
        """Keep one event of a session's stream (None: a priming event); its new id."""
        event_id = f"{self._prefix}-{next(self._counter)}"
        text = None if message is None else event_text(message)
        self._events[event_id] = (session_id, stream_id, text)
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_session_events_after(
        self, session_id: str, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the later events of ``last_event_id``'s stream, if it is ``session_id``'s."""
        found = self._events.get(last_event_id)
        if found is None or found[0] != session_id:
            return None
        stream = found[:2]
        after = False
        for event_id, (session, stream_id, text) in list(self._events.items()):
            if event_id == last_event_id:
                after = True
                continue
            if after and (session, stream_id) == stream and text is not None:
                await send_callback(EventMessage(event_message(text), event_id))
        return stream[1]

    @property
    def size(self) -> int:
        """How many events are kept (not ``__len__``: the SDK tests a store's truth)."""
        return len(self._events)
