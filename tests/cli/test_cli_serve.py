"""`charter serve`: its one-line errors in process, MCP over stdio in a subprocess, and --help.

Serving over HTTP end to end is ``tests/examples/test_travel_tour.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
from cli_support import ROOT, TravelFiles, charter, create_key, error_line, usage_error
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from charter.cli.serve import _allowed_hosts, _extra_origins, base_url, bind
from live_server import charter_serve

REMOTE_TOOLS = (Path(__file__).parent / "remote_tools.py").read_text(encoding="utf-8")

CHARTER = str(Path(sys.executable).with_name("charter"))


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_serve_on_a_port_in_use_prints_one_line_and_exits_2(
    travel: TravelFiles, taken_port: int
) -> None:
    result = charter(
        "serve", "examples.travel:host", "--port", str(taken_port), "--db", travel.db,
        env=travel.env,
    )  # fmt: skip
    assert usage_error(result) == (
        f"error: port {taken_port} on 127.0.0.1 is in use; stop the other server or pick "
        "another with --port"
    )


@pytest.mark.anyio
async def test_connections_to_the_served_port_send_small_replies_at_once() -> None:
    # asyncio sets TCP_NODELAY only on connections accepted from a socket created with
    # IPPROTO_TCP; with protocol 0, a small reply waits for the client's delayed ACK
    # (~40 ms per call on Linux).
    listening = bind("127.0.0.1", 0)
    accepted: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = writer.get_extra_info("socket")
        accepted.set_result(bool(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listening)
    try:
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        try:
            assert await asyncio.wait_for(accepted, 10)
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()


def test_serve_with_a_bad_target_prints_one_line_and_exits_2() -> None:
    result = charter("serve", "examples.travel:nope")
    assert usage_error(result) == "error: module 'examples.travel' has no attribute 'nope'"


def test_serve_with_an_unreachable_database_prints_one_line_and_exits_2() -> None:
    result = charter(
        "serve", "examples.travel:host", "--db", "postgresql://charter:secret@127.0.0.1:1/none"
    )
    line = usage_error(result)
    assert line.startswith("error: cannot open the database postgresql://charter:***@127.0.0.1")
    assert "secret" not in line


def test_serve_with_a_schema_behind_says_to_run_db_upgrade(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # charter tables without a revision: not this schema
        conn.execute("CREATE TABLE charter_ledger_entries (x TEXT)")
    result = charter("serve", "examples.travel:host", "--db", f"sqlite:///{path}")
    assert "charter_" in usage_error(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stdio", "--stateless"], "error: --stateless applies to HTTP"),
        (["--principal-key", "chk_x"], "error: --principal-key applies to --stdio"),
        (["--port", "70000"], None),
        (
            ["--allow-origin", "https://tools.example.com/console/"],
            "error: --allow-origin 'https://tools.example.com/console/' is not an origin",
        ),
        (["--allow-origin", "tools.example.com"], "error: --allow-origin 'tools.example.com'"),
        (["--public-url", "https://tools.example.com:99999/"], "error: --public-url must be"),
    ],
)
def test_serve_with_conflicting_options_exits_2(args: list[str], message: str | None) -> None:
    result = charter("serve", "examples.travel:host", *args)
    assert result.exit_code == 2
    if message is not None:
        assert error_line(result).startswith(message)


def test_serve_stdio_with_a_wrong_principal_key_prints_one_line(travel: TravelFiles) -> None:
    result = travel.run("serve", "--stdio", "--principal-key", "chk_0_wrong")
    assert usage_error(result).startswith("error: --principal-key was not accepted")


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8700"),
        ("0.0.0.0", "http://127.0.0.1:8700"),
        ("::", "http://[::1]:8700"),
        ("tools.internal", "http://tools.internal:8700"),
    ],
)
def test_the_banner_shows_an_address_people_can_open(address: str, url: str) -> None:
    assert base_url(address, 8700) == url


def test_allow_host_adds_a_name_to_the_loopback_hosts_mcp_accepts() -> None:
    assert _allowed_hosts([]) is None  # create_app's default: loopback only
    allowed = _allowed_hosts(["tools.example.com"])
    assert allowed is not None
    assert {"127.0.0.1:*", "tools.example.com", "tools.example.com:*"} <= set(allowed)


def test_allow_origin_and_the_public_urls_origin_are_answered_others_are_403(
    tmp_path: Path,
) -> None:
    # Behind a proxy the console's page has a public origin the server's Host never shows.
    args = (
        "examples.travel:host",
        "--db",
        f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}",
        "--allow-origin",
        "https://tools.example.com",
    )
    with (
        charter_serve(*args, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):

        def status(origin: str) -> int:
            return client.get("/v1/tools", headers={"Origin": origin}).status_code

        assert status("https://tools.example.com") == 200
        assert status(served.url) == 200  # the server's own origin stays allowed
        refused = client.get("/v1/tools", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and refused.json()["reason"] == "origin_not_allowed"


def test_stopping_the_server_lets_a_call_that_is_not_cancellable_finish(tmp_path: Path) -> None:
    # remote.send takes 7 s, past the 5 s uvicorn gives open requests when the server
    # stops: the request is cut off, but the call runs to its end and commits, so the
    # retry, on the server started again, replays it instead of sending it twice.
    (tmp_path / "remote_tools_stop.py").write_text(REMOTE_TOOLS, encoding="utf-8")
    db = f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}"
    key = create_key(db, "acme", "agent", "remote:send")
    marks = tmp_path / "marks.txt"
    env = {"PYTHONPATH": str(tmp_path), "MARKS": str(marks)}
    target = ("remote_tools_stop:registry", "--db", db)
    url = "/v1/tools/remote.send:call"
    body = {"text": "hello", "seconds": 7}
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": str(uuid.uuid4())}
    with charter_serve(*target, cwd=tmp_path, env=env) as served:
        sending = threading.Thread(
            target=lambda: httpx.post(served.url + url, json=body, headers=headers, timeout=60),
            daemon=True,
        )
        sending.start()
        deadline = time.monotonic() + 30
        while "start hello" not in (marks.read_text() if marks.exists() else ""):
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
    # Stopped (SIGINT) and exited cleanly: the call ran to its end first.
    assert marks.read_text().splitlines() == ["start hello", "end hello"]
    with (
        charter_serve(*target, cwd=tmp_path, env=env) as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        replay = client.post(url, json=body, headers=headers)
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert marks.read_text().splitlines() == ["start hello", "end hello"]


def test_the_public_urls_origin_is_allowed_as_a_browser_writes_it() -> None:
    public = "https://Console.Example.org:443/charter/"
    assert _extra_origins([], public) == ["https://console.example.org"]
    assert _extra_origins([], "http://[::1]:8700/") == ["http://[::1]:8700"]
    given = ["https://tools.example.com"]
    assert _extra_origins(given, "https://tools.example.com/") == given


# -- MCP over stdio, in a subprocess --------------------------------------------------------------


@pytest.fixture
def keys(travel: TravelFiles) -> dict[str, str]:
    """The demo keys, created before the test's event loop starts (the CLI runs its own)."""
    return travel.keys()


def stdio_server(travel: TravelFiles, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=CHARTER,
        args=["serve", "examples.travel:host", "--stdio", "--db", travel.db, *extra],
        env={"CHARTER_DEMO_KEYS": str(travel.keys_file)},
        cwd=ROOT,
    )


@pytest.mark.anyio
async def test_serve_stdio_runs_every_call_as_the_principal_key(
    travel: TravelFiles, keys: dict[str, str]
) -> None:
    principal_key = keys["traveller-agent"]
    async with Client(stdio_server(travel, "--principal-key", principal_key)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        found = await client.call_tool("trips.search", {"text": "lisbon"})
        admin = await client.call_tool("admin.tenants.list", {})
    assert "trips.search" in names and "admin.tenants.list" not in names
    assert found.structured_content is not None
    assert [t["id"] for t in found.structured_content["trips"]] == ["trp_lisbon01"]
    assert admin.is_error is True


@pytest.mark.anyio
async def test_serve_stdio_without_a_key_serves_public_tools_only(
    travel: TravelFiles, keys: dict[str, str]
) -> None:
    async with Client(stdio_server(travel)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        ping = await client.call_tool("catalog.ping", {})
        trips = await client.call_tool("trips.search", {})
    assert "catalog.ping" in names and "trips.search" not in names
    assert ping.structured_content == {"ok": True, "service": "travel"}
    assert trips.is_error is True
    block = trips.content[0]
    assert isinstance(block, types.TextContent) and block.text.startswith("[UNAUTHENTICATED]")


def test_serve_stdio_stops_once_its_principal_key_is_revoked(
    travel: TravelFiles, keys: dict[str, str]
) -> None:
    # A stdio server lives as long as its desktop client; a key revoked meanwhile must stop
    # it as it stops an HTTP caller, not keep running every call as the key's principal.
    key = keys["traveller-agent"]
    process = subprocess.Popen(
        [CHARTER, "serve", "examples.travel:host", "--stdio", "--db", travel.db,
         "--principal-key", key],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "CHARTER_DEMO_KEYS": str(travel.keys_file)},
    )  # fmt: skip
    try:
        assert process.stdin is not None and process.stdout is not None
        initialize = (
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        )
        process.stdin.write(initialize.encode())
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 0
        revoked = charter("keys", "revoke", key.split("_")[1], "--db", travel.db)
        assert revoked.exit_code == 0, revoked.output
        # Within the time a server remembers a verified key, and one more check.
        assert process.wait(timeout=30) == 2
        assert process.stderr is not None
        told = process.stderr.read().decode()
        assert "error: --principal-key is no longer accepted" in told, told
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


class StdioServer:
    """``charter serve TARGET --stdio`` in a subprocess, spoken to one JSON-RPC line at a time."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [CHARTER, "serve", *args, "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
            env={**os.environ, **env},
        )  # fmt: skip
        self.send(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }}
        )  # fmt: skip
        assert self.answer()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


def test_serve_stdio_stopped_by_sigterm_lets_a_call_that_is_not_cancellable_commit(
    tmp_path: Path,
) -> None:
    # The SDK's stdio client closes stdin, then sends SIGTERM two seconds later; a client
    # may also keep stdin open. Either way the call runs to its end and commits first.
    (tmp_path / "remote_tools_stdio.py").write_text(REMOTE_TOOLS, encoding="utf-8")
    db = f"sqlite+aiosqlite:///{tmp_path / 'charter.db'}"
    key = create_key(db, "acme", "agent", "remote:send")
    marks = tmp_path / "marks.txt"
    env = {"PYTHONPATH": str(tmp_path), "MARKS": str(marks)}
    target = ("remote_tools_stdio:registry", "--db", db, "--principal-key", key)
    arguments = {"text": "hello", "seconds": 2, "_charter": {"requestId": str(uuid.uuid4())}}
    call = {"name": "remote.send", "arguments": arguments}
    first = StdioServer(*target, cwd=tmp_path, env=env)
    try:
        first.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        deadline = time.monotonic() + 60
        while "start hello" not in (marks.read_text() if marks.exists() else ""):
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.05)
        first.process.send_signal(signal.SIGTERM)  # stdin stays open
        assert first.process.wait(timeout=60) == 0
    finally:
        first.close()
    assert marks.read_text().splitlines() == ["start hello", "end hello"]
    again = StdioServer(*target, cwd=tmp_path, env=env)
    try:
        again.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        replayed = again.answer()
    finally:
        again.close()
    assert replayed["result"]["_meta"]["charter/replayed"] is True, replayed
    assert marks.read_text().splitlines() == ["start hello", "end hello"]


# -- every command has --help ---------------------------------------------------------------------

COMMANDS = [
    [],
    ["serve"],
    ["tools"],
    ["call"],
    ["approvals"],
    ["approvals", "list"],
    ["approvals", "show"],
    ["approvals", "grant"],
    ["approvals", "deny"],
    ["keys"],
    ["keys", "create"],
    ["keys", "list"],
    ["keys", "revoke"],
    ["db"],
    ["db", "upgrade"],
    ["db", "prune"],
    ["diff"],
    ["lock"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "charter")
def test_every_command_has_help(command: list[str]) -> None:
    result = charter(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
