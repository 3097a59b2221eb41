"""Type inference pinned with ``assert_type``; checked by mypy --strict (see tests/test_typing.py).

Nothing here needs to run; pytest imports it, which also proves the declarations are valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from charter import Denied, Tool, ToolContext, define_tool, tool


class In(BaseModel):
    trip_id: str


class Out(BaseModel):
    ok: bool


class TripService:
    def exists(self, trip_id: str) -> bool:
        return bool(trip_id)


@dataclass(kw_only=True)
class TripsContext(ToolContext):
    trips: TripService


@tool(tier="read")
async def check_trip(args: In, ctx: TripsContext) -> Out:
    """Check that a trip exists."""
    # Both the parsed input and the domain context are typed in the handler.
    return Out(ok=ctx.trips.exists(args.trip_id))


assert_type(check_trip, Tool[In, Out, TripsContext])


@tool(tier="read")
def check_trip_sync(args: In, ctx: TripsContext) -> Out:
    """Check that a trip exists, synchronously."""
    return Out(ok=ctx.trips.exists(args.trip_id))


assert_type(check_trip_sync, Tool[In, Out, TripsContext])


@tool(tier="read")
def input_only(args: In) -> Out:
    """A handler that takes no context gets the base context type."""
    return Out(ok=bool(args.trip_id))


assert_type(input_only, Tool[In, Out, ToolContext])


@tool(tier="read", name="maybe")
async def maybe(args: In, ctx: TripsContext) -> Out | Denied:
    """A handler may return an outcome instead of output."""
    return Denied(reason="no") if not args.trip_id else Out(ok=True)


assert_type(maybe, Tool[In, Out, TripsContext])


async def handle(args: In, ctx: TripsContext) -> Out:
    return Out(ok=ctx.trips.exists(args.trip_id))


def handle_sync(args: In) -> Out:
    return Out(ok=True)


defined = define_tool(
    name="defined",
    description="Declared with define_tool.",
    input_schema=In,
    output_schema=Out,
    handler=handle,
    tier="read",
)
assert_type(defined, Tool[In, Out, TripsContext])

defined_sync = define_tool(
    name="defined_sync",
    description="Declared with define_tool and a sync handler.",
    input_schema=In,
    output_schema=Out,
    handler=handle_sync,
    tier="read",
)
assert_type(defined_sync, Tool[In, Out, ToolContext])

assert_type(check_trip.input_model, type[In])
assert_type(check_trip.output_model, type[Out])
