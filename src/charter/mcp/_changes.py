"""``notifications/tools/list_changed`` for charter's own MCP clients.

When the registry's tools change while serving (the gateway follows an upstream's list),
each handshake-era session that has listed tools is told so once per burst of changes, and
so is each 2026-07-28 ``subscriptions/listen`` stream that asked for it (``_listen``). A
session that listed tools with a bearer token is told only once that token has been checked
again (``_reauth``): a revoked caller's session is forgotten instead.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._safe_log import log_exception
from ..auth import Principal
from ..host import Host
from ._reauth import Caller, Standing, caller_of

__all__ = ("ToolListChanges",)

logger = logging.getLogger("charter.mcp")

_MOST_SESSIONS = 10_000
"""Sessions remembered at most (the oldest is forgotten first)."""


class ToolListChanges:
    """Remembers the sessions that listed tools and tells them when the tools change."""

    def __init__(self, host: Host, publish: Callable[[], Awaitable[None]] | None = None) -> None:
        """Remember sessions of ``host``'s callers; ``publish`` also announces each burst."""
        self.host = host
        self.publish = publish
        # By connection (its session id; None for stdio or in memory), the latest request's
        # session object and caller: the SDK makes one session object per request, and its
        # notifications without a related request travel on the connection's own channel. A
        # connection that cannot be reached any more is forgotten when a notification to it
        # fails, and one whose credential was revoked when it is checked.
        self._sessions: dict[str | None, tuple[ServerSession, Caller]] = {}
        self._pending = False
        self._tasks: set[asyncio.Task[None]] = set()

    def remember(
        self,
        ctx: ServerRequestContext[Any, Any],
        connection: str | None,
        principal: Principal | None,
    ) -> None:
        """Note the connection and caller of a ``tools/list`` request (handshake-era only)."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._sessions.pop(connection, None)
            self._sessions[connection] = (ctx.session, caller_of(ctx, principal))
            while len(self._sessions) > _MOST_SESSIONS:
                del self._sessions[next(iter(self._sessions))]

    def listener(self) -> Callable[[], None]:
        """A registry listener that holds this object weakly (servers come and go)."""
        ref = weakref.ref(self)

        def changed() -> None:
            changes = ref()
            if changes is not None:
                changes.changed()

        return changed

    def changed(self) -> None:
        """The tools changed: notify every remembered session, soon and once."""
        if self._pending or (not self._sessions and self.publish is None):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # registered outside the event loop: nobody is connected
            return
        self._pending = True
        task = loop.create_task(self._notify())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self) -> None:
        await asyncio.sleep(0)  # one refresh changes several tools: one notification
        self._pending = False
        if self.publish is not None:
            try:
                await self.publish()
            except Exception as exc:  # a bus of the application's: the sessions still hear
                log_exception(logger, "the tool list change could not be published", exc=exc)
        for connection, remembered in list(self._sessions.items()):
            session, caller = remembered
            standing = await caller.standing(self.host)
            if standing is Standing.REVOKED:
                if self._sessions.get(connection) is remembered:  # not listed again meanwhile
                    del self._sessions[connection]
                continue
            if standing is Standing.UNCHECKED:
                continue
            try:
                await session.send_tool_list_changed()
            except Exception:  # the connection is gone: forget it
                logger.debug("a session could not be told its tools changed", exc_info=True)
                self._sessions.pop(connection, None)
