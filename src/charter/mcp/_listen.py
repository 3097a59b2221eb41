"""``subscriptions/listen`` (2026-07-28): change events for new-protocol clients.

At 2026-07-28 there are no sessions to notify: a client opts in with a
``subscriptions/listen`` request whose response is the stream of events. The SDK's
``ListenHandler`` serves that stream from a ``SubscriptionBus``; charter publishes on it
what it tells handshake-era sessions: a resource changed (``host.content.updated``) and
the tool list changed (``charter.gateway``). Resource subscriptions are the host's
decision, as ``resources/subscribe`` is: a URI the caller may not read is refused, and a
change said to be one tenant's (``updated(uri, tenant_id=…)``) reaches only streams that
read that URI for that tenant. A stream opened with a bearer token hears of a change only
once that token has been checked again (``_reauth``): a revoked caller's stream ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_matches

from ..auth import Principal
from ..host import Host
from ._content import content_error
from ._reauth import Caller, Standing, caller_of

__all__ = ("Listening",)

Context = ServerRequestContext[Any, Any]

logger = logging.getLogger("charter.mcp")

_MOST_STREAMS = 1024
"""Listen streams open at once on one server (the SDK's ``ListenHandler`` default)."""
_MOST_STREAMS_PER_PRINCIPAL = 16
"""Listen streams one principal, (home tenant, subject), may hold open at once (anonymous
callers count as one): one key cannot take every stream the server allows."""
_MOST_WAITING = 1024
"""Events one stream holds while its caller's credential is checked (the SDK's own
per-stream backlog): past it, the stream ends, as the SDK ends a stream nobody reads."""


@dataclass(frozen=True, slots=True)
class _TenantsResourceUpdated(ResourceUpdated):
    """A resource changed, and whose tenant's it is (None: whoever reads the URI)."""

    tenant_id: str | None = None


@dataclass(frozen=True, slots=True)
class _ReaderView:
    """One stream's view of the bus: drops changes of another tenant's same-named resource."""

    bus: SubscriptionBus
    tenants: Mapping[str, str | None]
    """The tenant this stream reads each subscribed URI for."""

    async def publish(self, event: ServerEvent) -> None:
        await self.bus.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        def deliver(event: ServerEvent) -> None:
            if isinstance(event, _TenantsResourceUpdated) and event.tenant_id is not None:
                if self.tenants.get(event.uri, event.tenant_id) != event.tenant_id:
                    return
            listener(event)

        return self.bus.subscribe(deliver)


class _CheckedFeed:
    """One stream's view of the bus whose events wait until its caller is checked again.

    The SDK's ``ListenHandler`` hands the bus a synchronous listener, and checking a
    credential is not synchronous: so the events this stream asked for wait in its own
    queue, and a task takes them in order, checks the caller (``Caller.standing``) and
    passes on those it may still hear of. A revoked caller's stream ends (``end``, the
    handler's ``close``: the client sees a graceful end, and listening again takes a
    valid credential); while the credential cannot be checked, events are dropped.
    """

    def __init__(
        self,
        view: _ReaderView,
        *,
        host: Host,
        caller: Caller,
        wanted: types.SubscriptionFilter,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self.view = view
        self.host = host
        self.caller = caller
        self.wanted = wanted
        self.uris = frozenset(wanted.resource_subscriptions or ())
        self.tasks = tasks
        self.end: Callable[[], None] = lambda: None

    async def publish(self, event: ServerEvent) -> None:
        await self.view.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        send, receive = anyio.create_memory_object_stream[ServerEvent](_MOST_WAITING)

        def enqueue(event: ServerEvent) -> None:
            if not event_matches(self.wanted, self.uris, event):
                return  # never checks a caller for an event it would not hear of
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning("a listen stream's credential check fell behind; ending it")
                send.close()
                self.end()
            except anyio.ClosedResourceError:
                pass  # the stream is ending

        unsubscribe = self.view.subscribe(enqueue)
        task = asyncio.get_running_loop().create_task(self._forward(receive, listener))
        self.tasks.add(task)  # held until done, so it is not collected mid-way
        task.add_done_callback(self.tasks.discard)

        def stop() -> None:
            unsubscribe()
            send.close()

        return stop

    async def _forward(
        self,
        events: MemoryObjectReceiveStream[ServerEvent],
        listener: Callable[[ServerEvent], None],
    ) -> None:
        async with events:
            async for event in events:
                standing = await self.caller.standing(self.host)
                if standing is Standing.REVOKED:
                    self.end()
                    return
                if standing is Standing.VALID and self._readable(event):
                    listener(event)

    def _readable(self, event: ServerEvent) -> bool:
        """Whether the caller, as authenticated now, may still read what ``event`` is about."""
        if isinstance(event, ResourceUpdated):
            return self.host.content.check_read(event.uri, self.caller.principal) is None
        return True


class Listening:
    """One server's ``subscriptions/listen`` streams and what is published to them.

    The bus is this process's: with several replicas, a change announced on one reaches
    only the listen streams that replica serves.
    """

    def __init__(
        self,
        host: Host,
        *,
        principal_of: Callable[[Context], Principal | None],
        bus: SubscriptionBus | None = None,
    ) -> None:
        """Serve listen streams of ``host``'s changes; ``principal_of`` names the caller."""
        self.host = host
        self.principal_of = principal_of
        self.bus: SubscriptionBus = bus if bus is not None else InMemorySubscriptionBus()
        self._open: Counter[str | None] = Counter()
        self._checking: set[asyncio.Task[None]] = set()
        self.unwatch = host.content.watch(self.resource_updated)

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: check each resource asked for, then stream events."""
        principal = self.principal_of(ctx)
        tenants: dict[str, str | None] = {}
        for uri in params.notifications.resource_subscriptions or ():
            refusal = self.host.content.check_read(uri, principal)
            if refusal is not None:
                raise content_error(refusal, resource=True)
            tenants[uri] = self.host.content.reader_tenant(uri, principal)
        owner = principal.key if principal is not None else None
        if self._open.total() >= _MOST_STREAMS:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")
        if self._open[owner] >= _MOST_STREAMS_PER_PRINCIPAL:
            raise MCPError(
                types.INVALID_REQUEST,
                f"This caller already has {_MOST_STREAMS_PER_PRINCIPAL} listen streams open: "
                "end one (or listen for everything on one stream) first.",
            )
        # One handler per stream, over a view that knows this reader's tenants (and, for a
        # caller with a bearer token, checks it again before each event).
        view = _ReaderView(self.bus, tenants)
        caller = caller_of(ctx, principal)
        if caller.credentials is None:
            handler = ListenHandler(view)
        else:
            feed = _CheckedFeed(
                view,
                host=self.host,
                caller=caller,
                wanted=params.notifications,
                tasks=self._checking,
            )
            handler = ListenHandler(feed)
            feed.end = handler.close
        self._open[owner] += 1
        try:
            return await handler(ctx, params)
        finally:
            self._open[owner] -= 1
            if not self._open[owner]:
                del self._open[owner]

    async def resource_updated(self, uri: str, tenant_id: str | None = None) -> None:
        """Tell listen streams subscribed to ``uri`` (read for ``tenant_id``) that it changed."""
        await self.bus.publish(_TenantsResourceUpdated(uri=uri, tenant_id=tenant_id))

    async def tools_changed(self) -> None:
        """Tell listen streams that asked for it that the tool list changed."""
        await self.bus.publish(ToolsListChanged())
