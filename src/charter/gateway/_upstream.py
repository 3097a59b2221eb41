"""One upstream MCP server: a supervised connection through the official MCP client.

``Upstream.run`` connects (a subprocess over stdio, or streamable HTTP), lists the tools,
hands them to the gateway, then watches the connection: a ping every few seconds, a
failed call, or the transport closing marks it lost, and it reconnects with exponential
backoff. ``tools/list_changed`` lists the tools again. Calls made while it is down fail at
once with ``PROVIDER_UNAVAILABLE``, which a caller may retry.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic_core import to_json

from ..context import ToolContext
from ..errors import ErrorCode, ToolError
from ._config import UpstreamConfig, expand_env

__all__ = (
    "DEFAULT_BACKOFF",
    "Backoff",
    "ToolsHandler",
    "Upstream",
    "UpstreamHealth",
    "UpstreamState",
)

logger = logging.getLogger("charter.gateway")

UpstreamState = Literal["connecting", "connected", "down", "closed"]
"""Where an upstream's connection stands."""

ToolsHandler = Callable[["Upstream", list[types.Tool]], Awaitable[None]]
"""Receives an upstream's full tool listing, after each connect and each change."""

_CONNECTION_CODES = frozenset({types.CONNECTION_CLOSED})
_MAX_PAGES = 100
_ERROR_TEXT = 300


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """How long to wait between reconnection attempts: doubling from ``first`` to ``most``."""

    first: float = 0.5
    most: float = 30.0

    def __post_init__(self) -> None:
        if not (0 < self.first <= self.most):
            raise ValueError("backoff: 0 < first <= most")


DEFAULT_BACKOFF = Backoff()
"""Half a second, doubling to 30 seconds."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UpstreamHealth:
    """An upstream's connection as ``/readyz``, ``GET /v1/upstreams`` and the console show it.

    Their JSON is ``charter.http``'s ``UpstreamBody``, built from these fields.
    """

    name: str
    """The upstream's name in the configuration."""
    namespace: str
    transport: Literal["stdio", "http"]
    state: UpstreamState
    since: datetime
    """When it entered ``state``."""
    tools: int
    """Tools it lists (before charter hides any)."""
    calls: int
    """Calls charter has sent it since the gateway started."""
    reconnects: int
    """Connections made after the first."""
    last_error: str | None
    """Why the latest connection attempt or connection failed (the exception's type and text)."""


class Upstream:
    """A supervised connection to one upstream MCP server."""

    def __init__(
        self,
        config: UpstreamConfig,
        *,
        on_tools: ToolsHandler,
        backoff: Backoff = DEFAULT_BACKOFF,
        ping_interval: float = 10.0,
    ) -> None:
        """Connect to ``config``'s server once ``run`` starts; ``on_tools`` gets its tools."""
        self.config = config
        self._on_tools = on_tools
        self._backoff = backoff
        self._ping_interval = ping_interval
        self._client: Client | None = None
        self._lost = anyio.Event()
        self._wake = anyio.Event()
        """Set when the connection is lost or the tools changed (the watcher looks)."""
        self._changed = False
        self._listing: bytes | None = None
        """The latest listing handed to the gateway, as JSON."""
        self._attempted = anyio.Event()
        self._moved = anyio.Event()
        self._state: UpstreamState = "connecting"
        self._since = datetime.now(UTC)
        self._tools = 0
        self._calls = 0
        self._in_flight = 0
        """Calls sent and not answered yet: while any is, the connection is not pinged."""
        self._connections = 0
        self._last_error: str | None = None

    # -- health -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The upstream's configured name."""
        return self.config.name

    def health(self) -> UpstreamHealth:
        """Where the connection stands now."""
        return UpstreamHealth(
            name=self.config.name,
            namespace=self.config.effective_namespace,
            transport="stdio" if self.config.command is not None else "http",
            state=self._state,
            since=self._since,
            tools=self._tools,
            calls=self._calls,
            reconnects=max(self._connections - 1, 0),
            last_error=self._last_error,
        )

    async def first_attempt(self) -> None:
        """Wait until the first connection attempt succeeded or failed."""
        await self._attempted.wait()

    def _lose(self) -> None:
        """The connection broke: down at once (calls fail fast), and the supervisor reconnects."""
        self._lost.set()
        self._wake.set()
        self._enter("down")

    async def reach(self, state: UpstreamState) -> None:
        """Wait until the connection is in ``state`` (at once if it is)."""
        while self._state != state:
            await self._moved.wait()

    def _enter(self, state: UpstreamState) -> None:
        if state != self._state:
            self._state = state
            self._since = datetime.now(UTC)
            moved, self._moved = self._moved, anyio.Event()
            moved.set()

    # -- the supervisor ---------------------------------------------------------------------

    async def run(self) -> None:
        """Stay connected until cancelled: connect, list, watch, and reconnect with backoff."""
        delay = self._backoff.first
        try:
            while True:
                self._enter("connecting")
                try:
                    await self._connection()
                    delay = self._backoff.first  # it was up: the next attempt starts quickly
                except Exception as exc:  # any failure of one connection: log it, back off
                    self._last_error = _describe(exc)
                    logger.warning(
                        "upstream %s: connection failed or lost (%s); retrying in %.1f s",
                        self.name,
                        self._last_error,
                        delay,
                    )
                self._enter("down")
                self._attempted.set()
                await anyio.sleep(delay)
                delay = min(delay * 2, self._backoff.most)
        finally:
            self._client = None
            self._enter("closed")
            self._attempted.set()

    async def _connection(self) -> None:
        """One connection, from the handshake until it is lost."""
        self._lost = anyio.Event()
        self._wake = anyio.Event()
        self._changed = False
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(self._new_client(stack))
            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            async with anyio.create_task_group() as group:
                if modern:
                    # Listening before listing: no change falls between the two.
                    await group.start(self._listen, client)
                await self._list(client)
                self._client = client
                self._connections += 1
                self._last_error = None
                self._enter("connected")
                self._attempted.set()
                logger.info("upstream %s: connected (%d tools)", self.name, self._tools)
                try:
                    await self._watch(client, modern)
                finally:
                    self._client = None
                    group.cancel_scope.cancel()

    def _new_client(self, stack: AsyncExitStack) -> Client:
        config = self.config
        where = f"upstream {config.name!r}"
        if config.command is not None:
            server: Any = StdioServerParameters(
                command=config.command[0],
                args=list(config.command[1:]),
                env=expand_env(config.env, where=f"{where} env") or None,
                cwd=config.cwd,
            )
        else:
            assert config.url is not None
            headers = expand_env(config.headers, where=f"{where} headers")
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            stack.push_async_callback(http.aclose)
            server = streamable_http_client(config.url, http_client=http)
        return Client(
            server,
            message_handler=self._on_message,
            read_timeout_seconds=max(config.timeout, 30.0),
            # Listings are refetched on every change; no stale copy may answer.
            cache=None,
        )

    async def _list(self, client: Client) -> None:
        """Fetch every page of the tool listing and hand it to the gateway."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._tools = len(tools)
        listing = to_json([tool.model_dump(mode="json", by_alias=True) for tool in tools])
        if listing != self._listing:
            await self._on_tools(self, tools)
            self._listing = listing

    async def _watch(self, client: Client, modern: bool) -> None:
        """Return when the connection is lost; list again whenever the tools change."""
        while True:
            with anyio.move_on_after(self._ping_interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            if self._lost.is_set():
                raise ConnectionError("the connection closed")
            if self._changed:
                self._changed = False
                await self._list(client)
                continue
            if self._in_flight:
                # A call is using the connection, and finds it broken by itself; a ping
                # would wait behind the call (a long result, a server busy computing) and
                # take that wait for a dead connection.
                continue
            calls = self._calls
            try:
                with anyio.fail_after(self._ping_interval):
                    if modern:
                        # 2026-07-28 has no ping: listing again checks the connection, and
                        # catches a change a server without a listen stream did not announce.
                        await self._list(client)
                    else:
                        await client.send_ping()
            except TimeoutError:
                if self._in_flight or self._calls != calls:
                    continue  # a call started meanwhile, which the answer waited behind
                raise

    async def _listen(
        self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """2026-07-28 servers announce list changes on a ``subscriptions/listen`` stream."""
        capabilities = client.server_capabilities.tools
        if capabilities is None or not capabilities.list_changed:
            task_status.started()
            return
        started = False
        try:
            async with client.listen(tools_list_changed=True) as events:
                task_status.started()
                started = True
                async for _ in events:
                    self._mark_changed()
        except Exception as exc:  # no stream: the periodic listing still sees changes
            logger.info("upstream %s: no tools/list_changed stream (%s)", self.name, _describe(exc))
            if not started:
                task_status.started()

    def _mark_changed(self) -> None:
        self._changed = True
        self._wake.set()

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        """Notifications from the upstream: a changed tool list, or a broken transport."""
        if isinstance(message, Exception):
            logger.warning("upstream %s: transport error: %s", self.name, _describe(message))
            self._lose()
        elif isinstance(message, types.ToolListChangedNotification):
            self._mark_changed()
        await anyio.lowlevel.checkpoint()

    # -- calls ------------------------------------------------------------------------------

    async def call(
        self, tool: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> types.CallToolResult:
        """Call one upstream tool; upstream progress reaches the caller.

        Raises:
            ToolError: ``PROVIDER_UNAVAILABLE`` (retryable) when the upstream is down or the
                connection broke during the call; ``INVALID_INPUT`` when it refused the
                arguments; ``PROVIDER_ERROR`` for any other protocol failure.
        """
        client = self._client
        if client is None or self._state != "connected":
            raise _unavailable(self.name, "is not connected")

        async def forward_progress(
            progress: float, total: float | None, message: str | None
        ) -> None:
            # A caller that left cannot be told; the call goes on (a ledgered one runs on).
            try:
                await ctx.report_progress(progress, total, message)
            except Exception as exc:
                logger.debug("upstream %s: progress not delivered: %s", self.name, _describe(exc))

        self._calls += 1
        self._in_flight += 1
        try:
            return await client.call_tool(tool, arguments, progress_callback=forward_progress)
        except MCPError as exc:
            if exc.code in _CONNECTION_CODES:
                self._lose()
                raise _lost_mid_call(self.name) from exc
            if exc.code == types.INVALID_PARAMS:
                raise ToolError(
                    ErrorCode.INVALID_INPUT,
                    f"The upstream refused the arguments: {exc.error.message[:_ERROR_TEXT]}",
                    meta={"reason": "upstream_invalid_params", "upstream": self.name},
                ) from exc
            raise ToolError(
                ErrorCode.PROVIDER_ERROR,
                f"upstream {self.name!r} answered {tool!r} with error {exc.code}: "
                f"{exc.error.message}",
                meta={"reason": "upstream_protocol_error", "upstream": self.name},
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self._lose()
            raise _lost_mid_call(self.name) from exc
        finally:
            self._in_flight -= 1


LOST_MID_CALL = "upstream_lost_mid_call"
"""The reason of a call whose connection broke once it was under way: it may have run."""


def _lost_mid_call(name: str) -> ToolError:
    return _unavailable(name, "closed the connection during the call", reason=LOST_MID_CALL)


def _unavailable(name: str, what: str, *, reason: str = "upstream_unavailable") -> ToolError:
    return ToolError(
        ErrorCode.PROVIDER_UNAVAILABLE,
        f"The upstream MCP server {name!r} {what}; charter is reconnecting. Retry shortly "
        "with the same requestId.",
        retryable=True,
        meta={"reason": reason, "upstream": name},
    )


def _describe(exc: BaseException) -> str:
    """An exception as one short line: its type, and its text or its first sub-exception's."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:_ERROR_TEXT]}" if text else type(exc).__name__
