"""Reliability battery, approvals and confirmation (reliability.md §5.3, A01-A11).

``refund_order`` is destructive: it needs ``confirmed: true`` and a granted approval bound
to tenant, requester, tool@version, target and fingerprint. ``ship_order`` is sensitive:
confirmation only. Every rejection is ``AUTHORIZATION_DENIED`` with ``meta.reason`` from
issue #4's list. Effects are ``battery_effects`` rows, counted from outside charter.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from battery_support import (
    ADMIN,
    ALICE,
    AMY,
    APPROVALS,
    APPROVER,
    BORIS,
    CALLERS,
    EFFECTS,
    GLOBEX_ADMIN,
    GLOBEX_APPROVER,
    ITERATIONS,
    LEDGER,
    SCOPES,
    Battery,
    EnvFactory,
    Observer,
    SimulatedCrash,
    approval_id_of,
    approved,
    burst,
    completed,
    crash_at,
    failure,
    payout,
    payout_detail,
    refund,
    refused,
    rid,
)

from charter import Completed, ErrorCode, Failed, InteractionRequired, Principal, ToolOutcome
from charter.auth import holds_control_character
from charter.host import Host
from charter.ledger import ApprovalRecord
from charter.policy import command_fingerprint
from charter.store import SqlStore

pytestmark = pytest.mark.anyio


def denied(outcome: object, reason: str) -> Failed:
    """An ``AUTHORIZATION_DENIED`` with ``reason``."""
    return failure(outcome, ErrorCode.AUTHORIZATION_DENIED, reason)


def asks_confirmation(outcome: ToolOutcome) -> None:
    """The approval-kind interaction that asks to retry with ``confirmed: true``."""
    assert isinstance(outcome, InteractionRequired), outcome
    assert outcome.interaction.kind == "approval"
    assert outcome.interaction.metadata is not None
    assert outcome.interaction.metadata["code"] == ErrorCode.CONFIRMATION_REQUIRED.value


async def status_of(store: SqlStore, approval_id: str) -> str:
    record = await store.get_approval(approval_id)
    assert record is not None
    return record.status


def fingerprint(battery: Battery, tool: str, tenant: str, target: str, arguments: Any) -> str:
    registered = battery.registry.get(tool)
    assert registered is not None
    return command_fingerprint(
        capability_id=registered.capability_id,
        capability_version=registered.capability_version,
        tenant_id=tenant,
        target=target,
        arguments=arguments,
    )


# -- A01 / A02 ------------------------------------------------------------------------------


async def test_A01_approval_required_issues_bound_token(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    host, request_id = env.host, rid()
    # Confirmation comes first: without it no approval is created.
    asks_confirmation(
        await host.invoke("refund_order", refund("o-1", 100, request_id, confirmed=None), ALICE)
    )
    assert await observer.count(APPROVALS) == 0
    outcome = await host.invoke("refund_order", refund("o-1", 100, request_id), ALICE)
    approval_id = approval_id_of(outcome)
    assert isinstance(outcome, InteractionRequired)
    assert (outcome.approval_id, outcome.request_id, outcome.approval_status) == (
        approval_id,
        request_id,
        "pending",
    )
    assert outcome.continuation is not None
    assert outcome.continuation.controls() == {
        "requestId": request_id,
        "confirmed": True,
        "approvalId": approval_id,
    }
    record = await env.store.get_approval(approval_id)
    assert record is not None
    assert (record.tenant_id, record.requester_id, record.request_id, record.tool) == (
        "acme",
        "acme/alice",
        request_id,
        "refund_order",
    )
    assert record.target == "o-1" and record.arguments == {"order_id": "o-1", "amount": 100}
    assert record.fingerprint == fingerprint(
        env.battery, "refund_order", "acme", "o-1", {"order_id": "o-1", "amount": 100}
    )
    # Asking again answers the same pending approval; nothing ran, nothing is stored.
    again = await host.invoke("refund_order", refund("o-1", 100, request_id), ALICE)
    assert approval_id_of(again) == approval_id
    assert await observer.count(APPROVALS) == 1
    assert await observer.count(LEDGER) == 0 and await observer.count(EFFECTS) == 0
    # A fresh request id gets a fresh approval.
    other = approval_id_of(await host.invoke("refund_order", refund("o-1", 100, rid()), ALICE))
    assert other != approval_id


async def test_A02_approval_happy_path(make_env: EnvFactory, observer: Observer) -> None:
    # The consumption is in the action's transaction: when the action fails or the
    # process dies before the commit, the approval is still approved and the approved
    # call can be retried; when it commits, the approval is consumed with it.
    env = await make_env()
    request_id = rid()
    approval_id = await approved(env.host, refund("o-1", 100, request_id))
    call = refund("o-1", 100, request_id, approval_id=approval_id)
    env.battery.fail = "tool_error"
    failure(await env.host.invoke("refund_order", call, ALICE), ErrorCode.PROVIDER_UNAVAILABLE)
    assert await status_of(env.store, approval_id) == "approved"
    crashing = Host(
        env.battery.registry, store=env.store, clock=env.clock, fault_hook=crash_at("before_commit")
    )
    with pytest.raises(SimulatedCrash):
        await crashing.invoke("refund_order", call, ALICE)
    assert await status_of(env.store, approval_id) == "approved"
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    done = completed(await env.host.invoke("refund_order", call, ALICE))
    assert not done.replayed
    record = await env.store.get_approval(approval_id)
    assert record is not None and (record.status, record.consumed_by) == ("consumed", request_id)
    assert record.decided_by == APPROVER.key == "acme/ada"
    assert await observer.count(EFFECTS) == 1
    entry = await env.store.get_entry("acme", ALICE.key, request_id)
    assert entry is not None and entry.approval_id == approval_id


# -- A03 ------------------------------------------------------------------------------------


def flipped(approval_id: str) -> str:
    last = approval_id[-1]
    return approval_id[:-1] + ("0" if last != "0" else "1")


async def test_A03_approval_forgery(make_env: EnvFactory, observer: Observer) -> None:
    # Approval ids are random server-side keys (no MAC, no JWT): a forged id is simply
    # not found, looked up within the caller's tenant. A real id from another tenant
    # answers exactly like an id that never existed: no existence oracle.
    env = await make_env()
    host, request_id = env.host, rid()
    real = await approved(host, refund("o-1", 100, request_id))
    foreign = await approved(host, refund("o-1", 100, rid()), BORIS)
    forgeries = [
        str(uuid.uuid4()),
        "apr_" + uuid.uuid4().hex,
        real[:-4],
        flipped(real),
        real.upper(),
        os.urandom(24).decode("latin-1").strip() or "x",
        "apr_" + "0" * 32 + "\x00",
        foreign,
    ]
    answers = set()
    for forged in forgeries:
        outcome = await host.invoke(
            "refund_order", refund("o-1", 100, request_id, approval_id=forged), ALICE
        )
        if holds_control_character(forged):
            # Refused for its shape before any lookup, whether or not such an id exists.
            failure(outcome, ErrorCode.INVALID_INPUT, "invalid_controls")
            continue
        answer = denied(outcome, "not_found")
        # Only the caller's own id, echoed back, differs from one forgery to the next.
        meta = dict(answer.meta or {})
        given = meta.pop("approvalId")
        message = answer.message.replace(repr(given), "<id>")
        answers.add((message, str(meta), answer.retryable, answer.next_steps))
    assert len(answers) == 1, answers
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    assert await status_of(env.store, real) == "approved"
    assert await status_of(env.store, foreign) == "approved"
    # Nor can another tenant read or decide it.
    assert await host.approvals.get(BORIS, real) is None
    denied(await host.approvals.grant(real, GLOBEX_APPROVER), "not_found")


# -- A04 / A05 ------------------------------------------------------------------------------


async def test_A04_approval_reuse_other_command(make_env: EnvFactory, observer: Observer) -> None:
    # PSD2's dynamic linking: any change to the approved command invalidates the approval.
    env = await make_env()
    host, request_id = env.host, rid()
    approval_id = await approved(host, refund("o-1", 100, request_id))
    for request in (request_id, rid()):
        attempts: list[tuple[str, dict[str, Any], str | None]] = [
            (
                "refund_order",
                refund("o-1", 101, request, approval_id=approval_id),
                "fingerprint_mismatch",
            ),
            (
                "refund_order",
                refund("o-2", 100, request, approval_id=approval_id),
                "mismatched_action",
            ),
            (
                "void_order",
                refund("o-1", 100, request, approval_id=approval_id),
                "mismatched_action",
            ),
            (
                "refund_order",
                {**refund("o-1", 100, request, approval_id=approval_id), "memo": "x"},
                None,
            ),
        ]
        for tool, arguments, reason in attempts:
            outcome = await host.invoke(tool, arguments, ALICE)
            if reason is None:  # an extra field never gets past input validation
                failure(outcome, ErrorCode.INVALID_INPUT)
            else:
                denied(outcome, reason)
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    assert await status_of(env.store, approval_id) == "approved"
    exact = refund("o-1", 100, request_id, approval_id=approval_id)
    completed(await host.invoke("refund_order", exact, ALICE))
    assert await observer.count(EFFECTS) == 1


async def test_A04_an_approval_binds_the_secret_and_excluded_fields_it_does_not_show(
    make_env: EnvFactory, observer: Observer
) -> None:
    # The approver sees the IBAN masked and the memo shown; both are bound all the same.
    env = await make_env()
    host, request_id = env.host, rid()
    asked = await host.invoke("approved_payout", payout("DE-APPROVED", request_id), ALICE)
    approval_id = approval_id_of(asked)
    assert not isinstance(await host.approvals.grant(approval_id, APPROVER), Failed)
    for request in (request_id, rid()):
        for arguments in (
            payout("DE-SWAPPED", request, approval_id=approval_id),
            payout("DE-APPROVED", request, memo="other", approval_id=approval_id),
            payout("DE-APPROVED", request, tags=("a",), approval_id=approval_id),
        ):
            denied(await host.invoke("approved_payout", arguments, ALICE), "fingerprint_mismatch")
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    assert await status_of(env.store, approval_id) == "approved"
    exact = payout("DE-APPROVED", request_id, tags=("a", "b"), approval_id=approval_id)
    completed(await host.invoke("approved_payout", exact, ALICE))
    # The swapped IBAN with the approved request id is another command: never a replay.
    for swapped in (
        payout("DE-SWAPPED", request_id, approval_id=approval_id),
        payout("DE-SWAPPED", request_id),
    ):
        failure(
            await host.invoke("approved_payout", swapped, ALICE),
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "idempotency_key_reused",
        )
    assert await observer.details() == [payout_detail("DE-APPROVED", 100, "rent")]


async def test_A05_approval_cross_tenant_and_principal(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    host, request_id = env.host, rid()
    approval_id = await approved(host, refund("o-1", 100, request_id))
    call = refund("o-1", 100, request_id, approval_id=approval_id)
    denied(await host.invoke("refund_order", call, BORIS), "not_found")
    denied(await host.invoke("refund_order", call, GLOBEX_ADMIN), "not_found")
    denied(await host.invoke("refund_order", call, AMY), "principal_mismatch")
    denied(await host.invoke("refund_order", call, ADMIN), "principal_mismatch")
    # Acme's admin acting for globex cannot bring an approval minted for acme...
    delegated = refund("o-1", 100, request_id, approval_id=approval_id, onBehalfOf="globex")
    denied(await host.invoke("refund_order", delegated, ADMIN), "tenant_mismatch")
    assert await observer.count(EFFECTS) == 0
    assert await status_of(env.store, approval_id) == "approved"
    # ...it needs one minted for that delegation, which globex's approver decides.
    delegation_id = rid()
    asked = refund("o-9", 5, delegation_id, onBehalfOf="globex")
    minted = approval_id_of(await host.invoke("refund_order", asked, ADMIN))
    record = await env.store.get_approval(minted)
    assert record is not None and (record.tenant_id, record.requester_id) == ("globex", "acme/root")
    denied(await host.approvals.grant(minted, APPROVER), "not_found")
    assert not isinstance(await host.approvals.grant(minted, GLOBEX_APPROVER), Failed)
    own_tenant = refund("o-9", 5, delegation_id, approval_id=minted)
    denied(await host.invoke("refund_order", own_tenant, ADMIN), "not_found")
    done = completed(
        await host.invoke(
            "refund_order",
            refund("o-9", 5, delegation_id, approval_id=minted, onBehalfOf="globex"),
            ADMIN,
        )
    )
    assert not done.replayed
    assert await observer.count(EFFECTS, tenant_id="globex") == 1
    assert await observer.count(EFFECTS, tenant_id="acme") == 0


# -- A06 / A07 ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_A06_approval_single_use_concurrent(make_env: EnvFactory, observer: Observer) -> None:
    env = await make_env(pool_size=CALLERS + 2, in_progress_wait=60)
    host = env.host
    for iteration in range(ITERATIONS):
        order = f"o-{iteration}"
        own = rid()
        approval_id = await approved(host, refund(order, 100, own))
        # Half the callers retry the approved request itself, half try it under request
        # ids of their own: the approval belongs to its request and is consumed once.
        calls = [
            (
                "refund_order",
                refund(order, 100, own if n % 2 else rid(), approval_id=approval_id),
                ALICE,
            )
            for n in range(CALLERS)
        ]
        outcomes = await burst(host, env.battery, calls)
        [winner] = [o for o in outcomes if isinstance(o, Completed) and not o.replayed]
        for (_, arguments, _), outcome in zip(calls, outcomes, strict=True):
            if outcome is winner:
                continue
            if arguments["_charter"]["requestId"] == own:
                assert isinstance(outcome, Completed) and outcome.replayed, outcome
            else:
                denied(outcome, "request_id_mismatch")
        assert await observer.count(EFFECTS, detail=f"{order}:100") == 1
        assert await status_of(env.store, approval_id) == "consumed"
        # Once consumed, a new request id cannot use it either.
        again = refund(order, 100, rid(), approval_id=approval_id)
        denied(await host.invoke("refund_order", again, ALICE), "request_id_mismatch")
    assert env.battery.runs == ITERATIONS


class StallingStore(SqlStore):
    """Pauses one approval read or insert until released, to interleave two calls.

    Nothing else changes: the statement runs, just later (a stand-in for a slow network).
    """

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        self.stall_next: str | None = None
        self.stalled = asyncio.Event()
        self.proceed = asyncio.Event()

    async def _stall(self, operation: str) -> None:
        if self.stall_next == operation:
            self.stall_next = None
            self.stalled.set()
            await self.proceed.wait()
            self.stalled, self.proceed = asyncio.Event(), asyncio.Event()

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        await self._stall("get_approval")
        return await super().get_approval(approval_id)

    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        await self._stall("insert_approval")
        return await super().insert_approval(record)


async def test_A07_approval_exact_replay(
    make_env: EnvFactory, observer: Observer, store_url: str
) -> None:
    # After the approved call ran, its exact replay (with the now consumed approval, or
    # without any) is the stored result, not already_executed.
    env = await make_env()
    request_id = rid()
    approval_id = await approved(env.host, refund("o-1", 100, request_id))
    call = refund("o-1", 100, request_id, approval_id=approval_id)
    first = completed(await env.host.invoke("refund_order", call, ALICE))
    for again in (call, refund("o-1", 100, request_id)):
        replay = completed(await env.host.invoke("refund_order", again, ALICE))
        assert replay == first.model_copy(update={"replayed": True})

    # Also when the replay looked for a stored result just before the first call
    # committed, and reached the approval just after (two resumers racing): reading it
    # with the approvalId, or asking for it again without.
    async with StallingStore(store_url) as store:
        battery = Battery()
        host = Host(battery.registry, store=store, clock=env.clock)
        for order, stalled_at, with_id in (
            ("o-2", "get_approval", True),
            ("o-3", "insert_approval", False),
        ):
            request_id = rid()
            approval_id = await approved(host, refund(order, 100, request_id))
            call = refund(order, 100, request_id, approval_id=approval_id)
            late_call = call if with_id else refund(order, 100, request_id)
            store.stall_next = stalled_at
            stalled = store.stalled
            late = asyncio.create_task(host.invoke("refund_order", late_call, ALICE))
            async with asyncio.timeout(30):
                await stalled.wait()  # it found no stored result, then paused
            first = completed(await host.invoke("refund_order", call, ALICE))
            store.proceed.set()
            replay = completed(await late)
            assert replay == first.model_copy(update={"replayed": True})
        assert battery.runs == 2
    assert await observer.count(EFFECTS) == 3


# -- A08 / A09 / A10 ------------------------------------------------------------------------


async def test_A08_approval_expiry(make_env: EnvFactory, observer: Observer) -> None:
    ttl = timedelta(hours=1)
    env = await make_env(approval_ttl=ttl)
    host, clock = env.host, env.clock
    millisecond = timedelta(milliseconds=1)

    async def approval_at_expiry(order: str, offset: timedelta) -> dict[str, Any]:
        request_id = rid()
        approval_id = await approved(host, refund(order, 1, request_id))
        record = await env.store.get_approval(approval_id)
        assert record is not None and record.expires_at == clock() + ttl
        clock.now = record.expires_at + offset
        return refund(order, 1, request_id, approval_id=approval_id)

    completed(
        await host.invoke("refund_order", await approval_at_expiry("o-1", -millisecond), ALICE)
    )
    # Expired unused: a final Denied for the request, with or without the approval id.
    expired = await approval_at_expiry("o-2", millisecond)
    gone = refused(await host.invoke("refund_order", expired, ALICE), "approval_expired")
    assert gone.decided_at == clock.now - millisecond
    expired_without_id = {**expired, "_charter": {**expired["_charter"], "approvalId": None}}
    refused(await host.invoke("refund_order", expired_without_id, ALICE), "approval_expired")
    at_expiry = await approval_at_expiry("o-3", timedelta(0))
    refused(await host.invoke("refund_order", at_expiry, ALICE), "approval_expired")
    assert await observer.count(EFFECTS) == 1

    # An approval that expires before anyone decides cannot be granted any more.
    late = approval_id_of(await host.invoke("refund_order", refund("o-4", 1, rid()), ALICE))
    clock.advance(ttl)
    denied(await host.approvals.grant(late, APPROVER), "expired")

    # A handler running across the expiry completes: the approval is checked, and
    # consumed, when the call claims its request, before the handler runs.
    crossing = await approval_at_expiry("o-5", -millisecond)

    async def take_long(ctx: Any) -> None:
        clock.advance(timedelta(minutes=5))

    env.battery.after_write = take_long
    completed(await host.invoke("refund_order", crossing, ALICE))
    assert await observer.count(EFFECTS) == 2


async def test_A09_approval_denied_or_revoked(make_env: EnvFactory, observer: Observer) -> None:
    env = await make_env()
    host, request_id = env.host, rid()
    asked = approval_id_of(await host.invoke("refund_order", refund("o-1", 1, request_id), ALICE))
    refusal = await host.approvals.deny(asked, APPROVER, reason="not this one")
    assert isinstance(refusal, ApprovalRecord) and refusal.decision_reason == "not this one"
    # Every retry of the request is the person's denial: with the approval id, without it,
    # and even unconfirmed; it says who denied it, when and why.
    retries = [
        refund("o-1", 1, request_id, approval_id=asked),
        refund("o-1", 1, request_id),
        {**refund("o-1", 1, request_id), "_charter": {"requestId": request_id}},
    ]
    for call in retries:
        no = refused(await host.invoke("refund_order", call, ALICE), "approval_denied")
        assert no.approval_id == asked and no.request_id == request_id
        assert no.decided_by == refusal.decided_by and no.decided_at == refusal.decided_at
        assert no.decision_reason == "not this one" and "not this one" in no.reason
    status = await host.action_status(ALICE, request_id)
    assert status is not None and status.status == "denied"
    assert status.outcome is not None and status.outcome["cause"] == "approval_denied"
    # Revoked: granted, then denied before it was used.
    request_id = rid()
    revoked = await approved(host, refund("o-2", 1, request_id))
    assert not isinstance(await host.approvals.deny(revoked, APPROVER), Failed)
    refused(
        await host.invoke("refund_order", refund("o-2", 1, request_id, approval_id=revoked), ALICE),
        "approval_denied",
    )
    assert await observer.count(EFFECTS) == 0
    # A denied approval cannot be granted afterwards, nor a consumed one revoked.
    denied(await host.approvals.grant(asked, APPROVER), "already_denied")
    request_id = rid()
    used = await approved(host, refund("o-3", 1, request_id))
    completed(
        await host.invoke("refund_order", refund("o-3", 1, request_id, approval_id=used), ALICE)
    )
    denied(await host.approvals.deny(used, APPROVER), "already_consumed")


async def test_A10_approver_separation(make_env: EnvFactory) -> None:
    alice_approver = Principal(
        subject="alice", tenant_id="acme", scopes=SCOPES | {"charter:approve"}
    )
    env = await make_env()
    request_id = rid()
    asked = approval_id_of(
        await env.host.invoke("refund_order", refund("o-1", 1, request_id), alice_approver)
    )
    denied(await env.host.approvals.grant(asked, alice_approver), "self_approval")
    denied(await env.host.approvals.grant(asked, AMY), "insufficient_scope")
    denied(await env.host.approvals.grant(asked, GLOBEX_APPROVER), "not_found")
    assert await status_of(env.store, asked) == "pending"
    # A deployment may allow self-approval explicitly.
    lenient = Host(env.battery.registry, store=env.store, clock=env.clock, allow_self_approval=True)
    granted = await lenient.approvals.grant(asked, alice_approver)
    assert isinstance(granted, ApprovalRecord) and granted.decided_by == "acme/alice"


# -- A11 ------------------------------------------------------------------------------------


async def test_A11_confirmation_strict_and_excluded_from_hash(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    host, request_id = env.host, rid()

    def ship(confirmed: object = None) -> dict[str, Any]:
        controls: dict[str, Any] = {"requestId": request_id}
        if confirmed is not None:
            controls["confirmed"] = confirmed
        return {"order_id": "o-1", "_charter": controls}

    for almost in (None, "true", 1, "yes", False, [True], {"value": True}):
        asks_confirmation(await host.invoke("ship_order", ship(almost), ALICE))
        assert await observer.count(LEDGER) == 0 and await observer.count(EFFECTS) == 0
    first = completed(await host.invoke("ship_order", ship(True), ALICE))
    replay = completed(await host.invoke("ship_order", ship(True), ALICE))
    assert not first.replayed and replay == first.model_copy(update={"replayed": True})
    assert env.battery.runs == 1 and await observer.count(EFFECTS) == 1
    # The confirmation is a control: the stored fingerprint covers the input alone.
    entry = await env.store.get_entry("acme", ALICE.key, request_id)
    assert entry is not None
    assert entry.fingerprint == fingerprint(
        env.battery, "ship_order", "acme", "o-1", {"order_id": "o-1"}
    )


# -- A12 ------------------------------------------------------------------------------------


async def test_A12_an_approval_shows_every_bound_value_and_masks_secrets(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    request_id = rid()
    asked = await env.host.invoke("approved_payout", payout("DE-APPROVED", request_id), ALICE)
    approval_id = approval_id_of(asked)
    shown = {
        "order_id": "o-1",
        "iban": {"$secret": "bound"},  # bound by the fingerprint, never shown
        "amount": 100,
        "memo": "rent",  # a Field(exclude=True): left out of dumps, not of the approval
        "tags": {"$set": ["a", "b"]},  # sorted, whatever order the caller sent
    }
    record = await env.store.get_approval(approval_id)
    assert record is not None and record.arguments == shown
    [listed] = await env.host.approvals.list(APPROVER)
    assert listed.arguments == shown
    # The secret is stored nowhere: not in the approval, the ledger or the audit trail.
    async with observer.engine.connect() as conn:
        for table in (APPROVALS, LEDGER, "charter_audit_events"):
            rows = (await conn.execute(sa.text(f"SELECT * FROM {table}"))).all()
            assert "DE-APPROVED" not in repr(rows), table


# -- A13 / A14 (issue #14) --------------------------------------------------------------------


async def test_A13_an_approval_is_spent_only_by_its_own_request_id(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    host = env.host
    first, second = rid(), rid()
    approval_id = await approved(host, refund("o-1", 100, first))
    # The same approval, the same command, another request id: refused, nothing runs,
    # and the request it was granted for keeps a truthful status.
    stolen = refund("o-1", 100, second, approval_id=approval_id)
    denied(await host.invoke("refund_order", stolen, ALICE), "request_id_mismatch")
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    assert await host.action_status(ALICE, second) is None
    status = await host.action_status(ALICE, first)
    assert status is not None and status.status == "approved"
    completed(
        await host.invoke("refund_order", refund("o-1", 100, first, approval_id=approval_id), ALICE)
    )
    status = await host.action_status(ALICE, first)
    assert status is not None and status.status == "completed"
    assert await observer.count(EFFECTS) == 1


async def test_A14_asking_for_an_approval_never_runs_the_tool(
    make_env: EnvFactory, observer: Observer
) -> None:
    env = await make_env()
    host = env.host
    # A tool that needs only a confirmation, one that needs nothing, one that needs an
    # approval: asking never runs any of them, and says plainly when none is needed.
    for tool, arguments in (
        ("ship_order", {"order_id": "o-1"}),
        ("create_widget", {"name": "w"}),
    ):
        asked = await host.request_approval(tool, arguments, ALICE, request_id=rid())
        failure(asked, ErrorCode.INVALID_INPUT, "approval_not_required")
    request_id = rid()
    asked = await host.request_approval(
        "refund_order", {"order_id": "o-2", "amount": 5}, ALICE, request_id=request_id
    )
    assert isinstance(asked, ApprovalRecord) and asked.status == "pending"
    assert asked.request_id == request_id
    assert await observer.count(EFFECTS) == 0 and await observer.count(LEDGER) == 0
    assert env.battery.runs == 0
