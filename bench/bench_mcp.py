"""A ``tools/call`` round trip through charter's MCP adapter against the SDK's own servers.

All sides serve the same async tool (validated input, validated output, structured
content plus its JSON text) to the SDK's in-memory ``Client``, which validates the
structured content against the tool's output schema on every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import mcp.types as types
from mcp.client import Client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel
from pydantic_core import to_json

from bench import Case
from charter import Completed, Principal, Registry, define_tool
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.mcp import create_server


class Query(BaseModel):
    text: str
    limit: int = 10


class Echo(BaseModel):
    text: str
    limit: int


async def echo(query: Query) -> Echo:
    return Echo(text=query.text, limit=query.limit)


_ARGUMENTS = {"text": "hello", "limit": 3}
_PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:read"}))


def _host() -> Host:
    registry = Registry()
    registry.register(
        define_tool(
            name="echo",
            description="Echo the query back.",
            input_schema=Query,
            output_schema=Echo,
            handler=echo,
            tier="read",
            required_scopes=["notes:read"],
        )
    )
    return Host(registry, audit=MemoryAuditSink())


def _charter_server(host: Host) -> Server[Any]:
    return create_server(host, principal=_PRINCIPAL)


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
        outcome = await host.invoke("echo", arguments, _PRINCIPAL)
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


Call = Callable[[], Awaitable[object]]


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

    def call(self) -> Call:
        async def call_tool() -> object:
            assert self.client is not None
            return await self.client.call_tool("echo", _ARGUMENTS)

        return call_tool


def _check(*connections: _Connection) -> Callable[[], Awaitable[None]]:
    async def check() -> None:
        for connection in connections:
            client = await connection.open()
            result = await client.call_tool("echo", _ARGUMENTS)
            if result.is_error or result.structured_content != {"text": "hello", "limit": 3}:
                raise AssertionError(f"{connection.server!r} did not echo: {result!r}")

    return check


def _case(
    name: str,
    baseline_name: str,
    charter: _Connection,
    baseline: _Connection,
    note: str,
) -> Case:
    return Case(
        name=name,
        baseline_name=baseline_name,
        run=charter.call(),
        baseline=baseline.call(),
        target=1.10,
        check=_check(charter, baseline),
        note=note,
    )


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
        result += [
            _case(
                f"MCP tools/call ({era})",
                "bare low-level Server",
                _Connection(_charter_server(host), mode),
                _Connection(_bare_server(), mode),
                f"{about}; the baseline validates input and output with the same pydantic "
                "models in a hand-written `on_call_tool`.",
            ),
            _case(
                f"MCP tools/call vs MCPServer ({era})",
                "SDK MCPServer",
                _Connection(_charter_server(host), mode),
                _Connection(_mcpserver(), mode),
                f"{about}; the baseline is the SDK's high-level `MCPServer` serving the same "
                "tool as a decorated function.",
            ),
            _case(
                f"MCP adapter alone ({era})",
                "low-level Server calling Host.invoke",
                _Connection(_charter_server(host), mode),
                _Connection(_bare_server(host), mode),
                f"{about}; the baseline's hand-written `on_call_tool` calls `Host.invoke` "
                "itself and renders the output, so the ratio is what `charter.mcp` adds "
                "(listing aside: tools are listed once, before timing).",
            ),
        ]
    return result
