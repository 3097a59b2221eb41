"""How many MCP sessions one principal may hold: the cap, and closing the oldest past it.

The SDK's ``StreamableHTTPSessionManager`` caps sessions for the whole server
(``max_sessions``) and reaps idle ones (``session_idle_timeout``), but it knows nothing of
who opened a session beyond the credential check, and it has no public hook for "a session
ended" nor a public way to end one. So one key could open every session the server allows,
and every other caller, approvers included, got ``503 Too many open sessions``.

charter therefore keeps a small table of its own, built only from what crosses HTTP: a
session exists once a response carries its ``Mcp-Session-Id``; it ends on a ``DELETE``, on
a ``404`` for its id, or once it has had no request in flight for the idle timeout (the
rule the SDK applies with the same timeout). Past a principal's cap, its oldest session is
ended the way a client ends one: a ``DELETE`` with that session's credentials, sent
straight to the SDK's app.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field

import anyio
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._mcp_config import SessionLimits
from ._auth import principal_from_scope

__all__ = ("VERSION_HEADER", "Owner", "SessionLimiter", "SessionLimits", "sessionless")

logger = logging.getLogger("charter.mcp")

Owner = str | None
"""Who holds a session: the principal's ``key``, (home tenant, subject), or None for
anonymous callers (one owner)."""

_SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
_HANDSHAKE_VERSIONS = frozenset(v.encode("latin-1") for v in HANDSHAKE_PROTOCOL_VERSIONS)
_CLOSING_HEADERS = frozenset({b"host", b"origin"})
"""The opening request's headers a closing ``DELETE`` repeats (the SDK's DNS-rebinding check)."""
_CLOSING_SCOPE_KEYS = (
    "type",
    "asgi",
    "http_version",
    "scheme",
    "server",
    "client",
    "root_path",
    "path",
    "raw_path",
    "user",
    "auth",
)


Binding = AuthorizationContext | None
"""Whose credential a session is bound to, as the SDK compares it (its
``authorization_context``): None for a session opened without one."""


@dataclass(slots=True)
class _Session:
    owner: Owner
    binding: Binding
    """The credential the SDK bound it to: only a request with the same one reaches it."""
    closing_scope: Scope
    """Enough of one of its requests to send the ``DELETE`` that ends it."""
    in_flight: int = 0


@dataclass(slots=True)
class _Table:
    sessions: dict[str, _Session] = field(default_factory=dict)
    by_owner: dict[Owner, OrderedDict[str, None]] = field(default_factory=dict)
    """Each owner's sessions, oldest first."""
    idle: OrderedDict[str, float] = field(default_factory=OrderedDict)
    """Sessions with no request in flight and when they expire, soonest first (the
    timeout is one constant, so insertion order is deadline order)."""


def sessionless(version: bytes) -> bool:
    """Whether the SDK serves a request of this ``MCP-Protocol-Version`` without a session.

    Its own routing rule: any value but a handshake era's goes to its 2026-07-28 entry.
    """
    return version not in _HANDSHAKE_VERSIONS


class SessionLimiter:
    """ASGI middleware in front of the SDK's session manager: a session cap per principal.

    It sits behind the bearer-token middleware, so ``scope["user"]`` names the caller. A
    request of a sessionless protocol era (an ``MCP-Protocol-Version`` other than the
    handshake era's, which the SDK routes by the same header) passes straight through:
    it neither opens a session nor ends one, whatever ``Mcp-Session-Id`` it names.
    """

    def __init__(self, app: ASGIApp, *, per_principal: int, idle_timeout: float | None) -> None:
        """Cap each principal at ``per_principal`` sessions of ``app`` (the SDK's ASGI app)."""
        self.app = app
        self.per_principal = per_principal
        self.idle_timeout = idle_timeout
        self._table = _Table()

    def open_sessions(self, owner: Owner) -> int:
        """How many sessions ``owner`` holds, as far as this limiter knows (changes nothing)."""
        now = time.monotonic()
        idle = self._table.idle
        owned = list(self._table.by_owner.get(owner, ()))
        return sum(1 for session_id in owned if idle.get(session_id, math.inf) > now)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        named: str | None = None
        version: bytes | None = None
        for key, value in scope["headers"]:
            if key == _SESSION_HEADER and named is None:
                named = value.decode("latin-1")
            elif key == VERSION_HEADER and version is None:
                version = value
        if version is not None and sessionless(version):
            # A request of a sessionless era (2026-07-28): the SDK routes it by this
            # header, as here, and it neither opens nor uses a session.
            await self.app(scope, receive, send)
            return
        self._expire()
        principal = principal_from_scope(scope)
        owner = None if principal is None else principal.key
        watched = _Watched(self, scope, send, named, owner, _binding(scope))
        try:
            await self.app(scope, receive, watched)
        finally:
            if watched.held is not None:
                self._release(watched.held)
        await self._enforce(watched.owner)

    # -- the table ------------------------------------------------------------------------

    def _observe(
        self, session_id: str, owner: Owner, binding: Binding, scope: Scope, status: int
    ) -> str | None:
        """Record what an answer says of a session; the id when the request now holds it."""
        table = self._table
        session = table.sessions.get(session_id)
        if session is not None and session.binding != binding:
            # The SDK answers another credential 404 (even the same principal's other API
            # key: it binds a session to the key); the session lives on.
            return None
        ended = status == 404 or (scope["method"] == "DELETE" and status < 300)
        if ended:
            self._forget(session_id)
            return None
        if status >= 400 or scope["method"] == "DELETE":
            return None
        if session is None:
            # A new session, or a live one this table had given up on (its idle deadline
            # passed here a moment before the SDK saw the next request): either way, the
            # owner's newest.
            session = _Session(
                owner=owner, binding=binding, closing_scope=_closing_scope(scope, session_id)
            )
            table.sessions[session_id] = session
            table.by_owner.setdefault(owner, OrderedDict())[session_id] = None
        session.in_flight += 1
        table.idle.pop(session_id, None)
        return session_id

    def _release(self, session_id: str) -> None:
        """A request that held ``session_id`` is over; start its idle clock if it was the last."""
        session = self._table.sessions.get(session_id)
        if session is None:
            return
        session.in_flight -= 1
        if session.in_flight == 0 and self.idle_timeout is not None:
            self._table.idle[session_id] = time.monotonic() + self.idle_timeout

    def _forget(self, session_id: str) -> _Session | None:
        table = self._table
        session = table.sessions.pop(session_id, None)
        table.idle.pop(session_id, None)
        if session is not None:
            owned = table.by_owner.get(session.owner)
            if owned is not None:
                owned.pop(session_id, None)
                if not owned:
                    del table.by_owner[session.owner]
        return session

    def _expire(self) -> None:
        """Forget sessions the SDK has closed for idleness (same timeout, same rule)."""
        idle = self._table.idle
        now = time.monotonic()
        while idle:
            session_id, deadline = next(iter(idle.items()))
            if deadline > now:
                return
            self._forget(session_id)

    # -- closing --------------------------------------------------------------------------

    async def _enforce(self, owner: Owner) -> None:
        """Close ``owner``'s oldest sessions while it holds more than its cap."""
        owned = self._table.by_owner.get(owner)
        while owned is not None and len(owned) > self.per_principal:
            oldest = next(iter(owned))
            session = self._forget(oldest)
            assert session is not None
            logger.info(
                "closing MCP session %s: its principal holds more than %d sessions",
                oldest[:16],
                self.per_principal,
            )
            await self._close(session.closing_scope)
            owned = self._table.by_owner.get(owner)

    async def _close(self, scope: Scope) -> None:
        """End a session through the SDK's own ``DELETE``, as its client would."""
        status: list[int] = []
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        # Shielded: a client that hangs up must not leave its oldest session half closed.
        with anyio.CancelScope(shield=True):
            await self.app(dict(scope), receive, send)
        if status != [200]:
            # Already gone (404) is fine; anything else leaves it to the idle timeout.
            logger.debug("closing an MCP session answered %s", status)


def _binding(scope: Scope) -> Binding:
    """The credential the SDK binds a session to, read from ``scope`` as the SDK reads it."""
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None


def _closing_scope(scope: Scope, session_id: str) -> Scope:
    closing = {key: scope[key] for key in _CLOSING_SCOPE_KEYS if key in scope}
    headers = [(n, v) for n, v in scope["headers"] if n in _CLOSING_HEADERS]
    headers.append((_SESSION_HEADER, session_id.encode("latin-1")))
    return {**closing, "method": "DELETE", "query_string": b"", "headers": headers}


class _Watched:
    """One request's ``send`` through the limiter: it notes the session its answer names.

    A plain method handing on the server's own ``send(message)``, not a closure: no frame
    of ours per message, and no closure cells in the garbage cycle the SDK's cancelled
    disconnect read leaves behind (``charter.http._body_deadline._TimedRequest``).
    """

    __slots__ = ("_binding", "_limiter", "_named", "_scope", "_send", "held", "owner")

    def __init__(
        self,
        limiter: SessionLimiter,
        scope: Scope,
        send: Send,
        named: str | None,
        owner: Owner,
        binding: Binding,
    ) -> None:
        self._limiter = limiter
        self._binding = binding
        self._scope: Scope | None = scope
        self._send = send
        self._named = named
        self.owner = owner
        self.held: str | None = None
        """The session this request holds (counted in flight) once its answer started."""

    def __call__(self, message: Message) -> Awaitable[None]:
        scope = self._scope
        if scope is not None and message["type"] == "http.response.start":
            self._scope = None  # an answer starts once; the scope need not live on with us
            session_id = self._named or _header(message.get("headers", ()), _SESSION_HEADER)
            if session_id is not None:
                self.held = self._limiter._observe(
                    session_id, self.owner, self._binding, scope, message["status"]
                )
        return self._send(message)


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None
