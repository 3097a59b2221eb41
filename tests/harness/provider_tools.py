"""A tool with optional fields, nested models and an enum, and transcripts that call it, for
the provider format tests."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field
from tests.builders import tiered_tool

from charter.harness import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    ToolResultsMessage,
    UserMessage,
)


class Traveller(BaseModel):
    name: str
    age: int | None = None


class SearchIn(BaseModel):
    """Search trips."""

    city: str = Field(description="Where to.")
    nights: int = 2
    note: str | None = None
    cabin: Literal["economy", "business"] = "economy"
    lead: Traveller = Field(description="Who books.")
    others: list[Traveller] = []


class SearchOut(BaseModel):
    trips: list[str]


def search(args: SearchIn) -> SearchOut:
    return SearchOut(trips=[args.city])


SEARCH = tiered_tool(
    "search_trips", "read", search, SearchIn, SearchOut, description="Search trips."
)


DENIED_SEARCH: list[Message] = [
    UserMessage(content="Find Rome"),
    AssistantMessage(
        text="Searching.",
        tool_calls=(ToolCall(call_id="tu_1", name="search_trips", arguments='{"city":"Rome"}'),),
    ),
    ToolResultsMessage(
        results=(ToolResult(kind="denied", call_id="tu_1", tool_name="search_trips", reason="no"),)
    ),
]
"""A search whose call was denied, its arguments still the model's raw JSON text."""

COMPLETED_SEARCH: list[Message] = [
    UserMessage(content="Find Rome"),
    AssistantMessage(
        text=None,
        tool_calls=(ToolCall(call_id="c1", name="search_trips", arguments={"city": "Rome"}),),
    ),
    ToolResultsMessage(
        results=(
            ToolResult(kind="completed", call_id="c1", tool_name="search_trips", output={"n": 1}),
        )
    ),
    AssistantMessage(text="One trip."),
]
"""A search that completed (parsed arguments, no text beside the call) and the final answer."""


class OneCallChat:
    """The outside world for ``OpenAIChatModel``: a client whose model calls one tool, then
    answers text."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        self.call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        self.requests: list[dict[str, Any]] = []
        self.chat = self
        self.completions = self

    async def create(self, **request: Any) -> dict[str, Any]:
        """One chat completion: the tool call first, then ``Done.``."""
        self.requests.append(request)
        if len(self.requests) > 1:
            return {"choices": [{"message": {"role": "assistant", "content": "Done."}}]}
        return {"choices": [{"message": {"role": "assistant", "tool_calls": [self.call]}}]}
