"""The README's tour against `make run`'s server: `charter serve examples.travel:host` in a
subprocess, driven with httpx, the official MCP client and the `charter` command."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from demo_server import CHARTER, Server, serve_demo
from tests import doc_blocks
from tests.builders import mcp_http_client
from travel_support import ROOT

DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`charter serve examples.travel:host` as `make run` starts it, on a free port."""
    with serve_demo(tmp_path_factory.mktemp("tour")) as started:
        yield started


def call(
    server: Server, role: str, tool: str, body: dict[str, Any], **headers: str
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/tools/{tool}:call",
        json=body,
        headers=server.headers(role, **headers),
        timeout=30,
    )


# -- httpx --------------------------------------------------------------------------------------


def test_the_tour_lists_the_tools_each_caller_may_call(server: Server) -> None:
    agent = httpx.get(f"{server.url}/v1/tools", headers=server.headers("traveller-agent"))
    anonymous = httpx.get(f"{server.url}/v1/tools")
    names = [tool["name"] for tool in agent.json()["tools"]]
    assert agent.status_code == 200
    assert {"trips.search", "trips.create", "bookings.refund", "memory.recall"} <= set(names)
    assert "admin.tenants.list" not in names
    assert [tool["name"] for tool in anonymous.json()["tools"]] == ["catalog.ping"]


def test_the_tour_calls_a_tool(server: Server) -> None:
    found = call(server, "traveller-agent", "trips.search", {"text": "lisbon"})
    assert found.status_code == 200
    assert found.json()["output"]["trips"][0]["id"] == "trp_lisbon01"
    assert found.json()["replayed"] is False


def test_the_tour_refund_waits_for_approval_then_runs_once_and_replays(server: Server) -> None:
    request_id = str(uuid.uuid4())
    refund = {"booking_id": "bkg_hotel001", "amount_cents": 5000}
    controls = {"Idempotency-Key": request_id, "Charter-Confirm": "true"}
    asked = call(server, "traveller-agent", "bookings.refund", refund, **controls)
    assert asked.status_code == 202, asked.text
    approval_id = asked.json()["approvalId"]
    assert asked.json()["requestId"] == request_id

    pending = httpx.get(f"{server.url}/v1/approvals", headers=server.headers("staff-approver"))
    mine = next(a for a in pending.json()["approvals"] if a["id"] == approval_id)
    assert mine["arguments"] == refund and mine["tool"] == "bookings.refund"
    console = httpx.get(f"{server.url}/console/")
    assert console.status_code == 200 and "text/html" in console.headers["content-type"]

    granted = httpx.post(
        f"{server.url}/v1/approvals/{approval_id}:grant",
        json={"reason": "Customer called"},
        headers=server.headers("staff-approver"),
    )
    assert granted.status_code == 200 and granted.json()["status"] == "approved"

    retried = {**controls, "Charter-Approval": approval_id}
    done = call(server, "traveller-agent", "bookings.refund", refund, **retried)
    again = call(server, "traveller-agent", "bookings.refund", refund, **retried)
    assert done.status_code == 200, done.text
    assert done.json() == {
        "output": {
            "booking_id": "bkg_hotel001",
            "refunded_cents": 5000,
            "provider_key": done.json()["output"]["provider_key"],
        },
        "replayed": False,
    }
    assert again.status_code == 200
    assert again.json() == {**done.json(), "replayed": True}
    assert again.headers["Idempotent-Replayed"] == "true"
    status = httpx.get(
        f"{server.url}/v1/actions/{request_id}", headers=server.headers("traveller-agent")
    )
    assert status.json()["status"] == "completed"


# -- the official MCP client over streamable HTTP ------------------------------------------------


@pytest.mark.anyio
async def test_the_tour_over_mcp_lists_and_calls_with_a_bearer_key(server: Server) -> None:
    key = server.keys["traveller-agent"]
    async with mcp_http_client(f"{server.url}/mcp", key) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        trip = await mcp.call_tool("trips.get", {"trip_id": "trp_kyoto001"})
        created = await mcp.call_tool(
            "trips.create",
            {
                "name": "MCP offsite",
                "destination": "Porto",
                "nights": 2,
                "_charter": {"requestId": str(uuid.uuid4())},
            },
        )
    assert "bookings.refund" in tools and "admin.tenants.list" not in tools
    assert tools["bookings.refund"].annotations is not None
    assert tools["bookings.refund"].annotations.destructive_hint is True
    assert trip.structured_content is not None
    assert trip.structured_content["destination"] == "Kyoto"
    assert created.is_error is not True and created.structured_content is not None
    assert re.fullmatch(r"trp_[0-9a-f]{12}", created.structured_content["id"])


@pytest.mark.anyio
async def test_mcp_refuses_a_client_without_a_key(server: Server) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401


# -- the charter command against the server -------------------------------------------------------


def charter(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHARTER, *args],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tour_with_the_cli(server: Server) -> None:
    agent, approver = server.keys["traveller-agent"], server.keys["staff-approver"]
    found = charter(
        server, "call", "--url", server.url, "--key", agent, "trips.search",
        "--args", '{"text": "kyoto"}',
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["trips"][0]["id"] == "trp_kyoto001"

    request_id = str(uuid.uuid4())
    refund = [
        "call", "--url", server.url, "--key", agent, "bookings.refund",
        "--args", '{"booking_id": "bkg_flight01", "amount_cents": 700}',
        "--request-id", request_id, "--confirm",
    ]  # fmt: skip
    asked = charter(server, *refund, "--json")
    assert asked.returncode == 3, asked.stdout + asked.stderr
    approval_id = json.loads(asked.stdout)["interaction"]["id"]

    listed = charter(server, "approvals", "list", "--url", server.url, "--key", approver)
    assert listed.returncode == 0, listed.stderr
    assert approval_id in listed.stdout and "bookings.refund" in listed.stdout
    granted = charter(
        server, "approvals", "grant", approval_id, "--url", server.url, "--key", approver
    )
    assert granted.returncode == 0, granted.stdout + granted.stderr

    done = charter(server, *refund, "--approval", approval_id)
    again = charter(server, *refund, "--approval", approval_id)
    assert done.returncode == 0 and again.returncode == 0, done.stdout + again.stdout
    assert json.loads(done.stdout)["refunded_cents"] == 700
    assert json.loads(again.stdout) == json.loads(done.stdout)
    assert "replayed" in again.stderr


# -- the README's tour, as written ---------------------------------------------------------------


def run_blocks(server: Server, blocks: list[str]) -> subprocess.CompletedProcess[str]:
    """Run shell blocks in order with bash -euo pipefail, against ``server``'s port."""
    port = server.url.rsplit(":", 1)[1]
    script = "\n".join(blocks).replace("127.0.0.1:8700", f"127.0.0.1:{port}")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env={**server.env, "CHARTER_DB": server.db},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_http_pages_curl_tour_runs_as_written(server: Server) -> None:
    if shutil.which("curl") is None:
        pytest.skip("the tour uses curl")
    blocks = [b.code for b in doc_blocks.runnable(DOCS / "http.md", doc_blocks.SHELL)]
    assert len(blocks) == 1 and "uuidgen" not in blocks[0]
    result = run_blocks(server, blocks)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "'trips.search'" in out and "'bookings.refund'" in out
    assert '"id":"trp_lisbon01"' in out
    first, second = out.split("HTTP/1.1 200")[1:3]
    assert '"name":"Kyoto research week"' in first and '"replayed":false' in first
    assert "idempotent-replayed: true" in second.lower()
    assert '"status":"approved"' in out and '"decisionReason":"customer called"' in out
    # The booking's refunded total: earlier tours on this module's server refund it too.
    assert re.search(r'"booking_id":"bkg_flight01","refunded_cents":[1-9][0-9]*', out)
    assert out.rstrip().endswith("}") and '"status":"completed"' in out.rsplit("\n", 1)[-1]


def test_the_readmes_tour_commands_run_as_written(server: Server) -> None:
    """Every shell block of the README without a not-run marker, in order (the console step
    has a CLI twin), then the last one again: the refund completes once, then replays."""
    if shutil.which("curl") is None:
        pytest.skip("the tour uses curl")
    blocks = [b.code for b in doc_blocks.runnable(ROOT / "README.md", doc_blocks.SHELL)]
    assert len(blocks) >= 5
    result = run_blocks(server, [*blocks, blocks[-1]])
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert '"id":"trp_lisbon01"' in out
    assert '"kind":"interaction-required"' in out and '"approvalId":"apr_' in out
    completed, replayed = out.split("HTTP/1.1 200")[-2:]
    assert '"replayed":false' in completed and "idempotent-replayed" not in completed.lower()
    assert '"replayed":true' in replayed and "idempotent-replayed: true" in replayed.lower()


def test_the_shell_blocks_of_every_other_page_run_against_the_demo(server: Server) -> None:
    """A page's shell blocks, in order, against `make run`'s server: a page that gains one
    is run here until a test of its own checks what it prints."""
    checked_elsewhere = {
        ROOT / "README.md",  # the test above
        DOCS / "http.md",  # the curl tour's test
        DOCS / "versioning.md",  # tests/cli/test_versioning_page.py
    }
    for page in doc_blocks.pages():
        blocks = doc_blocks.runnable(page, doc_blocks.SHELL)
        if page in checked_elsewhere or not blocks:
            continue
        result = run_blocks(server, [b.code for b in blocks])
        assert result.returncode == 0, f"{blocks[0].where}:\n{result.stdout}{result.stderr}"
