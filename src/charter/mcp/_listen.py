"""``subscriptions/listen`` (2026-07-28): change events for new-protocol clients.

At 2026-07-28 there are no sessions to notify: a client opts in with a
``subscriptions/listen`` request whose response is the stream of events. The SDK's
``ListenHandler`` serves that stream from a ``SubscriptionBus``; charter publishes on it
what it tells handshake-era sessions: a resource changed (``host.content.updated``) and
the tool list changed (``charter.gateway``). Resource subscriptions are the host's
decision, as ``resources/subscribe`` is: a URI the caller may not read is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    SubscriptionBus,
    ToolsListChanged,
)

from ..auth import Principal
from ..host import Host
from ._content import content_error

__all__ = ("Listening",)

Context = ServerRequestContext[Any, Any]


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
        self._handler = ListenHandler(self.bus)
        self.unwatch = host.content.watch(self.resource_updated)

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: check each resource asked for, then stream events."""
        principal = self.principal_of(ctx)
        for uri in params.notifications.resource_subscriptions or ():
            refusal = self.host.content.check_read(uri, principal)
            if refusal is not None:
                raise content_error(refusal, resource=True)
        return await self._handler(ctx, params)

    async def resource_updated(self, uri: str) -> None:
        """Tell listen streams subscribed to ``uri`` that it changed."""
        await self.bus.publish(ResourceUpdated(uri=uri))

    async def tools_changed(self) -> None:
        """Tell listen streams that asked for it that the tool list changed."""
        await self.bus.publish(ToolsListChanged())
