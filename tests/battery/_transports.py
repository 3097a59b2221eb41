"""The travel example served over every transport, for the transport-level battery.

- ``TravelSite``: ``create_app(host)`` under uvicorn on 127.0.0.1 (a free port), in a
  thread with its own event loop, on a store the thread opens (SQLite file or PostgreSQL
  schema). REST is at ``/v1``, MCP streamable HTTP at ``/mcp`` of the same app.
- ``charter serve examples.travel:host --stdio --principal-key KEY`` in a subprocess, one
  per principal (stdio carries no credentials: each process runs every call as its key's
  principal), on the same database: ``mcp_stdio_caller`` through the MCP SDK's client,
  ``RawStdio`` line by line, ``SharedStdio`` one agent's server per backend for a module.
- ``Caller`` implementations that make one tool call and normalise what came back into a
  ``Seen`` (kind, code, reason, replayed, output, and the gate, approval and decision facts),
  so the outcomes of the transports compare as equal values. ``seen_from_outcome`` and
  ``seen_from_approval`` normalise what the in-process host (and ``charter call --json``)
  answers, and ``run_charter`` runs the ``charter`` command (in this process).
- ``ledger_state``: the database read from outside charter, with the random parts (ids,
  times) replaced by the scenario's labels, so two databases compare as equal values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import httpx
import httpx2
import mcp.types as types
import sqlalchemy as sa
import uvicorn
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.ext.asyncio import create_async_engine
from typer.testing import CliRunner

from charter import Tool
from charter.cli import app
from charter.http import create_app
from charter.ledger import ApprovalRecord
from charter.mcp import OUTCOME_META_KEY
from charter.outcome import Completed, Denied, Failed, InteractionRequired, ToolOutcome
from charter.store import SqlStore, sqlite_url
from live_server import ReportingServer, loopback_socket

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.travel import build_host, ensure_demo_keys  # noqa: E402
from tests.store.conftest import (  # noqa: E402
    postgres_schema,
    require_postgres,
    seed_migrated_sqlite,
)

CHARTER = str(Path(sys.executable).with_name("charter"))
STARTUP_SECONDS = 90.0
"""How long a server may take to start: importing the MCP SDK takes seconds on busy CI."""

AGENT = "traveller-agent"
APPROVER = "staff-approver"
ADMIN = "admin"
GLOBEX = "globex-agent"
ROLES = (AGENT, APPROVER, ADMIN, GLOBEX)
"""The demo principals of ``examples.travel`` (``DEMO_PRINCIPALS``), by role."""


# -- databases --------------------------------------------------------------------------------


class Databases:
    """Fresh databases on one backend: SQLite files or PostgreSQL schemas.

    A SQLite file starts as a copy of one at charter's head revision
    (``seed_migrated_sqlite``): the test's first store, or a ``charter serve`` child,
    then skips the migrations (Alembic's import and run, about 0.1 to 0.5 s of CPU a
    database). A PostgreSQL schema starts empty, and its first store migrates it.
    """

    def __init__(self, backend: str, directory: Path) -> None:
        self.backend = backend
        self._directory = directory
        self._stack = contextlib.ExitStack()
        self._count = 0
        if backend == "postgres":
            require_postgres()

    def new(self, name: str = "db") -> str:
        """The URL of a new database that holds no data (the class doc says which schema)."""
        self._count += 1
        if self.backend == "sqlite":
            path = self._directory / f"{name}-{self._count}.db"
            seed_migrated_sqlite(path)
            return sqlite_url(path)
        return self._stack.enter_context(postgres_schema())

    def close(self) -> None:
        """Drop the PostgreSQL schemas."""
        self._stack.close()


async def prepare_travel(url: str, keys_file: Path) -> dict[str, str]:
    """Create the travel tables, demo data and demo API keys; return each role's key."""
    async with SqlStore(url) as store:
        host = await build_host(store)
        host.registry.close()
        keys = await ensure_demo_keys(store, keys_file)
    return {key["role"]: key["key"] for key in keys}


# -- the HTTP app (REST and MCP) in a thread -----------------------------------------------


@dataclass
class TravelSite:
    """``create_app`` over the travel host, served on 127.0.0.1 from a thread of its own.

    The host, its store and uvicorn live in that thread's event loop; tests talk to it
    over the network only, and read the database through their own engine.
    """

    db_url: str
    keys: dict[str, str]
    extra_tools: Sequence[Tool[Any, Any, Any]] = ()
    url: str = ""
    errors: list[str] = field(default_factory=list)
    """Exceptions the server thread died with (a test fails on any)."""
    _server: ReportingServer | None = None
    _thread: threading.Thread | None = None

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"

    def start(self) -> None:
        sock = loopback_socket()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        built = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sock, built), daemon=True)
        self._thread.start()
        if not built.wait(STARTUP_SECONDS) or self._server is None:
            raise RuntimeError(f"the travel site did not start: {self.errors}")
        if not self._server.ready.wait(STARTUP_SECONDS) or not self._server.started:
            self.stop()
            raise RuntimeError(f"uvicorn did not start: {self.errors}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def _run(self, sock: socket.socket, built: threading.Event) -> None:
        try:
            asyncio.run(self._serve(sock, built))
        except BaseException as exc:  # reported to the test, which fails on it
            self.errors.append(repr(exc))
            built.set()
        finally:
            sock.close()

    async def _serve(self, sock: socket.socket, built: threading.Event) -> None:
        async with SqlStore(self.db_url) as store:
            host = await build_host(store)
            for extra in self.extra_tools:
                host.registry.register(extra)
            app = create_app(host)
            config = uvicorn.Config(app, lifespan="on", log_level="warning", ws="none")
            self._server = ReportingServer(config)
            built.set()
            try:
                await self._server.serve(sockets=[sock])
            finally:
                host.registry.close()


@contextmanager
def travel_site(
    db_url: str, keys: dict[str, str], extra_tools: Sequence[Tool[Any, Any, Any]] = ()
) -> Iterator[TravelSite]:
    """Serve the travel host on ``db_url`` until the block ends."""
    site = TravelSite(db_url=db_url, keys=keys, extra_tools=extra_tools)
    site.start()
    try:
        yield site
    finally:
        site.stop()
    assert site.errors == [], site.errors


# -- what a caller saw -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One call's outcome as the caller saw it, in transport-neutral terms."""

    kind: str
    """``completed``, ``failed``, ``denied``, ``interaction-required`` or ``deferred``; or
    ``approval`` for an approver's decision (``status`` says which)."""
    code: str | None = None
    """The error code, or for an interaction the code its gate is shown with
    (``CONFIRMATION_REQUIRED``, ``APPROVAL_REQUIRED``)."""
    reason: str | None = None
    """A failure's ``meta.reason``, or a denial's cause (``approval_denied``, …)."""
    replayed: bool = False
    output: Any = None
    approval_id: str | None = None
    """The approval an approval-gate interaction, a denial or a decision names."""
    gate: str | None = None
    """What paused an ``interaction-required`` call: ``confirmation``, ``approval``, ``handler``."""
    status: str | None = None
    """An approval decision's resulting status (``approved``, ``denied``)."""
    decided_by: str | None = None
    """Who decided (``tenant/subject``), for a decision and a person's denial."""
    decision_reason: str | None = None
    """The reason the person gave, for a decision and a person's denial."""

    def labelled(self, labels: Mapping[str, str]) -> Seen:
        """The same, with every request and approval id replaced by its label, no times."""
        return replace(
            self,
            output=without_times(relabel(self.output, labels)),
            approval_id=labels.get(self.approval_id or "", self.approval_id),
        )


GATE_CODES = {"confirmation": "CONFIRMATION_REQUIRED", "approval": "APPROVAL_REQUIRED"}
"""The code each host gate is shown with (REST ``metadata.code``, MCP's ``[CODE]`` text)."""


def seen_from_http(response: httpx.Response) -> Seen:
    """Normalise a ``POST /v1/tools/{name}:call`` answer."""
    body = response.json()
    if response.status_code == 200:
        return Seen(kind="completed", output=body["output"], replayed=body["replayed"])
    if response.status_code == 202:
        interaction = body.get("interaction") or {}
        metadata = interaction.get("metadata") or {}
        return Seen(
            kind=body["kind"],
            code=metadata.get("code"),
            approval_id=body.get("approvalId"),
            gate=body.get("gate"),
        )
    if body.get("type") == "urn:charter:denied":
        # A decision, not an error: 403 with who denied, when and why in ``meta``.
        facts = body.get("meta") or {}
        return Seen(
            kind="denied",
            reason=body.get("reason"),
            approval_id=facts.get("approvalId"),
            decided_by=facts.get("decidedBy"),
            decision_reason=facts.get("decisionReason"),
        )
    return Seen(
        kind="failed",
        code=body.get("code"),
        reason=body.get("reason"),
        replayed=bool(body.get("replayed")),
    )


def approval_seen(
    approval_id: str | None, status: str | None, decided_by: Any, reason: Any
) -> Seen:
    """An approval as every surface shows it: its id, status, decider and reason."""
    return Seen(
        kind="approval",
        approval_id=approval_id,
        status=status,
        decided_by=decided_by,
        decision_reason=reason,
    )


def seen_from_approval_body(body: Mapping[str, Any]) -> Seen:
    """Normalise an approval as REST (``:grant``, ``:deny``) and ``charter approvals`` show it."""
    reason = body.get("decisionReason")
    return approval_seen(body["id"], body["status"], body.get("decidedBy"), reason)


def seen_from_mcp(result: types.CallToolResult) -> Seen:
    """Normalise a ``tools/call`` result."""
    meta = result.meta or {}
    if not result.is_error:
        return Seen(
            kind="completed",
            output=result.structured_content,
            replayed=bool(meta.get("charter/replayed", False)),
        )
    outcome = meta[OUTCOME_META_KEY]
    kind = outcome["kind"]
    if kind == "failed":
        return Seen(
            kind=kind,
            code=outcome["code"],
            reason=(outcome.get("meta") or {}).get("reason"),
            replayed=bool(outcome.get("replayed")),
        )
    if kind == "interaction-required":
        interaction = outcome["interaction"]
        code = (interaction.get("metadata") or {}).get("code")
        return Seen(
            kind=kind,
            code=code,
            approval_id=interaction["id"] if code == "APPROVAL_REQUIRED" else None,
            gate=outcome.get("gate"),
        )
    if kind == "denied":
        return Seen(
            kind=kind,
            reason=outcome.get("cause"),
            approval_id=outcome.get("approval_id"),
            decided_by=outcome.get("decided_by"),
            decision_reason=outcome.get("decision_reason"),
        )
    return Seen(kind=kind)


def seen_from_outcome(outcome: ToolOutcome) -> Seen:
    """Normalise an outcome as ``Host.invoke`` returns it (and ``charter call --json`` shows it)."""
    if isinstance(outcome, Completed):
        return Seen(kind=outcome.kind, output=outcome.output, replayed=outcome.replayed)
    if isinstance(outcome, Failed):
        return Seen(
            kind=outcome.kind,
            code=outcome.code.value,
            reason=outcome.reason,
            replayed=outcome.replayed,
        )
    if isinstance(outcome, InteractionRequired):
        return Seen(
            kind=outcome.kind,
            code=GATE_CODES.get(outcome.gate),
            approval_id=outcome.approval_id,
            gate=outcome.gate,
        )
    if isinstance(outcome, Denied):
        # A denial carries the decision of the approval it names, and its cause.
        decision = approval_seen(
            outcome.approval_id, None, outcome.decided_by, outcome.decision_reason
        )
        return replace(decision, kind=outcome.kind, reason=outcome.cause)
    return Seen(kind=outcome.kind)


def seen_from_approval(record: ApprovalRecord | Failed) -> Seen:
    """Normalise what ``host.approvals.grant``/``.deny`` answered: the approval, or a refusal."""
    if isinstance(record, Failed):
        return seen_from_outcome(record)
    return approval_seen(record.id, record.status, record.decided_by, record.decision_reason)


# -- callers --------------------------------------------------------------------------------


class Caller(Protocol):
    """Makes tool calls as the demo principals over one transport."""

    name: str

    async def call(self, role: str, tool: str, arguments: dict[str, Any]) -> Seen: ...


class HttpCaller:
    """REST: ``POST /v1/tools/{name}:call`` with the role's key as a bearer token."""

    name = "http"

    def __init__(self, site: TravelSite) -> None:
        self._site = site
        self._client = httpx.AsyncClient(base_url=site.url, timeout=60)

    async def call(self, role: str, tool: str, arguments: dict[str, Any]) -> Seen:
        response = await self.post(role, tool, arguments)
        return seen_from_http(response)

    async def post(self, role: str | None, tool: str, arguments: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._site.keys[role]}"} if role else {}
        return await self._client.post(f"/v1/tools/{tool}:call", json=arguments, headers=headers)

    async def decide(
        self, role: str, approval_id: str, *, grant: bool, reason: str | None = None
    ) -> httpx.Response:
        """``POST /v1/approvals/{id}:grant`` (or ``:deny``) as ``role``, with the reason."""
        headers = {"Authorization": f"Bearer {self._site.keys[role]}"}
        path = f"/v1/approvals/{approval_id}:{'grant' if grant else 'deny'}"
        body = {"reason": reason} if reason is not None else None
        return await self._client.post(path, json=body, headers=headers)

    async def aclose(self) -> None:
        await self._client.aclose()


class McpCaller:
    """MCP through the official client: one session per role, opened on first use."""

    def __init__(self, name: str, connect: Callable[[str], Awaitable[Client]]) -> None:
        self.name = name
        self._connect = connect
        self._clients: dict[str, Client] = {}
        self._lock = asyncio.Lock()

    async def client(self, role: str) -> Client:
        async with self._lock:
            if role not in self._clients:
                self._clients[role] = await self._connect(role)
            return self._clients[role]

    async def call(self, role: str, tool: str, arguments: dict[str, Any]) -> Seen:
        client = await self.client(role)
        return seen_from_mcp(await client.call_tool(tool, arguments))


@asynccontextmanager
async def mcp_http_caller(site: TravelSite) -> AsyncIterator[McpCaller]:
    """MCP streamable HTTP at the site's ``/mcp``, a bearer key per role."""
    async with AsyncExitStack() as stack:

        async def connect(role: str) -> Client:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {site.keys[role]}"},
                    timeout=httpx2.Timeout(60, read=120),
                )
            )
            transport = streamable_http_client(site.mcp_url, http_client=http)
            return await stack.enter_async_context(Client(transport, mode="legacy"))

        yield McpCaller("mcp-http", connect)


def stdio_parameters(db_url: str, keys_file: Path, key: str | None) -> StdioServerParameters:
    """``charter serve examples.travel:host --stdio`` on ``db_url`` as ``key``'s principal."""
    env = {**os.environ, "CHARTER_DEMO_KEYS": str(keys_file)}
    for name in ("CHARTER_DB", "CHARTER_KEY", "CHARTER_PRINCIPAL_KEY"):
        env.pop(name, None)
    args = ["serve", "examples.travel:host", "--stdio", "--db", db_url]
    if key is not None:
        args += ["--principal-key", key]
    return StdioServerParameters(command=CHARTER, args=args, env=env, cwd=str(ROOT))


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """What one ``charter`` command did: its exit status and what it printed."""

    exit_code: int
    stdout: str
    stderr: str


async def run_charter(*args: str) -> CommandResult:
    """``charter ARGS…`` in this process (Typer's ``CliRunner``), without the caller's
    ``CHARTER_*`` settings.

    The command's own code end to end (parsing, requests, printing, exit status), without
    a ``charter`` process per command: a start costs about 0.6 s of CPU, nearly all
    imports (tests/cli runs the installed script). In a worker thread, so the event loop
    (and any server in this process) keeps running while it works.
    """
    unset = dict.fromkeys(("CHARTER_DB", "CHARTER_KEY", "CHARTER_PRINCIPAL_KEY"))
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args), env=unset)
    return CommandResult(exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr)


@asynccontextmanager
async def mcp_stdio_caller(
    db_url: str, keys: dict[str, str], keys_file: Path
) -> AsyncIterator[McpCaller]:
    """MCP over stdio: a ``charter serve --stdio`` subprocess per role, on one database."""
    async with AsyncExitStack() as stack:

        async def connect(role: str) -> Client:
            parameters = stdio_parameters(db_url, keys_file, keys[role])
            return await stack.enter_async_context(
                Client(parameters, mode="legacy", read_timeout_seconds=STARTUP_SECONDS)
            )

        yield McpCaller("mcp-stdio", connect)


# -- the database from outside ------------------------------------------------------------


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def relabel(value: Any, labels: Mapping[str, str]) -> Any:
    """``value`` with every id in ``labels`` replaced by its label (also inside strings)."""
    if isinstance(value, str):
        for raw, label in labels.items():
            if raw in value:
                value = value.replace(raw, label)
        return value
    if isinstance(value, list):
        return [relabel(item, labels) for item in value]
    if isinstance(value, dict):
        return {relabel(k, labels): relabel(v, labels) for k, v in value.items()}
    return value


_TIMES = frozenset({"created_at", "expires_at", "decided_at", "updated_at", "settled_at", "time"})


def without_times(value: Any) -> Any:
    """``value`` without the timestamps two runs of one scenario cannot share."""
    if isinstance(value, list):
        return [without_times(item) for item in value]
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in _TIMES}
    return value


_VOLATILE = frozenset(
    {
        "created_at",
        "expires_at",
        "decided_at",
        "invocation_id",
        "id",
        "time",
        "seq",
        "duration_ms",
        "settled_at",
        "updated_at",
        "delivered_at",
        "next_attempt_at",
        "lease_until",
    }
)
"""Columns and audit fields that differ between two runs of the same scenario."""


async def ledger_state(url: str, labels: Mapping[str, str]) -> dict[str, list[str]]:
    """Every charter and travel table, without the volatile columns, ids relabelled.

    Each table is a sorted list of canonical JSON rows, so two databases that went through
    the same scenario compare equal whatever the order of their rows.
    """
    engine = create_async_engine(url, poolclass=sa.NullPool)
    tables = {
        "ledger": "charter_ledger_entries",
        "approvals": "charter_approvals",
        "claims": "charter_claims",
        "audit": "charter_audit_events",
        "trips": "travel_trips",
        "bookings": "travel_bookings",
        "memories": "travel_memories",
        "payments": "travel_payment_calls",
        "effects": "charter_effects",
    }
    state: dict[str, list[str]] = {}
    try:
        async with engine.connect() as conn:
            for name, table in tables.items():
                rows = [
                    dict(r._mapping) for r in await conn.execute(sa.text(f"SELECT * FROM {table}"))
                ]
                state[name] = sorted(_canonical_row(name, row, labels) for row in rows)
    finally:
        await engine.dispose()
    return state


def _canonical_row(table: str, row: dict[str, Any], labels: Mapping[str, str]) -> str:
    if table == "audit":
        row = json.loads(row["event"]) if isinstance(row["event"], str) else dict(row["event"])
    if table == "approvals" and isinstance(row.get("arguments"), str):
        row["arguments"] = json.loads(row["arguments"])
    if table == "approvals" and isinstance(row.get("history"), str):
        # Each decision's time differs between runs; who decided what does not.
        row["history"] = without_times(json.loads(row["history"]))
    if table == "ledger" and isinstance(row.get("outcome"), str):
        row["outcome"] = json.loads(row["outcome"])
    kept = {k: v for k, v in row.items() if k not in _VOLATILE or (table == "trips" and k == "id")}
    if table == "bookings":
        kept["id"] = row["id"]
    return json.dumps(relabel(kept, labels), sort_keys=True, default=str)


async def effect_labels(url: str, labels: Mapping[str, str]) -> dict[str, str]:
    """Labels for the effect keys of labelled requests (``effect 0 of R5``).

    An effect's key is a hash over its request id (and tenant, caller, name, place), so it
    differs between runs of one scenario as the request id does; relabelling it compares
    the effects, the provider's calls and the outputs that carry the key.
    """
    engine = create_async_engine(url, poolclass=sa.NullPool)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(sa.text("SELECT key, request_id, seq FROM charter_effects"))
            ).all()
    finally:
        await engine.dispose()
    return {
        key: f"effect {seq} of {labels[request_id]}"
        for key, request_id, seq in rows
        if request_id in labels
    }


def unlabelled_ids(state: Mapping[str, list[str]]) -> list[str]:
    """UUIDs left in a relabelled state (a request id the scenario did not name)."""
    return sorted({m for rows in state.values() for row in rows for m in _UUID.findall(row)})


# -- raw JSON-RPC, for tests that choose their own message ids --------------------------------

INITIALIZE_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "battery", "version": "1"},
}


class RawMcp(Protocol):
    """A JSON-RPC connection to an MCP server whose message ids the test picks."""

    async def request(self, message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; return the response with that id (notifications skipped)."""
        ...


class RawStdio:
    """``charter serve --stdio`` driven line by line: one JSON-RPC message per line.

    A plain subprocess, read in a worker thread rather than through asyncio, so that one
    server can outlive the event loop of the test that first used it (``SharedStdio``).
    Not ``die_with_parent``: Linux sends that signal when the *thread* that started the
    server ends. Should pytest die, the server reads the end of its input and exits.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    @contextmanager
    def open(cls, parameters: StdioServerParameters) -> Iterator[RawStdio]:
        process = subprocess.Popen(
            [parameters.command, *parameters.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=parameters.env,
            cwd=parameters.cwd,
        )
        raw = cls(process)
        try:
            raw.exchange(0, "initialize", INITIALIZE_PARAMS)
            raw._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield raw
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:  # unclosed, it is a ResourceWarning when collected
                process.stdout.close()

    async def request(self, message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self.exchange, message_id, method, params)

    def exchange(self, message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; block until the response with that id (notifications skipped)."""
        self._send({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})
        assert self._process.stdout is not None
        while True:  # bounded by pytest's timeout should the server hang
            line = self._process.stdout.readline()
            if not line:
                raise RuntimeError("the stdio server closed its output")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == message_id:
                return message

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        self._process.stdin.flush()


@dataclass(frozen=True)
class StdioAgent:
    """A ``charter serve --stdio`` running as the demo agent, and its database's URL."""

    db_url: str
    raw: RawStdio


class SharedStdio:
    """One travel database and one stdio server as the agent per backend, started on first
    use and stopped by ``close``: each server start costs about 2 s of CPU (the MCP SDK's
    imports), so the tests of a module that each make their own calls (with request ids
    of their own) share them."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._stack = contextlib.ExitStack()
        self._agents: dict[str, StdioAgent] = {}
        self._lock = threading.Lock()

    async def agent(self, backend: str) -> StdioAgent:
        """The agent's server on ``backend`` (``sqlite`` or ``postgres``)."""
        return await asyncio.to_thread(self._agent, backend)

    def _agent(self, backend: str) -> StdioAgent:
        with self._lock:
            if backend not in self._agents:
                databases = Databases(backend, self._directory)
                self._stack.callback(databases.close)
                url = databases.new(backend)
                keys_file = self._directory / f"{backend}-keys.json"
                keys = asyncio.run(prepare_travel(url, keys_file))
                parameters = stdio_parameters(url, keys_file, keys[AGENT])
                raw = self._stack.enter_context(RawStdio.open(parameters))
                self._agents[backend] = StdioAgent(db_url=url, raw=raw)
            return self._agents[backend]

    def close(self) -> None:
        """Stop the servers (each exits when its input closes); drop the schemas."""
        self._stack.close()


class RawHttp:
    """MCP streamable HTTP driven request by request, with the session id it was given."""

    def __init__(self, client: httpx.AsyncClient, url: str, key: str) -> None:
        self._client = client
        self.url = url
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {key}",
        }

    @classmethod
    @asynccontextmanager
    async def open(cls, url: str, key: str) -> AsyncIterator[RawHttp]:
        async with httpx.AsyncClient(timeout=60) as client:
            raw = cls(client, url, key)
            response = await client.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": INITIALIZE_PARAMS,
                },
                headers=raw.headers,
            )
            assert response.status_code == 200, response.text
            raw.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
            raw.headers["MCP-Protocol-Version"] = str(INITIALIZE_PARAMS["protocolVersion"])
            notified = await client.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=raw.headers,
            )
            assert notified.status_code == 202, notified.text
            yield raw

    def message(self, message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}

    async def request(self, message_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = await self._client.post(
            self.url, json=self.message(message_id, method, params), headers=self.headers
        )
        return parse_mcp_response(response.text, response.headers.get("content-type", ""))


def parse_mcp_response(text: str, content_type: str) -> dict[str, Any]:
    """The JSON-RPC response in a streamable HTTP answer (JSON, or the last SSE message)."""
    if content_type.startswith("application/json"):
        parsed: dict[str, Any] = json.loads(text)
        return parsed
    data = [line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")]
    assert data, text
    last: dict[str, Any] = json.loads(data[-1])
    return last


async def scalar(url: str, sql: str, **params: Any) -> Any:
    """One value read from the database at ``url`` from outside charter."""
    engine = create_async_engine(url, poolclass=sa.NullPool)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(sa.text(sql), params)).scalar_one()
    finally:
        await engine.dispose()
