"""The travel demo's trip resource template and summary prompt, through the MCP client."""

from __future__ import annotations

import json

import mcp.types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from travel_support import AGENT, GLOBEX_AGENT, Travel

from charter.mcp import create_server

pytestmark = pytest.mark.anyio


async def test_an_agent_reads_a_trip_gets_its_summary_and_completes_its_id(
    travel: Travel,
) -> None:
    async with Client(create_server(travel.host, principal=AGENT)) as client:
        [template] = (await client.list_resource_templates()).resource_templates
        read = await client.read_resource("trip://trp_lisbon01")
        summary = await client.get_prompt("trips.summary", {"trip_id": "trp_lisbon01"})
        ids = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="trip://{trip_id}"),
            {"name": "trip_id", "value": "trp_l"},
        )
    assert template.uri_template == "trip://{trip_id}"
    assert json.loads(read.contents[0].text)["id"] == "trp_lisbon01"  # type: ignore[union-attr]
    embedded, ask = summary.messages
    assert isinstance(embedded.content, types.EmbeddedResource)
    assert isinstance(ask.content, types.TextContent) and "Summarise" in ask.content.text
    assert "trp_lisbon01" in ids.completion.values


async def test_another_tenants_agent_neither_reads_nor_completes_acme_trips(
    travel: Travel,
) -> None:
    async with Client(create_server(travel.host, principal=GLOBEX_AGENT)) as client:
        with pytest.raises(MCPError) as foreign:
            await client.read_resource("trip://trp_lisbon01")
        ids = await client.complete(
            types.PromptReference(type="ref/prompt", name="trips.summary"),
            {"name": "trip_id", "value": "trp_"},
        )
    assert foreign.value.code == -32002
    assert "trp_lisbon01" not in ids.completion.values and ids.completion.values
