"""REST and /mcp read a request's credentials the same way (``charter._credentials``).

The whole app (``create_app``) under uvicorn on 127.0.0.1: each set of credential headers
goes to ``/v1/whoami`` and to ``/mcp``, and both doors let the same caller in, or neither.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp_support import Probe, build_host
from tests.builders import MCP_HEADERS

from charter.http import create_app
from live_server import serve

MODERN = "2026-07-28"
TOOLS_LIST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
MODERN_HEADERS = {**MCP_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}

CASES: list[tuple[str, dict[str, str], int]] = [
    ("bearer", {"Authorization": "Bearer alice-token"}, 200),
    ("bearer, two spaces", {"Authorization": "Bearer  alice-token"}, 200),
    ("api key alone", {"X-API-Key": "alice-token"}, 200),
    (
        "basic and an api key",
        {"Authorization": "Basic Zm9vOmJhcg==", "X-API-Key": "alice-token"},
        200,
    ),
    (
        "bearer and the same api key",
        {"Authorization": "Bearer alice-token", "X-API-Key": "alice-token"},
        401,
    ),
    (
        "bearer and another api key",
        {"Authorization": "Bearer alice-token", "X-API-Key": "bob-token"},
        400,
    ),
    ("unknown bearer", {"Authorization": "Bearer no-such-token"}, 401),
    ("unknown api key", {"X-API-Key": "no-such-token"}, 401),
    ("empty bearer", {"Authorization": "Bearer"}, 401),
    ("basic alone", {"Authorization": "Basic Zm9vOmJhcg=="}, 401),
    ("none", {}, 401),
]


@pytest.fixture(scope="module")
def base_url() -> Any:
    with serve(create_app(build_host(Probe()), console=False)) as base:
        yield base


@pytest.mark.parametrize(("headers", "status"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rest_and_mcp_let_the_same_credentials_in(
    base_url: str, headers: dict[str, str], status: int
) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        rest = http.get("/v1/whoami", headers=headers)
        mcp = http.post("/mcp", json=TOOLS_LIST, headers={**MODERN_HEADERS, **headers})
    assert (rest.status_code, mcp.status_code) == (status, status), (rest.text, mcp.text)
    if status == 200:
        assert rest.json()["subject"] == "alice"
        names = [listed["name"] for listed in mcp.json()["result"]["tools"]]
        assert "charter.action_status" in names  # an authenticated caller's list
    if status == 401:
        # The SDK's bearer middleware still answers /mcp's 401, with its challenge.
        assert mcp.headers["www-authenticate"].startswith("Bearer")
