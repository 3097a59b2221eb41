"""A ``tools/call`` round trip through charter's MCP adapter against the SDK's own servers.

All sides serve the same async tool (validated input, validated output, structured
content plus its JSON text) to the SDK's ``Client``, which validates the structured
content against the tool's output schema on every call. The client reaches the servers
three ways: in memory (no transport: the worst case for charter's share), over
streamable HTTP to uvicorn on 127.0.0.1, and over stdio to a server subprocess.

``python -m bench.bench_mcp stdio charter|bare`` is the stdio server the stdio case
launches.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from pydantic_core import to_json
from starlette.applications import Starlette

from bench import Case, Check, Operation, Sides
from bench._echo import PRINCIPAL, Echo, Query, echo, echo_registry
from bench._live import Held, held_case, serving
from charter import Completed
from charter.audit import MemoryAuditSink
from charter.auth import StaticAuthenticator
from charter.host import Host
from charter.http import create_app
from charter.mcp import STATUS_TOOL, create_server

_ARGUMENTS = {"text": "hello", "limit": 3}
_EXPECTED = {"text": "hello", "limit": 3}
_TOKEN = "bench-token"
_ROOT = Path(__file__).resolve().parent.parent


def _host(*, authenticated: bool = False) -> Host:
    """The host every charter side runs; ``authenticated``: with a bearer token for
    ``PRINCIPAL`` (HTTP carries credentials; in memory and stdio run as the principal)."""
    registry = echo_registry()
    authenticator = StaticAuthenticator({_TOKEN: PRINCIPAL}) if authenticated else None
    return Host(registry, authenticator=authenticator, audit=MemoryAuditSink())


def _charter_server(host: Host) -> Server[Any]:
    return create_server(host, principal=PRINCIPAL)


def _bare_server(host: Host | None = None) -> Server[Any]:
    """What one writes by hand on the low-level server: validate, run, dump, build the result.

    With ``host``, the handler calls ``host.invoke`` instead and renders the output the
    same way: the difference to charter's server is then the adapter alone.
    """
    tool = types.Tool(
        name="echo",
        description="Echo the query back.",
        input_schema=Query.model_json_schema(),
        output_schema=Echo.model_json_schema(mode="serialization"),
    )

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def run(arguments: dict[str, Any]) -> Any:
        if host is None:
            return (await echo(Query.model_validate(arguments))).model_dump(mode="json")
        outcome = await host.invoke("echo", arguments, PRINCIPAL)
        assert isinstance(outcome, Completed)
        return outcome.output

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != "echo":
            raise ValueError(params.name)
        output = await run(params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=to_json(output).decode())],
            structured_content=output,
        )

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


def _mcpserver() -> MCPServer:
    server = MCPServer("sdk")

    @server.tool(name="echo", description="Echo the query back.")
    async def echo_tool(text: str, limit: int = 10) -> Echo:
        return await echo(Query(text=text, limit=limit))

    return server


class _Connection:
    """An open in-memory ``Client`` owned by its own task.

    The bench times operations in one event loop and has no teardown hook: a task that
    enters the client and waits lets ``asyncio.run`` cancel it (and close the session
    cleanly, in the task that opened it) when the loop ends.
    """

    def __init__(self, server: Server[Any] | MCPServer, mode: str) -> None:
        self.server = server
        self.mode = mode
        self.client: Client | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> Client:
        if self.client is None:
            ready = asyncio.Event()
            self._task = asyncio.create_task(self._hold(ready))
            await ready.wait()
        assert self.client is not None
        return self.client

    async def _hold(self, ready: asyncio.Event) -> None:
        async with AsyncExitStack() as stack:
            self.client = await stack.enter_async_context(Client(self.server, mode=self.mode))
            await self.client.list_tools()  # caches the output schema the client validates with
            ready.set()
            await asyncio.Event().wait()

    def call(self) -> Operation:
        async def call_tool() -> object:
            assert self.client is not None
            return await self.client.call_tool("echo", _ARGUMENTS)

        return call_tool


def _in_memory(host: Host, baseline: Server[Any] | MCPServer, mode: str) -> Sides:
    """charter's server for ``host`` against ``baseline``, each behind an in-memory client
    of its own in ``mode``; the check: both echo."""
    charter, other = _Connection(_charter_server(host), mode), _Connection(baseline, mode)

    async def check() -> None:
        for connection in (charter, other):
            client = await connection.open()
            result = await client.call_tool("echo", _ARGUMENTS)
            if result.is_error or result.structured_content != _EXPECTED:
                raise AssertionError(f"{connection.server!r} did not echo: {result!r}")

    return Sides(charter.call(), other.call(), check)


# -- over real transports ------------------------------------------------------------------


def _bare_http_app() -> Starlette:
    """The bare low-level server in the SDK's own streamable HTTP app, with the SDK's
    defaults (stateful, no ``json_response``, loopback DNS-rebinding protection, as
    charter's), and no authentication."""
    return _bare_server().streamable_http_app()


def _mcpserver_http_app() -> Starlette:
    """``MCPServer``'s own streamable HTTP app, defaults as for the bare server."""
    return _mcpserver().streamable_http_app()


def _charter_http_app(host: Host) -> Starlette:
    """charter's HTTP app, defaults and all: REST and MCP at ``/mcp`` on one port, bearer
    authentication through the SDK's middleware (``host.authenticate``), the session
    manager stateful without ``json_response`` (``create_asgi_app``, MCP alone, measured
    the same)."""
    return create_app(host)


def _over_http(build: Callable[[], Starlette], mode: str, label: str) -> Held[Client]:
    """An SDK ``Client`` on one streamable HTTP session to ``build()`` served by uvicorn.

    Built in the timing loop: a session manager runs once, and each case has a new loop.
    """

    async def enter(stack: AsyncExitStack) -> Client:
        url = await stack.enter_async_context(serving(build()))
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {_TOKEN}"},
                timeout=httpx2.Timeout(30, read=300),
            )
        )
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        client = await stack.enter_async_context(Client(transport, mode=mode))
        await client.list_tools()  # caches the output schema the client validates with
        return client

    return Held(enter, label)


def _over_stdio(side: str, mode: str, label: str) -> Held[Client]:
    """An SDK ``Client`` on a server subprocess (``python -m bench.bench_mcp stdio side``)."""

    async def enter(stack: AsyncExitStack) -> Client:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "bench.bench_mcp", "stdio", side], cwd=_ROOT
        )
        client = await stack.enter_async_context(Client(params, mode=mode))
        await client.list_tools()  # caches the output schema the client validates with
        return client

    return Held(enter, label)


def _held_call(held: Held[Client]) -> Operation:
    async def call_tool() -> object:
        return await held.value.call_tool("echo", _ARGUMENTS)

    return call_tool


def _held_check(charter: Held[Client], baseline: Held[Client]) -> Check:
    """Both sides echo; charter's lists its status tool, which it lists to an authenticated
    (or configured) principal only, and the baseline does not: each side is what it claims,
    and over HTTP charter's side authenticated the bearer token."""

    async def check() -> None:
        for side, status_listed in ((charter, True), (baseline, False)):
            client = await side.open()
            result = await client.call_tool("echo", _ARGUMENTS)
            if result.is_error or result.structured_content != _EXPECTED:
                raise AssertionError(f"{side!r} did not echo: {result!r}")
            names = {tool.name for tool in (await client.list_tools()).tools}
            if (STATUS_TOOL in names) is not status_listed or "echo" not in names:
                raise AssertionError(f"{side!r} lists {sorted(names)}")

    return check


def _transport_cases(host: Host) -> list[Case]:
    """The same call as users make it: over streamable HTTP on 127.0.0.1, and over stdio."""
    about = (
        "an async read tool (one scope, held) called with the SDK's `Client` over streamable "
        "HTTP to uvicorn on 127.0.0.1, one connection reused, server and client in the "
        "bench's event loop, so the CPU time is both ends (client, HTTP, server). charter's "
        "side is `create_app(host)` (REST and MCP on one port; `create_asgi_app`, MCP alone, "
        "measures the same): the bearer token checked by `host.authenticate` through the "
        "SDK's auth middleware on every request, then the whole host pipeline. Both sides "
        "run their defaults (stateful session manager, no `json_response`): at 2026-07-28 "
        "each call is a sessionless POST answered with JSON; in the handshake era the "
        "client holds a session (`Mcp-Session-Id`) and its standalone GET stream, and each "
        "call is a POST answered with an SSE stream"
    )
    result: list[Case] = []
    for mode, era in (("auto", "2026-07-28"), ("legacy", "handshake era")):
        charter = _over_http(lambda: _charter_http_app(host), mode, "charter over HTTP")
        bare = _over_http(_bare_http_app, mode, "bare Server over HTTP")
        result.append(
            held_case(
                charter,
                bare,
                call=_held_call,
                check=_held_check,
                name=f"MCP tools/call over streamable HTTP (127.0.0.1, {era})",
                baseline_name="bare low-level Server, SDK streamable HTTP app",
                target=1.10,
                note=f"{about}. This case: {era}; the baseline is the in-memory case's "
                "hand-written `on_call_tool` served by the SDK's own "
                "`Server.streamable_http_app()` (the same DNS-rebinding protection, no "
                "authentication).",
                iterations=100,
            )
        )
    charter = _over_http(lambda: _charter_http_app(host), "auto", "charter over HTTP")
    sdk = _over_http(_mcpserver_http_app, "auto", "MCPServer over HTTP")
    result.append(
        held_case(
            charter,
            sdk,
            call=_held_call,
            check=_held_check,
            name="MCP tools/call over streamable HTTP vs MCPServer (127.0.0.1, 2026-07-28)",
            baseline_name="SDK MCPServer, its streamable HTTP app",
            target=1.10,
            note=f"{about}. This case: 2026-07-28; the baseline is the SDK's `MCPServer` "
            "serving the same tool as a decorated function from its own "
            "`streamable_http_app()` (no authentication).",
            iterations=100,
        )
    )
    for mode, era in (("auto", "2026-07-28"), ("legacy", "handshake era")):
        charter_stdio = _over_stdio("charter", mode, "charter over stdio")
        bare_stdio = _over_stdio("bare", mode, "bare Server over stdio")
        result.append(
            held_case(
                charter_stdio,
                bare_stdio,
                call=_held_call,
                check=_held_check,
                name=f"MCP tools/call over stdio ({era})",
                baseline_name="bare low-level Server over stdio",
                target=1.10,
                note="an async read tool (one scope, held) called with the SDK's `Client` "
                f"over stdio ({era}) to a server subprocess, one connection reused: "
                "`serve_stdio(host, principal)` against the in-memory case's bare server on "
                "the SDK's `stdio_server()`, each with its garbage collector paused like the "
                "bench's. Timed in elapsed (wall-clock) time, since the server's work "
                "happens in another process: this case is more exposed to machine load than "
                "the others (its ratio moves by 0.05 or more between runs). charter's "
                "handler costs about 0.1 ms more server CPU per call than the bare one, "
                "nearly all of it `Host.invoke`, against a round trip of about 1 ms: the "
                "ratio sits at the 1.1x target, above or below it from run to run.",
                iterations=100,
                clock="wall",
            )
        )
    return result


def cases() -> list[Case]:
    """charter's adapter against a bare low-level server and ``MCPServer``, both eras.

    Each case opens its own connections: the bench runs every case in a new event loop.
    """
    host = _host()
    result: list[Case] = []
    for mode, era in (("auto", "2026-07-28"), ("legacy", "handshake era")):
        about = (
            f"an async read tool (one scope, held) called {era} through the SDK's in-memory "
            "`Client`, charter behind `create_server` running the whole host pipeline"
        )
        # One case per baseline server: its name, the baseline's, the server, and what the
        # baseline does (the note's end, after ``about``).
        baselines: list[tuple[str, str, Server[Any] | MCPServer, str]] = [
            (
                f"MCP tools/call ({era})",
                "bare low-level Server",
                _bare_server(),
                "the baseline validates input and output with the same pydantic "
                "models in a hand-written `on_call_tool`. Why the 1.1x target is missed "
                "here: with no transport at all, a round trip is only the SDK's own Python "
                "(about 200-300 µs on this machine), and charter's pipeline (the bearer "
                "principal's scopes, payload limits, tenancy, the tool context with its "
                "cancel signal, output validation, the audit event; 45 µs in a tight loop, "
                "about twice that with the SDK's code around it) is what the baseline does "
                "not do. `charter.mcp` itself adds under 5% (the adapter-alone case), and "
                "over a real transport (the streamable HTTP cases below) the same pipeline "
                "is within 1.1x.",
            ),
            (
                f"MCP tools/call vs MCPServer ({era})",
                "SDK MCPServer",
                _mcpserver(),
                "the baseline is the SDK's high-level `MCPServer` serving the same "
                "tool as a decorated function. It misses 1.1x for the reason the first case "
                "gives (no transport, so charter's pipeline weighs on a bare round trip); "
                "over streamable HTTP the same comparison is within it.",
            ),
            (
                f"MCP adapter alone ({era})",
                "low-level Server calling Host.invoke",
                _bare_server(host),
                "the baseline's hand-written `on_call_tool` calls `Host.invoke` "
                "itself and renders the output, so the ratio is what `charter.mcp` adds "
                "(listing aside: tools are listed once, before timing).",
            ),
        ]
        result += [
            _in_memory(host, server, mode).case(
                name, baseline_name, target=1.10, note=f"{about}; {baseline_does}"
            )
            for name, baseline_name, server, baseline_does in baselines
        ]
    return result + _transport_cases(_host(authenticated=True))


def _serve_stdio(side: str) -> None:
    """The stdio server of one side of the stdio case, until the client closes the pipe."""
    import anyio
    from mcp.server.stdio import stdio_server

    from charter.mcp import serve_stdio

    logging.disable(logging.INFO)  # as the bench does: no log line per request
    gc.disable()  # as the bench does while it times; the process lives for one case

    async def bare() -> None:
        server = _bare_server()
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    if side == "charter":
        anyio.run(serve_stdio, _host(), PRINCIPAL)
    elif side == "bare":
        anyio.run(bare)
    else:
        raise SystemExit(f"unknown side {side!r}: charter or bare")


if __name__ == "__main__":
    if sys.argv[1:2] != ["stdio"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m bench.bench_mcp stdio charter|bare")
    _serve_stdio(sys.argv[2])
