"""Each travel tool through ``Host.invoke`` on SQLite: its happy path, then its policy."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import pytest
import sqlalchemy as sa
from examples.travel.db import bookings, trips
from tests.builders import request_id
from travel_support import ADMIN, AGENT, APPROVER, GLOBEX_AGENT, Travel

from charter import (
    Completed,
    Denied,
    ErrorCode,
    Failed,
    InteractionRequired,
    Principal,
    ToolOutcome,
)
from charter.ledger import ApprovalRecord
from charter.manifest import deprecation_warnings

pytestmark = pytest.mark.anyio


def charter(**controls: object) -> dict[str, Any]:
    return {"_charter": controls}


async def call(
    travel: Travel, tool: str, principal: Principal | None, **arguments: Any
) -> ToolOutcome:
    return await travel.host.invoke(tool, arguments, principal)


def output(outcome: ToolOutcome) -> Any:
    assert isinstance(outcome, Completed), outcome
    return outcome.output


def failure(outcome: ToolOutcome, code: ErrorCode) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.code is code, outcome
    return outcome


def interaction(outcome: ToolOutcome, code: ErrorCode) -> dict[str, Any]:
    assert isinstance(outcome, InteractionRequired), outcome
    metadata = outcome.interaction.metadata or {}
    assert metadata.get("code") == code.value, outcome
    return dict(metadata)


async def scalar(travel: Travel, query: sa.Select[Any]) -> Any:
    async with travel.store.engine.connect() as conn:
        return (await conn.execute(query)).scalar_one()


RETREAT = {"name": "Retreat", "destination": "Porto", "nights": 3}
"""The arguments of the trip the ``trips.create`` tests create."""


async def retreats(travel: Travel) -> int:
    """How many trips named like ``RETREAT`` the database holds."""
    query = sa.select(sa.func.count()).select_from(trips).where(trips.c.name == RETREAT["name"])
    return int(await scalar(travel, query))


# -- public and admin ---------------------------------------------------------------------


async def test_catalog_ping_answers_an_anonymous_caller(travel: Travel) -> None:
    assert output(await call(travel, "catalog.ping", None)) == {"ok": True, "service": "travel"}


async def test_an_anonymous_caller_discovers_only_the_public_tool(travel: Travel) -> None:
    assert [entry["name"] for entry in travel.host.discover(None)] == ["catalog.ping"]


async def test_admin_tenants_list_needs_the_admin_scope(travel: Travel) -> None:
    denied = failure(
        await call(travel, "admin.tenants.list", AGENT), ErrorCode.AUTHORIZATION_DENIED
    )
    assert "admin.tenants.list" not in [e["name"] for e in travel.host.discover(AGENT)]
    listed = await call(travel, "admin.tenants.list", ADMIN)
    assert output(listed) == {"tenants": ["acme", "globex"]}
    assert "admin" in denied.message


# -- reads --------------------------------------------------------------------------------


async def test_trips_search_finds_the_callers_trips_by_name_or_destination(
    travel: Travel,
) -> None:
    everything = output(await call(travel, "trips.search", AGENT))
    kyoto = output(await call(travel, "trips.search", AGENT, text="KYOTO"))
    offsite = output(await call(travel, "trips.search", AGENT, text="offsite"))
    assert sorted(t["id"] for t in everything["trips"]) == ["trp_kyoto001", "trp_lisbon01"]
    assert [t["destination"] for t in kyoto["trips"]] == ["Kyoto"]
    assert [t["id"] for t in offsite["trips"]] == ["trp_lisbon01"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("trips.search", {"text": "kyoto"}),
        ("trips.get", {"trip_id": "trp_kyoto001"}),
        ("memory.recall", {}),
        ("admin.tenants.list", {}),
    ],
)
async def test_read_tools_query_their_tables_without_taking_the_write_lock(
    travel: Travel, tool: str, arguments: dict[str, Any]
) -> None:
    # On SQLite a write transaction (BEGIN IMMEDIATE) holds the database's one write lock:
    # a read made in one would wait for every ledgered call, and each of them for it. The
    # read tools query through the store's reader instead; only their audit event writes.
    log: list[tuple[str, int]] = []
    engine = travel.store.engine.sync_engine

    def executed(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        log.append((statement, id(conn.connection.dbapi_connection)))

    def ended(conn: Any) -> None:
        log.append(("END", id(conn.connection.dbapi_connection)))

    sa.event.listen(engine, "before_cursor_execute", executed)
    sa.event.listen(engine, "commit", ended)
    sa.event.listen(engine, "rollback", ended)
    try:
        principal = ADMIN if tool.startswith("admin.") else AGENT
        output(await call(travel, tool, principal, **arguments))
    finally:
        sa.event.remove(engine, "before_cursor_execute", executed)
        sa.event.remove(engine, "commit", ended)
        sa.event.remove(engine, "rollback", ended)
    writing: set[int] = set()
    queried = []
    for statement, connection in log:
        if statement == "BEGIN IMMEDIATE":
            writing.add(connection)
        elif statement == "END":
            writing.discard(connection)
        elif re.search(r"\bFROM travel_", statement):
            queried.append(connection not in writing)
    assert queried == [True], log
    assert [s for s, _ in log if s.startswith("INSERT")] == [
        s for s, _ in log if s.startswith("INSERT INTO charter_audit_events")
    ]


async def test_the_deprecated_alias_trips_find_runs_trips_search(travel: Travel) -> None:
    found = await call(travel, "trips.find", AGENT, text="lisbon")
    searched = await call(travel, "trips.search", AGENT, text="lisbon")
    assert output(found) == output(searched)
    entry = next(e for e in travel.host.discover(AGENT) if e["name"] == "trips.search")
    assert entry["aliases"] == ["trips.find"]
    assert entry["aliasDeprecations"]["trips.find"]["sunsetDate"] == "2027-06-30"
    assert deprecation_warnings(entry, date(2027, 6, 30)) == []
    (warning,) = deprecation_warnings(entry, date(2027, 7, 1))
    assert "alias 'trips.find'" in warning and "past its sunset date 2027-06-30" in warning


async def test_trips_get_returns_a_trip_of_the_callers_tenant(travel: Travel) -> None:
    trip = output(await call(travel, "trips.get", GLOBEX_AGENT, trip_id="trp_oslo0001"))
    assert trip == {
        "id": "trp_oslo0001",
        "name": "Oslo sales visit",
        "destination": "Oslo",
        "nights": 2,
        "status": "planned",
    }


async def test_another_tenants_trip_answers_exactly_like_a_missing_one(travel: Travel) -> None:
    foreign = failure(
        await call(travel, "trips.get", GLOBEX_AGENT, trip_id="trp_lisbon01"), ErrorCode.NOT_FOUND
    )
    missing = failure(
        await call(travel, "trips.get", GLOBEX_AGENT, trip_id="trp_nothere01"),
        ErrorCode.NOT_FOUND,
    )
    # Everything but the id the caller sent is identical: no existence oracle.
    assert (
        foreign.model_dump()
        == missing.model_copy(
            update={"message": missing.message.replace("trp_nothere01", "trp_lisbon01")}
        ).model_dump()
    )


# -- created targets and replay -----------------------------------------------------------


async def test_trips_create_needs_a_request_id(travel: Travel) -> None:
    outcome = await call(travel, "trips.create", AGENT, **RETREAT)
    assert "requestId" in failure(outcome, ErrorCode.INVALID_INPUT).message
    assert await retreats(travel) == 0


async def test_trips_create_retried_with_the_same_request_id_returns_the_same_trip(
    travel: Travel,
) -> None:
    args = {**RETREAT, **charter(requestId=request_id())}
    first = await travel.host.invoke("trips.create", args, AGENT)
    again = await travel.host.invoke("trips.create", args, AGENT)
    other = await travel.host.invoke(
        "trips.create", {**args, **charter(requestId=request_id())}, AGENT
    )
    assert isinstance(again, Completed) and again.replayed is True
    assert output(again) == output(first)
    assert re.fullmatch(r"trp_[0-9a-f]{12}", output(first)["id"])
    assert output(other)["id"] != output(first)["id"]
    assert await retreats(travel) == 2


async def test_trips_create_with_a_reused_request_id_and_other_arguments_is_a_conflict(
    travel: Travel,
) -> None:
    args = {**RETREAT, **charter(requestId=request_id())}
    output(await travel.host.invoke("trips.create", args, AGENT))
    conflict = await travel.host.invoke("trips.create", {**args, "nights": 4}, AGENT)
    failure(conflict, ErrorCode.IDEMPOTENCY_CONFLICT)


# -- two versions of one capability -------------------------------------------------------


async def test_trips_rename_has_two_capability_versions(travel: Travel) -> None:
    registry = travel.host.registry
    v1 = registry.get_by_capability("travel.trips.rename", "1.0.0")
    v2 = registry.get_by_capability("travel.trips.rename", "2.0.0")
    assert v1 is not None and v1.name == "trips.rename"
    assert v2 is not None and v2.name == "trips.rename.v2"
    assert "destination" not in v1.entry["inputSchema"]["properties"]
    assert "destination" in v2.entry["inputSchema"]["properties"]


async def test_trips_rename_v1_renames_and_v2_also_moves_the_trip(travel: Travel) -> None:
    renamed = await travel.host.invoke(
        "trips.rename",
        {"trip_id": "trp_lisbon01", "name": "Lisbon summit", **charter(requestId=request_id())},
        AGENT,
    )
    moved = await travel.host.invoke(
        "trips.rename.v2",
        {
            "trip_id": "trp_lisbon01",
            "name": "Porto summit",
            "destination": "Porto",
            **charter(requestId=request_id()),
        },
        AGENT,
    )
    assert (output(renamed)["name"], output(renamed)["destination"]) == ("Lisbon summit", "Lisbon")
    assert (output(moved)["name"], output(moved)["destination"]) == ("Porto summit", "Porto")


async def test_trips_rename_of_another_tenants_trip_is_not_found(travel: Travel) -> None:
    outcome = await travel.host.invoke(
        "trips.rename",
        {"trip_id": "trp_lisbon01", "name": "Mine now", **charter(requestId=request_id())},
        GLOBEX_AGENT,
    )
    failure(outcome, ErrorCode.NOT_FOUND)
    trip = output(await call(travel, "trips.get", AGENT, trip_id="trp_lisbon01"))
    assert trip["name"] == "Lisbon offsite"


# -- confirmation ---------------------------------------------------------------------------


async def test_trips_cancel_asks_for_confirmation_before_anything_changes(
    travel: Travel,
) -> None:
    rid = request_id()
    args = {"trip_id": "trp_kyoto001", "reason": "Budget cut"}
    asked = await travel.host.invoke("trips.cancel", {**args, **charter(requestId=rid)}, AGENT)
    interaction(asked, ErrorCode.CONFIRMATION_REQUIRED)
    still = output(await call(travel, "trips.get", AGENT, trip_id="trp_kyoto001"))
    assert still["status"] == "planned"

    confirmed = await travel.host.invoke(
        "trips.cancel", {**args, **charter(requestId=rid, confirmed=True)}, AGENT
    )
    assert output(confirmed)["status"] == "cancelled"
    twice = await travel.host.invoke(
        "trips.cancel", {**args, **charter(requestId=request_id(), confirmed=True)}, AGENT
    )
    assert "already cancelled" in failure(twice, ErrorCode.INVALID_INPUT).message


async def test_confirmed_must_be_the_boolean_true(travel: Travel) -> None:
    outcome = await travel.host.invoke(
        "trips.cancel",
        {
            "trip_id": "trp_kyoto001",
            "reason": "Budget cut",
            **charter(requestId=request_id(), confirmed="true"),
        },
        AGENT,
    )
    assert not isinstance(outcome, Completed)


# -- approval -------------------------------------------------------------------------------


async def refunded_cents(travel: Travel, booking_id: str) -> int:
    query = sa.select(bookings.c.refunded_cents).where(bookings.c.id == booking_id)
    return int(await scalar(travel, query))


async def refund_approval(
    travel: Travel, booking_id: str, cents: int, rid: str
) -> tuple[dict[str, Any], str]:
    """Ask the agent's confirmed refund of ``cents`` on ``booking_id``: its arguments (without
    controls) and the approval id it waits for."""
    args = {"booking_id": booking_id, "amount_cents": cents}
    controls = charter(requestId=rid, confirmed=True)
    asked = await travel.host.invoke("bookings.refund", {**args, **controls}, AGENT)
    approval_id = interaction(asked, ErrorCode.APPROVAL_REQUIRED)["approvalId"]
    assert isinstance(approval_id, str)
    return args, approval_id


async def test_bookings_refund_waits_for_an_approval_then_refunds_once_after_commit(
    travel: Travel,
) -> None:
    rid = request_id()
    args, approval_id = await refund_approval(travel, "bkg_hotel001", 5_000, rid)
    early = await travel.host.invoke(
        "bookings.refund",
        {**args, **charter(requestId=rid, confirmed=True, approvalId=approval_id)},
        AGENT,
    )
    # Before the grant the same pause answers again: still pending, nothing refunded.
    assert isinstance(early, InteractionRequired) and early.approval_status == "pending"
    assert await travel.payments.refunds("bkg_hotel001") == 0

    granted = await travel.host.approvals.grant(approval_id, APPROVER, "Customer called")
    assert isinstance(granted, ApprovalRecord) and granted.status == "approved"
    retried = {**args, **charter(requestId=rid, confirmed=True, approvalId=approval_id)}
    done = await travel.host.invoke("bookings.refund", retried, AGENT)
    key = output(done)["provider_key"]
    assert output(done) == {
        "booking_id": "bkg_hotel001",
        "refunded_cents": 5_000,
        "provider_key": key,
    }
    assert key.startswith("eff_")
    assert await travel.payments.refunds("bkg_hotel001") == 1
    assert await travel.payments.calls(key) == 1
    [effect] = await travel.host.effects.list(request_id=rid)
    assert effect.key == key and effect.status == "delivered"

    replayed = await travel.host.invoke("bookings.refund", retried, AGENT)
    assert isinstance(replayed, Completed) and replayed.replayed is True
    assert replayed.output == output(done)
    assert await travel.payments.refunds("bkg_hotel001") == 1
    assert await travel.payments.calls(key) == 1
    assert await refunded_cents(travel, "bkg_hotel001") == 5_000


async def test_the_requesting_agent_cannot_grant_its_own_refund(travel: Travel) -> None:
    _, approval_id = await refund_approval(travel, "bkg_hotel001", 100, request_id())
    refused = await travel.host.approvals.grant(approval_id, AGENT)
    assert isinstance(refused, Failed) and refused.code is ErrorCode.AUTHORIZATION_DENIED
    assert refused.reason == "not_a_person"


async def test_a_denied_refund_never_runs(travel: Travel) -> None:
    rid = request_id()
    args, approval_id = await refund_approval(travel, "bkg_flight01", 2_500, rid)
    denied = await travel.host.approvals.deny(approval_id, APPROVER, "Not refundable")
    assert isinstance(denied, ApprovalRecord) and denied.status == "denied"
    retried = await travel.host.invoke(
        "bookings.refund",
        {**args, **charter(requestId=rid, confirmed=True, approvalId=approval_id)},
        AGENT,
    )
    assert isinstance(retried, Denied) and retried.cause == "approval_denied"
    assert retried.decision_reason == "Not refundable" and retried.decided_by is not None
    assert await travel.payments.refunds("bkg_flight01") == 0
    assert await refunded_cents(travel, "bkg_flight01") == 0


async def test_a_refund_larger_than_what_is_left_fails_and_refunds_nothing(
    travel: Travel,
) -> None:
    rid = request_id()
    args, approval_id = await refund_approval(travel, "bkg_hotel001", 84_001, rid)
    await travel.host.approvals.grant(approval_id, APPROVER)
    too_much = await travel.host.invoke(
        "bookings.refund",
        {**args, **charter(requestId=rid, confirmed=True, approvalId=approval_id)},
        AGENT,
    )
    assert "At most 84000 cents" in failure(too_much, ErrorCode.INVALID_INPUT).message
    assert await travel.payments.refunds("bkg_hotel001") == 0


# -- delegation -------------------------------------------------------------------------------


async def test_memory_tools_read_and_write_the_callers_tenant(travel: Travel) -> None:
    rid = request_id()
    saved = await travel.host.invoke(
        "memory.update", {"key": "seat", "value": "aisle", **charter(requestId=rid)}, AGENT
    )
    assert output(saved) == {"tenant_id": "acme", "memories": {"seat": "aisle"}}
    recalled = await call(travel, "memory.recall", AGENT)
    assert output(recalled) == {"tenant_id": "acme", "memories": {"seat": "aisle"}}
    deleted = await travel.host.invoke(
        "memory.delete", {"key": "seat", **charter(requestId=request_id())}, AGENT
    )
    assert output(deleted) == {"tenant_id": "acme", "key": "seat", "deleted": True}
    assert output(await call(travel, "memory.recall", AGENT))["memories"] == {}


@pytest.mark.parametrize("tool", ["memory.recall", "memory.update", "memory.delete"])
async def test_a_non_admin_naming_another_tenant_is_denied(travel: Travel, tool: str) -> None:
    args: dict[str, Any] = {"tenant_id": "globex", "key": "seat"}
    if tool == "memory.update":
        args["value"] = "window"
    outcome = await travel.host.invoke(tool, {**args, **charter(requestId=request_id())}, AGENT)
    failure(outcome, ErrorCode.AUTHORIZATION_DENIED)


async def test_an_admin_acts_for_another_tenant_and_the_call_is_audited_as_delegated(
    travel: Travel,
) -> None:
    saved = await travel.host.invoke(
        "memory.update",
        {"tenant_id": "globex", "key": "seat", "value": "window"} | charter(requestId=request_id()),
        ADMIN,
    )
    assert output(saved) == {"tenant_id": "globex", "memories": {"seat": "window"}}
    # The memory landed in globex, not in the admin's own tenant.
    recalled = await call(travel, "memory.recall", ADMIN, tenant_id="globex")
    assert output(recalled)["memories"] == {"seat": "window"}
    assert output(await call(travel, "memory.recall", ADMIN))["memories"] == {}
    events = await travel.store.events(tenant="globex")
    delegated = [e for e in events if e.tool == "memory.update"]
    assert delegated and delegated[0].delegated is True and delegated[0].subject == "ops-olga"


# -- the approval tools ---------------------------------------------------------------------


async def test_the_approval_tools_let_an_approver_list_pending_requests(travel: Travel) -> None:
    await travel.host.invoke(
        "bookings.refund",
        {"booking_id": "bkg_hotel001", "amount_cents": 100}
        | charter(requestId=request_id(), confirmed=True),
        AGENT,
    )
    listed = output(await call(travel, "list_action_approvals", APPROVER))
    assert [(a["tool"], a["target"], a["status"]) for a in listed["approvals"]] == [
        ("bookings.refund", "bkg_hotel001", "pending")
    ]
