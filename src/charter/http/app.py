"""``create_app``: charter's HTTP transport as a Starlette app (REST, console and MCP)."""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charter._asgi import DEFAULT_ALLOWED_HOSTS, BodyLimit, HostCheck, default_origins
from charter._mcp_config import SessionLimits, check_request_state_keys, check_reserved_names
from charter._safe_log import log_exception
from charter._wording import new_error_id
from charter.errors import DEFAULT_NEXT_STEPS, ErrorCode
from charter.host import Host

from ._authentication import authentication
from ._body_deadline import BodyDeadline
from ._openapi import OpenAPIDocument
from ._payloads import ProblemBody
from ._problem import http_problem, problem_response
from ._request import CONTROL_HEADERS
from ._routes_approvals import ApprovalRoutes
from ._routes_content import ContentRoutes
from ._routes_ops import OpsRoutes
from ._routes_tools import CallEndpoint, ToolRoutes

if TYPE_CHECKING:
    from charter.gateway import Gateway

__all__ = ("DEFAULT_BODY_TIMEOUT", "McpMount", "create_app")

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request's body may take to arrive after its head (``create_app(body_timeout=)``)."""

logger = logging.getLogger("charter.http")

_Endpoint = Callable[[Request], Awaitable[Response]]

CONSOLE_DIRECTORY = Path(__file__).resolve().parent.parent / "console"

_CONSOLE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


class McpMount(Protocol):
    """Protocol: what ``charter.mcp.streamable_http_app`` returns (issue 5).

    ``app`` is the ASGI app served at ``/mcp`` (an object, not a function: Starlette
    treats a plain function as a request handler); ``run()`` is the async context
    manager that keeps its session manager running for the app's lifetime.
    """

    @property
    def app(self) -> ASGIApp:
        """The streamable HTTP endpoint."""
        ...

    def run(self) -> AbstractAsyncContextManager[object]:
        """Run the session manager; entered in the app's lifespan."""
        ...


def create_app(
    host: Host,
    *,
    mcp: bool = True,
    console: bool = True,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int | None = None,
    mcp_stateless: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
    mcp_session_limits: SessionLimits | None = None,
    mcp_request_state_keys: Sequence[bytes | str] | None = None,
    mcp_quiet_json: bool = True,
    gateway: Gateway | None = None,
) -> Starlette:
    """Build the HTTP app for a host: ``/v1`` REST, ``/console``, and MCP at ``/mcp``.

    The app maps requests onto ``host`` and renders its outcomes; every decision (auth
    modes, scopes, tenancy, validation, the ledger) is the host's.

    Args:
        host: the host whose tools are served.
        mcp: mount MCP streamable HTTP at ``/mcp`` when ``charter.mcp`` is installed.
        console: serve the approvals console at ``/console``.
        cors_origins: origins allowed to call the API from a browser; none by default.
        max_body_bytes: largest request body, REST and MCP; defaults to
            ``host.limits.max_bytes``. Larger bodies are refused with 413 before they are
            read in full.
        mcp_stateless: run MCP without sessions (for several replicas on one store).
        allowed_hosts: ``Host`` headers the app answers (REST, console and MCP; DNS-
            rebinding protection); ``name:*`` allows any port. Default: loopback only
            (``DEFAULT_ALLOWED_HOSTS``); other hosts get 421.
        allowed_origins: ``Origin`` headers the app answers (REST, console and MCP; a
            request without one passes); ``scheme://name:*`` allows any port. Default:
            the ``http://`` and ``https://`` forms of the allowed hosts, so the console's
            own page is accepted. ``cors_origins`` are accepted too. Others get 403: a
            page on another site cannot have its visitors' browsers call the app.
        body_timeout: seconds a request's body may take to arrive after its head; later
            it is answered 408 and the connection closed. None: wait as long as the
            client keeps the connection open.
        mcp_session_limits: MCP sessions per principal and in all, and their idle
            timeout (``charter.mcp.SessionLimits``; default: its defaults).
        mcp_request_state_keys: secrets that seal MCP ``requestState`` (see
            ``charter.mcp.create_server``); give every replica the same ones.
        mcp_quiet_json: answer a 2026-07-28 request that asks for no progress and no log
            messages with one JSON body (``charter.mcp.streamable_http_app``'s
            ``quiet_json``); False sends every request through the SDK's streaming mode.
        gateway: the running ``charter.gateway.Gateway`` whose tools the host serves:
            ``/readyz`` needs its upstreams connected, ``/v1/upstreams`` shows them.

    Returns:
        A Starlette app; serve it with uvicorn. Its lifespan opens the host's store if it
        was handed over unopened, and closes it at shutdown (``Host.running``).

    Raises:
        ValueError: ``max_body_bytes`` or ``body_timeout`` is not positive.
    """
    if body_timeout is not None and not (math.isfinite(body_timeout) and body_timeout > 0):
        raise ValueError("body_timeout must be a positive, finite number of seconds or None")
    limit = max_body_bytes if max_body_bytes is not None else host.limits.max_bytes
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(DEFAULT_ALLOWED_HOSTS)
    origins = list(allowed_origins) if allowed_origins is not None else default_origins(hosts)
    # An origin a browser may call the API from (CORS) may send the request it prepared.
    origins += [origin for origin in cors_origins if origin not in origins]
    openapi = OpenAPIDocument()
    tools = ToolRoutes(host)
    content = ContentRoutes(host)
    approvals = ApprovalRoutes(host)
    ops = OpsRoutes(host, openapi, gateway)
    # Every /v1 route knows its caller before it runs (one
    # authentication middleware); a POST route reads its body only after that.
    signed = [authentication(host)]
    with_body = [*signed, Middleware(BodyLimit, max_bytes=limit)]

    def get(path: str, endpoint: _Endpoint) -> BaseRoute:
        return _Route(path, endpoint, methods=["GET"], middleware=signed)

    def post(path: str, endpoint: _Endpoint, *, body: bool) -> BaseRoute:
        """``body``: the route reads one (bounded, once the caller is known)."""
        return _Route(path, endpoint, methods=["POST"], middleware=with_body if body else signed)

    routes: list[BaseRoute] = [
        # Calls first: most of a server's REST traffic is matched by the first route tried.
        # No other route matches a path ending in ':call' (``_Route``), so the order
        # changes no answer.
        # An ASGI app that authenticates and bounds the body itself (``CallEndpoint``).
        _CallRoute("/v1/tools/{name}:call", CallEndpoint(tools, max_bytes=limit), methods=["POST"]),
        get("/v1/tools", tools.list_tools),
        get("/v1/tools/{name}", tools.get_tool),
        get("/v1/resources", content.list_resources),
        # A plain Route: a resource URI holds ':' (trip://T-1), percent-encoded or not.
        Route(
            "/v1/resources/{uri:path}", content.read_resource, methods=["GET"], middleware=signed
        ),
        get("/v1/prompts", content.list_prompts),
        post("/v1/prompts/{name}:get", content.get_prompt, body=True),
        get("/v1/actions/{request_id}", ops.action_status),
        get("/v1/approvals", approvals.list_approvals),
        get("/v1/approvals/{approval_id}", approvals.get_approval),
        post("/v1/approvals/{approval_id}:grant", approvals.grant, body=True),
        post("/v1/approvals/{approval_id}:deny", approvals.deny, body=True),
        get("/v1/audit", ops.audit),
        get("/v1/limits", ops.limits),
        get("/v1/effects", ops.effects),
        post("/v1/effects/{key}:retry", ops.retry_effect, body=False),
        post("/v1/effects/{key}:discard", ops.discard_effect, body=False),
        # A plain Route, after the actions: a GET reads the key it names, even one ending
        # in ':retry', while another method on such a path is the action's 405 (Allow: POST).
        Route("/v1/effects/{key}", ops.get_effect, methods=["GET"], middleware=signed),
        get("/v1/whoami", ops.whoami),
        get("/v1/upstreams", ops.upstreams),
        get("/v1/openapi.json", ops.openapi_json),
        _Route("/healthz", ops.healthz, methods=["GET"]),
        _Route("/readyz", ops.readyz, methods=["GET"]),
    ]
    if console:
        routes.append(Route("/", _to_console, methods=["GET"], include_in_schema=False))
        routes.append(
            Mount(
                "/console",
                app=StaticFiles(directory=CONSOLE_DIRECTORY, html=True),
                middleware=[Middleware(_SecurityHeaders, headers=_CONSOLE_HEADERS)],
                name="console",
            )
        )
    mounted = (
        _LazyMcp(
            host,
            stateless=mcp_stateless,
            allowed_hosts=allowed_hosts,
            allowed_origins=origins,
            session_limits=mcp_session_limits,
            request_state_keys=mcp_request_state_keys,
            quiet_json=mcp_quiet_json,
            max_body_bytes=limit,
        )
        if mcp and find_spec("mcp") is not None
        else None
    )
    if mounted is not None:
        # A Route, not a Mount: MCP clients post to /mcp itself, and a Mount would answer
        # that with a redirect to /mcp/. First, so that an MCP request (most of the
        # traffic of an MCP server) is not matched against every REST route before it; no
        # other route's path is /mcp, so the order changes no answer.
        routes.insert(0, Route("/mcp", mounted, methods=["GET", "POST", "DELETE"], name="mcp"))
    # Outermost: the REST API's headers, then the Host check (DNS rebinding) and the
    # Origin check (cross-site requests) every route gets, REST, console and MCP alike.
    middleware: list[Middleware] = [
        Middleware(_SecurityHeaders, headers=_API_HEADERS, prefix=_API_PREFIX),
        Middleware(
            HostCheck,
            allowed_hosts=hosts,
            allowed_origins=origins,
            exempt=("/healthz", "/readyz"),
        ),
    ]
    if body_timeout is not None:
        middleware.append(Middleware(BodyDeadline, seconds=body_timeout))
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=[
                    "Authorization",
                    "X-API-Key",
                    "Content-Type",
                    *CONTROL_HEADERS.values(),
                ],
                expose_headers=[
                    "Location",
                    "Retry-After",
                    "Idempotent-Replayed",
                    "WWW-Authenticate",
                ],
                max_age=600,
            )
        )
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_exception, Exception: _server_error},
        lifespan=_lifespan(host, mounted),
    )


class _Route(Route):
    """A REST route whose path parameters never hold ``:``.

    ``:`` separates a resource from its custom method (``/v1/tools/{name}:call``,
    ``/v1/approvals/{id}:grant``), and no tool name or id contains it. A plain Starlette
    ``/v1/tools/{name}`` would also match ``/v1/tools/x:call``: a GET there would look the
    tool ``x:call`` up, and a PUT would be answered 405 with the GET route's ``Allow``
    (``GET, HEAD``) instead of the ``POST`` the path takes.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Match as ``Route`` does, but never with a ``:`` in a path parameter."""
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            params: dict[str, object] = child_scope.get("path_params", {})
            for value in params.values():  # a loop, not any(): no generator per request
                if isinstance(value, str) and ":" in value:
                    return Match.NONE, {}
        return match, child_scope


class _CallRoute(_Route):
    """The call route, ``/v1/tools/{name}:call``: a call's path is matched without the regex.

    A path of the form ``/v1/tools/<name>:call`` whose name holds no ``/`` or ``:`` is
    exactly what ``_Route`` would match, with the same path parameters; any other path,
    and any request under a ``root_path``, goes to ``_Route``'s own matching, so the
    answers are the same (405 included).
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Match a call's path directly; anything else as ``_Route`` does."""
        if scope["type"] == "http" and not scope.get("root_path"):
            path: str = scope["path"]
            if path.startswith(_CALL_PREFIX) and path.endswith(_CALL_SUFFIX):
                name = path[len(_CALL_PREFIX) : -len(_CALL_SUFFIX)]
                if name and "/" not in name and ":" not in name:
                    params = dict(scope.get("path_params", {}))
                    params["name"] = name
                    child = {"endpoint": self.endpoint, "path_params": params}
                    methods = self.methods
                    if methods and scope["method"] not in methods:
                        return Match.PARTIAL, child
                    return Match.FULL, child
        return super().matches(scope)


_CALL_PREFIX = "/v1/tools/"
_CALL_SUFFIX = ":call"


class _LazyMcp:
    """The ``/mcp`` endpoint, built from ``charter.mcp`` on its first request.

    Importing ``charter.mcp`` (the MCP SDK) and building its server costs about half a
    second of CPU, which a server that only ever answers REST (or starts, is probed and
    stops) never needs. The first request to ``/mcp`` builds the endpoint and starts its
    session manager in a task of the app's lifespan (``running``), where it runs until
    shutdown, as an endpoint built with the app would; later requests go straight to it.
    The http package is the composition root: the only transport that imports another,
    and lazily, so ``charter.http`` works without the ``mcp`` extra.
    """

    def __init__(
        self,
        host: Host,
        *,
        stateless: bool,
        allowed_hosts: Sequence[str] | None,
        allowed_origins: Sequence[str],
        session_limits: SessionLimits | None,
        request_state_keys: Sequence[bytes | str] | None,
        quiet_json: bool,
        max_body_bytes: int,
    ) -> None:
        # What building it would refuse, refused now: the app is not built otherwise.
        check_reserved_names(host.registry)
        check_request_state_keys(request_state_keys)
        self._host = host
        self._options: dict[str, object] = {
            "stateless": stateless,
            "allowed_hosts": list(allowed_hosts) if allowed_hosts is not None else None,
            "allowed_origins": list(allowed_origins),
            "session_limits": session_limits,
            "request_state_keys": request_state_keys,
            "quiet_json": quiet_json,
            "max_body_bytes": max_body_bytes,
        }
        self._mounted: McpMount | None = None
        self._tasks: TaskGroup | None = None
        self._building: anyio.Lock | None = None
        self._stopping: anyio.Event | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request, building the endpoint first if none has come before."""
        mounted = self._mounted or await self._start()
        await mounted.app(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep the endpoint's session manager running (once built) until the app stops."""
        async with anyio.create_task_group() as tasks:
            self._tasks, self._building, self._stopping = tasks, anyio.Lock(), anyio.Event()
            try:
                yield
            finally:
                self._stopping.set()
                self._tasks = None
        # A session manager runs once: another lifespan of the app builds a new endpoint.
        self._mounted = None

    async def _start(self) -> McpMount:
        if self._tasks is None or self._building is None:
            raise RuntimeError("/mcp is served only while the app's lifespan runs")
        async with self._building:
            if self._mounted is None:
                module = importlib.import_module("charter.mcp")
                factory: Callable[..., McpMount] = module.streamable_http_app
                mounted = factory(self._host, **self._options)
                await self._tasks.start(self._run, mounted)
                self._mounted = mounted
            return self._mounted

    async def _run(
        self, mounted: McpMount, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        assert self._stopping is not None
        stopping = self._stopping
        async with mounted.run():
            task_status.started()
            await stopping.wait()


def _lifespan(
    host: Host, mounted: _LazyMcp | None
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    # The host first: a store handed over unopened is opened before the first request
    # and closed after the last (`uvicorn module:app` has no other place to do it).
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(host.running())
            if mounted is not None:
                await stack.enter_async_context(mounted.running())
            yield

    return lifespan


async def _to_console(request: Request) -> Response:
    return RedirectResponse(f"{request.scope.get('root_path', '')}/console/", status_code=307)


_CONSOLE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", _CONSOLE_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
)
"""The console's page and files: same-origin scripts only, no framing, revalidated."""

_API_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
)
"""Every ``/v1`` answer: never stored, never sniffed. The key travels as ``X-API-Key``, not
``Authorization``, so RFC 9111's rule keeping shared caches from storing authorised answers
does not cover it, and an answer holds approvals' arguments, audit events and outcomes."""

_API_PREFIX = "/v1/"


class _SecurityHeaders:
    """Adds fixed headers to every answer (under ``prefix`` only, when one is given).

    Outermost for ``/v1``, so the authentication's 401, the Host and Origin checks'
    refusals and a routing 404 carry them too.
    """

    def __init__(
        self, app: ASGIApp, *, headers: Sequence[tuple[bytes, bytes]], prefix: str = ""
    ) -> None:
        self.app = app
        self.headers = list(headers)
        self.names = {name for name, _ in headers}
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _route_path(scope).startswith(self.prefix):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [h for h in message.get("headers", []) if h[0].lower() not in self.names]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _route_path(scope: Scope) -> str:
    """The request's path below the app's ``root_path`` (behind a proxy's prefix)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Routing errors (unknown path, wrong method) as problems too."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return http_problem(
            404,
            "Not found",
            f"No route {request.url.path[:200]!r}. See /v1/openapi.json for the API.",
            code=ErrorCode.NOT_FOUND,
            reason="route_not_found",
            next_steps=("Check the path and method against /v1/openapi.json.",),
        )
    return http_problem(
        exc.status_code,
        str(exc.detail),
        f"{request.method} is not supported here." if exc.status_code == 405 else str(exc.detail),
        headers=exc.headers,
    )


async def _server_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: logged under an error id, answered with only that id."""
    error_id = new_error_id()
    log_exception(logger, "unhandled error (error id %s)", error_id, exc=exc)
    return problem_response(
        ProblemBody(
            type=f"urn:charter:error:{ErrorCode.PROVIDER_ERROR.value}",
            title="Internal error",
            status=500,
            detail=f"The server failed. Report error id {error_id}.",
            code=ErrorCode.PROVIDER_ERROR.value,
            next_steps=list(DEFAULT_NEXT_STEPS[ErrorCode.PROVIDER_ERROR]),
            error_id=error_id,
        )
    )
