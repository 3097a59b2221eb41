"""``Mcp-Param-*`` headers at 2026-07-28: checked against the arguments they mirror.

A tool argument annotated ``x-mcp-header`` in its input schema must arrive as a header
too, with the same value, so an intermediary can route on it; the SDK refuses a request
whose header and argument disagree. charter hands the SDK the schema only of tools that
declare such a header; these tests hold both kinds on a real server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_types import HEADER_MISMATCH
from pydantic import BaseModel, Field
from tests.builders import MCP_HEADERS

from charter import Registry, tool
from charter.host import Host
from charter.mcp import create_asgi_app
from live_server import serve

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"


class Booking(BaseModel):
    """Which region a booking lives in, mirrored in ``Mcp-Param-Region``."""

    region: str = Field(json_schema_extra={"x-mcp-header": "Region"})
    trip_id: str


class Lookup(BaseModel):
    """No argument is mirrored in a header."""

    region: str
    trip_id: str


class Found(BaseModel):
    """What both tools answer."""

    where: str


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    @tool(tier="read", auth="public")
    def find_booking(args: Booking) -> Found:
        """Find a booking in its region."""
        return Found(where=f"{args.region}/{args.trip_id}")

    @tool(tier="read", auth="public")
    def find_trip(args: Lookup) -> Found:
        """Find a trip; the region is an ordinary argument."""
        return Found(where=f"{args.region}/{args.trip_id}")

    registry = Registry()
    registry.register_all([find_booking, find_trip])
    with serve(create_asgi_app(Host(registry), stateless=True)) as url:
        yield url + "/mcp"


async def _call(url: str, name: str, region_header: str | None) -> httpx.Response:
    headers = {
        **MCP_HEADERS,
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    if region_header is not None:
        headers["Mcp-Param-Region"] = region_header
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params: dict[str, Any] = {
        "name": name,
        "arguments": {"region": "eu-west", "trip_id": "T-1"},
        "_meta": meta,
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, json=body, headers=headers)


async def test_a_declared_header_that_matches_its_argument_is_answered(mcp_url: str) -> None:
    response = await _call(mcp_url, "find_booking", "eu-west")
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"where": "eu-west/T-1"}


@pytest.mark.parametrize("header", ["us-east", None], ids=["header-disagrees", "header-missing"])
async def test_a_declared_header_that_disagrees_or_is_missing_is_refused(
    mcp_url: str, header: str | None
) -> None:
    response = await _call(mcp_url, "find_booking", header)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == HEADER_MISMATCH
    assert "Mcp-Param-Region" in error["message"]
    assert "result" not in response.json()


@pytest.mark.parametrize("header", ["us-east", None], ids=["stray-header", "no-header"])
async def test_a_tool_that_declares_no_header_ignores_one(mcp_url: str, header: str | None) -> None:
    response = await _call(mcp_url, "find_trip", header)
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"where": "eu-west/T-1"}
