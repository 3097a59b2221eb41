"""`charter serve`: REST, MCP and the console on one port, or MCP over stdio."""

from __future__ import annotations

import asyncio
import errno
import gc
import importlib
import os
import signal
import socket
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from charter._mcp_config import MIN_STATE_KEY_BYTES, SessionLimits
from charter.cli._common import (
    DEFAULT_DB_URL,
    EXIT_OK,
    EXIT_UNUSABLE_INPUT,
    DbOption,
    DebugOption,
    Unusable,
    console,
    display_url,
    error_console,
    unusable_input,
)
from charter.cli._serve_options import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_KEEP_ALIVE_TIMEOUT,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SESSIONS_PER_PRINCIPAL,
    BodyTimeoutOption,
    HeadTimeoutOption,
    KeepAliveTimeoutOption,
    LimitConcurrencyOption,
    MaxConnectionsOption,
    MaxHeaderBytesOption,
    McpIdleTimeoutOption,
    McpMaxSessionsOption,
    McpSessionsOption,
    RequestStateKeyOption,
    ServeLimits,
)

if TYPE_CHECKING:  # the host loads when the server starts, not for other commands
    import uvicorn

    from charter.auth import Principal
    from charter.cli._host import OpenedHost
    from charter.host import Host
    from charter.notify import Notifier

__all__ = ("base_url", "bind", "serve")

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_GRACEFUL_SHUTDOWN_SECONDS = 5
"""How long a stop waits for open requests and MCP streams before closing them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Http:
    """How to serve over HTTP, as the options say."""

    stateless: bool
    extra_hosts: list[str]
    extra_origins: list[str]
    limits: ServeLimits
    sessions_per_principal: int
    session_idle_timeout: float
    max_sessions: int
    request_state_keys: list[str]

    def session_limits(self) -> SessionLimits:
        """The MCP session limits (0 turns one off); unused without the ``mcp`` extra."""
        return SessionLimits(
            per_principal=self.sessions_per_principal or None,
            idle_timeout=self.session_idle_timeout or None,
            max_sessions=self.max_sessions or None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Notifying:
    """Where approval events go, as ``--notify`` and ``--public-url`` say."""

    notifiers: list[Notifier]
    console_url: str | None

    async def open(
        self, target: str | None, upstreams: str | None, db: str | None, stack: AsyncExitStack
    ) -> OpenedHost:
        """``open_served`` with these notifiers and console URL."""
        from charter.cli._host import open_served

        return await open_served(
            target, upstreams, db, stack, notifiers=self.notifiers, console_url=self.console_url
        )


def _checked_public_url(url: str | None) -> str | None:
    """``--public-url`` if it is an absolute http(s) URL.

    Raises:
        Unusable: it is not.
    """
    if url is None:
        return None
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or past 65535
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise Unusable("--public-url must be an absolute http:// or https:// URL")
    return url


def serve(
    target: Annotated[
        str | None,
        typer.Argument(
            help="module:attribute naming a Host, a Registry, or a factory of one "
            "(optional with --upstreams).",
            show_default=False,
        ),
    ] = None,
    upstreams: Annotated[
        str | None,
        typer.Option(
            "--upstreams",
            help="A TOML file of upstream MCP servers whose tools to serve under charter's "
            "policy (docs/gateway.md).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0 picks a free one).")
    ] = 8700,
    db: DbOption = None,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve MCP on stdin/stdout instead of HTTP.")
    ] = False,
    stateless: Annotated[
        bool,
        typer.Option("--stateless", help="MCP without sessions, for replicas on one database."),
    ] = False,
    principal_key: Annotated[
        str | None,
        typer.Option(
            "--principal-key",
            envvar="CHARTER_PRINCIPAL_KEY",
            help="With --stdio: the API key every call runs as (default: anonymous).",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A Host header MCP accepts besides loopback (e.g. 'tools.example.com'); "
            "repeatable.",
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            help="An Origin header browsers may send besides the allowed hosts' own, such "
            "as the console's public origin behind a proxy (e.g. 'https://tools.example.com'); "
            "repeatable. --public-url's origin is allowed too.",
        ),
    ] = None,
    request_state_key: RequestStateKeyOption = None,
    notify: Annotated[
        str | None,
        typer.Option(
            "--notify",
            envvar="CHARTER_NOTIFY",
            help="A TOML file of approval notifiers ([[webhook]], [[slack]]); their secrets "
            "come from the environment variables it names (docs/notifications.md).",
            show_default=False,
        ),
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            envvar="CHARTER_PUBLIC_URL",
            help="This server's public base URL; notifications link to the console card "
            "under it (/console/#/approvals/{id}).",
            show_default=False,
        ),
    ] = None,
    timeout_header: HeadTimeoutOption = DEFAULT_HEAD_TIMEOUT,
    timeout_body: BodyTimeoutOption = DEFAULT_BODY_TIMEOUT,
    timeout_keep_alive: KeepAliveTimeoutOption = DEFAULT_KEEP_ALIVE_TIMEOUT,
    max_connections: MaxConnectionsOption = None,
    limit_concurrency: LimitConcurrencyOption = None,
    max_header_bytes: MaxHeaderBytesOption = DEFAULT_MAX_HEADER_BYTES,
    mcp_sessions_per_principal: McpSessionsOption = DEFAULT_SESSIONS_PER_PRINCIPAL,
    mcp_session_idle_timeout: McpIdleTimeoutOption = DEFAULT_SESSION_IDLE_TIMEOUT,
    mcp_max_sessions: McpMaxSessionsOption = DEFAULT_MAX_SESSIONS,
    debug: DebugOption = False,
) -> None:
    """Serve a host's tools: REST at /v1, MCP at /mcp and the approvals console at /console.

    TARGET is `module:attribute` naming a Host, a Registry (served with the store's API
    keys), or a factory of either, sync or async; a factory with a `store` parameter gets
    the opened store. The store is SQLite in `.charter/` unless `--db` says otherwise.

    With `--stdio`, MCP runs on stdin/stdout as the principal of `--principal-key`, or
    anonymously (public tools only).

    The limits (timeouts, connection and MCP session caps) and their defaults are
    explained in docs/operations.md.
    """
    from charter.cli._notify_config import load_notifiers

    with unusable_input(debug):
        if stdio and stateless:
            raise Unusable("--stateless applies to HTTP; leave it out with --stdio")
        if principal_key is not None and not stdio:
            raise Unusable("--principal-key applies to --stdio; over HTTP each caller sends a key")
        keys = _checked_keys(request_state_key or [])
        notifying = _Notifying(
            notifiers=load_notifiers(notify) if notify is not None else [],
            console_url=_checked_public_url(public_url),
        )
        http = _Http(
            stateless=stateless,
            extra_hosts=allow_host or [],
            extra_origins=_extra_origins(allow_origin or [], notifying.console_url),
            limits=ServeLimits(
                head_timeout=timeout_header,
                body_timeout=timeout_body,
                keep_alive_timeout=timeout_keep_alive,
                max_connections=max_connections,
                limit_concurrency=limit_concurrency,
                max_header_bytes=max_header_bytes,
            ),
            sessions_per_principal=mcp_sessions_per_principal,
            session_idle_timeout=mcp_session_idle_timeout,
            max_sessions=mcp_max_sessions,
            request_state_keys=keys,
        )
        try:
            if stdio:
                asyncio.run(_serve_stdio(target, upstreams, db, principal_key, notifying))
            else:
                asyncio.run(_serve_http(target, upstreams, host, port, db, http, notifying))
        except KeyboardInterrupt:
            # Ctrl+C: uvicorn finished its graceful shutdown and re-raised the signal so the
            # process stops; the store closed on the way out.
            raise typer.Exit(EXIT_OK) from None
        except SystemExit as exc:
            # uvicorn exits when the app's lifespan fails to start; it logged why.
            if exc.code in (0, None):
                raise typer.Exit(EXIT_OK) from None
            typer.echo("error: the app did not start (see the log above)", err=True)
            raise typer.Exit(EXIT_UNUSABLE_INPUT) from None


async def _serve_http(
    target: str | None,
    upstreams: str | None,
    address: str,
    port: int,
    db: str | None,
    http: _Http,
    notifying: _Notifying,
) -> None:
    import uvicorn

    from charter._serve_protocol import guarded_protocol
    from charter.http import create_app

    async with AsyncExitStack() as stack:
        opened = await notifying.open(target, upstreams, db, stack)
        hosts = _allowed_hosts(http.extra_hosts)
        app = create_app(
            opened.host,
            mcp_stateless=http.stateless,
            allowed_hosts=hosts,
            allowed_origins=_allowed_origins(hosts, http.extra_origins),
            body_timeout=http.limits.body_timeout,
            mcp_session_limits=http.session_limits(),
            mcp_request_state_keys=await _request_state_keys(opened, http.request_state_keys),
            gateway=opened.gateway,
        )
        sock = bind(address, port)
        stack.callback(sock.close)
        limits = http.limits
        config = uvicorn.Config(
            app,
            lifespan="on",
            ws="none",
            log_level="info",
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
            http=guarded_protocol(
                head_timeout=limits.head_timeout, max_connections=limits.connections()
            ),
            timeout_keep_alive=limits.keep_alive_timeout,
            limit_concurrency=limits.limit_concurrency,
            h11_max_incomplete_event_size=limits.max_header_bytes,
        )
        base = base_url(address, sock.getsockname()[1])
        keys = await _key_count(opened)
        _import_mcp()  # last: a bad target, database or port is reported without waiting on it

        def started() -> None:
            _print_banner(console(), _served(target, upstreams), opened, base, http.stateless, keys)
            _freeze_startup_heap()

        await _reporting_server(config, started).serve(sockets=[sock])


def _import_mcp() -> None:
    """Import the MCP stack now, before the heap is frozen, not on the first ``/mcp`` call.

    ``create_app`` builds ``/mcp`` on its first request (a library's app may never serve
    MCP); ``charter serve`` always does, and half a second of imports is better spent
    before it serves than in a client's first call. Without the ``mcp`` extra ``/mcp``
    answers its own error, as before.
    """
    try:
        importlib.import_module("charter.mcp")
    except ImportError:
        pass


def _freeze_startup_heap() -> None:
    """Leave what startup built out of the cycle collector's way from now on (``gc.freeze``).

    A server's heap is mostly what it built to start: modules, the app, the host, the
    store's engine. CPython walks all of it in every full collection, which under load
    comes every second or so and stalls every request in flight (docs/performance.md,
    "The startup heap"). Frozen objects are still freed by reference counting; only cycles
    among them would stay, so what startup left in cycles is collected first. ``charter
    serve`` owns its process; an app served in someone else's is theirs to tune.
    """
    gc.collect()
    gc.freeze()


def _checked_keys(keys: list[str]) -> list[str]:
    """``--request-state-key`` values (the variable's are space-separated), each long enough.

    Raises:
        Unusable: A key is shorter than 32 bytes.
    """
    split = [part for key in keys for part in key.split()]
    short = [i for i, key in enumerate(split, 1) if len(key.encode()) < MIN_STATE_KEY_BYTES]
    if short:
        raise Unusable(
            f"--request-state-key number {short[0]} is shorter than {MIN_STATE_KEY_BYTES} bytes; "
            'make one with: python -c "import secrets; print(secrets.token_hex(32))"'
        )
    return split


async def _request_state_keys(opened: OpenedHost, given: list[str]) -> list[bytes | str] | None:
    """The keys that seal MCP ``requestState``: the configured ones, else the store's.

    None (a key of this process only) when neither is available: a host with its own
    store that is not SQL.
    """
    if given:
        return list(given)
    if opened.store is not None:
        return [await opened.store.request_state_key()]
    try:
        from charter.store import SqlStore
    except ImportError:  # pragma: no cover - a host of its own without the sql extra
        return None
    store = opened.host.store
    return [await store.request_state_key()] if isinstance(store, SqlStore) else None


async def _serve_stdio(
    target: str | None,
    upstreams: str | None,
    db: str | None,
    key: str | None,
    notifying: _Notifying,
) -> None:
    from charter.auth import AuthenticationFailed
    from charter.cli._host import principal_for

    notes = error_console()  # stdout carries the protocol
    async with AsyncExitStack() as stack:
        opened = await notifying.open(target, upstreams, db, stack)
        try:
            principal = await principal_for(opened.host, key)
        except AuthenticationFailed as exc:
            raise Unusable(f"--principal-key was not accepted: {exc}") from exc
        who = f"{principal.subject} in tenant {principal.tenant_id}" if principal else "anonymous"
        count = len(opened.host.callable_tools(principal))
        served = _served(target, upstreams)
        notes.print(Text(f"charter: serving {served} over MCP stdio as {who} ({_tools(count)})"))
        await _serve_while_accepted(opened.host, key, principal)


EXIT_SIGNALLED = 130
"""A stdio server stopped by a second signal, before its calls ended (as a shell's Ctrl+C)."""

_KEY_CHECK_SECONDS = 5.0
"""How often a stdio server asks again whether its ``--principal-key`` is accepted: the time
an HTTP server remembers a verified key, so a revoked key stops both within it."""


async def _serve_while_accepted(host: Host, key: str | None, principal: Principal | None) -> None:
    """Serve MCP on stdio as ``principal`` until the client leaves or ``key`` is refused.

    The process runs every call as the principal its key named at start, and may live for
    days inside a desktop client: a key revoked or expired since then ends it (exit 2), as
    it stops an HTTP caller. A key store that cannot be reached for a moment ends nothing.
    """
    import anyio

    from charter.mcp import serve_stdio

    async with anyio.create_task_group() as group:
        if key is not None:
            group.start_soon(_exit_once_refused, host, key)
        group.start_soon(_exit_once_signalled, host)
        await serve_stdio(host, principal)
        group.cancel_scope.cancel()


async def _exit_once_signalled(host: Host) -> None:
    """On SIGTERM or SIGINT: let the calls that cannot be cancelled end, then exit (0).

    The client may keep stdin open, and the SDK reads it in a thread that no cancellation
    stops, so the process ends itself once ``host.aclose()`` has waited for the calls of
    tools declared ``cancellable=False`` (their outcomes committed). A second signal exits
    at once.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def on_signal() -> None:
        if stopping.is_set():
            os._exit(EXIT_SIGNALLED)
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    await stopping.wait()
    await host.aclose()
    error_console().print(Text("charter: stopped serving"))
    os._exit(0)


async def _exit_once_refused(host: Host, key: str) -> None:
    import anyio

    from charter.auth import AuthenticationFailed, AuthenticationUnavailable
    from charter.cli._host import principal_for

    while True:
        await anyio.sleep(_KEY_CHECK_SECONDS)
        try:
            await principal_for(host, key)
        except AuthenticationUnavailable:
            continue
        except AuthenticationFailed as exc:
            error_console().print(
                Text(f"error: --principal-key is no longer accepted ({exc}); stopped serving")
            )
            # At once: the SDK reads stdin in a thread that no cancellation stops, so an
            # orderly exit would wait for the client's next line, served as the old key.
            # A call cut short here rolls back, as after any crash.
            os._exit(EXIT_UNUSABLE_INPUT)


def _allowed_hosts(extra: list[str]) -> list[str] | None:
    """MCP's accepted ``Host`` headers: loopback (the default, None) plus ``--allow-host``."""
    from charter._asgi import DEFAULT_ALLOWED_HOSTS  # Starlette: only the server needs it

    if not extra:
        return None
    return [*DEFAULT_ALLOWED_HOSTS, *extra, *(f"{name}:*" for name in extra)]


def _allowed_origins(hosts: list[str] | None, extra: list[str]) -> list[str] | None:
    """The ``Origin`` headers served: the ``hosts``' own (the default, None) plus ``extra``."""
    from charter._asgi import DEFAULT_ALLOWED_HOSTS, default_origins

    if not extra:
        return None
    return [*default_origins(hosts or DEFAULT_ALLOWED_HOSTS), *extra]


def _extra_origins(given: list[str], public_url: str | None) -> list[str]:
    """``--allow-origin`` values, checked, and ``--public-url``'s origin.

    Raises:
        Unusable: a value is not an origin (``scheme://host[:port]``, nothing after).
    """
    origins: list[str] = []
    for origin in given:
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.netloc
            or origin != f"{parts.scheme}://{parts.netloc}"
        ):
            raise Unusable(
                f"--allow-origin {origin!r} is not an origin: write scheme://host[:port], "
                "as a browser sends it (e.g. 'https://tools.example.com'), nothing after"
            )
        origins.append(origin)
    if public_url is not None:
        # As a browser writes it: lower case, no default port, no user information.
        parts = urlsplit(public_url)
        default = {"http": 80, "https": 443}[parts.scheme]
        host = (parts.hostname or "").lower()
        host = f"[{host}]" if ":" in host else host
        port = "" if parts.port in (None, default) else f":{parts.port}"
        origins.append(f"{parts.scheme}://{host}{port}")
    return list(dict.fromkeys(origins))


def _reporting_server(config: uvicorn.Config, on_started: Callable[[], None]) -> uvicorn.Server:
    """A uvicorn server that calls ``on_started`` once it listens and its app has started."""
    import uvicorn

    class ReportingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                on_started()

    return ReportingServer(config)


def bind(address: str, port: int) -> socket.socket:
    """Bind and listen on ``address:port`` before serving, so a taken port is one clear line.

    Raises:
        Unusable: The port is in use or the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted from a
    # socket whose protocol says TCP; without it small replies wait ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # Like uvicorn: a port in TIME_WAIT after a restart is reusable; one that another
        # process listens on is still refused.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise Unusable(
                f"port {port} on {address} is in use; stop the other server or pick "
                "another with --port"
            ) from exc
        raise Unusable(f"cannot listen on {address}:{port}: {exc.strerror or exc}") from exc
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def base_url(address: str, port: int) -> str:
    """The URL to print for a listening address (a wildcard address shows as loopback)."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(address, address)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


async def _key_count(opened: OpenedHost) -> int | None:
    """How many API keys the store holds, when the command opened the store."""
    if opened.store is None:
        return None
    return len(await opened.store.list_api_keys())


def _served(target: str | None, upstreams: str | None) -> str:
    """What the banner says is served: TARGET, the upstreams file, or both."""
    return " + ".join(part for part in (target, upstreams and f"upstreams of {upstreams}") if part)


def _tools(count: int) -> str:
    return "1 tool" if count == 1 else f"{count} tools"


def _print_banner(
    out: Console,
    target: str,
    opened: OpenedHost,
    base: str,
    stateless: bool,
    keys: int | None,
) -> None:
    store = (
        display_url(opened.db_url)
        if opened.store is not None and opened.db_url is not None
        else f"the host's own ({type(opened.host.store).__name__})"
    )
    title = Text("charter ", style="bold")
    title.append(f"is serving {target}", style="bold green")
    out.print(title)
    out.print(
        Text(
            f"{_tools(len(opened.host.registry.names()))} · store {store}"
            + (" · MCP stateless" if stateless else ""),
            style="dim",
        )
    )
    urls = Table.grid(padding=(0, 2))
    urls.add_row("REST", Text(f"{base}/v1/tools", style="cyan"), "OpenAPI at /v1/openapi.json")
    urls.add_row("MCP", Text(f"{base}/mcp", style="cyan"), "streamable HTTP, bearer API key")
    urls.add_row("Console", Text(f"{base}/console/", style="cyan"), "sign in with an approver key")
    out.print(urls)
    out.print(Text("\nNext:", style="bold"))
    db = (
        f" --db {display_url(opened.db_url)}" if opened.db_url not in (None, DEFAULT_DB_URL) else ""
    )
    steps = [
        f'curl -H "Authorization: Bearer $CHARTER_KEY" {base}/v1/tools',
        f"charter call --url {base} --key $CHARTER_KEY <tool> --args '{{}}'",
        f"npx @modelcontextprotocol/inspector   (Streamable HTTP, URL {base}/mcp, "
        "header Authorization: Bearer $CHARTER_KEY)",
    ]
    if keys == 0:
        steps.insert(
            0,
            f"no API keys yet: charter keys create{db} --tenant <tenant> --subject <who> "
            "--scope '<resource>:<action>'",
        )
    for step in steps:
        out.print(Text(f"  {step}"), soft_wrap=True)  # commands stay whole for copying
    if keys:
        out.print(Text(f"  (the API keys: charter keys list{db})", style="dim"))
    out.print(Text("Press Ctrl+C to stop.", style="dim"))
