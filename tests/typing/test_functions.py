"""What mypy --strict infers for plain-function tools (see tests/test_typing.py).

A plain function's input model is generated, so its type is ``FunctionInput``; a return
that is not a model is wrapped, so the output is ``FunctionOutput[R]`` with ``R`` the
function's return type; the context type is exact when the context is the first
parameter, and ``ToolContext`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, assert_type

from pydantic import BaseModel, Field

from charter import Denied, FunctionInput, FunctionOutput, Tool, ToolContext, tool


class Trip(BaseModel):
    trip_id: str


class TripService:
    def titles(self, city: str) -> list[str]:
        return [city]


@dataclass(kw_only=True)
class TripsContext(ToolContext):
    trips: TripService


@tool(tier="read")
def add(a: int, b: Annotated[int, Field(ge=0)] = 1) -> int:
    """Add two integers."""
    return a + b


assert_type(add, Tool[FunctionInput, FunctionOutput[int], ToolContext])
assert_type(add.output_model, type[FunctionOutput[int]])


@tool(tier="read")
async def titles(ctx: TripsContext, city: str, limit: int = 10) -> list[str]:
    """The context first: the tool carries its type."""
    # The function's own annotations type its body.
    return ctx.trips.titles(city)[:limit]


assert_type(titles, Tool[FunctionInput, FunctionOutput[list[str]], TripsContext])


@tool(tier="read")
def titles_sync(city: str, ctx: TripsContext) -> list[str]:
    """The context elsewhere: the tool is typed with the base context."""
    return ctx.trips.titles(city)


assert_type(titles_sync, Tool[FunctionInput, FunctionOutput[list[str]], ToolContext])


@tool(tier="read")
async def one(trip_id: str) -> Trip:
    """A model return stays the output model."""
    return Trip(trip_id=trip_id)


assert_type(one, Tool[FunctionInput, Trip, ToolContext])


@tool(tier="read")
def one_or_denied(ctx: TripsContext, trip_id: str) -> Trip | Denied:
    """Outcomes in the return union are not the output."""
    return Denied(reason="no") if not trip_id else Trip(trip_id=trip_id)


assert_type(one_or_denied, Tool[FunctionInput, Trip, TripsContext])


@tool(tier="read")
async def count_or_denied(city: str) -> int | Denied:
    """Outcomes beside a plain value: the value is the result."""
    return len(city)


assert_type(count_or_denied, Tool[FunctionInput, FunctionOutput[int], ToolContext])


@tool(tier="read")
def maybe(trip_id: str) -> Trip | None:
    """An optional model is not an object: it is wrapped."""
    return None


assert_type(maybe, Tool[FunctionInput, FunctionOutput[Trip | None], ToolContext])


@tool(tier="read")
def nothing() -> None:
    """No parameters, no value."""


assert_type(nothing, Tool[FunctionInput, FunctionOutput[None], ToolContext])


@tool(tier="read")
async def count_words(args: Trip, ctx: TripsContext) -> int:
    """The model form with a plain return: the input model stays, the output is wrapped."""
    return len(args.trip_id)


assert_type(count_words, Tool[Trip, FunctionOutput[int], TripsContext])


@tool(tier="read")
def count_words_sync(args: Trip) -> int:
    """The same without the context, synchronously."""
    return len(args.trip_id)


assert_type(count_words_sync, Tool[Trip, FunctionOutput[int], ToolContext])
