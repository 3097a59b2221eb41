"""MCP over streamable HTTP: the SDK's session manager behind the SDK's bearer-token hooks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TypedDict

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext, RequireAuthMiddleware
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from typing_extensions import Unpack

from .. import __version__
from .._asgi import DEFAULT_ALLOWED_HOSTS, HostCheck, default_origins
from ..auth import Principal
from ..errors import ConfigurationError
from ..host import Host
from ._auth import HostBearerBackend, HostTokenVerifier, RefuseBadCredentials
from ._events import MemoryEventStore, Resumability, SessionEventStore
from ._gate import Admission, Body
from ._interact import ConnectionState
from ._quiet import QuietRequests
from ._render import Presenter
from ._sessions import SessionLimiter, SessionLimits
from ._stored_events import SqlEventStore, StreamEventStorage
from .server import create_server

__all__ = ("DEFAULT_ALLOWED_HOSTS", "StreamableHTTPApp", "create_asgi_app", "streamable_http_app")


class StreamableHTTPApp:
    """An ASGI app serving MCP streamable HTTP for one host, and the lifespan it needs.

    Serve ``app`` (or this object: it is the same ASGI callable) at ``/mcp`` and enter
    ``run()`` for the life of the application: it runs the SDK's
    ``StreamableHTTPSessionManager`` (and the second one, in JSON mode, that answers quiet
    2026-07-28 requests: ``charter.mcp._quiet``), which can run only once; build a new one
    to serve again.
    """

    def __init__(
        self,
        *,
        server: Server[ConnectionState],
        session_manager: StreamableHTTPSessionManager,
        app: ASGIApp,
        limiter: SessionLimiter | None = None,
        quiet_manager: StreamableHTTPSessionManager | None = None,
    ) -> None:
        """Wrap a prepared ASGI app; build one with ``streamable_http_app``."""
        self.server = server
        self.session_manager = session_manager
        self._quiet_manager = quiet_manager
        self._app = app
        self._limiter = limiter

    @property
    def app(self) -> ASGIApp:
        """The ASGI endpoint (DNS-rebinding checks, bearer authentication, MCP)."""
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI request."""
        await self._app(scope, receive, send)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session managers; enter this once, for as long as the app serves."""
        try:
            async with AsyncExitStack() as managers:
                await managers.enter_async_context(self.session_manager.run())
                if self._quiet_manager is not None:
                    await managers.enter_async_context(self._quiet_manager.run())
                yield
        finally:
            # The sessions are over: their events will never be replayed.
            store = self.session_manager.event_store
            if isinstance(store, SqlEventStore):
                store.close()

    def open_sessions(self, principal: Principal | None) -> int:
        """How many sessions ``principal`` (None: anonymous callers) holds now.

        Counted by the per-principal cap; 0 when there is none (stateless, or
        ``SessionLimits(per_principal=None)``).
        """
        if self._limiter is None:
            return 0
        return self._limiter.open_sessions(None if principal is None else principal.key)


class _StreamableHTTPOptions(TypedDict, total=False):
    """The keyword arguments of ``streamable_http_app``, which ``create_asgi_app`` passes on."""

    stateless: bool
    allowed_hosts: Sequence[str] | None
    allowed_origins: Sequence[str] | None
    json_response: bool
    quiet_json: bool
    require_auth: bool | None
    resource_metadata_url: str | None
    name: str
    version: str
    presenters: Mapping[str, Presenter] | None
    request_state_keys: Sequence[bytes | str] | None
    session_limits: SessionLimits | None
    resumability: Resumability | bool
    max_body_bytes: int | None


def streamable_http_app(
    host: Host,
    *,
    stateless: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    json_response: bool = False,
    quiet_json: bool = True,
    require_auth: bool | None = None,
    resource_metadata_url: str | None = None,
    name: str = "charter",
    version: str = __version__,
    presenters: Mapping[str, Presenter] | None = None,
    request_state_keys: Sequence[bytes | str] | None = None,
    session_limits: SessionLimits | None = None,
    resumability: Resumability | bool = True,
    max_body_bytes: int | None = None,
) -> StreamableHTTPApp:
    """Serve ``host``'s tools over MCP streamable HTTP.

    Args:
        host: the host whose pipeline runs every call.
        stateless: no ``Mcp-Session-Id``: each request stands alone, so any replica can
            take any request (server-to-client requests then need 2026-07-28 clients).
        allowed_hosts: ``Host`` header values to accept (``name:*`` allows any port);
            DNS-rebinding protection stays on. Default: ``DEFAULT_ALLOWED_HOSTS``.
        allowed_origins: ``Origin`` values to accept; default: ``http://`` and
            ``https://`` forms of the allowed hosts.
        json_response: answer with JSON bodies instead of SSE streams.
        quiet_json: answer a 2026-07-28 request that asks for no progress and no log
            messages with one JSON body, in the request's own task, instead of through
            the SDK's streaming machinery (``charter.mcp._quiet``); a client that leaves
            still cancels the call. False: the SDK's streaming mode for every request,
            with its keep-alive pings for calls silent past 15 seconds.
        require_auth: answer requests without a valid bearer token with 401. Default:
            when the host has an authenticator. False lets callers who send no
            credentials reach public tools as anonymous, while tokens still authenticate
            and refused ones are still 401.
        resource_metadata_url: the RFC 9728 protected-resource metadata URL to name in
            the ``WWW-Authenticate`` challenge (you serve the document).
        name: the server name announced to clients.
        version: the server version announced to clients.
        presenters: per-tool renderers of output as MCP content (see ``create_server``).
        request_state_keys: shared secrets for sealed ``requestState`` (see
            ``create_server``); give every replica the same keys.
        session_limits: how many sessions one principal and the whole server may hold,
            and how long an idle one lives (stateful mode only). Default:
            ``SessionLimits()``.
        resumability: how stateful sessions' SSE streams resume after a reconnect with
            ``Last-Event-ID`` (``Resumability``); True: the defaults (events kept in
            the host's ``SqlStore``, else in memory), False: not at all. Stateless mode
            has no streams to resume.
        max_body_bytes: the largest request body (default ``host.limits.max_bytes``, 1
            MiB); a larger one is refused with 413 (``charter._asgi``).

    Raises:
        ConfigurationError: ``require_auth=True`` on a host without an authenticator.
        ValueError: ``max_body_bytes`` is not positive.
    """
    limits = session_limits if session_limits is not None else SessionLimits()
    resume = (
        None
        if stateless or resumability is False
        else Resumability()
        if resumability is True
        else resumability
    )
    server = create_server(
        host,
        name=name,
        version=version,
        presenters=presenters,
        request_state_keys=request_state_keys,
        sse_poll_after=resume.poll_after if resume is not None else None,
    )
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(DEFAULT_ALLOWED_HOSTS)
    origins = list(allowed_origins) if allowed_origins is not None else default_origins(hosts)
    manager = _SessionManager(
        app=server,
        json_response=json_response,
        stateless=stateless,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        ),
        session_idle_timeout=limits.idle_timeout,
        max_sessions=limits.max_sessions,
        event_store=_event_store(resume, host),
        retry_interval=None if resume is None else resume.retry_ms,
    )
    answers: ASGIApp = StreamableHTTPASGIApp(manager)
    quiet: StreamableHTTPSessionManager | None = None
    if quiet_json and not json_response:
        # Only 2026-07-28 requests reach it, and those have no session to keep.
        quiet = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            security_settings=manager.security_settings,
        )
        answers = QuietRequests(answers, StreamableHTTPASGIApp(quiet))
    limit = max_body_bytes if max_body_bytes is not None else host.limits.max_bytes
    # Innermost: the body is read only once the caller is known (as on REST).
    app: ASGIApp = Body(answers, max_bytes=limit, limits=host.limits)
    limiter: SessionLimiter | None = None
    if not stateless and limits.per_principal is not None:
        # Inside the bearer middleware below, so it sees who each request is from.
        app = limiter = SessionLimiter(
            app,
            per_principal=limits.per_principal,
            idle_timeout=limits.idle_timeout,
        )
    if host.authenticator is not None:
        metadata = AnyHttpUrl(resource_metadata_url) if resource_metadata_url else None
        if require_auth is None or require_auth:
            app = RequireAuthMiddleware(app, [], metadata)
        else:
            app = RefuseBadCredentials(app, RequireAuthMiddleware(app, [], metadata))
        app = AuthContextMiddleware(app)
        app = AuthenticationMiddleware(app, backend=HostBearerBackend(HostTokenVerifier(host)))
    elif require_auth:
        raise ConfigurationError(
            "require_auth=True needs a host with an authenticator (Host(authenticator=...))"
        )
    app = Admission(app, max_bytes=limit)
    return StreamableHTTPApp(
        server=server, session_manager=manager, app=app, limiter=limiter, quiet_manager=quiet
    )


def _event_store(resume: Resumability | None, host: Host) -> EventStore | None:
    # ``is None``, not ``or``: a store may define ``__len__`` (the SDK then sees an empty
    # one as no store at all, so charter's do not).
    if resume is None:
        return None
    if resume.event_store is not None:
        return resume.event_store
    if isinstance(host.store, StreamEventStorage):
        return SqlEventStore(host.store)
    return MemoryEventStore()


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, giving each session its own view of the event store.

    The SDK hands every session's transport the one store it was given; a
    ``SessionEventStore`` is bound here to the new session's id, so one session's
    ``Last-Event-ID`` never replays another's events (stream ids, JSON-RPC request ids,
    repeat across sessions). The SDK has no public hook for this: this overrides where
    it builds a session's transport (tests/mcp/test_mcp_resumable.py checks it holds).
    """

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        store = self.event_store
        if transport is not None and isinstance(store, SessionEventStore):
            session_id = transport.mcp_session_id
            assert session_id is not None
            transport._event_store = store.for_session(session_id)
        return transport


def create_asgi_app(
    host: Host, *, path: str = "/mcp", **options: Unpack[_StreamableHTTPOptions]
) -> Starlette:
    """A standalone Starlette app serving MCP at ``path``, with its lifespan wired.

    The arguments are those of ``streamable_http_app``; ``path`` is where MCP answers.
    Every request first passes the checks REST makes too (``charter._asgi``): its
    ``Host`` header must be one of ``allowed_hosts``, a present ``Origin`` one of
    ``allowed_origins``, and its body at most ``max_body_bytes`` (default
    ``host.limits.max_bytes``, 1 MiB), else 421, 403 or 413.
    The lifespan opens the host's store if it was handed over unopened, and closes it at
    shutdown (``Host.running``), then runs the session manager.
    """
    options["max_body_bytes"] = options.get("max_body_bytes") or None  # 0: the host's limit
    mcp_app = streamable_http_app(host, **options)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with host.running(), mcp_app.run():
            yield

    allowed_hosts = options.get("allowed_hosts")
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(DEFAULT_ALLOWED_HOSTS)
    allowed_origins = options.get("allowed_origins")
    origins = list(allowed_origins) if allowed_origins is not None else default_origins(hosts)
    return Starlette(
        routes=[Route(path, endpoint=mcp_app, methods=["GET", "POST", "DELETE"])],
        # The Host and Origin checks every charter HTTP app makes (charter._asgi), answered
        # as problems, before routing.
        middleware=[Middleware(HostCheck, allowed_hosts=hosts, allowed_origins=origins)],
        lifespan=lifespan,
    )
