"""The travel back office's tools, written only against charter's public API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from charter import (
    ActionPolicy,
    Alias,
    CreatedTarget,
    Deprecation,
    Effect,
    ErrorCode,
    RiskPolicy,
    ToolContext,
    ToolError,
    effect,
    tool,
)

from .db import MemoryService, PaymentProvider, TripService

# -- the domain context ------------------------------------------------------------------


@dataclass(kw_only=True)
class TravelContext(ToolContext):
    """What travel handlers get: charter's context plus the travel services."""

    trips: TripService
    memories: MemoryService
    payments: PaymentProvider
    resource_updated: Callable[[str, str], Awaitable[None]] | None = None
    """``host.content.updated``: tells MCP sessions subscribed to a tenant's resource it changed."""


# -- models ----------------------------------------------------------------------------

TripStatus = Literal["planned", "cancelled"]


class Trip(BaseModel):
    """A trip as callers see it."""

    id: str
    name: str
    destination: str
    nights: int
    status: TripStatus


class TripList(BaseModel):
    """Trips matching a search."""

    trips: list[Trip]


Id = Annotated[str, Field(min_length=1, max_length=40)]
"""A trip's or booking's id."""

Text = Annotated[str, Field(min_length=1, max_length=200)]
"""A short non-empty text: a name, a destination, a memory's key."""


class TripSearch(BaseModel):
    """What to search for."""

    text: str | None = Field(default=None, max_length=100, description="Name or destination.")
    limit: int = Field(default=20, ge=1, le=50)


class TripRef(BaseModel):
    """Which trip."""

    trip_id: Id


class NewTrip(BaseModel):
    """A trip to create."""

    name: Text
    destination: Text
    nights: int = Field(ge=1, le=365)


class RenameTrip(BaseModel):
    """A new name for a trip (capability version 1)."""

    trip_id: Id
    name: Text


class RenameTripV2(BaseModel):
    """A new name and, optionally, destination (capability version 2)."""

    trip_id: Id
    name: Text
    destination: str | None = Field(default=None, min_length=1, max_length=200)


class CancelTrip(BaseModel):
    """A trip to cancel, and why."""

    trip_id: Id
    reason: str = Field(min_length=1, max_length=500)


class RefundRequest(BaseModel):
    """A refund on a booking."""

    booking_id: Id
    amount_cents: int = Field(gt=0, le=10_000_000)


class Refund(BaseModel):
    """The refund as recorded."""

    booking_id: str
    refunded_cents: int
    provider_key: str
    """The idempotency key charter gives the payment provider (the effect's key)."""


class RefundPayment(BaseModel):
    """What the payment provider is asked to refund: the ``payments.refund`` effect's payload."""

    booking_id: str
    amount_cents: int


class MemoryQuery(BaseModel):
    """Which tenant's memories (admins may name another tenant)."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str | None = Field(default=None, description="Defaults to your tenant.")
    key: str | None = Field(default=None, max_length=200)


class MemoryWrite(BaseModel):
    """A memory to set."""

    tenant_id: str | None = Field(default=None, description="Defaults to your tenant.")
    key: Text
    value: str = Field(max_length=10_000)


class MemoryKey(BaseModel):
    """A memory to delete."""

    tenant_id: str | None = Field(default=None, description="Defaults to your tenant.")
    key: Text


class Memories(BaseModel):
    """A tenant's memories."""

    tenant_id: str
    memories: dict[str, str]


class MemoryDeleted(BaseModel):
    """Whether the memory existed."""

    tenant_id: str
    key: str
    deleted: bool


class Empty(BaseModel):
    """No arguments."""


class Tenants(BaseModel):
    """Tenants known to the back office."""

    tenants: list[str]


class Pong(BaseModel):
    """The service answers."""

    ok: bool
    service: str


# -- read tools ----------------------------------------------------------------------------


@tool(
    tier="read",
    name="trips.search",
    required_scopes=["trips:read"],
    capability_id="travel.trips.search",
    capability_version="1.0.0",
    owner="travel",
    aliases=[
        Alias(
            name="trips.find",
            deprecation=Deprecation(
                since_version="1.0.0",
                message="trips.find is the old name of trips.search; call trips.search.",
                replacement_capability_id="travel.trips.search",
                sunset_date=date(2027, 6, 30),
            ),
        )
    ],
)
async def search_trips(args: TripSearch, ctx: TravelContext) -> TripList:
    """Search your tenant's trips by name or destination."""
    rows = await ctx.trips.search(ctx.db, ctx.tenant_id, args.text, args.limit)
    return TripList(trips=[Trip.model_validate(row) for row in rows])


@tool(
    tier="read",
    name="trips.get",
    required_scopes=["trips:read"],
    capability_id="travel.trips.get",
    capability_version="1.0.0",
    owner="travel",
)
async def get_trip(args: TripRef, ctx: TravelContext) -> Trip:
    """Get one of your tenant's trips by id."""
    return Trip.model_validate(await _trip(ctx, args.trip_id))


async def _trip(ctx: TravelContext, trip_id: str) -> dict[str, object]:
    row = await ctx.trips.get(ctx.db, ctx.tenant_id, trip_id)
    if row is None:
        # Another tenant's trip answers exactly like a missing one: no existence oracle.
        raise ToolError(ErrorCode.NOT_FOUND, f"No trip {trip_id!r} in your tenant.")
    return row


# -- writes --------------------------------------------------------------------------------

_WRITE = RiskPolicy(
    destructive=False, reversible=True, dry_run_supported=False, side_effects=("data-write",)
)


@tool(
    tier="write",
    risk_policy=_WRITE,
    name="trips.create",
    required_scopes=["trips:write"],
    capability_id="travel.trips.create",
    capability_version="1.0.0",
    owner="travel",
    enforcement="handler",
    action_policy=ActionPolicy(
        target_type="trip",
        target_lifecycle="created",
        created_target=CreatedTarget(
            command_target_type="trip-create-command", result_reference_type="trip"
        ),
    ),
)
async def create_trip(args: NewTrip, ctx: TravelContext) -> Trip:
    """Create a trip. Retrying with the same requestId returns the same trip."""
    assert ctx.handler_action_policy is not None and ctx.db is not None
    claim = await ctx.handler_action_policy.claim()
    if claim.prior is not None:
        # An exact replay whose stored outcome expired: return what was created.
        return Trip.model_validate(await _trip(ctx, claim.prior.removeprefix("trip:")))
    row = await ctx.trips.create(ctx.db, ctx.tenant_id, args.name, args.destination, args.nights)
    await claim.record(f"trip:{row['id']}")
    return Trip.model_validate(row)


@tool(
    tier="write",
    risk_policy=_WRITE,
    name="trips.rename",
    required_scopes=["trips:write"],
    capability_id="travel.trips.rename",
    capability_version="1.0.0",
    owner="travel",
    action_policy=ActionPolicy(target_type="trip", command_target_field="trip_id"),
)
async def rename_trip(args: RenameTrip, ctx: TravelContext) -> Trip:
    """Rename one of your trips."""
    return await _update(ctx, args.trip_id, name=args.name)


@tool(
    tier="write",
    risk_policy=_WRITE,
    name="trips.rename.v2",
    required_scopes=["trips:write"],
    capability_id="travel.trips.rename",
    capability_version="2.0.0",
    owner="travel",
    action_policy=ActionPolicy(target_type="trip", command_target_field="trip_id"),
)
async def rename_trip_v2(args: RenameTripV2, ctx: TravelContext) -> Trip:
    """Rename one of your trips and optionally change its destination."""
    values = {"name": args.name}
    if args.destination is not None:
        values["destination"] = args.destination
    return await _update(ctx, args.trip_id, **values)


async def _update(ctx: TravelContext, trip_id: str, **values: str) -> Trip:
    assert ctx.db is not None
    row = await ctx.trips.update(ctx.db, ctx.tenant_id, trip_id, **values)
    if row is None:
        raise ToolError(ErrorCode.NOT_FOUND, f"No trip {trip_id!r} in your tenant.")
    announce = ctx.resource_updated
    if announce is not None:
        # After the call commits, never for one that rolls back: a subscriber that reads
        # trip://… again then sees the change.
        # trip://{trip_id} resolves in the reader's tenant: say whose trip changed.
        uri, tenant = f"trip://{row['id']}", ctx.tenant_id
        ctx.wait_until(lambda: announce(uri, tenant))
    return Trip.model_validate(row)


@tool(
    tier="sensitive",
    risk_policy=RiskPolicy(
        destructive=False,
        reversible=False,
        dry_run_supported=False,
        confirmation_required=True,
        side_effects=("data-write", "email"),
    ),
    name="trips.cancel",
    required_scopes=["trips:write"],
    capability_id="travel.trips.cancel",
    capability_version="1.0.0",
    owner="travel",
    action_policy=ActionPolicy(
        target_type="trip", command_target_field="trip_id", confirmation="required"
    ),
)
async def cancel_trip(args: CancelTrip, ctx: TravelContext) -> Trip:
    """Cancel a trip. Needs the user's explicit confirmation (_charter.confirmed)."""
    trip = await _trip(ctx, args.trip_id)
    if trip["status"] == "cancelled":
        raise ToolError(ErrorCode.INVALID_INPUT, f"Trip {args.trip_id!r} is already cancelled.")
    return await _update(ctx, args.trip_id, status="cancelled")


@tool(
    tier="destructive",
    risk_policy=RiskPolicy(
        destructive=True, reversible=False, dry_run_supported=False, side_effects=("refund",)
    ),
    name="bookings.refund",
    required_scopes=["bookings:refund"],
    capability_id="travel.bookings.refund",
    capability_version="1.0.0",
    owner="travel",
    action_policy=ActionPolicy(
        target_type="booking",
        command_target_field="booking_id",
        confirmation="required",
        approval="required",
    ),
)
async def refund_booking(args: RefundRequest, ctx: TravelContext) -> Refund:
    """Refund part of a booking. Needs a person's approval before it runs."""
    assert ctx.db is not None and ctx.request_id is not None
    booking = await ctx.trips.booking(ctx.db, ctx.tenant_id, args.booking_id)
    if booking is None:
        raise ToolError(ErrorCode.NOT_FOUND, f"No booking {args.booking_id!r} in your tenant.")
    remaining = int(booking["amount_cents"]) - int(booking["refunded_cents"])
    if args.amount_cents > remaining:
        raise ToolError(
            ErrorCode.INVALID_INPUT,
            f"At most {remaining} cents can still be refunded on {args.booking_id!r}.",
        )
    refunded = await ctx.trips.refund(ctx.db, ctx.tenant_id, args.booking_id, args.amount_cents)
    # The payment provider is outside our transaction: the effect commits with the refund
    # above and runs after the commit (retried by `charter worker` if it fails or this
    # process dies), always with the same key, so the provider refunds once.
    key = ctx.effect(
        "payments.refund",
        RefundPayment(booking_id=args.booking_id, amount_cents=args.amount_cents),
    )
    return Refund(booking_id=args.booking_id, refunded_cents=refunded, provider_key=key)


def payment_effects(payments: PaymentProvider) -> tuple[Effect, ...]:
    """The travel effects, bound to the payment provider they call."""

    @effect("payments.refund")
    async def refund_at_provider(payment: RefundPayment, key: str) -> None:
        """Refund at the provider; it deduplicates by the key."""
        await payments.refund(key, payment.booking_id, payment.amount_cents)

    return (refund_at_provider,)


# -- delegable memory tools ------------------------------------------------------------------


@tool(
    tier="read",
    name="memory.recall",
    required_scopes=["memories:read"],
    delegable=True,
    tenant_field="tenant_id",
    owner="travel",
)
async def recall(args: MemoryQuery, ctx: TravelContext) -> Memories:
    """Recall memories (an admin may name another tenant; that call is audited)."""
    tenant = args.tenant_id or ctx.tenant_id
    return Memories(tenant_id=tenant, memories=await ctx.memories.recall(tenant, args.key))


@tool(
    tier="write",
    risk_policy=_WRITE,
    name="memory.update",
    required_scopes=["memories:write"],
    delegable=True,
    tenant_field="tenant_id",
    owner="travel",
    action_policy=ActionPolicy(target_type="memory", command_target_field="key"),
)
async def update_memory(args: MemoryWrite, ctx: TravelContext) -> Memories:
    """Set a memory (delegable to admins)."""
    assert ctx.db is not None
    tenant = args.tenant_id or ctx.tenant_id
    await ctx.memories.update(ctx.db, tenant, args.key, args.value)
    return Memories(tenant_id=tenant, memories={args.key: args.value})


@tool(
    tier="write",
    risk_policy=RiskPolicy(
        destructive=True, reversible=False, dry_run_supported=False, side_effects=("data-delete",)
    ),
    name="memory.delete",
    required_scopes=["memories:delete"],
    delegable=True,
    tenant_field="tenant_id",
    owner="travel",
    action_policy=ActionPolicy(target_type="memory", command_target_field="key"),
)
async def delete_memory(args: MemoryKey, ctx: TravelContext) -> MemoryDeleted:
    """Delete a memory (delegable to admins)."""
    assert ctx.db is not None
    tenant = args.tenant_id or ctx.tenant_id
    deleted = await ctx.memories.delete(ctx.db, tenant, args.key)
    return MemoryDeleted(tenant_id=tenant, key=args.key, deleted=deleted)


# -- admin and public ------------------------------------------------------------------------


@tool(tier="read", name="admin.tenants.list", auth="admin", owner="travel")
async def list_tenants(args: Empty, ctx: TravelContext) -> Tenants:
    """List the tenants that have trips (admin scope only)."""
    return Tenants(tenants=await ctx.trips.tenants())


@tool(tier="read", name="catalog.ping", auth="public", owner="travel")
async def ping(args: Empty) -> Pong:
    """Check that the travel service answers (no credentials needed)."""
    return Pong(ok=True, service="travel")


TOOLS = (
    search_trips,
    get_trip,
    create_trip,
    rename_trip,
    rename_trip_v2,
    cancel_trip,
    refund_booking,
    recall,
    update_memory,
    delete_memory,
    list_tenants,
    ping,
)
