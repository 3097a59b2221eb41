"""The travel demo's side doors, closed: nothing runs without the gate its policy demands."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from examples.travel.db import trips
from tests.builders import request_id as rid
from travel_support import AGENT, APPROVER, Travel

from charter import Completed, Denied, ErrorCode, Failed, InteractionRequired, ToolOutcome
from charter.harness import Approve, Harness, ModelResponse
from charter.harness.testing import ScriptedModel
from charter.harness.testing import call as model_call
from charter.ledger import ApprovalRecord
from charter.store._schema import ledger_entries

pytestmark = pytest.mark.anyio


async def ask_approval(travel: Travel, tool: str, arguments: dict[str, Any], request: str) -> Any:
    """The traveller agent calls ``request_action_approval`` for ``tool``."""
    return await travel.host.invoke(
        "request_action_approval",
        {"tool": tool, "arguments": arguments, "request_id": request},
        AGENT,
    )


async def trip_status(travel: Travel, trip_id: str) -> str:
    async with travel.store.engine.connect() as conn:
        query = sa.select(trips.c.status).where(trips.c.id == trip_id)
        return str((await conn.execute(query)).scalar_one())


async def trip_name(travel: Travel, trip_id: str) -> str:
    async with travel.store.engine.connect() as conn:
        query = sa.select(trips.c.name).where(trips.c.id == trip_id)
        return str((await conn.execute(query)).scalar_one())


async def ledger_rows(travel: Travel) -> int:
    async with travel.store.engine.connect() as conn:
        count = sa.select(sa.func.count()).select_from(ledger_entries)
        return int((await conn.execute(count)).scalar_one())


def refused(outcome: ToolOutcome, reason: str) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason == reason, outcome
    return outcome


async def test_asking_approval_for_a_cancellation_never_cancels_the_trip(travel: Travel) -> None:
    # Leak 1: the approval tool ran trips.cancel with confirmed: true added, then said
    # "does not need an approval" after the trip was already cancelled.
    before = await ledger_rows(travel)
    cancel = {"trip_id": "trp_lisbon01", "reason": "Plans changed"}
    asked = await ask_approval(travel, "trips.cancel", cancel, rid())
    failure = refused(asked, "approval_not_required")
    assert failure.code is ErrorCode.INVALID_INPUT
    assert await trip_status(travel, "trp_lisbon01") == "planned"
    assert await ledger_rows(travel) == before


async def test_the_request_id_to_ask_approval_for_is_a_uuid_in_schema_and_validation(
    travel: Travel,
) -> None:
    # schemathesis: the schema said any string, the host then refused "0" (#18).
    tool = travel.host.registry.get("request_action_approval")
    assert tool is not None
    assert tool.entry["inputSchema"]["properties"]["request_id"]["format"] == "uuid"
    before = await ledger_rows(travel)
    refund = {"booking_id": "bkg_hotel001", "amount_cents": 100}
    asked = await ask_approval(travel, "bookings.refund", refund, "0")
    assert isinstance(asked, Failed) and asked.code is ErrorCode.INVALID_INPUT
    assert asked.meta is not None
    issues: Any = asked.meta["issues"]
    assert [issue["loc"] for issue in issues] == [["request_id"]]
    assert await ledger_rows(travel) == before


async def test_asking_approval_for_a_rename_commits_nothing(travel: Travel) -> None:
    before = await ledger_rows(travel)
    name = await trip_name(travel, "trp_lisbon01")
    request = rid()
    asked = await ask_approval(
        travel, "trips.rename", {"trip_id": "trp_lisbon01", "name": "Sneaky"}, request
    )
    refused(asked, "approval_not_required")
    assert await trip_name(travel, "trp_lisbon01") == name
    assert await ledger_rows(travel) == before
    # The request id is still free: the real call with it runs once.
    real = await travel.host.invoke(
        "trips.rename",
        {"trip_id": "trp_lisbon01", "name": "Sneaky", "_charter": {"requestId": request}},
        AGENT,
    )
    assert isinstance(real, Completed) and real.replayed is False
    assert await ledger_rows(travel) == before + 1


async def test_asking_approval_for_a_refund_returns_the_pending_approval_only(
    travel: Travel,
) -> None:
    request = rid()
    arguments = {"booking_id": "bkg_hotel001", "amount_cents": 5_000}
    asked = await ask_approval(travel, "bookings.refund", arguments, request)
    assert isinstance(asked, Completed), asked
    assert isinstance(asked.output, dict) and asked.output["status"] == "pending"
    approval_id = asked.output["approval_id"]
    # Asking again is the same approval, and nothing was refunded either time.
    again = await ask_approval(travel, "bookings.refund", arguments, request)
    assert isinstance(again, Completed) and isinstance(again.output, dict)
    assert again.output["approval_id"] == approval_id
    assert await travel.payments.refunds("bkg_hotel001") == 0
    # The call the agent then makes uses exactly that approval.
    call = {**arguments, "_charter": {"requestId": request, "confirmed": True}}
    paused = await travel.host.invoke("bookings.refund", call, AGENT)
    assert isinstance(paused, InteractionRequired) and paused.approval_id == approval_id


async def test_an_approval_granted_for_one_request_cannot_be_spent_by_another(
    travel: Travel,
) -> None:
    # Leak 2: an approval granted for R1 was consumed by a retry under R2; R1 then
    # reported "approved" forever and its own retry got already_executed.
    first, second = rid(), rid()
    arguments = {"booking_id": "bkg_hotel001", "amount_cents": 5_000}

    def call(request: str, approval_id: str | None = None) -> dict[str, Any]:
        controls: dict[str, Any] = {"requestId": request, "confirmed": True}
        if approval_id is not None:
            controls["approvalId"] = approval_id
        return {**arguments, "_charter": controls}

    paused = await travel.host.invoke("bookings.refund", call(first), AGENT)
    assert isinstance(paused, InteractionRequired) and paused.approval_id is not None
    approval_id = paused.approval_id
    granted = await travel.host.approvals.grant(approval_id, APPROVER)
    assert isinstance(granted, ApprovalRecord)

    stolen = await travel.host.invoke("bookings.refund", call(second, approval_id), AGENT)
    assert refused(stolen, "request_id_mismatch").code is ErrorCode.AUTHORIZATION_DENIED
    assert await travel.payments.refunds("bkg_hotel001") == 0
    other = await travel.host.action_status(AGENT, second)
    assert other is None
    status = await travel.host.action_status(AGENT, first)
    assert status is not None and status.status == "approved"

    done = await travel.host.invoke("bookings.refund", call(first, approval_id), AGENT)
    assert isinstance(done, Completed) and done.replayed is False
    assert await travel.payments.refunds("bkg_hotel001") == 1
    status = await travel.host.action_status(AGENT, first)
    assert status is not None and status.status == "completed"


async def test_a_model_acting_for_an_approver_decides_nothing_until_the_person_confirms(
    travel: Travel,
) -> None:
    # The approver's assistant lists approvals (text the requester wrote reaches the model)
    # and then calls approve_action_approval by itself: the turn pauses for the person.
    request = rid()
    arguments = {"booking_id": "bkg_flight01", "amount_cents": 132_500}
    call = {**arguments, "_charter": {"requestId": request, "confirmed": True}}
    paused = await travel.host.invoke("bookings.refund", call, AGENT)
    assert isinstance(paused, InteractionRequired) and paused.approval_id is not None
    approval_id = paused.approval_id
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[model_call("list_action_approvals", "c1")]),
            ModelResponse(
                tool_calls=[model_call("approve_action_approval", "c2", approval_id=approval_id)]
            ),
            ModelResponse(text="Summary: one refund."),
        ]
    )
    session = Harness(travel.host, model).session(APPROVER)
    turn = await session.run("Summarise my pending approvals.")
    assert turn.status == "paused", turn
    (pending,) = turn.interactions
    assert pending.tool_name == "approve_action_approval"
    metadata = pending.interaction.metadata
    assert metadata is not None and metadata["code"] == "CONFIRMATION_REQUIRED"
    record = await travel.host.approvals.get(APPROVER, approval_id)
    assert record is not None and record.status == "pending"
    assert await travel.payments.refunds("bkg_flight01") == 0
    # The person confirms the decision: only then is the approval granted.
    resumed = await session.resume(Approve(interaction_id=pending.interaction.id))
    assert resumed.status == "completed", resumed
    record = await travel.host.approvals.get(APPROVER, approval_id)
    assert record is not None and record.status == "approved"
    assert record.decided_by == APPROVER.key


async def test_a_denied_refund_is_denied_on_every_retry_and_in_its_status(
    travel: Travel,
) -> None:
    request = rid()
    arguments = {"booking_id": "bkg_flight01", "amount_cents": 2_500}
    call = {**arguments, "_charter": {"requestId": request, "confirmed": True}}
    paused = await travel.host.invoke("bookings.refund", call, AGENT)
    assert isinstance(paused, InteractionRequired) and paused.approval_id is not None
    await travel.host.approvals.deny(paused.approval_id, APPROVER, "Not refundable")
    for _ in range(2):
        retried = await travel.host.invoke("bookings.refund", call, AGENT)
        assert isinstance(retried, Denied) and retried.cause == "approval_denied"
        assert retried.decision_reason == "Not refundable"
    asked = await ask_approval(travel, "bookings.refund", arguments, request)
    assert isinstance(asked, Failed) and asked.reason == "approval_denied"
    status = await travel.host.action_status(AGENT, request)
    assert status is not None and status.status == "denied"
    assert await travel.payments.refunds("bkg_flight01") == 0
