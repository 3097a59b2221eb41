"""Gaps in who a caller is, closed in the host for every tool and transport (issue #15)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel
from tests.builders import Clock, risk, tiered_tool

from charter import ActionPolicy, Principal, Registry, Tool, ToolContext
from charter.audit import MemoryAuditSink
from charter.errors import ErrorCode
from charter.host import Host
from charter.outcome import Completed, Failed

pytestmark = pytest.mark.anyio


class Lookup(BaseModel):
    code: str
    tenant_id: str | None = None


class Found(BaseModel):
    code: str
    tenant: str


def build(**options: Any) -> tuple[Host, list[str]]:
    seen: list[str] = []

    async def lookup(args: Lookup, ctx: ToolContext) -> Found:
        seen.append(f"{ctx.tenant_id}:{args.tenant_id}")
        return Found(code=args.code, tenant=ctx.tenant_id)

    staff_only = ActionPolicy(
        target_type="voucher",
        command_target_field="code",
        ledger="optional",
        allowed_actor_types=("staff",),
    )

    def declare(name: str, tier: str, description: str, **options: Any) -> Tool[Any, Any, Any]:
        options["description"] = description
        return tiered_tool(name, tier, lookup, Lookup, Found, **options)

    public = {"auth": "public", "tenant_field": "tenant_id"}
    staff = {"required_scopes": ["refunds:write"], "action_policy": staff_only}
    registry = Registry()
    registry.register_all(
        [
            declare("vouchers.check", "read", "Check a voucher code (public).", **public),
            declare(
                "refunds.issue",
                "write",
                "Issue a refund (staff only).",
                risk_policy=risk("refund"),
                **staff,
            ),
        ]
    )
    return Host(registry, **options), seen


async def test_an_anonymous_caller_cannot_name_a_tenant_in_a_public_tools_tenant_field() -> None:
    host, seen = build()
    refused = await host.invoke("vouchers.check", {"code": "X", "tenant_id": "globex"}, None)
    assert isinstance(refused, Failed) and refused.reason == "tenant_forbidden"
    assert seen == []
    fine = await host.invoke("vouchers.check", {"code": "X"}, None)
    assert isinstance(fine, Completed) and seen == [":None"]


async def test_allowed_actor_types_are_enforced_for_a_generic_tool() -> None:
    host, seen = build()
    customer = Principal(
        subject="cara", tenant_id="acme", scopes=frozenset({"refunds:write"}), actor="customer"
    )
    refused = await host.invoke("refunds.issue", {"code": "V1"}, customer)
    assert isinstance(refused, Failed) and refused.code is ErrorCode.AUTHORIZATION_DENIED
    assert refused.reason == "actor_not_allowed" and seen == []
    staff = Principal(subject="sam", tenant_id="acme", scopes=frozenset({"refunds:write"}))
    assert isinstance(await host.invoke("refunds.issue", {"code": "V1"}, staff), Completed)


async def test_anonymous_refusals_are_aggregated_per_kind_and_window() -> None:
    clock = Clock(datetime(2030, 1, 1, tzinfo=UTC))
    host, _ = build(clock=clock, anonymous_audit_window=timedelta(minutes=1))
    for n in range(50):
        await host.invoke(f"no.such.tool.{n}", {}, None)  # a flood of unknown names
    await host.invoke("refunds.issue", {"code": "V1"}, None)  # another kind of refusal
    events = await host.audit.events(limit=1000)
    # The first refusal of each kind is recorded at once, the rest counted.
    assert [(e.tool, e.code, e.count) for e in reversed(events)] == [
        ("no.such.tool.0", "NOT_FOUND", 1),
        ("refunds.issue", "UNAUTHENTICATED", 1),
    ]
    clock.now += timedelta(minutes=2)
    await host.invoke("no.such.tool.x", {}, None)  # a new window: the count is recorded
    events = await host.audit.events(limit=1000)
    assert [(e.tool, e.count) for e in reversed(events)][2:] == [
        ("(unknown)", 49),
        ("no.such.tool.x", 1),
    ]
    # A signed-in caller's refusals are never aggregated, and closing records the rest.
    sam = Principal(subject="sam", tenant_id="acme", scopes=frozenset())
    for _ in range(3):
        await host.invoke("no.such.tool", {}, sam)
    await host.invoke("no.such.tool.y", {}, None)
    await host.aclose()
    events = list(reversed(await host.audit.events(limit=1000)))
    assert [e.subject for e in events].count("sam") == 3
    assert sum(e.count for e in events if e.subject is None and e.code == "NOT_FOUND") == 52


async def test_anonymous_audit_events_are_pruned_apart_from_the_others() -> None:
    clock = Clock(datetime(2030, 1, 1, tzinfo=UTC))
    host, _ = build(clock=clock, anonymous_audit_window=timedelta(0))
    sam = Principal(subject="sam", tenant_id="acme", scopes=frozenset())
    await host.invoke("no.such.tool", {}, None)
    await host.invoke("no.such.tool", {}, sam)
    clock.now += timedelta(days=8)
    prune = cast(MemoryAuditSink, host.audit).prune_audit  # the host's default sink
    assert await prune(clock.now - timedelta(days=7), anonymous_only=True) == 1
    assert [e.subject for e in await host.audit.events()] == ["sam"]
