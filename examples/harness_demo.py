"""A scripted model books and cancels trips through the harness, pausing for approval.

Run it with ``python -m examples.harness_demo``. No model provider is called: a
``ScriptedModel`` plays the assistant. The tools are small travel-like stand-ins defined
here (the full travel back office in ``examples/travel`` needs the SQL store); every
call still goes through ``Host.invoke``, so scopes, the ledger and approvals apply.

What happens:

1. The model searches trips and adds one to the session's cart (a capability with
   session-local state), in one step; both calls run concurrently.
2. It cancels a booking. The tool is destructive: the host asks the user to confirm,
   then asks an approver. The session pauses twice; its record is in the store.
3. A *new* harness (as after a restart) resumes: the approver grants, the call runs
   once, and the model answers. Resuming the same approval again is refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from charter import (
    ActionPolicy,
    Principal,
    Registry,
    RiskPolicy,
    ToolContext,
    ToolError,
    tool,
)
from charter.harness import (
    Approve,
    Capability,
    Harness,
    MemorySessionStore,
    ModelResponse,
    ToolCall,
    TurnResult,
)
from charter.harness.testing import ScriptedModel
from charter.host import Host
from charter.ledger import MemoryStore

# -- the tools ------------------------------------------------------------------------------


class TripQuery(BaseModel):
    """Where to look."""

    city: str = Field(min_length=1, description="The destination city.")


class TripList(BaseModel):
    """Matching trips."""

    trips: list[str]


class CartAdd(BaseModel):
    """A trip to keep in the cart."""

    trip_id: str


class CartView(BaseModel):
    """The cart after the change."""

    trip_ids: list[str]


class BookingRef(BaseModel):
    """The booking to cancel."""

    booking_id: str = Field(pattern=r"^bk_[a-z0-9]+$")


class Cancellation(BaseModel):
    """What was cancelled."""

    booking_id: str
    refunded_eur: int


BOOKINGS = {"bk_42": 380}
"""Bookings and what they cost (a stand-in for the travel database)."""

CANCELLED: list[str] = []


@tool(tier="read", required_scopes=["trips:read"])
async def search_trips(args: TripQuery) -> TripList:
    """Search bookable trips to a city."""
    return TripList(trips=[f"trp_{args.city.lower()}_1", f"trp_{args.city.lower()}_2"])


@dataclass
class Cart:
    """The session's cart: capability state, created once per session."""

    trip_ids: list[str] = field(default_factory=list)


@tool(tier="read", required_scopes=["trips:read"])
async def add_to_cart(args: CartAdd, ctx: ToolContext) -> CartView:
    """Keep a trip in this conversation's cart."""
    cart: Cart = ctx.state
    cart.trip_ids.append(args.trip_id)
    return CartView(trip_ids=list(cart.trip_ids))


@tool(
    tier="destructive",
    risk_policy=RiskPolicy(
        destructive=True, reversible=False, dry_run_supported=False, side_effects=("refund",)
    ),
    required_scopes=["bookings:cancel"],
    action_policy=ActionPolicy(
        target_type="booking", command_target_field="booking_id", approval="required"
    ),
)
async def cancel_booking(args: BookingRef) -> Cancellation:
    """Cancel a booking and refund it (needs the user's confirmation and an approver)."""
    if args.booking_id not in BOOKINGS:
        raise ToolError("NOT_FOUND", f"No booking {args.booking_id}.")
    CANCELLED.append(args.booking_id)
    return Cancellation(booking_id=args.booking_id, refunded_eur=BOOKINGS[args.booking_id])


CART = Capability(id="cart", tools=(add_to_cart,), state_factory=Cart)

AGENT = Principal(
    subject="agent-ada",
    tenant_id="acme",
    kind="agent",
    scopes=frozenset({"trips:read", "bookings:cancel"}),
)
MANAGER = Principal(subject="manager-mo", tenant_id="acme", scopes=frozenset({"charter:approve"}))

# -- the script -----------------------------------------------------------------------------


def script() -> list[ModelResponse]:
    """What the pretend model says, step by step."""
    return [
        ModelResponse(
            text="Let me look.",
            tool_calls=[
                ToolCall(call_id="c1", name="search_trips", arguments={"city": "Lisbon"}),
                ToolCall(call_id="c2", name="add_to_cart", arguments='{"trip_id": "trp_lisbon_1"}'),
            ],
        ),
        ModelResponse(
            tool_calls=[
                ToolCall(call_id="c3", name="cancel_booking", arguments={"booking_id": "bk_42"})
            ]
        ),
        ModelResponse(
            text="Booking bk_42 is cancelled and refunded; Lisbon trip 1 is in your cart."
        ),
    ]


def show(label: str, result: TurnResult) -> None:
    """Print what a turn or resume returned."""
    print(f"{label}: {result.status}" + (f" ({result.code})" if result.code else ""))
    for r in result.results:
        print(f"  {r.call_id} {r.tool_name}: {r.kind} {r.output or r.reason or r.message}")
    for pending in result.interactions:
        print(f"  waiting ({pending.gate}): {pending.interaction.prompt[:90]}...")
    if result.text:
        print(f"  model: {result.text}")


async def main() -> list[TurnResult]:
    """Run the demo; returns every result (the test reads them)."""
    CANCELLED.clear()
    registry = Registry()
    registry.register_all([search_trips, cancel_booking])
    CART.register(registry)
    ledger, sessions = MemoryStore(), MemorySessionStore()
    model = ScriptedModel(script())
    host = Host(registry, store=ledger)
    session = Harness(host, model, capabilities=[CART], store=sessions).session(AGENT, "ses_1")

    results = [await session.run("Find me a Lisbon trip and cancel booking bk_42.")]
    show("turn", results[-1])
    (confirmation,) = results[-1].interactions
    results.append(await session.resume(Approve(interaction_id=confirmation.interaction.id)))
    show("user confirmed", results[-1])
    (approval,) = results[-1].interactions

    # The process restarts: a new host and harness over the same ledger and session store.
    host = Host(registry, store=ledger)
    await host.approvals.grant(approval.interaction.id, MANAGER)
    session = Harness(host, model, capabilities=[CART], store=sessions).session(AGENT, "ses_1")
    results.append(await session.resume(Approve(interaction_id=approval.interaction.id)))
    show("approved, resumed after a restart", results[-1])
    results.append(await session.resume(Approve(interaction_id=approval.interaction.id)))
    show("the same approval again", results[-1])
    print(f"bookings cancelled: {CANCELLED}")
    return results


if __name__ == "__main__":
    asyncio.run(main())
