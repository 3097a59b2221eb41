"""What the provider formats accept as tools, and the error for what they do not."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from charter import Principal, Registry, tool
from charter.harness.providers import (
    anthropic_tools,
    gemini_tools,
    openai_tool_calls,
    openai_tools,
)
from charter.host import Host


class SearchIn(BaseModel):
    text: str


@tool(tier="read", name="trips.search")
def search(args: SearchIn) -> list[str]:
    """Search trips."""
    return [args.text]


def travel() -> tuple[Registry, Host, Principal]:
    registry = Registry()
    registry.register(search)
    ada = Principal(subject="ada", tenant_id="acme", scopes=frozenset())
    return registry, Host(registry), ada


FORMATS: dict[str, Callable[[Any], Any]] = {
    "openai chat": openai_tools,
    "openai responses": lambda tools: openai_tools(tools, api="responses"),
    "anthropic": anthropic_tools,
    "gemini": gemini_tools,
    "openai parser": lambda tools: openai_tool_calls({"role": "assistant"}, tools=tools),
}


@pytest.mark.parametrize("source", ["registry.list()", "host.discover(principal)"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_manifest_entries_are_refused_with_a_type_error_naming_what_to_pass(
    name: str, source: str
) -> None:
    registry, host, ada = travel()
    entries = registry.list() if source == "registry.list()" else host.discover(ada)
    with pytest.raises(TypeError) as raised:
        FORMATS[name](entries)
    message = str(raised.value)
    assert "ToolSchema, BoundToolDefinition, RegisteredTool or Tool" in message
    assert "not dict (a manifest entry" in message
    assert "host.callable_tools(principal)" in message


def test_a_tool_name_is_refused_too() -> None:
    names: list[Any] = ["trips.search"]
    with pytest.raises(TypeError, match=r"not str; pass host\.callable_tools"):
        openai_tools(names)


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_tools_a_principal_may_call_are_accepted(name: str) -> None:
    _registry, host, ada = travel()
    FORMATS[name](host.callable_tools(ada))


def test_the_callable_tools_go_out_by_model_facing_name() -> None:
    _registry, host, ada = travel()
    tools = host.callable_tools(ada)
    assert [t["function"]["name"] for t in openai_tools(tools)] == ["trips_search"]
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "trips_search", "arguments": json.dumps({"text": "Rome"})},
            }
        ],
    }
    (call,) = openai_tool_calls(message, tools=tools)
    assert call.arguments == {"text": "Rome"}
