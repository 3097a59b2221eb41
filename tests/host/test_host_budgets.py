"""Budgets for agents (issue #23): rate limits, quotas and in-flight caps, in the host."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import Clock, risk, tiered_tool

from charter import ActionPolicy, InFlight, Principal, RateLimit, Registry
from charter._telemetry import RATE_LIMITED_METRIC
from charter.errors import ConfigurationError, ErrorCode
from charter.host import Host
from charter.ledger import MemoryStore
from charter.ledger.budgets import bucket_key
from charter.limits import MAX_WINDOW, MIN_UNIT
from charter.outcome import Completed, Failed, InteractionRequired, ToolOutcome

pytestmark = pytest.mark.anyio


class Search(BaseModel):
    destination: str


class Trips(BaseModel):
    found: list[str]


class Refund(BaseModel):
    booking_id: str
    amount_cents: int


class Refunded(BaseModel):
    booking_id: str
    amount_cents: int


START = datetime(2030, 1, 1, tzinfo=UTC)
"""Where the tests' clocks start: a fixed instant, so every run sees the same windows."""

REFUND_RISK = risk("refund", reversible=False)


def registry(
    *,
    search_limits: list[Any] | None = None,
    refund_limits: list[Any] | None = None,
    approval: str = "never",
    pause: float = 0.0,
    ran: list[str] | None = None,
) -> Registry:
    ran = ran if ran is not None else []

    async def search(args: Search) -> Trips:
        ran.append(args.destination)
        if pause:
            await anyio.sleep(pause)
        return Trips(found=[f"{args.destination} in May"])

    async def refund(args: Refund) -> Refunded:
        ran.append(args.booking_id)
        return Refunded(booking_id=args.booking_id, amount_cents=args.amount_cents)

    tools = Registry()
    tools.register(
        tiered_tool("trips.search", "read", search, Search, Trips, limits=search_limits or [])
    )
    tools.register(
        tiered_tool(
            "bookings.refund",
            "sensitive",
            refund,
            Refund,
            Refunded,
            description="Refund a booking.",
            risk_policy=REFUND_RISK,
            action_policy=ActionPolicy(
                target_type="booking",
                command_target_field="booking_id",
                confirmation="never",
                approval=approval,  # type: ignore[arg-type]
                ledger="required",
            ),
            limits=refund_limits or [],
        )
    )
    return tools


def agent(subject: str = "planner", tenant: str = "acme") -> Principal:
    return Principal(subject=subject, tenant_id=tenant, scopes=frozenset({"*"}), kind="agent")


def refund_args(amount: int, booking: str = "bk_1", request: str | None = None) -> dict[str, Any]:
    return {
        "booking_id": booking,
        "amount_cents": amount,
        "_charter": {"requestId": request or str(uuid.uuid4()), "confirmed": True},
    }


def rate_limited(outcome: object) -> bool:
    return isinstance(outcome, Failed) and outcome.code is ErrorCode.RATE_LIMITED


def search_host(*limits: Any, **options: Any) -> Host:
    """A host (``options`` go to it) whose ``trips.search`` has ``limits``."""
    return Host(registry(search_limits=list(limits)), **options)


def refusing_limit(outcome: object) -> object:
    """The limit a refused call names (``meta["limit"]``); the outcome must be a failure."""
    assert isinstance(outcome, Failed) and outcome.meta is not None
    return outcome.meta["limit"]


async def concurrent_searches(host: Host, calls: int) -> list[ToolOutcome]:
    """The outcomes of ``calls`` trips.search calls started at once, in the order they ended."""
    outcomes: list[ToolOutcome] = []

    async def call(i: int) -> None:
        outcomes.append(await host.invoke("trips.search", {"destination": f"d{i}"}, agent()))

    async with anyio.create_task_group() as tg:
        for i in range(calls):
            tg.start_soon(call, i)
    return outcomes


async def test_64_concurrent_calls_against_a_limit_of_10_run_exactly_10() -> None:
    ran: list[str] = []
    host = Host(
        registry(search_limits=[RateLimit(calls=10, per=60)], pause=0.05, ran=ran),
        store=MemoryStore(),
    )
    outcomes = await concurrent_searches(host, 64)
    assert sum(isinstance(o, Completed) for o in outcomes) == 10
    refused = [o for o in outcomes if rate_limited(o)]
    assert len(refused) == 54
    assert len(ran) == 10
    first = refused[0]
    assert isinstance(first, Failed) and first.retryable and first.meta is not None
    assert first.meta["limit"] == "10/60s by principal"
    # One unit comes back every 6 seconds: that is the wait.
    assert first.meta["retryAfter"] == 6.0
    assert "retry in 6 s" in first.message


async def test_the_window_refills_one_unit_per_interval_and_bursts_after_a_full_window() -> None:
    clock = Clock(START)
    host = search_host(RateLimit(calls=3, per=60), clock=clock)

    async def search() -> object:
        return await host.invoke("trips.search", {"destination": "Lisbon"}, agent())

    assert [isinstance(await search(), Completed) for _ in range(3)] == [True] * 3
    refused = await search()
    assert rate_limited(refused) and isinstance(refused, Failed)
    assert refused.meta is not None and refused.meta["retryAfter"] == 20.0
    clock.advance(timedelta(seconds=19.9))
    late = await search()
    assert rate_limited(late) and isinstance(late, Failed) and late.meta is not None
    assert late.meta["retryAfter"] == 0.1
    clock.advance(timedelta(seconds=0.1))
    assert isinstance(await search(), Completed)
    assert rate_limited(await search())
    clock.advance(timedelta(seconds=60))
    assert [isinstance(await search(), Completed) for _ in range(3)] == [True] * 3
    assert rate_limited(await search())


async def test_a_replay_of_a_ledgered_request_is_free() -> None:
    ran: list[str] = []
    host = Host(registry(refund_limits=[RateLimit(calls=1, per=3600)], ran=ran))
    first = refund_args(500, request=str(uuid.uuid4()))
    assert isinstance(await host.invoke("bookings.refund", first, agent()), Completed)
    again = await host.invoke("bookings.refund", first, agent())
    assert isinstance(again, Completed) and again.replayed
    again = await host.invoke("bookings.refund", first, agent())
    assert isinstance(again, Completed) and again.replayed
    assert rate_limited(await host.invoke("bookings.refund", refund_args(700), agent()))
    assert ran == ["bk_1"]


async def test_a_replay_spends_nothing_while_the_budget_still_has_room() -> None:
    ran: list[str] = []
    host = Host(registry(refund_limits=[RateLimit(calls=2, per=3600)], ran=ran))
    first = refund_args(500)
    for _ in range(5):
        assert isinstance(await host.invoke("bookings.refund", first, agent()), Completed)
    second = await host.invoke("bookings.refund", refund_args(300, "bk_2"), agent())
    assert isinstance(second, Completed) and not second.replayed
    assert rate_limited(await host.invoke("bookings.refund", refund_args(100, "bk_3"), agent()))
    assert ran == ["bk_1", "bk_2"]


async def test_a_pause_for_approval_spends_nothing_and_the_approved_run_does() -> None:
    host = Host(registry(refund_limits=[RateLimit(calls=1, per=3600)], approval="required"))
    args = refund_args(500)
    for _ in range(3):
        paused = await host.invoke("bookings.refund", args, agent())
        assert isinstance(paused, InteractionRequired)
    other = await host.invoke("bookings.refund", refund_args(900, "bk_2"), agent())
    assert isinstance(other, InteractionRequired)


async def test_principal_tenant_and_tool_keys_count_separately() -> None:
    host = search_host(
        RateLimit(calls=1, per=60, key="principal"),
        RateLimit(calls=2, per=60, key="tenant"),
        RateLimit(calls=3, per=60, key="tool"),
    )

    async def search(who: Principal) -> object:
        return await host.invoke("trips.search", {"destination": "Porto"}, who)

    assert isinstance(await search(agent("planner", "acme")), Completed)
    # The same subject in another tenant is another principal with its own budget.
    assert isinstance(await search(agent("planner", "globex")), Completed)
    assert refusing_limit(await search(agent("planner", "acme"))) == "1/60s by principal"
    # A second principal of acme spends acme's second tenant unit...
    assert isinstance(await search(agent("booker", "acme")), Completed)
    # ...and then acme's tenant budget is spent for everyone in acme.
    assert refusing_limit(await search(agent("auditor", "acme"))) == "2/60s by tenant"
    # The tool's budget (3) is now spent across tenants.
    assert refusing_limit(await search(agent("booker", "initech"))) == "3/60s by tool"


async def test_a_refused_limit_gives_back_what_the_call_spent_on_the_others() -> None:
    host = search_host(
        RateLimit(calls=5, per=60, key="tenant"), RateLimit(calls=1, per=60, key="principal")
    )
    planner = agent("planner")
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, planner), Completed)
    for _ in range(10):
        assert rate_limited(await host.invoke("trips.search", {"destination": "x"}, planner))
    # The tenant budget lost one unit only: four colleagues still get through.
    for name in ("a", "b", "c", "d"):
        outcome = await host.invoke("trips.search", {"destination": "x"}, agent(name))
        assert isinstance(outcome, Completed)


async def test_a_daily_quota_counts_the_cost_of_the_validated_input() -> None:
    clock = Clock(START)
    quota = RateLimit(
        calls=2_000,
        per=86_400,
        cost=lambda args: args.amount_cents,
        name="refunds per day",
    )
    host = Host(registry(refund_limits=[quota]), clock=clock)
    assert isinstance(await host.invoke("bookings.refund", refund_args(1_500), agent()), Completed)
    refused = await host.invoke("bookings.refund", refund_args(600), agent())
    assert isinstance(refused, Failed) and refused.code is ErrorCode.RATE_LIMITED
    assert refused.meta is not None and refused.meta["limit"] == "refunds per day"
    # 100 cents come back in 100 * 43.2 s; until then 600 does not fit.
    assert refused.meta["retryAfter"] == pytest.approx(4320.0)
    assert isinstance(await host.invoke("bookings.refund", refund_args(500), agent()), Completed)
    too_big = await host.invoke("bookings.refund", refund_args(2_500), agent())
    assert isinstance(too_big, Failed) and too_big.code is ErrorCode.RATE_LIMITED
    assert not too_big.retryable and too_big.reason == "over_quota"
    clock.advance(timedelta(seconds=86_400))
    assert isinstance(await host.invoke("bookings.refund", refund_args(2_000), agent()), Completed)


async def test_a_cost_function_returning_no_whole_number_fails_the_call_clearly() -> None:
    # A float cost on purpose (mypy refuses it too): the host refuses it when the call runs.
    quota = RateLimit(calls=10, per=60, cost=lambda args: 1.5)  # type: ignore[arg-type, return-value]
    ran: list[str] = []
    host = Host(registry(refund_limits=[quota], ran=ran))
    outcome = await host.invoke("bookings.refund", refund_args(100), agent())
    assert isinstance(outcome, Failed) and outcome.code is ErrorCode.PROVIDER_ERROR
    assert outcome.reason == "invalid_limit_cost" and ran == []
    assert outcome.meta is not None and outcome.meta["limit"] == "10/60s by principal"


async def test_in_flight_caps_refuse_calls_beyond_the_cap_until_one_ends() -> None:
    ran: list[str] = []
    host = Host(registry(search_limits=[InFlight(limit=2)], pause=0.2, ran=ran))
    outcomes = await concurrent_searches(host, 5)
    assert sum(isinstance(o, Completed) for o in outcomes) == 2
    refused = [o for o in outcomes if isinstance(o, Failed)]
    assert len(refused) == 3 and all(o.reason == "too_many_in_flight" for o in refused)
    # Both ended: the next two run again.
    for _ in range(2):
        outcome = await host.invoke("trips.search", {"destination": "again"}, agent())
        assert isinstance(outcome, Completed)


async def test_host_wide_limits_count_across_tools() -> None:
    host = Host(registry(), rate_limits=[RateLimit(calls=2, per=60)])
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, agent()), Completed)
    assert isinstance(await host.invoke("bookings.refund", refund_args(1), agent()), Completed)
    refused = await host.invoke("trips.search", {"destination": "x"}, agent())
    assert rate_limited(refused)
    assert isinstance(
        await host.invoke("trips.search", {"destination": "x"}, agent("booker")), Completed
    )


async def test_rate_limited_refusals_are_audited_aggregated_per_caller_and_tool() -> None:
    clock = Clock(START)
    store = MemoryStore()
    host = search_host(RateLimit(calls=1, per=60), store=store, clock=clock)
    for _ in range(21):
        await host.invoke("trips.search", {"destination": "x"}, agent())
    for _ in range(3):
        await host.invoke("trips.search", {"destination": "x"}, agent("booker"))
    await host.aclose()
    refused = [e for e in await store.events(tenant="acme") if e.code == "RATE_LIMITED"]
    by_subject: dict[str | None, int] = {}
    for event in refused:
        by_subject[event.subject] = by_subject.get(event.subject, 0) + event.count
    assert by_subject == {"planner": 20, "booker": 2}
    assert len(refused) == 4  # the first of each window, and one count each


async def test_malformed_limits_are_configuration_errors_naming_the_problem() -> None:
    # The "user" key and the lone RateLimit are ill-typed on purpose (mypy refuses them too).
    bad: list[tuple[Callable[[], object], str]] = [
        (lambda: registry(search_limits=[RateLimit(calls=0, per=60)]), "calls > 0"),
        (lambda: registry(search_limits=[RateLimit(calls=5, per=0)]), "per > 0"),
        (lambda: registry(search_limits=[RateLimit(calls=5, per=60, key="user")]), "'user'"),  # type: ignore[arg-type]
        (lambda: registry(search_limits=[InFlight(limit=0)]), "limit > 0"),
        (lambda: registry(search_limits=["10/min"]), "got str"),
        (lambda: Host(registry(), rate_limits=RateLimit(calls=1, per=1)), "must be a list"),  # type: ignore[arg-type]
    ]
    for build, words in bad:
        with pytest.raises(ConfigurationError, match=words):
            build()


async def test_limits_sharing_a_name_in_one_scope_are_configuration_errors() -> None:
    # A limit's name is its bucket: two limits under one name would share one bucket.
    hourly = RateLimit(calls=100, per=3_600, name="q")
    shared: list[list[Any]] = [
        [RateLimit(calls=10, per=60)] * 2,  # the same derived name twice
        [RateLimit(calls=10, per=60, name="q"), hourly],
        [InFlight(limit=2, name="q"), hourly],
    ]
    for limits in shared:
        with pytest.raises(ConfigurationError, match="two limits are named"):
            registry(search_limits=limits)
        with pytest.raises(ConfigurationError, match="the host's rate_limits: two limits"):
            Host(registry(), rate_limits=limits)
    # One name on two tools, or on a tool and the host, is two buckets: allowed.
    host = Host(registry(search_limits=[hourly], refund_limits=[hourly]), rate_limits=[hourly])
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, agent()), Completed)


async def test_windows_units_and_names_out_of_range_are_configuration_errors() -> None:
    # Ill-typed names on purpose (mypy refuses them too).
    bad: list[tuple[Any, str]] = [
        (RateLimit(calls=1, per=1e308), "longer than the longest window"),
        (RateLimit(calls=1, per=MAX_WINDOW + 1), "316,224,000 seconds"),
        (RateLimit(calls=1, per=10**400), "longer than the longest window"),
        (RateLimit(calls=1, per=math.inf), "longer than the longest window"),
        (RateLimit(calls=1, per=math.nan), "per > 0"),
        (RateLimit(calls=10**13, per=86_400), "one unit worth"),  # 10 trillion a day
        (RateLimit(calls=10**400, per=60), "one unit worth"),
        (RateLimit(calls=5, per=60, name=5), "got 5"),  # type: ignore[arg-type]
        (InFlight(limit=5, name=5), "got 5"),  # type: ignore[arg-type]
        (RateLimit(calls=5, per=60, name=""), "non-empty"),
        (RateLimit(calls=5, per=60, name="  "), "non-empty"),
        (InFlight(limit=5, name="burst\nx"), "control characters"),
    ]
    for limit, words in bad:
        with pytest.raises(ConfigurationError, match=words):
            registry(search_limits=[limit])
        with pytest.raises(ConfigurationError, match=words):
            Host(registry(), rate_limits=[limit])
    # The bounds themselves are allowed.
    registry(search_limits=[RateLimit(calls=1, per=MAX_WINDOW)])
    registry(search_limits=[RateLimit(calls=round(1 / MIN_UNIT), per=1)])


async def test_a_refusal_under_the_longest_window_says_a_finite_wait() -> None:
    host = search_host(RateLimit(calls=1, per=MAX_WINDOW), clock=Clock(START))
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, agent()), Completed)
    refused = await host.invoke("trips.search", {"destination": "x"}, agent())
    assert rate_limited(refused)
    assert isinstance(refused, Failed) and refused.meta is not None
    assert refused.meta["retryAfter"] == MAX_WINDOW


async def test_a_pending_refusal_count_is_recorded_by_any_refusal_after_its_window() -> None:
    clock = Clock(START)
    store = MemoryStore()
    host = search_host(RateLimit(calls=1, per=3_600), store=store, clock=clock)

    async def planner_counts() -> list[int]:
        events = await store.events(tenant="acme")
        return [e.count for e in events if e.code == "RATE_LIMITED" and e.subject == "planner"]

    for _ in range(51):
        await host.invoke("trips.search", {"destination": "x"}, agent())
    assert await planner_counts() == [1]  # the first; 49 more counted
    clock.advance(timedelta(seconds=59))
    await host.invoke("trips.search", {"destination": "x"}, agent("booker"))
    await host.invoke("trips.search", {"destination": "x"}, agent("booker"))
    assert await planner_counts() == [1]  # the window still runs
    clock.advance(timedelta(seconds=1))
    # Another caller's refusal, after the planner's window: the planner's count is recorded
    # now, not when the planner is refused again or the host closes.
    await host.invoke("trips.search", {"destination": "x"}, agent("booker"))
    assert sorted(await planner_counts()) == [1, 49]
    await host.aclose()
    assert sorted(await planner_counts()) == [1, 49]


async def test_each_refusal_counts_in_the_rate_limit_metric_by_tool_and_limit(otel: Any) -> None:
    quota = RateLimit(calls=1, per=60, name="search burst")
    tools = registry(search_limits=[quota])
    host = Host(tools)

    def refused() -> int:
        points = otel.points(RATE_LIMITED_METRIC, "trips.search")
        return sum(p.value for p in points if p.attributes.get("charter.limit") == "search burst")

    before = refused()
    for _ in range(4):
        await host.invoke("trips.search", {"destination": "x"}, agent("metric-reader"))
    assert refused() - before == 3


def test_bucket_keys_never_collide_when_names_hold_the_separator() -> None:
    first = bucket_key("trips.search", "burst|acme", "planner")
    second = bucket_key("trips.search", "burst", "acme|planner")
    assert first != second
    assert bucket_key("t", "100%|x", "y") != bucket_key("t", "100%7Cx", "y")


async def test_a_subject_holding_the_separator_has_its_own_budget() -> None:
    host = search_host(RateLimit(calls=1, per=60))
    auth0 = agent("auth0|123")
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, auth0), Completed)
    assert rate_limited(await host.invoke("trips.search", {"destination": "x"}, auth0))
    other = agent("auth0|1234")
    assert isinstance(await host.invoke("trips.search", {"destination": "x"}, other), Completed)
