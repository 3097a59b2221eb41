"""The travel demo's trip resource template and summary prompt, through the MCP client."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import mcp.types as types
import pytest
import sqlalchemy as sa
from examples.travel.db import trips
from mcp.client import Client
from mcp.client.context import ClientRequestContext
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


async def test_reads_and_prompts_are_audit_rows_in_the_sql_store(travel: Travel) -> None:
    async with Client(create_server(travel.host, principal=AGENT)) as client:
        await client.read_resource("trip://trp_lisbon01")
        await client.get_prompt("trips.summary", {"trip_id": "trp_lisbon01"})
    events = await travel.store.events(tenant="acme", limit=10)
    assert [(e.action, e.tool, e.outcome) for e in events[:2]] == [
        ("prompt.get", "trips.summary", "completed"),
        ("resource.read", "trip://trp_lisbon01", "completed"),
    ]


class User:
    """Answers each confirmation the server asks for with the next of ``answers``."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return self.answers.pop(0)


def controls() -> dict[str, Any]:
    return {"_charter": {"requestId": str(uuid.uuid4())}}


async def stored_trip(travel: Travel, trip_id: str) -> tuple[str, str]:
    """The trip's committed name and status, read on a connection of its own."""
    async with travel.store.engine.connect() as conn:
        row = (
            await conn.execute(sa.select(trips.c.name, trips.c.status).where(trips.c.id == trip_id))
        ).one()
    return row.name, row.status


def fail_before_commit(point: str) -> None:
    if point == "before_commit":
        raise RuntimeError("the commit never happens")


@pytest.mark.filterwarnings(
    "ignore:resources/.*subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning"
)
async def test_a_trip_subscriber_is_told_of_committed_changes_only(travel: Travel) -> None:
    uri = "trip://trp_lisbon01"
    told: list[tuple[str, tuple[str, str]]] = []
    arrived = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            # What a subscriber reads again when told: the change must be committed by then.
            told.append((message.params.uri, await stored_trip(travel, "trp_lisbon01")))
            if len(told) == 2:
                arrived.set()

    globex_told: list[str] = []
    oslo_told = anyio.Event()

    async def on_globex_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            globex_told.append(message.params.uri)
            oslo_told.set()

    user = User(
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="accept", content={"confirm": True}),
    )
    lisbon = {"trip_id": "trp_lisbon01"}
    async with (
        Client(
            create_server(travel.host, principal=AGENT),
            mode="legacy",
            message_handler=on_message,
            elicitation_callback=user,
        ) as agent,
        Client(
            create_server(travel.host, principal=GLOBEX_AGENT),
            mode="legacy",
            message_handler=on_globex_message,
        ) as globex,
    ):
        await agent.subscribe_resource(uri)
        # Globex guesses acme's trip id: trip://… resolves in its own tenant, so it is not told.
        await globex.subscribe_resource(uri)
        await globex.subscribe_resource("trip://trp_oslo0001")
        # Refused or rolled back: nothing changed, nobody is told.
        foreign = await globex.call_tool("trips.rename", {**lisbon, "name": "x", **controls()})
        declined = await agent.call_tool(
            "trips.cancel", {**lisbon, "reason": "weather", **controls()}
        )
        travel.host._gate.fault_hook = fail_before_commit  # the gate's crash-test seam
        try:
            rolled_back = await agent.call_tool(
                "trips.rename", {**lisbon, "name": "Rolled back", **controls()}
            )
        finally:
            travel.host._gate.fault_hook = None
        assert (foreign.is_error, declined.is_error, rolled_back.is_error) == (True, True, True)
        assert await stored_trip(travel, "trp_lisbon01") == ("Lisbon offsite", "planned")
        assert told == []
        # Committed: a rename, then a cancel the user confirmed.
        renamed = await agent.call_tool(
            "trips.rename", {**lisbon, "name": "Lisbon summit", **controls()}
        )
        cancelled = await agent.call_tool(
            "trips.cancel", {**lisbon, "reason": "weather", **controls()}
        )
        with anyio.fail_after(10):
            await arrived.wait()
        oslo = {"trip_id": "trp_oslo0001", "name": "Oslo board", **controls()}
        assert not (await globex.call_tool("trips.rename", oslo)).is_error
        with anyio.fail_after(10):
            await oslo_told.wait()
    # Told in order: acme's two changes would have come first.
    assert globex_told == ["trip://trp_oslo0001"]
    assert (renamed.is_error, cancelled.is_error) == (False, False)
    assert told == [(uri, ("Lisbon summit", "planned")), (uri, ("Lisbon summit", "cancelled"))]
