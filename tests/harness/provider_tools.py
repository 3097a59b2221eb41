"""A tool with optional fields, nested models and an enum, for the provider format tests."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from tests.builders import tiered_tool


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
