"""`charter serve --upstreams` and `charter tools --upstreams`: the real server, real clients."""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import anyio
import httpx
import mcp.types as types
import pytest
from examples.gateway import upstreams_toml
from tests.builders import mcp_http_client
from tests.store.conftest import seed_migrated_sqlite
from typer.testing import CliRunner

from charter.cli import app
from live_server import charter_serve, raw_connection

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT)}


def charter(*args: str, env: Mapping[str, str] | None = None) -> str:
    result = CliRunner().invoke(app, list(args), env={"CHARTER_DB": None, **(env or {})})
    assert result.exit_code == 0, result.output
    return result.stdout


def create_key(db: str, subject: str, kind: str, *scopes: str) -> str:
    scope_args = [part for scope in scopes for part in ("--scope", scope)]
    out = charter(
        "keys", "create", "--db", db, "--tenant", "acme", "--subject", subject, "--kind", kind,
        *scope_args, "--json",
    )  # fmt: skip
    key: str = json.loads(out)["key"]
    return key


@pytest.fixture
def upstreams(npm_servers: dict[str, Path], files: Path, tmp_path: Path) -> Path:
    path = tmp_path / "upstreams.toml"
    path.write_text(upstreams_toml(npm_servers["filesystem"], files))
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    seed_migrated_sqlite(tmp_path / "gateway.db")  # at head: no test here is about migrating
    return f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"


@pytest.fixture
def keys(db: str) -> dict[str, str]:
    """An agent's key and an approver's, made before the test's event loop starts."""
    return {
        "agent": create_key(db, "agent", "agent", "files:read", "files:write"),
        "approver": create_key(db, "bob", "person", "charter:approve"),
    }


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.anyio
async def test_serve_with_only_upstreams_governs_the_filesystem_server_over_mcp_and_rest(
    upstreams: Path, files: Path, db: str, keys: dict[str, str], tmp_path: Path
) -> None:
    agent, approver = keys["agent"], keys["approver"]
    with charter_serve("--upstreams", str(upstreams), "--db", db, cwd=tmp_path, env=ENV) as served:
        async with mcp_http_client(served.url + "/mcp", agent, timeout=60) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            read = await client.call_tool(
                "fs.read_text_file", {"path": str(files / "itinerary.md")}
            )
        assert "fs.read_text_file" in names and "fs.write_file" in names
        assert "fs.move_file" not in names  # hidden by the file
        assert read.content == [
            types.TextContent(type="text", text=(files / "itinerary.md").read_text())
        ]

        with httpx.Client(base_url=served.url, timeout=60) as rest:
            ready = rest.get("/readyz")
            assert ready.status_code == 200
            [fs] = ready.json()["upstreams"]
            assert fs["name"] == "fs" and fs["state"] == "connected"
            listed = rest.get("/v1/upstreams", headers=bearer(agent)).json()["upstreams"]
            assert [u["name"] for u in listed] == ["fs"]

            request_id = str(uuid.uuid4())
            body = {"path": str(files / "packing.txt"), "content": "Sunscreen."}
            headers = {**bearer(agent), "Idempotency-Key": request_id, "Charter-Confirm": "true"}
            asked = rest.post("/v1/tools/fs.write_file:call", json=body, headers=headers)
            assert asked.status_code == 202, asked.text
            approval_id = asked.json()["interaction"]["id"]
            assert not (files / "packing.txt").exists()
            granted = rest.post(
                f"/v1/approvals/{approval_id}:grant", json={}, headers=bearer(approver)
            )
            assert granted.status_code == 200, granted.text
            done = rest.post(
                "/v1/tools/fs.write_file:call",
                json=body,
                headers={**headers, "Charter-Approval": approval_id},
            )
            assert done.status_code == 200, done.text
            assert done.json()["output"]["isError"] is False
    assert (files / "packing.txt").read_text() == "Sunscreen."


def test_charter_tools_lists_a_targets_tools_and_the_upstreams_side_by_side(
    upstreams: Path, db: str, tmp_path: Path
) -> None:
    out = charter(
        "tools", "examples.travel:host", "--upstreams", str(upstreams), "--db", db, "--json",
        env={"CHARTER_DEMO_KEYS": str(tmp_path / "keys.json")},
    )  # fmt: skip
    entries = {entry["name"]: entry for entry in json.loads(out)}
    assert "trips.search" in entries and "fs.read_text_file" in entries
    assert entries["fs.write_file"]["tier"] == "destructive"
    assert entries["fs.write_file"]["requiredScopes"] == ["files:write"]
    assert "fs.move_file" not in entries


def test_readyz_is_503_while_an_upstream_is_unreachable(db: str, tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    path = tmp_path / "upstreams.toml"
    path.write_text(f'[upstreams.remote]\nurl = "http://127.0.0.1:{port}/mcp"\n')
    with (
        charter_serve("--upstreams", str(path), "--db", db, cwd=tmp_path, env=ENV) as served,
        httpx.Client(base_url=served.url, timeout=60) as rest,
    ):
        ready = rest.get("/readyz")
    assert ready.status_code == 503
    problem = ready.json()
    assert problem["code"] == "PROVIDER_UNAVAILABLE"
    assert problem["reason"] == "upstream_unavailable"
    assert problem["meta"] == {"upstreams": "remote"}


def test_an_upstreams_file_with_a_mistake_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "upstreams.toml"
    path.write_text('[upstreams.fs]\ncommand = "npx server"\n')
    db = f"sqlite+aiosqlite:///{tmp_path / 'never-opened.db'}"
    result = CliRunner().invoke(
        app, ["tools", "--upstreams", str(path), "--db", db], env={"CHARTER_DB": None}
    )
    assert result.exit_code == 2
    assert "upstreams.fs.command" in result.stderr and "must be a list" in result.stderr
    assert not (tmp_path / "never-opened.db").exists()


@pytest.mark.browser
def test_the_console_shows_each_upstreams_health(
    upstreams: Path, db: str, keys: dict[str, str], tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    with (
        charter_serve("--upstreams", str(upstreams), "--db", db, cwd=tmp_path, env=ENV) as served,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{served.url}/console/")
            page.get_by_label("API key").fill(keys["approver"])
            page.get_by_label("API key").press("Enter")
            tab = page.get_by_role("tab", name="Upstreams")
            tab.click()
            row = page.get_by_role("tabpanel", name="Upstreams").get_by_role("row", name="fs")
            expect(row).to_contain_text("connected")
            expect(row).to_contain_text("fs.*")
            # The arrow keys walk the visible tabs, this one included.
            tab.press("ArrowRight")
            expect(page.get_by_role("tab", name="Approvals")).to_be_focused()
        finally:
            browser.close()


def test_an_upstream_tool_error_over_rest_is_a_502_that_replays_without_calling_again(
    upstreams: Path, files: Path, db: str, keys: dict[str, str], tmp_path: Path
) -> None:
    agent = keys["agent"]
    # Outside the served folder: the filesystem server runs the call and answers isError.
    body = {"path": str(tmp_path / "elsewhere")}
    headers = {**bearer(agent), "Idempotency-Key": str(uuid.uuid4()), "Charter-Confirm": "true"}
    with (
        charter_serve("--upstreams", str(upstreams), "--db", db, cwd=tmp_path, env=ENV) as served,
        httpx.Client(base_url=served.url, timeout=60) as rest,
    ):

        def upstream_calls() -> int:
            [fs] = rest.get("/v1/upstreams", headers=bearer(agent)).json()["upstreams"]
            calls: int = fs["calls"]
            return calls

        first = rest.post("/v1/tools/fs.create_directory:call", json=body, headers=headers)
        assert upstream_calls() == 1
        replay = rest.post("/v1/tools/fs.create_directory:call", json=body, headers=headers)
        assert upstream_calls() == 1
    assert first.status_code == 502, first.text
    problem = first.json()
    assert problem["code"] == "UPSTREAM_ERROR" and problem["reason"] == "upstream_tool_error"
    assert "outside allowed directories" in problem["detail"]
    assert problem["meta"]["result"]["isError"] is True
    assert "Idempotent-Replayed" not in first.headers
    assert replay.status_code == 502 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["detail"] == problem["detail"] and replay.json()["replayed"] is True
    assert not (tmp_path / "elsewhere").exists()


def test_a_write_whose_rest_client_disconnects_is_recorded_not_sent_again(
    db: str, keys: dict[str, str], tmp_path: Path
) -> None:
    # The client gives up once the upstream is doing the write (its journal says so).
    # charter lets the call run on and records it, so the retry replays it.
    journal = tmp_path / "journal.txt"
    command = json.dumps([sys.executable, str(Path(__file__).with_name("slow_server.py"))])
    path = tmp_path / "upstreams.toml"
    path.write_text(
        f"[upstreams.slow]\ncommand = {command}\nenv = {{ JOURNAL = {json.dumps(str(journal))} }}\n"
        '[upstreams.slow.tools.slow_write]\nscopes = ["files:write"]\ntier = "write"\n'
    )
    headers = {
        **bearer(keys["agent"]),
        "Idempotency-Key": str(uuid.uuid4()),
        "Charter-Confirm": "true",
    }
    url = "/v1/tools/slow.slow_write:call"
    content = json.dumps({"seconds": 2}).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = (
        f"POST {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(content)}\r\n{head}\r\n"
    ).encode() + content
    with charter_serve("--upstreams", str(path), "--db", db, cwd=tmp_path, env=ENV) as served:
        with raw_connection(served.url, request):
            deadline = time.monotonic() + 60
            while "ran" not in (journal.read_text() if journal.exists() else ""):
                assert time.monotonic() < deadline, "the write never reached the upstream"
                time.sleep(0.05)
        # The connection is closed: the client left while the upstream works.
        with httpx.Client(base_url=served.url, timeout=60) as rest:
            replay = rest.post(url, json={"seconds": 2}, headers=headers)
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["output"]["structuredContent"] == {"result": "written"}
    assert journal.read_text().count("ran") == 1


@pytest.mark.anyio
async def test_a_handshake_session_over_http_is_told_when_an_upstreams_tools_change(
    db: str, keys: dict[str, str], tmp_path: Path
) -> None:
    import sys

    script = Path(__file__).with_name("changing_server.py")
    path = tmp_path / "upstreams.toml"
    command = json.dumps([sys.executable, str(script)])
    path.write_text(f'[upstreams.changing]\ncommand = {command}\ndefault = {{ tier = "read" }}\n')
    told = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    with charter_serve("--upstreams", str(path), "--db", db, cwd=tmp_path, env=ENV) as served:
        async with mcp_http_client(
            served.url + "/mcp",
            keys["agent"],
            timeout=60,
            mode="legacy",
            message_handler=on_message,
        ) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            await client.call_tool("changing.unlock", {})
            with anyio.fail_after(60):
                await told.wait()
            after = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
    assert "changing.unlock" in before and "changing.secret" not in before
    assert after - before == {"changing.secret"}
