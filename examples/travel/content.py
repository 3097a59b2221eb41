"""The travel back office's resource template and prompt, beside its tools.

``trip://{trip_id}`` reads one of the caller's tenant's trips; ``trips.summary`` asks a
model to summarise one. Both need ``trips:read``, like ``trips.get``, and resolve in the
caller's tenant only.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from charter import ToolContext
from charter.resources import (
    PromptMessage,
    PromptResource,
    PromptText,
    TextContents,
    prompt,
    resource,
)

from .tools import TravelContext, Trip, TripRef, _trip


async def _trip_ids(typed: str, ctx: ToolContext) -> list[str]:
    """Trip ids of the caller's tenant starting with what was typed."""
    assert isinstance(ctx, TravelContext)
    rows = await ctx.trips.search(ctx.db, ctx.tenant_id, None, 50)
    return [str(row["id"]) for row in rows if str(row["id"]).startswith(typed)]


@resource(
    "trip://{trip_id}",
    name="trip",
    title="Trip",
    required_scopes=("trips:read",),
    complete={"trip_id": _trip_ids},
)
async def trip_resource(ref: TripRef, ctx: TravelContext) -> Trip:
    """One of your tenant's trips, as JSON."""
    return Trip.model_validate(await _trip(ctx, ref.trip_id))


class SummaryArgs(BaseModel):
    """Which trip to summarise."""

    trip_id: str = Field(description="The trip's id, e.g. trp_lisbon01.", max_length=40)


@prompt(
    "trips.summary",
    title="Trip summary",
    required_scopes=("trips:read",),
    complete={"trip_id": _trip_ids},
)
async def trip_summary(args: SummaryArgs, ctx: TravelContext) -> list[PromptMessage]:
    """Summarise one trip for a traveller: where, how long, and its status."""
    found = Trip.model_validate(await _trip(ctx, args.trip_id))
    embedded = TextContents(
        uri=f"trip://{found.id}", mime_type="application/json", text=found.model_dump_json()
    )
    return [
        PromptMessage(role="user", content=PromptResource(resource=embedded)),
        PromptMessage(
            role="user",
            content=PromptText(
                text=f"Summarise the trip above ({found.name}) for the traveller in two "
                "sentences: where, how many nights, and whether it is still planned."
            ),
        ),
    ]


CONTENT = (trip_resource, trip_summary)
