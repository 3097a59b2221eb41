"""tools/list: what a caller sees of the tools it may call (in memory, through the SDK client)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from mcp.client import Client
from mcp.server.lowlevel import Server
from mcp_support import ALICE, CAROL, PRESENTERS, Answer, Empty

from charter import CONTRACT_VERSION, Registry, tool
from charter.errors import ConfigurationError
from charter.host import Host
from charter.mcp import STATUS_TOOL, TOOL_META_KEY, ConnectionState, create_server

pytestmark = pytest.mark.anyio


async def _tools(server: Server[ConnectionState], mode: str = "auto") -> dict[str, Any]:
    async with Client(server, mode=mode) as client:
        listed = await client.list_tools()
    return {t.name: t for t in listed.tools}


async def test_the_list_holds_exactly_the_tools_the_caller_may_call(
    server: Server[ConnectionState], host: Host, mode: str
) -> None:
    tools = await _tools(server, mode)
    expected = [t.name for t in host.callable_tools(ALICE)] + [STATUS_TOOL]
    assert list(tools) == expected
    # Lacking a scope (notes:read) or outside the audience (partner): not listed.
    assert "read_notes" not in tools
    assert "partner_report" not in tools


async def test_an_anonymous_connection_sees_only_public_tools_and_no_status_tool(
    host: Host,
) -> None:
    tools = await _tools(create_server(host, principal=None))
    assert all(t.meta[TOOL_META_KEY]["auth"] == "public" for t in tools.values())
    assert "echo" in tools and "whoami" not in tools and STATUS_TOOL not in tools


async def test_another_principal_sees_its_own_tools(host: Host) -> None:
    tools = await _tools(create_server(host, principal=CAROL))
    assert "read_notes" in tools and "whoami" not in tools and "rename_trip" not in tools


async def test_the_input_schema_is_the_tools_own_2020_12_schema_plus_optional_controls(
    server: Server[ConnectionState], host: Host
) -> None:
    echo = (await _tools(server))["echo"]
    schema = echo.input_schema
    own = host.registry.get("echo")
    assert own is not None
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$defs"] == own.tool.input_schema["$defs"]
    assert schema["additionalProperties"] is False
    assert {k: v for k, v in schema["properties"].items() if k != "_charter"} == (
        own.tool.input_schema["properties"]
    )
    assert "_charter" not in schema.get("required", [])
    controls = schema["properties"]["_charter"]
    assert set(controls["properties"]) == {"requestId", "reasonCode"}
    assert "required" not in controls
    assert controls["additionalProperties"] is False
    # The advertised schema validates what the host accepts.
    jsonschema.Draft202012Validator(schema).validate(
        {"text": "hi", "address": {"city": "Oslo", "country": "NO"}, "_charter": {}}
    )


async def test_controls_say_which_are_required_for_each_tool(
    server: Server[ConnectionState],
) -> None:
    tools = await _tools(server)
    cancel = tools["cancel_trip"].input_schema
    delete = tools["delete_trip"].input_schema
    assert cancel["properties"]["_charter"]["required"] == ["requestId", "confirmed"]
    assert "approvalId" not in cancel["properties"]["_charter"]["properties"]
    assert delete["properties"]["_charter"]["required"] == ["requestId", "confirmed"]
    assert "approvalId" in delete["properties"]["_charter"]["properties"]
    assert cancel["required"] == ["trip_id"]


async def test_output_schema_title_and_annotations_come_from_the_contract(
    server: Server[ConnectionState], host: Host
) -> None:
    tools = await _tools(server)
    echo, delete = tools["echo"], tools["delete_trip"]
    own = host.registry.get("echo")
    assert own is not None
    assert echo.output_schema == own.tool.output_schema
    assert echo.title == "Echo"
    assert echo.annotations is not None
    assert echo.annotations.read_only_hint is True
    assert echo.annotations.idempotent_hint is True
    assert delete.title is None
    assert delete.annotations is not None
    assert delete.annotations.destructive_hint is True
    assert delete.annotations.read_only_hint is False


async def test_meta_carries_the_contract_data(server: Server[ConnectionState]) -> None:
    delete = (await _tools(server))["delete_trip"]
    contract = delete.meta[TOOL_META_KEY]
    assert contract["contractVersion"] == CONTRACT_VERSION
    assert contract["capabilityId"] == "delete_trip"
    assert contract["capabilityVersion"]
    assert contract["owner"]
    assert contract["tier"] == "destructive"
    assert contract["deploymentRisk"] in ("high", "critical")
    assert contract["riskPolicy"]["destructive"] is True
    assert contract["requiredScopes"] == ["trips:write"]
    assert contract["aliases"] == []
    assert contract["actionPolicy"]["approval"] == "required"
    assert contract["controls"]["required"] == ["requestId", "confirmed"]
    assert contract["targetResolution"] == "command-target-field"
    assert "inputSchema" not in contract and "name" not in contract


async def test_listing_the_same_tools_twice_returns_equal_entries(
    server: Server[ConnectionState],
) -> None:
    async with Client(server) as client:
        first = await client.list_tools(cache_mode="bypass")
        second = await client.list_tools(cache_mode="bypass")
    assert first.tools == second.tools


async def test_a_presenter_for_an_unknown_tool_is_refused_before_serving(host: Host) -> None:
    with pytest.raises(ConfigurationError, match="nope"):
        create_server(host, presenters={**PRESENTERS, "nope": PRESENTERS["picture"]})


async def test_a_registered_tool_may_not_take_the_status_tools_name() -> None:
    @tool(tier="read", name=STATUS_TOOL)
    def status(_: Empty) -> Answer:
        """Clash with the adapter."""
        return Answer(text="x")

    registry = Registry()
    registry.register(status)
    with pytest.raises(ConfigurationError, match="reserved"):
        create_server(Host(registry))
