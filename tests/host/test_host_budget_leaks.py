"""Budgets give back what they took on every early exit, and a retry is never refused by one.

A spend that stops early (a limit without room, a store busy or unreachable, a ``cost``
function that raises, a cancellation) gives back its ``InFlight`` holds and the buckets it
spent; a retry of a request still running waits for it and replays, on the default store
too.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import Clock, risk, tiered_tool

from charter import ActionPolicy, InFlight, Principal, RateLimit, Registry
from charter.errors import ErrorCode, StoreBusy, StoreUnavailable
from charter.host import Host
from charter.ledger import MemoryStore
from charter.ledger.budgets import Bucket, MemoryBudgets
from charter.outcome import Completed, Failed

pytestmark = pytest.mark.anyio

START = datetime(2030, 1, 1, tzinfo=UTC)


class Search(BaseModel):
    destination: str
    items: list[str] | None = None


class Trips(BaseModel):
    found: list[str]


class Refund(BaseModel):
    booking_id: str
    amount_cents: int


class Refunded(BaseModel):
    booking_id: str
    amount_cents: int


class BudgetingStore(MemoryStore, MemoryBudgets):
    """A ledger store that keeps its own buckets (a ``BudgetStore`` as ``SqlStore`` is),
    whose spends and refunds can fail or wait, as a database's can."""

    def __init__(self) -> None:
        MemoryStore.__init__(self)
        MemoryBudgets.__init__(self)
        self.failing: dict[str, Exception] = {}
        """Limit labels whose spend raises this error."""
        self.spend_gate: anyio.Event | None = None
        """When set, every spend waits for it (a database lock) before it spends."""
        self.refund_gate: anyio.Event | None = None
        self.spending = anyio.Event()
        self.refunding = anyio.Event()
        self.refunds = 0

    async def spend_budget(self, bucket: Bucket, *, cost: float, now: float) -> bool:
        error = self.failing.get(bucket.limit)
        if error is not None:
            raise error
        if self.spend_gate is not None:
            self.spending.set()
            await self.spend_gate.wait()
        return await MemoryBudgets.spend_budget(self, bucket, cost=cost, now=now)

    async def refund_budget(self, bucket: Bucket, *, cost: float) -> None:
        if self.refund_gate is not None:
            self.refunding.set()
            await self.refund_gate.wait()
        await MemoryBudgets.refund_budget(self, bucket, cost=cost)
        self.refunds += 1

    async def used(self, clock: Clock) -> dict[str, int]:
        now = clock().timestamp()
        return {u.bucket.limit: u.used(now) for u in await self.budget_usage(now=now)}


def search_registry(limits: list[Any], *, ran: list[str] | None = None) -> Registry:
    ran = ran if ran is not None else []

    async def search(args: Search) -> Trips:
        ran.append(args.destination)
        return Trips(found=[args.destination])

    tools = Registry()
    tools.register(tiered_tool("trips.search", "read", search, Search, Trips, limits=limits))
    return tools


def refund_registry(limits: list[Any], *, pause: float = 0.0, ran: list[str]) -> Registry:
    async def refund(args: Refund) -> Refunded:
        ran.append(args.booking_id)
        await anyio.sleep(pause)
        return Refunded(booking_id=args.booking_id, amount_cents=args.amount_cents)

    tools = Registry()
    tools.register(
        tiered_tool(
            "bookings.refund",
            "sensitive",
            refund,
            Refund,
            Refunded,
            description="Refund a booking.",
            risk_policy=risk("refund", reversible=False),
            action_policy=ActionPolicy(
                target_type="booking",
                command_target_field="booking_id",
                confirmation="never",
                approval="never",
                ledger="required",
            ),
            limits=limits,
        )
    )
    return tools


def agent(subject: str = "planner") -> Principal:
    return Principal(subject=subject, tenant_id="acme", scopes=frozenset({"*"}), kind="agent")


def rate_limited(outcome: object) -> bool:
    return isinstance(outcome, Failed) and outcome.code is ErrorCode.RATE_LIMITED


def refund_args(request: str, amount: int = 100) -> dict[str, Any]:
    controls = {"requestId": request, "confirmed": True}
    return {"booking_id": "bk_1", "amount_cents": amount, "_charter": controls}


async def search(host: Host, **args: Any) -> Any:
    return await host.invoke("trips.search", {"destination": "x", **args}, agent())


async def call_within(scope: anyio.CancelScope, host: Host) -> None:
    """A call the test cancels by ``scope`` (the caller hangs up)."""
    with scope:
        await search(host)


# -- finding: what a spend took is given back on every early exit ---------------------------


@pytest.mark.parametrize("error", [StoreBusy("locked"), StoreUnavailable("gone")])
async def test_a_store_that_fails_mid_spend_gives_back_the_holds_and_the_spends(
    error: Exception,
) -> None:
    clock = Clock(START)
    store = BudgetingStore()
    limits = [
        InFlight(limit=1, key="tool"),
        RateLimit(calls=5, per=60, name="first"),
        RateLimit(calls=5, per=60, name="second"),
    ]
    host = Host(search_registry(limits), store=store, clock=clock)
    store.failing["second"] = error
    for _ in range(3):  # each failure would have kept the one slot for good
        refused = await search(host)
        assert isinstance(refused, Failed) and refused.code is ErrorCode.PROVIDER_UNAVAILABLE
        assert refused.reason == "budgets_unavailable" and refused.retryable
    assert await store.used(clock) == {}  # "first" was spent each time, and given back
    store.failing.clear()
    assert isinstance(await search(host), Completed)
    assert await store.used(clock) == {"first": 1, "second": 1}


async def test_a_cost_function_that_raises_fails_the_call_naming_the_limit_and_spends_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(START)
    store = BudgetingStore()
    ran: list[str] = []

    def items(args: Search) -> int:
        return len(args.items)  # type: ignore[arg-type]  # careless: items may be None

    limits = [
        InFlight(limit=1),
        RateLimit(calls=5, per=60, name="first"),
        RateLimit(calls=100, per=60, cost=items, name="items"),
    ]
    host = Host(search_registry(limits, ran=ran), store=store, clock=clock)
    for _ in range(2):
        failed = await search(host)
        assert isinstance(failed, Failed) and failed.code is ErrorCode.PROVIDER_ERROR
        assert failed.reason == "invalid_limit_cost" and not failed.retryable
        assert failed.meta is not None and failed.meta["limit"] == "items"
        error_id = str(failed.meta["errorId"])
        assert error_id in failed.message and "items" in failed.message
        assert error_id in caplog.text and "TypeError" in caplog.text  # the cause, logged
    assert ran == [] and await store.used(clock) == {}
    assert isinstance(await search(host, items=["a", "b"]), Completed)
    assert await store.used(clock) == {"first": 1, "items": 2}


async def test_a_host_wide_quota_whose_cost_fits_one_tool_fails_the_others_and_leaks_none() -> None:
    ran: list[str] = []
    quota = RateLimit(calls=100_000, per=86_400, cost=lambda args: args.amount_cents, name="cents")
    host = Host(search_registry([InFlight(limit=2, key="tool")], ran=ran), rate_limits=[quota])
    for _ in range(4):
        failed = await search(host)
        assert isinstance(failed, Failed) and failed.reason == "invalid_limit_cost"
        assert failed.meta is not None and failed.meta["limit"] == "cents"
    assert ran == []


async def test_a_caller_cancelled_while_its_spend_waits_gives_back_the_spend_and_the_hold() -> None:
    clock = Clock(START)
    store = BudgetingStore()
    limits = [InFlight(limit=1), RateLimit(calls=3, per=3_600, name="hourly")]
    host = Host(search_registry(limits), store=store, clock=clock)
    assert isinstance(await search(host), Completed)
    store.spend_gate = anyio.Event()  # the database is locked: the next spend waits
    caller = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call_within, caller, host)
        await store.spending.wait()
        caller.cancel()  # the caller goes away while the spend waits ...
        await anyio.sleep(0.01)
        store.spend_gate.set()  # ... and the spend goes through once the lock is free
    store.spend_gate = None
    # The spend that went through after the caller left was given back, and the hold.
    assert await store.used(clock) == {"hourly": 1}
    assert isinstance(await search(host), Completed)
    assert await store.used(clock) == {"hourly": 2}


async def test_a_give_back_runs_to_its_end_when_the_caller_is_cancelled_meanwhile() -> None:
    clock = Clock(START)
    store = BudgetingStore()
    limits = [RateLimit(calls=5, per=60, name="roomy"), RateLimit(calls=1, per=60, name="tight")]
    host = Host(search_registry(limits), store=store, clock=clock)
    assert isinstance(await search(host), Completed)
    store.refund_gate = anyio.Event()
    caller = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call_within, caller, host)  # "tight" refuses: "roomy" is given back
        await store.refunding.wait()
        caller.cancel()
        await anyio.sleep(0.01)
        assert store.refunds == 0
        store.refund_gate.set()
    await anyio.sleep(0.01)
    assert store.refunds == 1
    assert await store.used(clock) == {"roomy": 1, "tight": 1}


async def test_the_in_memory_buckets_give_back_a_refused_calls_hold() -> None:
    host = Host(search_registry([InFlight(limit=1), RateLimit(calls=1, per=60)]))
    assert isinstance(await search(host), Completed)
    for _ in range(3):
        assert rate_limited(await search(host))
    # The refusals held the one slot only while they spent: a new holder still runs.
    other = await host.invoke("trips.search", {"destination": "x"}, agent("booker"))
    assert isinstance(other, Completed)


# -- finding: a retry of a request still running is never refused by a budget ---------------


async def test_a_retry_of_a_running_request_waits_and_replays_on_the_default_store() -> None:
    ran: list[str] = []
    host = Host(refund_registry([RateLimit(calls=1, per=3_600)], pause=0.2, ran=ran))
    request = str(uuid.uuid4())
    outcomes: list[Any] = []

    async def call() -> None:
        outcomes.append(await host.invoke("bookings.refund", refund_args(request), agent()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(0.05)
        tg.start_soon(call)  # the budget is spent by the very request it retries
    first, retry = outcomes
    assert isinstance(first, Completed) and not first.replayed
    assert isinstance(retry, Completed) and retry.replayed
    assert retry.output == first.output and ran == ["bk_1"]
    # A new request is still over the budget.
    assert rate_limited(
        await host.invoke("bookings.refund", refund_args(str(uuid.uuid4())), agent())
    )


async def test_a_retry_of_a_request_running_past_the_wait_is_request_in_progress() -> None:
    ran: list[str] = []
    tools = refund_registry([RateLimit(calls=1, per=3_600)], pause=0.5, ran=ran)
    host = Host(tools, in_progress_wait=0.05)
    request = str(uuid.uuid4())
    async with anyio.create_task_group() as tg:
        tg.start_soon(host.invoke, "bookings.refund", refund_args(request), agent())
        await anyio.sleep(0.05)
        retry = await host.invoke("bookings.refund", refund_args(request), agent())
        assert isinstance(retry, Failed) and retry.code is ErrorCode.REQUEST_IN_PROGRESS
        assert retry.retryable and retry.meta is not None and retry.meta["requestId"] == request
    assert ran == ["bk_1"]
    replay = await host.invoke("bookings.refund", refund_args(request), agent())
    assert isinstance(replay, Completed) and replay.replayed


async def test_a_retry_of_a_running_request_is_not_refused_by_its_in_flight_cap() -> None:
    ran: list[str] = []
    host = Host(refund_registry([InFlight(limit=1)], pause=0.2, ran=ran))
    request = str(uuid.uuid4())
    outcomes: list[Any] = []

    async def call(request: str) -> None:
        outcomes.append(await host.invoke("bookings.refund", refund_args(request), agent()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, request)
        await anyio.sleep(0.05)
        tg.start_soon(call, request)
        tg.start_soon(call, str(uuid.uuid4()))  # another request: the cap refuses it
    kinds = sorted(
        "replayed" if isinstance(o, Completed) and o.replayed else type(o).__name__
        for o in outcomes
    )
    assert kinds == ["Completed", "Failed", "replayed"] and ran == ["bk_1"]
    refused = next(o for o in outcomes if isinstance(o, Failed))
    assert refused.reason == "too_many_in_flight"
