"""Shared tools, principals and helpers for the harness tests (imported by conftest)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from tests.builders import DESTRUCTIVE_RISK, WRITE_RISK, Clock, booking_policy, tiered_tool

from charter import (
    Deferred,
    ErrorCode,
    Interaction,
    InteractionRequired,
    Principal,
    Registry,
    Tool,
    ToolContext,
    ToolError,
    define_tool,
)
from charter.harness import Capability, Harness, Model, ModelResponse, SessionStore, ToolCall
from charter.host import Host
from charter.ledger import MemoryStore
from charter.risk import RiskTier

ALICE = Principal(
    subject="alice",
    tenant_id="t1",
    scopes=frozenset({"trips:read", "trips:write", "bookings:cancel"}),
)
"""The requester: a staff user who may call every tool."""

BOB = Principal(subject="bob", tenant_id="t1", scopes=frozenset({"charter:approve"}))
"""An approver in the same tenant."""


class AddIn(BaseModel):
    a: int
    b: int


class AddOut(BaseModel):
    sum: int


class BookingIn(BaseModel):
    booking_id: str
    reason: str | None = None


class CancelOut(BaseModel):
    cancelled: str


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    answer: str


class JobIn(BaseModel):
    job: str


class JobOut(BaseModel):
    status: str


class TotalOut(BaseModel):
    total: int


class ItemIn(BaseModel):
    item: str


class CartOut(BaseModel):
    count: int


class WaitIn(BaseModel):
    name: str


class Empty(BaseModel):
    pass


@dataclass
class World:
    """The tools' side effects and the gates tests open, visible to assertions."""

    clock: Clock
    registry: Registry
    ledger: MemoryStore
    host: Host
    executions: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    """(tool, invocation id, arguments) of every handler run that got past its checks."""
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    entered: dict[str, asyncio.Event] = field(default_factory=dict)
    sync_saw_cancel: threading.Event = field(default_factory=threading.Event)
    sync_started: threading.Event = field(default_factory=threading.Event)
    states_created: int = 0

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def entered_event(self, name: str) -> asyncio.Event:
        return self.entered.setdefault(name, asyncio.Event())

    def count(self, tool: str) -> int:
        return sum(1 for name, _, _ in self.executions if name == tool)

    def new_host(self, **options: Any) -> Host:
        """A host on the same registry and ledger, as after a process restart."""
        return Host(self.registry, store=self.ledger, clock=self.clock, **options)

    def harness(
        self,
        model: Model,
        *,
        host: Host | None = None,
        store: SessionStore | None = None,
        **options: Any,
    ) -> Harness:
        return Harness(
            host or self.host,
            model,
            store=store,
            capabilities=options.pop("capabilities", (self.cart,)),
            clock=self.clock,
            **options,
        )

    cart: Capability[dict[str, list[str]]] = field(init=False)


def _core_handlers(world: World) -> dict[str, Any]:
    async def add(args: AddIn, ctx: ToolContext) -> AddOut:
        world.executions.append(("add", ctx.invocation_id, args.model_dump()))
        return AddOut(sum=args.a + args.b)

    async def wait_for(args: WaitIn, ctx: ToolContext) -> AddOut:
        world.entered_event(args.name).set()
        await world.gate(args.name).wait()
        world.executions.append(("wait_for", ctx.invocation_id, args.model_dump()))
        return AddOut(sum=len(args.name))

    async def cancel_booking(args: BookingIn, ctx: ToolContext) -> CancelOut:
        world.executions.append(("cancel_booking", ctx.invocation_id, args.model_dump()))
        if args.booking_id in world.gates:
            world.entered_event(args.booking_id).set()
            await world.gate(args.booking_id).wait()
        return CancelOut(cancelled=args.booking_id)

    async def ask_user(args: AskIn, ctx: ToolContext) -> AskOut | InteractionRequired:
        world.executions.append(("ask_user", ctx.invocation_id, args.model_dump()))
        if ctx.resume is None:
            return InteractionRequired(
                interaction=Interaction(id="ask-1", kind="response", prompt=args.question),
                token={"asked": args.question},
            )
        assert ctx.resume.kind == "response"
        return AskOut(answer=f"{ctx.resume.value} (token {ctx.resume.token})")

    async def start_job(args: JobIn, ctx: ToolContext) -> Deferred:
        world.executions.append(("start_job", ctx.invocation_id, args.model_dump()))
        return Deferred(token={"job": args.job})

    return {
        "add": add,
        "wait_for": wait_for,
        "cancel_booking": cancel_booking,
        "ask_user": ask_user,
        "start_job": start_job,
    }


def _other_handlers(world: World) -> dict[str, Any]:
    async def boom(args: Empty) -> AddOut:
        world.executions.append(("boom", None, {}))
        raise RuntimeError("kaboom: secret detail")

    async def refuse(args: Empty) -> AddOut:
        raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "The booking system is down.")

    async def bad_total(args: Empty) -> TotalOut:
        world.executions.append(("bad_total", None, {}))
        return {"total": "not-an-int"}  # type: ignore[return-value]

    async def add_item(args: ItemIn, ctx: ToolContext) -> CartOut:
        items: list[str] = ctx.state["items"]
        items.append(args.item)
        world.executions.append(("add_item", ctx.invocation_id, args.model_dump()))
        return CartOut(count=len(items))

    def sync_wait(args: Empty, ctx: ToolContext) -> AddOut:
        world.sync_started.set()
        # A sync handler in a worker thread: asyncio cannot interrupt it, only ctx.cancel.
        if ctx.cancel.wait_sync(timeout=10):
            world.sync_saw_cancel.set()
            raise ToolError(ErrorCode.CANCELLED, "stopped")
        return AddOut(sum=0)

    async def async_wait(args: Empty, ctx: ToolContext) -> AddOut:
        world.entered_event("async_wait").set()
        await asyncio.sleep(10)
        return AddOut(sum=0)

    def make_state() -> dict[str, list[str]]:
        world.states_created += 1
        return {"items": []}

    return {
        "boom": boom,
        "refuse": refuse,
        "bad_total": bad_total,
        "add_item": add_item,
        "sync_wait": sync_wait,
        "async_wait": async_wait,
        "make_state": make_state,
    }


def build_world() -> World:
    clock = Clock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    registry = Registry()
    ledger = MemoryStore()
    world = World(
        clock=clock,
        registry=registry,
        ledger=ledger,
        host=Host(registry, store=ledger, clock=clock),
    )

    h = {**_core_handlers(world), **_other_handlers(world)}

    approved_booking = booking_policy(approval="required")

    def made(
        name: str,
        description: str,
        input_schema: type[BaseModel],
        output_schema: type[BaseModel] = AddOut,
        tier: RiskTier | str = "read",
        **options: Any,
    ) -> Tool[Any, Any, Any]:
        """Tool ``name`` whose handler is the world's handler of that name."""
        options["description"] = description
        return tiered_tool(name, tier, h[name], input_schema, output_schema, **options)

    registry.register_all(
        [
            made("add", "Add two integers.", AddIn, required_scopes=("trips:read",)),
            made("wait_for", "Wait until the test opens a gate.", WaitIn),
            made(
                "cancel_booking",
                "Cancel a booking (needs confirmation and an approver).",
                BookingIn,
                CancelOut,
                "destructive",
                risk_policy=DESTRUCTIVE_RISK,
                required_scopes=("bookings:cancel",),
                action_policy=approved_booking,
            ),
            made("ask_user", "Ask the user a question.", AskIn, AskOut),
            made(
                "start_job",
                "Start a job that finishes elsewhere.",
                JobIn,
                JobOut,
                "write",
                risk_policy=WRITE_RISK,
            ),
            made("boom", "Always raises.", Empty),
            made("refuse", "Fails with a coded error.", Empty),
            made("bad_total", "Returns output that breaks its schema.", Empty, TotalOut),
            made("sync_wait", "A sync handler that waits for cancellation.", Empty),
            made("async_wait", "An async handler that sleeps.", Empty),
        ]
    )
    add_item_tool = made("add_item", "Add an item to the session's cart.", ItemIn, CartOut)
    world.cart = Capability(id="cart", tools=(add_item_tool,), state_factory=h["make_state"])
    world.cart.register(registry)
    return world


def calls(*items: tuple[str, str, str | dict[str, Any]]) -> ModelResponse:
    """A model response made of tool calls ``(name, call_id, arguments)``."""
    return ModelResponse(
        tool_calls=[ToolCall(call_id=cid, name=name, arguments=args) for name, cid, args in items]
    )


def last_results(request_messages: Any) -> Any:
    """The results of the last tool-results message a model request carried."""
    for message in reversed(request_messages):
        if message.role == "tool":
            return message.results
    raise AssertionError("no tool results in the transcript")


class QueryOut(BaseModel):
    """What a ``recording_tool`` answers: its own name."""

    tool: str


def recording_tool(
    name: str, runs: list[str], input_schema: type[BaseModel], **options: Any
) -> Any:
    """A read tool called ``name`` that appends its name to ``runs`` each time it runs."""

    def handler(args: BaseModel) -> QueryOut:
        runs.append(name)
        return QueryOut(tool=name)

    return define_tool(
        name=name,
        description=f"Tool {name}.",
        input_schema=input_schema,
        output_schema=QueryOut,
        handler=handler,
        tier="read",
        **options,
    )
