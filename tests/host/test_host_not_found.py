"""Two kinds of NOT_FOUND, each with the next step that fits it, over the host.

An unknown tool name says to list the tools; a tool that did not find what it was asked
for (a handler's ``ToolError(NOT_FOUND, …)``) says to check the identifier instead.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import ErrorCode, Failed, Principal, Registry, ToolError
from charter.errors import DEFAULT_NEXT_STEPS, UNKNOWN_TOOL_NEXT_STEPS
from charter.host import Host

pytestmark = pytest.mark.anyio

CALLER = Principal(subject="agent-1", tenant_id="acme", scopes=frozenset({"trips:read"}))


class TripRef(BaseModel):
    trip_id: str


class Trip(BaseModel):
    trip_id: str
    name: str


def _get_trip(arguments: TripRef) -> Trip:
    raise ToolError(ErrorCode.NOT_FOUND, f"No trip {arguments.trip_id!r} in your tenant.")


def _host() -> Host:
    registry = Registry()
    registry.register(
        tiered_tool("trips.get", "read", _get_trip, TripRef, Trip, required_scopes=["trips:read"])
    )
    return Host(registry)


async def test_a_handlers_not_found_says_to_check_the_identifier_not_to_list_tools() -> None:
    outcome = await _host().invoke("trips.get", {"trip_id": "trp_1"}, CALLER)
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.NOT_FOUND
    assert outcome.message == "No trip 'trp_1' in your tenant."
    assert outcome.next_steps == DEFAULT_NEXT_STEPS[ErrorCode.NOT_FOUND]
    assert "identifier" in outcome.next_steps[0]
    assert "tools" not in " ".join(outcome.next_steps)


async def test_an_unknown_tool_still_says_to_list_the_tools() -> None:
    outcome = await _host().invoke("trips.gett", {"trip_id": "trp_1"}, CALLER)
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.NOT_FOUND
    assert outcome.message.startswith("Unknown tool 'trips.gett'.")
    assert outcome.next_steps == UNKNOWN_TOOL_NEXT_STEPS
    assert outcome.next_steps == (
        "List the available tools and call one of them by its exact name.",
    )


def test_the_two_next_steps_differ() -> None:
    assert set(UNKNOWN_TOOL_NEXT_STEPS).isdisjoint(DEFAULT_NEXT_STEPS[ErrorCode.NOT_FOUND])
