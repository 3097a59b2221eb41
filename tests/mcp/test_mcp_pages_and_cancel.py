"""Two answers the SDK leaves to the server, over a live server on 127.0.0.1.

- ``*/list`` with a cursor: charter lists everything on one page and gives out no cursor,
  so any cursor is invalid, and the spec asks for ``-32602`` (not the first page again).
- A handshake-era call cancelled with ``notifications/cancelled``: its SSE stream ends
  with the SDK's ``-32800 Request cancelled`` for its id (docs/mcp.md says so).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_support import Probe
from mcp_support import build_host as build_tool_host
from tests.builders import MCP_HEADERS, MCP_INITIALIZE, mcp_http_client

from charter.mcp import create_asgi_app
from content_support import build_content_host
from live_server import serve


@pytest.fixture(scope="module")
def content_url() -> Iterator[str]:
    with serve(create_asgi_app(build_content_host())) as base:
        yield base + "/mcp"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake-era", "2026-07-28"])
async def test_a_list_request_with_a_cursor_is_invalid_params(content_url: str, mode: str) -> None:
    async with mcp_http_client(content_url, "ada-token", mode=mode) as client:
        first_pages = [
            await client.list_tools(),
            await client.list_resources(),
            await client.list_resource_templates(),
            await client.list_prompts(),
        ]
        refused: list[int] = []
        for listing in (
            client.list_tools,
            client.list_resources,
            client.list_resource_templates,
            client.list_prompts,
        ):
            with pytest.raises(MCPError) as caught:
                await listing(cursor="no-such-cursor", cache_mode="bypass")
            refused.append(caught.value.error.code)
    assert all(page.next_cursor is None for page in first_pages)  # one page, no cursor
    assert refused == [-32602] * 4


def _sse_messages(text: str) -> list[dict[str, Any]]:
    # A priming event (resumable streams) has empty data.
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    return [json.loads(event) for event in data if event.strip()]


def test_a_cancelled_handshake_era_call_gets_the_sdks_request_cancelled() -> None:
    probe = Probe()
    app = create_asgi_app(build_tool_host(probe, authenticated=False))
    with serve(app) as base, httpx.Client(timeout=30) as http:
        url = base + "/mcp"
        opened = http.post(url, json=MCP_INITIALIZE, headers=MCP_HEADERS)
        headers = {
            **MCP_HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=done, headers=headers).status_code == 202
        answered: list[httpx.Response] = []
        call = {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "tools/call",
            "params": {"name": "wait_for_cancel", "arguments": {}},
        }
        caller = threading.Thread(
            target=lambda: answered.append(http.post(url, json=call, headers=headers))
        )
        caller.start()
        assert probe.started.wait(10)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 41, "reason": "the user stopped it"},
        }
        assert http.post(url, json=cancel, headers=headers).status_code == 202
        caller.join(10)
        assert probe.saw_cancel.wait(10)
    assert _sse_messages(answered[0].text) == [
        {"jsonrpc": "2.0", "id": 41, "error": {"code": -32800, "message": "Request cancelled"}}
    ]
