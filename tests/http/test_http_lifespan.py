"""Embedding: ``create_app`` (and the MCP ASGI app) served by plain ``uvicorn module:app``.

No ``charter serve``: the app's lifespan must open the ``SqlStore`` it was handed unopened
and close it at shutdown, so every audit event and ledgered call lands in the database.
A host that loses audit events says so on ``/readyz``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from http_support import AGENT, serve
from pydantic import BaseModel

from charter import Registry, tool
from charter.audit import AuditEvent, MemoryAuditSink
from charter.auth import StaticAuthenticator
from charter.host import Host
from charter.http import create_app
from charter.store import SqlStore
from live_server import interrupt, loopback_socket

ROOT = Path(__file__).resolve().parents[2]

APP_MODULE = textwrap.dedent(
    """
    import os

    from pydantic import BaseModel

    from charter import Registry, RiskPolicy, tool
    from charter.host import Host
    from charter.store import ApiKeyAuthenticator, SqlStore


    class TripSearch(BaseModel):
        text: str


    class TripList(BaseModel):
        trips: list[str]


    class RenameTrip(BaseModel):
        trip_id: str
        name: str


    class Trip(BaseModel):
        id: str
        name: str


    @tool(name="trips.search", tier="read", required_scopes=["trips:read"])
    def search(args: TripSearch) -> TripList:
        "Find trips by text."
        return TripList(trips=["trp_lisbon01"] if "lis" in args.text else [])


    @tool(
        name="trips.rename",
        tier="write",
        risk_policy=RiskPolicy(
            destructive=False, reversible=True, dry_run_supported=False,
            side_effects=("data-write",),
        ),
        required_scopes=["trips:write"],
    )
    def rename(args: RenameTrip) -> Trip:
        "Rename a trip."
        return Trip(id=args.trip_id, name=args.name)


    registry = Registry()
    registry.register_all([search, rename])
    # Handed over unopened: only the app's lifespan opens it.
    store = SqlStore(os.environ["LIFESPAN_DB"])
    host = Host(registry, store=store, authenticator=ApiKeyAuthenticator(store))

    if os.environ["LIFESPAN_APP"] == "http":
        from charter.http import create_app

        app = create_app(host)
    else:
        from charter.mcp import create_asgi_app

        app = create_asgi_app(host)
    """
)


async def make_key(url: str) -> str:
    """Create the schema and one agent key, then close: the served app opens its own store."""
    scopes = ["trips:read", "trips:write"]
    async with SqlStore(url) as store:
        secret, _ = await store.create_api_key(
            tenant_id="acme", subject="agent-7", scopes=scopes, kind="agent", name="lifespan test"
        )
    return secret


async def audit_rows(url: str) -> list[tuple[str, str, str]]:
    async with SqlStore(url) as store:
        async with store.engine.connect() as conn:
            rows = await conn.execute(
                sa.text("SELECT tool, outcome, subject FROM charter_audit_events ORDER BY time")
            )
            return [(r[0], r[1], r[2]) for r in rows]


@contextmanager
def uvicorn_process(tmp_path: Path, kind: str, db_url: str) -> Iterator[tuple[str, Path]]:
    """``python -m uvicorn lifespan_app:app`` in a subprocess; yields its URL and log."""
    (tmp_path / "lifespan_app.py").write_text(APP_MODULE)
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()  # uvicorn binds it again (SO_REUSEADDR); the race is harmless on loopback
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")]),
        "LIFESPAN_DB": db_url,
        "LIFESPAN_APP": kind,
    }
    log = tmp_path / f"uvicorn-{kind}.log"
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "lifespan_app:app", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=err,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_listening(url, process, log)
        yield url, log
    finally:
        code = interrupt(process)
    assert code == 0, log.read_text()


def _wait_until_listening(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{log.read_text()}")
        try:
            httpx.get(url + "/", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)  # polling for startup, not timing an assertion
    raise RuntimeError(f"uvicorn did not listen within 60 s:\n{log.read_text()}")


def test_plain_uvicorn_opens_the_store_it_was_handed_and_records_every_audit_event(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}"
    key = asyncio.run(make_key(db_url))
    headers = {"Authorization": f"Bearer {key}"}
    request_id = str(uuid.uuid4())
    with uvicorn_process(tmp_path, "http", db_url) as (url, log):
        assert httpx.get(url + "/readyz").status_code == 200
        found = httpx.post(
            url + "/v1/tools/trips.search:call", json={"text": "lisbon"}, headers=headers
        )
        assert found.status_code == 200, found.text
        assert found.json()["output"] == {"trips": ["trp_lisbon01"]}
        renamed = httpx.post(
            url + "/v1/tools/trips.rename:call",
            json={"trip_id": "trp_lisbon01", "name": "Offsite"},
            headers={**headers, "Idempotency-Key": request_id},
        )
        assert renamed.status_code == 200, renamed.text
        replayed = httpx.post(
            url + "/v1/tools/trips.rename:call",
            json={"trip_id": "trp_lisbon01", "name": "Offsite"},
            headers={**headers, "Idempotency-Key": request_id},
        )
        assert replayed.json()["replayed"] is True
        trail = httpx.get(url + "/v1/audit", headers=headers).json()
        assert [e["tool"] for e in trail["events"]].count("trips.rename") == 2
        assert httpx.get(url + "/readyz").status_code == 200
    assert "not open" not in log.read_text()
    # Shut down cleanly (the store closed), and everything is in the database.
    rows = asyncio.run(audit_rows(db_url))
    assert rows == [
        ("trips.search", "completed", "agent-7"),
        ("trips.rename", "completed", "agent-7"),
        ("trips.rename", "completed", "agent-7"),
    ]


def test_plain_uvicorn_serves_the_mcp_asgi_app_on_the_store_it_opened(tmp_path: Path) -> None:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    db_url = f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}"
    key = asyncio.run(make_key(db_url))

    async def call(url: str) -> dict[str, object]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as client,
            streamable_http_client(url + "/mcp", http_client=client) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(
                "trips.rename",
                {
                    "trip_id": "trp_lisbon01",
                    "name": "Offsite",
                    "_charter": {"requestId": str(uuid.uuid4())},
                },
            )
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

    with uvicorn_process(tmp_path, "mcp", db_url) as (url, log):
        assert asyncio.run(call(url)) == {"id": "trp_lisbon01", "name": "Offsite"}
    assert "not open" not in log.read_text()
    assert asyncio.run(audit_rows(db_url)) == [("trips.rename", "completed", "agent-7")]


def test_a_store_the_application_opened_is_left_open_by_the_app(tmp_path: Path) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}"

    async def scenario() -> None:
        async with SqlStore(db_url) as store:
            host = Host(Registry(), store=store)
            async with host.running():
                assert store.state == "open"
            assert store.state == "open"  # its owner closes it
        closed = SqlStore(db_url)
        await closed.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            async with Host(Registry(), store=closed).running():
                pass

    asyncio.run(scenario())


class FlakyAudit(MemoryAuditSink):
    """An audit sink that refuses events while ``down``."""

    down = True

    async def record(self, event: AuditEvent) -> None:
        if self.down:
            raise OSError("the audit database is full")
        await super().record(event)


class TripSearch(BaseModel):
    text: str = ""


class TripList(BaseModel):
    trips: list[str]


@tool(name="trips.search", tier="read", required_scopes=["trips:read"])
def search(args: TripSearch) -> TripList:
    """Find trips by text."""
    return TripList(trips=[])


def test_lost_audit_events_make_readyz_fail_until_one_is_recorded_again() -> None:
    registry = Registry()
    registry.register(search)
    sink = FlakyAudit()
    host = Host(
        registry,
        authenticator=StaticAuthenticator({"agent-key": AGENT}),
        audit=sink,
    )
    headers = {"Authorization": "Bearer agent-key"}
    with serve(create_app(host, mcp=False)) as url:
        assert httpx.get(url + "/readyz").status_code == 200
        call = httpx.post(url + "/v1/tools/trips.search:call", json={}, headers=headers)
        # The call's outcome stands (it may have had an effect); the loss is not silent.
        assert call.status_code == 200, call.text
        ready = httpx.get(url + "/readyz")
        assert ready.status_code == 503
        assert ready.json()["reason"] == "audit_lost"
        assert host.audit_losses().lost == 1
        sink.down = False
        httpx.post(url + "/v1/tools/trips.search:call", json={}, headers=headers)
        assert httpx.get(url + "/readyz").status_code == 200
        assert host.audit_losses().lost == 1 and not host.audit_losses().failing
