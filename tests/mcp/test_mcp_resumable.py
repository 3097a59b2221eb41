"""Resumable streams: a closed SSE stream resumes with ``Last-Event-ID`` (SEP-1699 polling).

uvicorn on 127.0.0.1 and the official MCP client, which reconnects by itself.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import EventCallback, EventMessage
from mcp_support import Logs, serve
from pydantic import BaseModel

from charter import Registry, ToolContext, tool
from charter.errors import ConfigurationError
from charter.host import Host
from charter.mcp import MemoryEventStore, Resumability, create_asgi_app

pytestmark = pytest.mark.anyio


class Empty(BaseModel):
    """No arguments."""


class Answer(BaseModel):
    """A text answer."""

    text: str


class WatchedStore(MemoryEventStore):
    """Tells when a client resumed a stream."""

    def __init__(self) -> None:
        super().__init__()
        self.replays = 0
        self.resumed = asyncio.Event()

    async def replay_session_events_after(
        self, session_id: str, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        found = await super().replay_session_events_after(session_id, last_event_id, send_callback)
        self.replays += 1
        self.resumed.set()
        return found


@pytest.fixture(scope="module")
def polled() -> Iterator[tuple[str, WatchedStore]]:
    """A server that closes every call's stream at once, so clients poll."""
    store = WatchedStore()

    @tool(tier="read", auth="public")
    async def slow_report(_: Empty, ctx: ToolContext) -> Answer:
        """Log, then answer only once the client has come back for the rest."""
        await ctx.log("info", "started")
        try:
            await asyncio.wait_for(store.resumed.wait(), 10)
        except TimeoutError:
            return Answer(text="the client never resumed")
        return Answer(text="finished after the client resumed")

    registry = Registry()
    registry.register(slow_report)
    app = create_asgi_app(
        Host(registry), resumability=Resumability(event_store=store, retry_ms=0, poll_after=0)
    )
    with serve(app) as url:
        yield url + "/mcp", store


@asynccontextmanager
async def connect(url: str, **options: Any) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(10, read=30)) as http:
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client


@pytest.mark.filterwarnings(
    "ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning"
)
async def test_a_call_whose_stream_the_server_closed_still_answers_after_the_client_resumes(
    polled: tuple[str, WatchedStore],
) -> None:
    url, store = polled
    logs = Logs()

    async with connect(url, mode="legacy", logging_callback=logs) as client:
        result = await client.call_tool("slow_report", {})
    assert result.structured_content == {"text": "finished after the client resumed"}
    assert store.replays >= 1
    assert logs.data == ["started"]  # sent before the close, delivered once


async def test_the_memory_event_store_replays_only_later_events_of_the_same_stream() -> None:
    store = MemoryEventStore(max_events=4)
    ping = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    first = await store.store_event("a", None)
    await store.store_event("b", ping)
    await store.store_event("a", ping)
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert await store.replay_events_after(first, send) == "a"
    assert [e.message for e in sent] == [ping]
    assert await store.replay_events_after("forged-id", send) is None
    for _ in range(4):
        await store.store_event("c", ping)
    assert store.size == 4
    assert await store.replay_events_after(first, send) is None  # dropped: too late


async def test_each_sessions_view_of_a_memory_store_replays_only_its_own_streams() -> None:
    store = MemoryEventStore()
    a, b = store.for_session("a"), store.for_session("b")
    ping = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    pong = types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping")
    primed = await a.store_event("1", None)
    await b.store_event("1", pong)  # the same request id, so the same stream id
    mine = await a.store_event("1", ping)
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert await a.replay_events_after(primed, send) == "1"
    assert [(e.event_id, e.message) for e in sent] == [(mine, ping)]
    assert await b.replay_events_after(primed, send) is None


async def test_the_memory_event_store_keeps_nothing_the_garbage_collector_tracks() -> None:
    """Ten thousand kept responses must not make the collector walk them all, again and again."""
    store = MemoryEventStore(max_events=100)
    for n in range(100):
        response = types.JSONRPCResponse(
            jsonrpc="2.0",
            id=n,
            result={"content": [{"type": "text", "text": "3"}], "structuredContent": {"n": n}},
        )
        await store.store_event(str(n), response)
    gc.collect()
    kept = gc.get_referents(*store._events.values())
    assert kept and not [value for value in kept if gc.is_tracked(value)]
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    first = await store.store_event("last", None)
    await store.store_event("last", response)
    await store.replay_events_after(first, send)
    assert [e.message for e in sent] == [response]


def test_resumability_refuses_negative_settings() -> None:
    with pytest.raises(ConfigurationError):
        Resumability(poll_after=-1)
    with pytest.raises(ConfigurationError):
        MemoryEventStore(max_events=0)
