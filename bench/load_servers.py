"""The servers the throughput cases load, each run alone: ``python -m bench.load_servers``.

``python -m bench.load_servers KIND PORT`` serves one app with uvicorn on 127.0.0.1:PORT,
with the same uvicorn settings for every kind (one worker, no access log, warnings
only). Every MCP kind serves the same ``add(a, b) -> int`` tool (structured content
``{"result": a + b}``); every REST kind the same ``POST /v1/tools/add:call`` with the
same Pydantic validation. KINDs:

- ``charter-mcp``, ``charter-mcp-stateless``: ``create_app(host)`` (REST, MCP at /mcp, the
  console), the bearer token checked by the host on every request;
- ``sdk-mcp``, ``sdk-mcp-stateless``: the SDK's ``MCPServer`` and its streamable HTTP app;
- ``sdk-mcp-bearer``, ``sdk-mcp-bearer-stateless``: the same behind the SDK's own bearer
  check (``token_verifier``, ``AuthSettings``), of the token charter's side accepts and
  the scope its ``add`` requires: what charter's side authenticates, done the SDK's way;
- ``fastmcp``, ``fastmcp-stateless``: standalone FastMCP (the ``bench`` extra);
- ``charter-rest``: ``create_app(host)``; ``fastapi``: a FastAPI endpoint; ``starlette``: a
  bare Starlette endpoint;
- ``charter-ledger``, ``bare-ledger``: a write on the PostgreSQL (or SQLite) store at
  ``CHARTER_BENCH_DB_URL``: the ledgered ``save_note`` tool, or a bare endpoint inserting
  the same two rows in one transaction.

``replica_registry`` is what ``charter serve bench.load_servers:replica_registry`` serves
(the two-replica case).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import uvicorn
from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from bench._notes import WRITE_RISK, Note, Saved, effects_table, insert_effect
from charter import Principal, Registry, ToolContext, tool
from charter.audit import MemoryAuditSink
from charter.auth import StaticAuthenticator
from charter.host import Host

TOKEN = "bench-load-token"
"""The bearer token every charter side accepts (and ``sdk-mcp-bearer``; the other
baselines check none)."""
AUDIT_CAPACITY = 1_000
"""Audit events each charter server keeps in memory (``MemoryAuditSink``'s newest
``capacity``): full after the memory cases' first thousand calls, so growth past them is
memory a call leaves behind, not the bounded buffer filling (10,000 by default)."""
PRINCIPAL = Principal(
    subject="user-1", tenant_id="tenant-a", scopes=frozenset({"math:read", "notes:write"})
)


@tool(tier="read", required_scopes=["math:read"])
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddInput(BaseModel):
    """The same input model a hand-written endpoint validates with."""

    a: int
    b: int


effects = effects_table("bench_load_effects")


@tool(
    tier="write",
    risk_policy=WRITE_RISK,
    required_scopes=["notes:write"],
)
async def save_note(note: Note, ctx: ToolContext) -> Saved:
    """Save a note in the application's own table."""
    return Saved(note_id=await insert_effect(effects, note, ctx), text=note.text)


def post_scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The ASGI scope of a POST to ``path`` as wrk sends it (bench/profile_*.py, in process)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "state": {},
    }


def _registry() -> Registry:
    registry = Registry()
    registry.register_all([add, save_note])
    return registry


def replica_registry() -> Registry:
    """The registry each ``charter serve --stateless`` replica serves (store API keys)."""
    return _registry()


def _host(store: Any = None) -> Host:
    return Host(
        _registry(),
        authenticator=StaticAuthenticator({TOKEN: PRINCIPAL}),
        audit=MemoryAuditSink(capacity=AUDIT_CAPACITY),
        store=store,
    )


def charter_app(*, stateless: bool = False) -> Starlette:
    """charter's whole HTTP app, as ``charter serve`` builds it."""
    from charter.http import create_app

    return create_app(_host(), mcp_stateless=stateless)


class _OneToken:
    """The SDK's ``TokenVerifier`` hook over one token, as charter's ``StaticAuthenticator``."""

    def __init__(self) -> None:
        from mcp.server.auth.provider import AccessToken

        # Built once, as charter builds its access token once per principal.
        self._access = AccessToken(
            token=TOKEN, client_id=PRINCIPAL.subject, scopes=sorted(PRINCIPAL.scopes)
        )

    async def verify_token(self, token: str) -> Any:
        """The access token of ``TOKEN``; None for any other."""
        return self._access if token == TOKEN else None


def sdk_app(*, stateless: bool = False, bearer: bool = False, resumable: bool = False) -> Starlette:
    """The SDK's ``MCPServer`` serving ``add`` from its own streamable HTTP app.

    ``bearer``: behind the SDK's bearer middleware, accepting ``TOKEN`` only and requiring
    the scope charter's ``add`` requires (``math:read``). ``resumable``: with the event
    store and reconnection delay charter's streams have by default (``MemoryEventStore``,
    ``retry: 1000``), so every SSE answer starts with a priming event, as charter's do.
    """
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer

    server = (
        MCPServer(
            "sdk",
            token_verifier=_OneToken(),
            auth=AuthSettings(
                issuer_url="http://127.0.0.1",
                resource_server_url=None,
                required_scopes=sorted(add.required_scopes),
            ),
        )
        if bearer
        else MCPServer("sdk")
    )

    @server.tool(name="add", description="Add two integers.")
    async def add_tool(a: int, b: int) -> int:
        return a + b

    if resumable:
        from charter.mcp import MemoryEventStore

        return server.streamable_http_app(
            stateless_http=stateless, event_store=MemoryEventStore(), retry_interval=1000
        )
    return server.streamable_http_app(stateless_http=stateless)


def fastmcp_app(*, stateless: bool = False) -> ASGIApp:
    """Standalone FastMCP serving ``add`` from its own HTTP app."""
    from fastmcp import FastMCP

    server = FastMCP("fastmcp")

    @server.tool(name="add", description="Add two integers.")
    async def add_tool(a: int, b: int) -> int:
        return a + b

    app: ASGIApp = server.http_app(path="/mcp", stateless_http=stateless)
    return app


def starlette_app() -> Starlette:
    """A bare endpoint: validate with the model, add, answer charter's response shape."""

    async def call(request: Request) -> Response:
        query = AddInput.model_validate_json(await request.body())
        return JSONResponse({"output": {"result": query.a + query.b}, "replayed": False})

    return Starlette(routes=[Route("/v1/tools/add:call", call, methods=["POST"])])


def fastapi_app() -> ASGIApp:
    """A FastAPI endpoint taking the same model and answering the same shape."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/tools/add:call")
    async def call(query: AddInput) -> dict[str, Any]:
        return {"output": {"result": query.a + query.b}, "replayed": False}

    return app


def charter_ledger_app(store: Any) -> Starlette:
    """charter's app over a host on the store: ``save_note`` is ledgered."""
    from charter.http import create_app

    return create_app(_host(store))


class NoteCall(BaseModel):
    """The bare endpoint's body: the note and its request id, as charter's."""

    text: str
    charter: dict[str, str] = Field(alias="_charter")


def bare_ledger_app(store: Any) -> Starlette:
    """Validate, insert a completed ledger row and the effect row in one transaction."""
    from bench._bare import write_note

    async def call(request: Request) -> Response:
        body = NoteCall.model_validate_json(await request.body())
        async with store.engine.begin() as conn:
            outcome = await write_note(
                conn, effects, PRINCIPAL, body.charter["requestId"], body.text
            )
        return JSONResponse({"output": outcome.output, "replayed": False})

    return Starlette(routes=[Route("/v1/tools/save_note:call", call, methods=["POST"])])


KINDS: dict[str, Callable[[], ASGIApp]] = {
    "charter-mcp": charter_app,
    "charter-mcp-stateless": lambda: charter_app(stateless=True),
    "sdk-mcp": sdk_app,
    "sdk-mcp-stateless": lambda: sdk_app(stateless=True),
    "sdk-mcp-bearer": lambda: sdk_app(bearer=True),
    "sdk-mcp-bearer-stateless": lambda: sdk_app(stateless=True, bearer=True),
    "sdk-mcp-resumable": lambda: sdk_app(resumable=True),
    "fastmcp": fastmcp_app,
    "fastmcp-stateless": lambda: fastmcp_app(stateless=True),
    "charter-rest": charter_app,
    "fastapi": fastapi_app,
    "starlette": starlette_app,
}
ON_STORE: dict[str, Callable[[Any], ASGIApp]] = {
    "charter-ledger": charter_ledger_app,
    "bare-ledger": bare_ledger_app,
}
"""The kinds that serve on the store at ``CHARTER_BENCH_DB_URL`` (opened first)."""


async def _serve(kind: str, port: int) -> None:
    config = uvicorn.Config(
        "bench.load_servers:placeholder",
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
    )
    if kind in KINDS:
        config.app = KINDS[kind]()
        await uvicorn.Server(config).serve()
        return
    from charter.store import SqlStore

    async with SqlStore(os.environ["CHARTER_BENCH_DB_URL"]) as store:
        async with store.engine.begin() as conn:
            await conn.run_sync(effects.metadata.create_all)
        config.app = ON_STORE[kind](store)
        await uvicorn.Server(config).serve()


def main(argv: list[str]) -> None:
    """Serve one kind on 127.0.0.1 until terminated."""
    kinds = [*KINDS, *ON_STORE]
    if len(argv) != 2 or argv[0] not in kinds:
        raise SystemExit(f"usage: python -m bench.load_servers {'|'.join(kinds)} PORT")
    asyncio.run(_serve(argv[0], int(argv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
