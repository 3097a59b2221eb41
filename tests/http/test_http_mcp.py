"""One app, one port: MCP at ``/mcp`` beside REST, over the same host and ledger."""

from __future__ import annotations

import uuid

import httpx
import pytest
from http_support import Live, mcp_client
from mcp.types import TextContent

pytestmark = pytest.mark.anyio


async def test_mcp_and_rest_list_the_same_tools(both: Live) -> None:
    async with mcp_client(both.url, "agent-token") as client:
        over_mcp = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("trips.search", {"query": "lisbon", "limit": 1})
    with both.client("agent-token") as rest:
        over_rest = {t["name"] for t in rest.get("/v1/tools").json()["tools"]}
    assert over_rest <= over_mcp
    assert result.structured_content == {
        "trips": [
            {
                "trip_id": "trp_1",
                "name": "Lisbon",
                "destination": {"city": "Lisbon", "country": "PT"},
            }
        ]
    }


async def test_an_approval_asked_over_mcp_is_granted_and_completed_over_rest(both: Live) -> None:
    request_id = str(uuid.uuid4())
    arguments = {"booking_id": "bkg_mcp", "amount_cents": 900}
    async with mcp_client(both.url, "agent-token") as client:
        asked = await client.call_tool(
            "bookings.refund",
            {**arguments, "_charter": {"requestId": request_id, "confirmed": True}},
        )
    assert "approval" in str(asked.content[0]).lower()
    with both.client("approver-token") as approver, both.client("agent-token") as agent:
        pending = approver.get("/v1/approvals").json()["approvals"]
        approval = next(a for a in pending if a["requestId"] == request_id)
        assert approver.post(f"/v1/approvals/{approval['id']}:grant").status_code == 200
        done = agent.post(
            "/v1/tools/bookings.refund:call",
            json=arguments,
            headers={
                "Idempotency-Key": request_id,
                "Charter-Confirm": "true",
                "Charter-Approval": approval["id"],
            },
        )
    assert done.status_code == 200
    assert done.json()["output"] == {"booking_id": "bkg_mcp", "refunded_cents": 900}
    assert both.lab.runs["refund:bkg_mcp"] == 1


def test_mcp_without_a_token_is_401_with_the_bearer_challenge(both: Live) -> None:
    response = httpx.post(
        both.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_reason_code_with_a_bidi_override_is_refused_over_mcp(both: Live) -> None:
    async with mcp_client(both.url, "agent-token") as client:
        result = await client.call_tool(
            "bookings.refund",
            {
                "booking_id": "bkg_mcp_bidi",
                "amount_cents": 900,
                "_charter": {
                    "requestId": str(uuid.uuid4()),
                    "confirmed": True,
                    "reasonCode": "\u202edevorppa-erp OFC",
                },
            },
        )
    assert result.is_error
    text = result.content[0].text if isinstance(result.content[0], TextContent) else ""
    assert text.startswith("[INVALID_INPUT] Invalid _charter controls: reasonCode:")
    with both.client("approver-token") as approver:
        listed = approver.get("/v1/approvals", params={"status": "all"}).json()["approvals"]
    assert not [a for a in listed if a["target"] == "bkg_mcp_bidi"]
