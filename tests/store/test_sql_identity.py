"""Who a caller is and who may approve, on SQLite and PostgreSQL (issue #15).

A principal is (home tenant, subject) everywhere it is stored or compared; only a person
holding the approver scope itself decides approvals; every decision, and every refused
one, is audited, and an approval keeps its history.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from tests.builders import destructive_risk

from charter import ActionPolicy, Principal, Registry, ToolContext, define_tool
from charter.errors import ErrorCode
from charter.host import Host
from charter.ledger import ApprovalRecord
from charter.outcome import Completed, Failed, InteractionRequired
from charter.store import SqlStore

SqlStoreFactory = Callable[..., Awaitable[SqlStore]]

pytestmark = pytest.mark.anyio

SCOPES = frozenset({"payouts:send"})
# acme's admin and globex's own operator share a subject; they are two principals.
ACME_OLGA = Principal(subject="ops-olga", tenant_id="acme", scopes=SCOPES | {"admin"})
GLOBEX_OLGA = Principal(subject="ops-olga", tenant_id="globex", scopes=SCOPES)
GLOBEX_APPROVER = Principal(
    subject="gina", tenant_id="globex", scopes=frozenset({"charter:approve"})
)
ACME_APPROVER = Principal(subject="ada", tenant_id="acme", scopes=frozenset({"charter:approve"}))


class Payout(BaseModel):
    account: str
    cents: int
    tenant_id: str | None = None


class Paid(BaseModel):
    account: str
    cents: int
    tenant: str
    by: str


def build(store: Any, **options: Any) -> tuple[Host, list[dict[str, Any]]]:
    runs: list[dict[str, Any]] = []

    async def pay(args: Payout, ctx: ToolContext) -> Paid:
        assert ctx.principal is not None
        runs.append({"tenant": ctx.tenant_id, "by": ctx.principal.key})
        return Paid(
            account=args.account, cents=args.cents, tenant=ctx.tenant_id, by=ctx.principal.key
        )

    registry = Registry()
    registry.register(
        define_tool(
            name="payouts.send",
            description="Send a payout (an approver must approve it).",
            input_schema=Payout,
            output_schema=Paid,
            handler=pay,
            tier="destructive",
            risk_policy=destructive_risk("payment"),
            required_scopes=["payouts:send"],
            delegable=True,
            tenant_field="tenant_id",
            action_policy=ActionPolicy(
                target_type="account", command_target_field="account", approval="required"
            ),
        )
    )
    return Host(registry, store=store, **options), runs


async def olgas_payout_approval(host: Host) -> str:
    """Have Olga (acme) ask for a payout; the id of the approval it waits for."""
    asked = await host.invoke("payouts.send", payout(str(uuid.uuid4())), ACME_OLGA)
    assert isinstance(asked, InteractionRequired) and asked.approval_id is not None
    return asked.approval_id


def payout(request_id: str, approval_id: str | None = None, **fields: Any) -> dict[str, Any]:
    controls: dict[str, Any] = {"requestId": request_id, "confirmed": True}
    if approval_id is not None:
        controls["approvalId"] = approval_id
    return {"account": "ACC-1", "cents": 500, **fields, "_charter": controls}


async def test_A05_a_same_named_principal_of_another_tenant_never_reaches_a_delegated_call(
    make_sql_store: SqlStoreFactory,
) -> None:
    host, runs = build(await make_sql_store())
    rid = str(uuid.uuid4())
    # acme's admin acts for globex, with globex's approval.
    asked = await host.invoke("payouts.send", payout(rid, tenant_id="globex"), ACME_OLGA)
    assert isinstance(asked, InteractionRequired) and asked.approval_id is not None
    record = await host.approvals.get(GLOBEX_APPROVER, asked.approval_id)
    assert record is not None and record.tenant_id == "globex"
    assert (record.requester_tenant, record.requester_subject) == ("acme", "ops-olga")
    assert not isinstance(await host.approvals.grant(asked.approval_id, GLOBEX_APPROVER), Failed)

    # globex's own ops-olga can neither spend that approval ...
    stolen = await host.invoke(
        "payouts.send", payout(rid, asked.approval_id, tenant_id="globex"), GLOBEX_OLGA
    )
    assert isinstance(stolen, Failed) and stolen.reason == "principal_mismatch"
    assert runs == []

    done = await host.invoke(
        "payouts.send", payout(rid, asked.approval_id, tenant_id="globex"), ACME_OLGA
    )
    assert isinstance(done, Completed) and not done.replayed
    # ... nor read the admin's outcome, nor see its audit event ...
    assert await host.action_status(GLOBEX_OLGA, rid) is None
    assert await host.action_status(GLOBEX_OLGA, rid, tenant="globex") is None
    trail = await host.audit_events(GLOBEX_OLGA)
    assert not isinstance(trail, Failed)
    # (only its own refused attempt shows, never the admin's delegated call)
    assert {(e.principal_tenant, e.outcome) for e in trail.events if e.request_id == rid} == {
        ("globex", "failed")
    }
    # ... nor get it as a replay: the same request id is its own request.
    own = await host.invoke("payouts.send", payout(rid), GLOBEX_OLGA)
    assert isinstance(own, InteractionRequired) and own.approval_id != asked.approval_id
    assert len(runs) == 1

    # The admin finds its own delegated call by naming the tenant it acted for.
    status = await host.action_status(ACME_OLGA, rid, tenant="globex")
    assert status is not None and status.status == "completed"
    theirs = await host.action_status(GLOBEX_OLGA, rid, tenant="globex")
    assert theirs is not None and theirs.approval_id == own.approval_id  # its own request


@pytest.mark.parametrize(
    "scopes",
    [
        {"*"},
        {"*:*"},
        {"*:approve"},
        {"charter:*"},
        {"admin"},
    ],
    ids=str,
)
async def test_A15_a_wildcard_or_the_admin_scope_never_decides_an_approval(
    make_sql_store: SqlStoreFactory, scopes: set[str]
) -> None:
    host, runs = build(await make_sql_store())
    approval_id = await olgas_payout_approval(host)
    wildcard = Principal(subject="wanda", tenant_id="acme", scopes=frozenset(scopes))
    assert not host.approvals.is_approver(wildcard)
    refused = await host.approvals.grant(approval_id, wildcard)
    assert isinstance(refused, Failed) and refused.code is ErrorCode.AUTHORIZATION_DENIED
    assert refused.reason == "insufficient_scope"
    record = await host.store.get_approval(approval_id)
    assert record is not None and record.status == "pending" and runs == []


async def test_A15_an_agent_with_the_approver_scope_never_decides(
    make_sql_store: SqlStoreFactory,
) -> None:
    host, _ = build(await make_sql_store())
    approval_id = await olgas_payout_approval(host)
    for kind in ("agent", "service"):
        bot = Principal(
            subject="bot", tenant_id="acme", scopes=frozenset({"charter:approve"}), kind=kind
        )
        refused = await host.approvals.deny(approval_id, bot)
        assert isinstance(refused, Failed) and refused.reason == "not_a_person"


async def test_A15_the_admin_scope_decides_only_when_the_host_says_so(
    make_sql_store: SqlStoreFactory,
) -> None:
    host, _ = build(await make_sql_store(), admin_may_approve=True)
    approval_id = await olgas_payout_approval(host)
    admin = Principal(subject="root", tenant_id="acme", scopes=frozenset({"admin"}))
    granted = await host.approvals.grant(approval_id, admin)
    assert isinstance(granted, ApprovalRecord) and granted.decided_by == "acme/root"


async def test_A16_every_decision_and_refused_decision_is_audited_and_kept_in_the_history(
    make_sql_store: SqlStoreFactory,
) -> None:
    host, _ = build(await make_sql_store())
    approval_id = await olgas_payout_approval(host)
    wildcard = Principal(subject="wanda", tenant_id="acme", scopes=frozenset({"*"}))
    assert isinstance(await host.approvals.grant(approval_id, wildcard, "sure"), Failed)
    assert isinstance(
        await host.approvals.grant(approval_id, ACME_APPROVER, "checked"), ApprovalRecord
    )
    revoked = await host.approvals.deny(approval_id, ACME_APPROVER, "changed my mind")
    assert isinstance(revoked, ApprovalRecord) and revoked.status == "denied"
    # The revocation did not erase who granted.
    assert [(d.status, d.decided_by, d.reason) for d in revoked.history] == [
        ("approved", "acme/ada", "checked"),
        ("denied", "acme/ada", "changed my mind"),
    ]
    events = [e for e in await host.audit.events(tenant="acme") if e.action != "call"]
    assert [(e.action, e.subject, e.outcome, e.reason, e.note) for e in reversed(events)] == [
        ("approval.grant", "wanda", "failed", "insufficient_scope", "sure"),
        ("approval.grant", "ada", "completed", None, "checked"),
        ("approval.revoke", "ada", "completed", None, "changed my mind"),
    ]
    assert {e.approval_id for e in events} == {approval_id}
    assert {e.tenant for e in events} == {"acme"}


async def test_A16_a_decision_that_waits_out_a_locked_row_is_retryable_and_decides_nothing(
    make_sql_store: SqlStoreFactory,
) -> None:
    store = await make_sql_store(busy_timeout=0.2)
    host, _ = build(store)
    approval_id = await olgas_payout_approval(host)
    blocker = await make_sql_store()
    async with blocker.transaction(wait=5) as tx:
        # Hold the approval's row (PostgreSQL) or the database's write lock (SQLite).
        conn: Any = tx.connection
        await conn.execute(
            sa.text("UPDATE charter_approvals SET risk = risk WHERE id = :id"),
            {"id": approval_id},
        )
        busy = await host.approvals.grant(approval_id, ACME_APPROVER)
    assert isinstance(busy, Failed) and busy.retryable
    assert busy.code is ErrorCode.PROVIDER_UNAVAILABLE and busy.reason == "store_busy"
    record = await store.get_approval(approval_id)
    assert record is not None and record.status == "pending"
    assert isinstance(await host.approvals.grant(approval_id, ACME_APPROVER), ApprovalRecord)
