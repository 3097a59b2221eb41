"""Resumable streams kept in the SQL store: a real server on 127.0.0.1, on SQLite and PostgreSQL.

The client is raw HTTP (httpx), so the test decides where a stream breaks: it reads a
call's first events, hangs up, lets the call finish while nobody listens, and reconnects
with ``Last-Event-ID``. A second session calls with the same JSON-RPC id meanwhile: its
events must never reach the first session's replay. The ledgered variant sends its log
messages while its transaction holds SQLite's write lock, which events must not wait for.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from tests.builders import WRITE_RISK
from tests.store.conftest import SQL_BACKENDS, fresh_database

from charter import Registry, ToolContext, tool
from charter.auth import Principal, StaticAuthenticator
from charter.host import Host
from charter.mcp import MemoryEventStore, SqlEventStore, create_asgi_app, streamable_http_app
from charter.store import SqlStore, sqlite_url
from live_server import serve

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-11-25"
JSON_AND_SSE = {
    "Accept": "application/json, text/event-stream",
    "Authorization": "Bearer ada-token",
}
WAIT_SECONDS = 20


class Step(BaseModel):
    """Which call this is."""

    label: str


class Done(BaseModel):
    """What the call did."""

    label: str


def build_registry(gate: threading.Event) -> Registry:
    async def two_steps(args: Step, ctx: ToolContext) -> Done:
        """Log, wait for the gate when the label says "held", log again, answer."""
        await ctx.log("info", f"{args.label}: first")
        if args.label == "held":
            await asyncio.to_thread(gate.wait, WAIT_SECONDS)
        await ctx.log("info", f"{args.label}: second")
        return Done(label=args.label)

    @tool(tier="write", risk_policy=WRITE_RISK)
    async def ledgered_steps(args: Step, ctx: ToolContext) -> Done:
        """The same, as a ledgered write: its log messages are sent inside its transaction."""
        return await two_steps(args, ctx)

    registry = Registry()
    registry.register(tool(tier="read", auth="public")(two_steps))
    registry.register(ledgered_steps)
    return registry


ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset(), kind="agent")
GUS = Principal(subject="ada", tenant_id="globex", scopes=frozenset(), kind="agent")
"""Another tenant's principal with ADA's subject."""


@pytest.fixture(params=SQL_BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database: a SQLite file, or a PostgreSQL schema (skipped when it is down)."""
    with fresh_database(request.param, tmp_path / "charter.db") as url:
        yield url


def sql_host(db: str, gate: threading.Event) -> Host:
    return Host(
        build_registry(gate),
        store=SqlStore(db),
        authenticator=StaticAuthenticator({"ada-token": ADA, "gus-token": GUS}),
    )


def call(request_id: int, label: str, name: str = "two_steps") -> dict[str, Any]:
    arguments: dict[str, Any] = {"label": label}
    if name == "ledgered_steps":
        arguments["_charter"] = {"requestId": str(uuid.uuid4())}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def sse(response: httpx2.Response) -> AsyncIterator[tuple[str | None, Any]]:
    """The events of an SSE response as ``(id, JSON message or None for a priming event)``."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if event_id is not None or data:
                text = "\n".join(data)
                yield event_id, json.loads(text) if text else None
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


async def messages(response: httpx2.Response) -> list[Any]:
    return [message async for _, message in sse(response) if message is not None]


async def open_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a session; the headers its later requests carry."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    response = await http.post(url, json=hello, headers=JSON_AND_SSE)
    assert response.status_code == 200, response.text
    headers = {
        **JSON_AND_SSE,
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": PROTOCOL,
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    return headers


def read(db: str, statement: str, **parameters: str) -> list[Any]:
    """Rows of a query on the test's database, through a connection of the test's own."""
    engine = sa.create_engine(db.replace("+aiosqlite", ""))
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(statement), parameters))
    finally:
        engine.dispose()


def stored_result(db: str, session_id: str, stream_id: str) -> bool:
    """Whether the store holds the response on a session's stream yet."""
    rows = read(
        db,
        "SELECT message FROM charter_stream_events WHERE session_id = :s AND stream_id = :t",
        s=session_id,
        t=stream_id,
    )
    return any(text is not None and '"result"' in text for (text,) in rows)


async def until_stored(db: str, session_id: str, stream_id: str) -> None:
    """Wait until a session's stream has its response in the store (the call finished)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not stored_result(db, session_id, stream_id):
        assert time.monotonic() < deadline, "the call's response was never stored"
        await asyncio.sleep(0.05)


def stored_events(db: str) -> int:
    [(count,)] = read(db, "SELECT count(*) FROM charter_stream_events")
    return int(count)


async def hang_up_mid_call(
    http: httpx2.AsyncClient, url: str, session: dict[str, str], name: str = "two_steps"
) -> str:
    """Call ``held`` (JSON-RPC id 7), read up to its first log message, hang up; its id."""
    seen: list[tuple[str | None, Any]] = []
    async with http.stream("POST", url, json=call(7, "held", name), headers=session) as response:
        async for event_id, message in sse(response):
            seen.append((event_id, message))
            if message is not None:
                break
    last_id, first = seen[-1]
    assert first["params"]["data"] == "held: first"
    assert seen[0][1] is None  # the priming event came first
    assert last_id is not None
    return last_id


@pytest.mark.parametrize("name", ["two_steps", "ledgered_steps"])
async def test_a_broken_stream_resumes_from_the_store_with_its_own_events_only(
    db: str, name: str
) -> None:
    gate = threading.Event()
    with serve(create_asgi_app(sql_host(db, gate))) as base:
        url = base + "/mcp"
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_SECONDS)) as http:
            a = await open_session(http, url)
            last_id = await hang_up_mid_call(http, url, a, name)

            # Session B calls with the same JSON-RPC id, so the same stream id, and ends (an
            # unledgered call: a held ledgered one holds SQLite's write lock until it ends).
            b = await open_session(http, url)
            response = await http.post(url, json=call(7, "quick"), headers=b)
            assert (await messages(response))[-1]["result"]["structuredContent"] == {
                "label": "quick"
            }

            gate.set()  # A's call goes on while nobody listens; its events are stored
            await until_stored(db, a["Mcp-Session-Id"], "7")

            replayed: list[Any] = []
            resume = {**a, "Last-Event-ID": str(last_id)}
            async with http.stream("GET", url, headers=resume) as response:
                assert response.status_code == 200
                async for _, message in sse(response):
                    if message is not None:
                        replayed.append(message)
                        if "result" in message or "error" in message:
                            break
    assert [m["params"]["data"] for m in replayed[:-1]] == ["held: second"]
    assert replayed[-1]["id"] == 7
    assert replayed[-1]["result"]["structuredContent"] == {"label": "held"}
    assert stored_events(db) > 0  # in the database, not in the process


async def test_no_other_session_nor_principal_replays_a_sessions_stored_events(db: str) -> None:
    gate = threading.Event()
    with serve(create_asgi_app(sql_host(db, gate))) as base:
        url = base + "/mcp"
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_SECONDS)) as http:
            a = await open_session(http, url)
            last_id = await hang_up_mid_call(http, url, a)
            gate.set()
            await until_stored(db, a["Mcp-Session-Id"], "7")
            # Another session of the same principal, presenting A's event id: nothing of A's.
            b = await open_session(http, url)
            async with http.stream("GET", url, headers={**b, "Last-Event-ID": last_id}) as got:
                status, foreign = got.status_code, [m async for _, m in sse(got)]
            # The same subject in another tenant, presenting A's session and event id.
            stolen = {**a, "Authorization": "Bearer gus-token", "Last-Event-ID": last_id}
            other_tenant = await http.get(url, headers=stolen)
            # A itself still resumes: the attempts above took nothing from it.
            resume = {**a, "Last-Event-ID": last_id}
            async with http.stream("GET", url, headers=resume) as response:
                async for _, message in sse(response):
                    if message is not None and "result" in message:
                        break
    assert status == 200 and foreign == []
    assert other_tenant.status_code == 404
    assert message is not None and message["result"]["structuredContent"] == {"label": "held"}


async def test_after_a_restart_the_old_session_is_unknown_and_prune_deletes_its_events(
    db: str,
) -> None:
    gate = threading.Event()
    gate.set()
    with serve(create_asgi_app(sql_host(db, gate))) as base:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_SECONDS)) as http:
            a = await open_session(http, base + "/mcp")
            async with http.stream(
                "POST", base + "/mcp", json=call(3, "held"), headers=a
            ) as response:
                ids = [event_id async for event_id, _ in sse(response)]
            await until_stored(db, a["Mcp-Session-Id"], "3")  # written behind the stream
    assert stored_events(db) >= len(ids)
    # A new server on the same database: the SDK keeps sessions in memory, so the old
    # session id is unknown (404) and the client must initialize again; nothing of the
    # old session can be replayed, to anyone.
    with serve(create_asgi_app(sql_host(db, gate))) as base:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_SECONDS)) as http:
            response = await http.get(base + "/mcp", headers={**a, "Last-Event-ID": str(ids[0])})
            assert response.status_code == 404
            fresh = await open_session(http, base + "/mcp")
            response = await http.get(
                base + "/mcp", headers={**fresh, "Last-Event-ID": str(ids[0])}
            )
            assert await messages(response) == []  # another session's event id resumes nothing
    async with SqlStore(db) as store:
        assert await store.prune(datetime.now(UTC) + timedelta(days=1)) >= len(ids)
    assert stored_events(db) == 0


async def test_the_store_is_chosen_by_the_hosts_store(tmp_path: Path) -> None:
    gate = threading.Event()
    assert isinstance(
        streamable_http_app(
            sql_host(sqlite_url(tmp_path / "a.db"), gate)
        ).session_manager.event_store,
        SqlEventStore,
    )
    assert isinstance(
        streamable_http_app(Host(build_registry(gate))).session_manager.event_store,
        MemoryEventStore,
    )
    assert (
        streamable_http_app(Host(build_registry(gate)), stateless=True).session_manager.event_store
        is None
    )
