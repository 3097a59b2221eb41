"""Throughput under load: charter's servers against the SDK's, FastMCP, FastAPI and Starlette.

Every server runs alone in a process of its own (``bench/load_servers.py``, or ``charter
serve`` for the replicas and the travel demo) and is loaded by wrk (``bench/_load.py``); a
case compares requests per second, with p50 and p99 latency beside them. Servers start
when a case checks them and stop when it closes; each side's first load is a two-second
warm-up run.

The PostgreSQL cases use ``CHARTER_BENCH_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``), one temporary schema per server, and are
left out when it does not answer. ``CHARTER_BENCH_RSS_CALLS`` (default 100000) is the
call count of the memory cases.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx

from bench import Case, Load
from bench._load import CONNECTIONS, Request, Server, python_module, wrk, wrk_together
from bench.bench_ledger import POSTGRES_URL, _postgres_reachable
from bench.load_servers import AUDIT_CAPACITY, TOKEN

RSS_CALLS = int(os.environ.get("CHARTER_BENCH_RSS_CALLS", "100000"))
_RSS_FIRST = AUDIT_CAPACITY
_ROUNDS = 3
_MODERN = "2026-07-28"
_LEGACY = "2025-11-25"
_ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}
_MCP_EXPECT = '"result":3'
_MCP_PROFILE = (
    " Where a request's time goes on each side, what was fixed from it and what remains: "
    "[performance.md](performance.md#mcp-toolscall)."
)
_REST_EXPECT = '"result":3'
_MCP_QUIET = (
    " The request asks for no progress and no log messages, so charter answers it with one "
    "JSON body in the request's own task (the SDK's JSON mode, `quiet_json`), while every "
    "baseline runs the SDK's default streaming mode, which spends a task, a disconnect "
    "watcher, a memory stream and a timer on it; the answer on the wire is the same. "
    "MCPServer built with `json_response=True` takes about 0.6x its default's CPU time per "
    "request in process, but drops progress and log messages for every request "
    "([mcp.md](mcp.md#quiet-requests-are-answered-as-plain-json))."
)

_RESUMABLE_LABEL = "SDK MCPServer with the same event store"
_MCP_RESUMABLE = (
    " Its streams resume as charter's do by default (`Resumability()`): the same "
    "`MemoryEventStore` and `retry_interval=1000`, so the SDK keeps every event and starts "
    "each SSE answer with a priming event (an id, empty data, `retry: 1000`), one more "
    "event per call through its stream machinery. The plain MCPServer row has no store; "
    "against this one the difference is charter's own work, the bearer check included."
)


_MCP_BEARER = (
    "behind the SDK's own bearer check (`MCPServer(token_verifier=..., auth=AuthSettings("
    "required_scopes=['math:read']))`: its authentication middleware, auth context and "
    "`RequireAuthMiddleware`), accepting the one token charter's side accepts, its access "
    "token built once, and requiring the scope charter's `add` requires. The row beside "
    "the plain MCPServer one, which authenticates no one: charter cannot serve a tool "
    "without the authentication its host is configured with, so this is the like-for-like "
    "comparison for it (the plain row stays, as the SDK's best case)."
)


def _mcp_request(era: str, *, bearer: str = TOKEN) -> Request:
    """A ``tools/call`` of ``add`` as the SDK's client sends it in ``era``."""
    params: dict[str, object] = dict(_ADD)
    headers = {
        "Authorization": f"Bearer {bearer}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": era,
    }
    if era == _MODERN:
        # A 2026-07-28 request stands alone: what it would have said in `initialize` rides
        # in its _meta, and the method and tool name are repeated in headers.
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": _MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "4"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "add"}
    body = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}
    text = json.dumps(body, separators=(",", ":")).replace('"id":0', '"id":__ID__', 1)
    return Request(path="/mcp", body=text.encode(), headers=headers, expect=_MCP_EXPECT)


async def _legacy_session(server: Server, request: Request) -> Request:
    """Open a handshake-era session (``initialize``, ``notifications/initialized``); the
    request again with its ``Mcp-Session-Id``."""
    headers = {k: v for k, v in request.headers.items() if k != "MCP-Protocol-Version"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": _LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "wrk", "version": "4"},
        },
    }
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as client:
        answer = await client.post("/mcp", json=initialize)
        answer.raise_for_status()
        session = answer.headers["mcp-session-id"]
        headers = {**request.headers, "Mcp-Session-Id": session}
        done = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=headers,
        )
        done.raise_for_status()
    return Request(path=request.path, body=request.body, headers=headers, expect=request.expect)


Prepare = Callable[[Server, Request], Awaitable[Request]]


@dataclass(kw_only=True)
class _Side:
    """One side of a throughput case: its servers, what wrk sends, how many connections."""

    servers: Sequence[Server]
    request: Request
    connections: int = CONNECTIONS
    prepare: Prepare | None = None
    _prepared: list[Request] = field(default_factory=list)

    async def start(self) -> None:
        """Start every server, open a session where one is needed, check one answer."""
        for server in self.servers:
            await server.start()
        if not self._prepared:
            for server in self.servers:
                request = self.request
                if self.prepare is not None:
                    request = await self.prepare(server, request)
                self._prepared.append(request)
                await _check_once(server, request)

    async def load(self, *, warmup: bool = False) -> Load:
        """One load run (or a two-second warm-up): one wrk, or one per server at once."""
        await self.start()
        seconds = 2 if warmup else None
        if len(self.servers) == 1:
            return await wrk(
                self.servers[0],
                self._prepared[0],
                connections=self.connections,
                seconds=seconds,
                warmup=warmup,
            )
        pairs = list(zip(self.servers, self._prepared, strict=True))
        return await wrk_together(
            pairs, connections=self.connections, seconds=seconds, warmup=warmup
        )

    async def stop(self) -> None:
        """Stop every server."""
        for server in self.servers:
            await server.stop()
        self._prepared.clear()


async def _check_once(server: Server, request: Request) -> None:
    """One request as wrk will send it: a 200 whose body has the expected answer."""
    body = request.body.replace(b"__ID__", b"7").replace(b"__UUID__", str(uuid.uuid4()).encode())
    async with httpx.AsyncClient(timeout=30) as client:
        answer = await client.post(server.url + request.path, content=body, headers=request.headers)
    if answer.status_code != 200 or request.expect not in answer.text:
        raise AssertionError(f"{server.label} answered {answer.status_code}: {answer.text[:300]}")


def _case(
    name: str,
    baseline_name: str,
    charter: _Side,
    baseline: _Side,
    *,
    target: float,
    note: str,
) -> Case:
    warmed: set[int] = set()

    def measured(side: _Side) -> Callable[[], Awaitable[Load]]:
        async def load() -> Load:
            if id(side) not in warmed:
                warmed.add(id(side))
                await side.load(warmup=True)
            return await side.load()

        return load

    async def check() -> None:
        await charter.start()
        await baseline.start()

    async def close() -> None:
        try:
            await charter.stop()
        finally:
            await baseline.stop()

    return Case(
        name=name,
        baseline_name=baseline_name,
        run=measured(charter),
        baseline=measured(baseline),
        target=target,
        check=check,
        close=close,
        note=note,
        measure="throughput",
        rounds=_ROUNDS,
    )


def _served(kind: str, env: Mapping[str, str] | None = None) -> Server:
    return Server(
        argv=python_module("bench.load_servers", kind, "{port}"), label=kind, env=env or {}
    )


def _mcp_cases() -> list[Case]:
    cases: list[Case] = []
    eras = ((_MODERN, _MODERN), (_LEGACY, "handshake era"))
    for (era, era_name), stateless in ((e, s) for e in eras for s in (False, True)):
        suffix = "-stateless" if stateless else ""
        mode = "stateless" if stateless else "stateful"
        prepare = _legacy_session if era == _LEGACY and not stateless else None
        baselines = [
            ("sdk-mcp", "SDK MCPServer", 0.95),
            ("sdk-mcp-bearer", "SDK MCPServer with the same bearer check", 0.95),
            ("fastmcp", "FastMCP (standalone)", 2.0),
        ]
        if prepare is not None:
            # Only a session's SSE streams resume: the one mode where charter's default
            # differs from the SDK's in what goes on the wire.
            baselines.insert(2, ("sdk-mcp-resumable", _RESUMABLE_LABEL, 0.95))
        for kind, label, target in baselines:
            charter = _Side(
                servers=[_served(f"charter-mcp{suffix}")],
                request=_mcp_request(era),
                prepare=prepare,
            )
            baseline = _Side(
                servers=[_served(f"{kind}{suffix}")], request=_mcp_request(era), prepare=prepare
            )
            session = (
                "one session opened with `initialize`, every request on it (`Mcp-Session-Id`), "
                "answered as an SSE stream"
                if prepare
                else "no session: every request stands alone"
            )
            cases.append(
                _case(
                    f"MCP tools/call under load ({era_name}, {mode})",
                    f"{label}, {mode}",
                    charter,
                    baseline,
                    target=target,
                    note=f"`tools/call` of `add(a, b)` as the SDK's client sends it at {era} "
                    f"({session}), the server's session manager {mode}; charter's side is "
                    "`create_app(host)` (REST, MCP and the console on one port) checking "
                    f"the bearer token on every request; the baseline, {label}, serves the "
                    "same tool from its own streamable HTTP app "
                    + (_MCP_BEARER if kind == "sdk-mcp-bearer" else "without authentication.")
                    + (_MCP_RESUMABLE if kind == "sdk-mcp-resumable" else "")
                    + (_MCP_QUIET if era == _MODERN and kind == "sdk-mcp" else "")
                    + (_MCP_PROFILE if kind == "sdk-mcp" else ""),
                )
            )
    return cases


def _rest_cases() -> list[Case]:
    body = b'{"a": 1, "b": 2}'
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    request = Request(path="/v1/tools/add:call", body=body, headers=headers, expect=_REST_EXPECT)
    cases = []
    for kind, label, target in (
        ("fastapi", "FastAPI endpoint, same model", 0.9),
        ("starlette", "bare Starlette endpoint, same model", 0.8),
    ):
        cases.append(
            _case(
                "REST POST /v1/tools/{name}:call under load",
                label,
                _Side(servers=[_served("charter-rest")], request=request),
                _Side(servers=[_served(kind)], request=request),
                target=target,
                note="`add(a, b)` called over REST: charter's `create_app(host)` checks the "
                "bearer token and runs the whole host pipeline (scopes, limits, validation "
                "of input and output, the audit event); the baseline validates the body "
                f"with the same Pydantic model and answers the same JSON ({label}), with no "
                "authentication. Where a request's time goes: "
                "[performance.md](performance.md#rest-call).",
            )
        )
    return cases


def _schema_url(schema: str) -> str:
    base = POSTGRES_URL.split("://", 1)[1]
    separator = "&" if "?" in base else "?"
    return f"postgresql+psycopg://{base}{separator}options={quote(f'-csearch_path={schema}')}"


@dataclass(kw_only=True)
class _Schemas:
    """Temporary PostgreSQL schemas, dropped by ``drop``."""

    names: list[str] = field(default_factory=list)

    def new(self) -> str:
        """A new empty schema; its SQLAlchemy URL."""
        import psycopg

        schema = f"bench_load_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        self.names.append(schema)
        return _schema_url(schema)

    def drop(self) -> None:
        """Drop every schema made."""
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            for schema in self.names:
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self.names.clear()


def _with_schemas(case: Case, schemas: _Schemas) -> Case:
    """``case`` with its schemas dropped when it closes."""
    return _cleaning_up(case, schemas.drop)


def _cleaning_up(case: Case, cleanup: Callable[[], None]) -> Case:
    """``case`` calling ``cleanup`` once it has closed."""
    close = case.close

    async def closed() -> None:
        try:
            if close is not None:
                await close()
        finally:
            cleanup()

    return Case(
        **{name: getattr(case, name) for name in case.__dataclass_fields__ if name != "close"},
        close=closed,
    )


def _ledger_case() -> Case:
    schemas = _Schemas()
    body = b'{"text": "hello", "_charter": {"requestId": "__UUID__"}}'
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    request = Request(
        path="/v1/tools/save_note:call", body=body, headers=headers, expect='"note_id"'
    )

    class _OnSchema(Server):
        async def start(self) -> None:
            if self.process is None:
                self.env = {"CHARTER_BENCH_DB_URL": schemas.new()}
            await super().start()

    def side(kind: str) -> _Side:
        server = _OnSchema(argv=python_module("bench.load_servers", kind, "{port}"), label=kind)
        return _Side(servers=[server], request=request, connections=32)

    case = _case(
        "Ledgered write on PostgreSQL under load (32 connections)",
        "bare endpoint, same two inserts",
        side("charter-ledger"),
        side("bare-ledger"),
        target=0.8,
        note="`save_note` over REST with a fresh requestId per request (wrk fills it in), "
        "32 connections, each server on a schema of its own on the shared PostgreSQL "
        "with `SqlStore`'s default pool: charter runs its whole ledgered pipeline (the "
        "claim of the request id, the handler's insert through `ctx.db`, the stored "
        "outcome); the bare endpoint validates the same body and inserts a completed "
        "ledger row and the effect row in one SQLAlchemy Core transaction on the same "
        "store's engine. Both wait mostly on the database, which other engineers' tests "
        "share today. Where the target is missed, the CPU ratio says why: charter's server "
        "spends 1.1 to 1.4 times the bare one's CPU a request (runs of 2026-12-07), spread "
        "over the host pipeline, the store's statements, psycopg's pipelines and a task per "
        "store operation; the pipelines themselves cost less CPU than a round trip a "
        "statement ([performance.md](performance.md#ledgered-writes-on-postgresql)).",
    )
    return _with_schemas(case, schemas)


def _replica_case() -> Case:
    schemas = _Schemas()
    state: dict[str, str] = {}

    async def key() -> str:
        """A fresh schema, migrated, with one API key; the key."""
        if "key" not in state:
            from charter.store import SqlStore

            state["url"] = schemas.new()
            async with SqlStore(state["url"]) as store:
                state["key"], _ = await store.create_api_key(
                    tenant_id="tenant-a", subject="user-1", scopes=["math:read"]
                )
        return state["key"]

    class _Replica(Server):
        async def start(self) -> None:
            if self.process is None:
                await key()
                self.argv = [
                    *python_module("charter.cli", "serve", "bench.load_servers:replica_registry"),
                    "--stateless",
                    "--db",
                    state["url"],
                    "--port",
                    "{port}",
                ]
            await super().start()

    async def with_key(server: Server, request: Request) -> Request:
        headers = {**request.headers, "Authorization": f"Bearer {await key()}"}
        return Request(path=request.path, body=request.body, headers=headers, expect=request.expect)

    def replica(n: int) -> Server:
        return _Replica(argv=[], label=f"charter serve --stateless (replica {n})")

    request = _mcp_request(_MODERN)
    case = _case(
        "Two `charter serve --stateless` replicas under load",
        "one replica",
        _Side(servers=[replica(1), replica(2)], request=request, prepare=with_key),
        _Side(servers=[replica(3)], request=request, prepare=with_key),
        target=1.7,
        note=f"`tools/call` of `add(a, b)` at {_MODERN} with an API key from the store, "
        "against `charter serve bench.load_servers:replica_registry --stateless --db "
        "<PostgreSQL>` as users run it (its access log included, every call's audit event "
        "written to PostgreSQL): two replicas on one database, each loaded by a wrk of its "
        "own with half the connections at the same time (requests per second summed, the "
        "slower replica's latencies), against one replica loaded with all of them. A "
        "replica remembers a verified API key for 5 s (`ApiKeyAuthenticator(cache_seconds="
        "5)`), so the store is queried once per key, not per request (and once, not by "
        "every request in flight, when that time runs out); the audit events are written "
        "with group commit, the events recorded while one INSERT is in flight going "
        "together in the next (about 0.26 statements and commits per call at 16 "
        "connections, where one transaction per call used to cost a checkout, BEGIN, "
        "INSERT and COMMIT; a replica's CPU per request fell to about two thirds, "
        "2026-12-02). Why two replicas can pass 1.7x on 2 CPUs: one replica, one Python "
        "thread, uses one CPU at most, and before the audit events were group-committed it "
        "spent 2.2-2.3 ms of CPU per request (2026-12-01, /proc), so wrk and PostgreSQL "
        "(about 0.08 and 0.35 ms) left the two replicas at most 2 s / 2.7 ms = 740 req/s, "
        "1.69x; with about a third less CPU per request, PostgreSQL's share (now a fraction "
        "of a statement per call) leaves more of the second CPU to the second replica "
        "(1.81x measured 2026-12-02 at a load of 1). On a busy machine the ratio moves "
        "either way with the scheduler (2.30x once with the machine 100% busy at a load of "
        "6). The cheaper a replica's request, the lower that ceiling: wrk's and "
        "PostgreSQL's cost per request stays, so their share of the 2 CPUs grows as the "
        "replicas get faster (2026-12-07: 1.76x in the morning, each replica at 0.74-0.76 "
        "ms of CPU per request; 1.63x later, after quiet 2026-07-28 requests stopped going "
        "through the SDK's streaming machinery, at 0.87-0.92 ms on a machine about 1.5x "
        "slower, where the same replica would have spent about 1.1 ms before; 1.73x run "
        "alone again half an hour later; 1.50x to 1.61x in three runs once `charter "
        "serve` froze its startup heap, the one replica then at 0.79 to 0.83 ms and "
        "saturating its CPU at 1,210 to 1,260 req/s, so wrk's, PostgreSQL's and the "
        "kernel's 0.15 to 0.2 ms a request left the two about 2,000: "
        "[performance.md](performance.md#the-startup-heap)). "
        "What the case checks is that replicas share nothing but the database (no lock "
        "or row every request waits on); on a machine with more CPUs the ratio is the "
        "better test of that.",
    )
    return _with_schemas(case, schemas)


_TRAVEL_READERS = 2
_TRAVEL_WRITERS = 8


@dataclass(kw_only=True)
class _Travel:
    """``charter serve examples.travel:host`` on a SQLite file of its own, with its demo keys."""

    directory: Path | None = None

    def files(self) -> Path:
        """The directory of the database and the keys file (made on first use)."""
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="charter-bench-travel-"))
        return self.directory

    def remove(self) -> None:
        """Delete the database and the keys."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    async def with_key(self, server: Server, request: Request) -> Request:
        """``request`` with the bearer token of the demo key that may create trips."""
        keys = json.loads((self.files() / "keys.json").read_text())
        key = next(k["key"] for k in keys if "trips:write" in k["scopes"])
        headers = {**request.headers, "Authorization": f"Bearer {key}"}
        return Request(path=request.path, body=request.body, headers=headers, expect=request.expect)


@dataclass(kw_only=True)
class _UnderWrites(_Side):
    """Reads loaded by wrk while a second wrk sends ``writes`` to the same server.

    Its CPU time per request counts every request the server answered, writes included.
    """

    writes: Request
    writers: int
    _writes_prepared: Request | None = None

    async def start(self) -> None:
        """Start the server and check one write as well."""
        await super().start()
        if self._writes_prepared is None:
            server = self.servers[0]
            writes = self.writes
            if self.prepare is not None:
                writes = await self.prepare(server, writes)
            await _check_once(server, writes)
            self._writes_prepared = writes

    async def load(self, *, warmup: bool = False) -> Load:
        """The reads' load, measured while the writes run as long."""
        await self.start()
        assert self._writes_prepared is not None
        server, seconds = self.servers[0], 2 if warmup else None
        reads, writes = await asyncio.gather(
            wrk(
                server,
                self._prepared[0],
                connections=self.connections,
                threads=1,
                seconds=seconds,
                warmup=warmup,
            ),
            wrk(
                server,
                self._writes_prepared,
                connections=self.writers,
                threads=1,
                seconds=seconds,
                warmup=warmup,
            ),
        )
        answered = reads.requests_per_second + writes.requests_per_second
        return Load(
            requests_per_second=reads.requests_per_second,
            p50_ms=reads.p50_ms,
            p99_ms=reads.p99_ms,
            # Both runs last as long, so each saw the server's whole CPU time.
            cpu_ms=reads.cpu_ms * reads.requests_per_second / answered if answered else 0,
        )

    async def stop(self) -> None:
        """Stop the server."""
        await super().stop()
        self._writes_prepared = None


def _sqlite_reads_case() -> Case:
    travel = _Travel()

    class _TravelServer(Server):
        async def start(self) -> None:
            if self.process is None:
                files = travel.files()
                self.argv = [
                    *python_module("charter.cli", "serve", "examples.travel:host"),
                    "--db",
                    f"sqlite+aiosqlite:///{files / 'travel.db'}",
                    "--port",
                    "{port}",
                ]
                self.env = {"CHARTER_DEMO_KEYS": str(files / "keys.json")}
            await super().start()

    server = _TravelServer(argv=[], label="charter serve examples.travel:host")
    json_type = {"Content-Type": "application/json"}
    reads = Request(
        path="/v1/tools/trips.get:call",
        body=b'{"trip_id": "trp_lisbon01"}',
        headers=json_type,
        expect='"trp_lisbon01"',
    )
    writes = Request(
        path="/v1/tools/trips.create:call",
        body=b'{"name": "Week away", "destination": "Porto", "nights": 5, '
        b'"_charter": {"requestId": "__UUID__"}}',
        headers=json_type,
        expect='"Porto"',
    )
    case = _case(
        f"A read tool on SQLite while {_TRAVEL_WRITERS} connections write (travel demo, "
        f"{_TRAVEL_READERS} connections)",
        "the same read tool with no writes",
        _UnderWrites(
            servers=[server],
            request=reads,
            prepare=travel.with_key,
            connections=_TRAVEL_READERS,
            writes=writes,
            writers=_TRAVEL_WRITERS,
        ),
        _Side(
            servers=[server],
            request=reads,
            prepare=travel.with_key,
            connections=_TRAVEL_READERS,
        ),
        target=0.2,
        note=f"`trips.get` over REST with {_TRAVEL_READERS} connections, against `charter "
        "serve examples.travel:host --db <a SQLite file>` as a newcomer runs it (one process, "
        "its access log, every call's audit event written to the file); on charter's side a "
        f"second wrk creates trips with {_TRAVEL_WRITERS} connections at the same time, "
        "each a ledgered call holding SQLite's one write lock, and the ratio is the reads' "
        "requests per second under those writes over theirs alone. The CPU column counts "
        "every request the server answered, the writes included, so its ratio says "
        "nothing here. A read queries through `store.reader` (no lock) and waits only for "
        "its audit event, which goes before the ledgered writes waiting in the store's "
        "queue; in arrival order it waited for all of them (0.05x, 14 reads a second "
        "against 301 alone, in the same case on 2026-12-07). The writes and reads share the "
        "one CPU the server's thread runs on: what reads get, writes give up "
        "([ledger.md](ledger.md#sqlite-and-postgresql)).",
    )
    return _cleaning_up(case, travel.remove)


def _rss_case(kind: str, request: Request, name: str) -> Case:
    server = _served(kind)
    side = _Side(servers=[server], request=request)

    async def after_first() -> int:
        await wrk(server, side._prepared[0], calls=_RSS_FIRST)
        return server.rss()

    async def after_all() -> int:
        await wrk(server, side._prepared[0], calls=RSS_CALLS - _RSS_FIRST)
        return server.rss()

    async def close() -> None:
        await side.stop()

    return Case(
        name=f"{name}: server RSS after {RSS_CALLS:,} calls",
        baseline_name=f"the same server after {_RSS_FIRST:,} calls",
        run=after_all,
        baseline=after_first,
        target=1.10,
        check=side.start,
        close=close,
        measure="rss",
        rounds=1,
        note=f"`{kind}` (`create_app(host)`) loaded by wrk with {CONNECTIONS} connections "
        f"until {_RSS_FIRST:,} calls were answered, its resident memory read from /proc, "
        f"then until {RSS_CALLS:,} (about two minutes of load per side): memory a call "
        "leaves behind (caches that grow, records kept per call) shows as growth beyond "
        f"the first thousand calls. The server's `MemoryAuditSink` keeps the newest "
        f"{AUDIT_CAPACITY:,} events (`capacity`), so it is full when the first reading is "
        "taken: with the sink's default 10,000 the same run grew by about 17 MiB (1.20x), "
        "9,000 more events of about 2 KiB each, bounded by design and not a leak.",
    )


def cases() -> list[Case]:
    """Every throughput case; the PostgreSQL ones only when PostgreSQL answers."""
    if not Path("/proc/self/status").exists() or sys.platform != "linux":
        return []
    result = [*_mcp_cases(), *_rest_cases(), _sqlite_reads_case()]
    if _postgres_reachable():
        result += [_ledger_case(), _replica_case()]
    result += [
        _rss_case(
            "charter-rest",
            Request(
                path="/v1/tools/add:call",
                body=b'{"a": 1, "b": 2}',
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
                expect=_REST_EXPECT,
            ),
            "REST",
        ),
        _rss_case("charter-mcp", _mcp_request(_MODERN), f"MCP ({_MODERN})"),
    ]
    return result
