"""Failures around a call (audit, approval decisions, handlers) never escape as exceptions."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel
from tests.builders import DESTRUCTIVE_RISK

from charter import ErrorCode, Failed, Host, Principal, Registry, ToolContext, tool
from charter.audit import AuditEvent
from charter.store import SqlStore, sqlite_url


class Ping(BaseModel):
    text: str = "hi"


class Pong(BaseModel):
    text: str


@tool(tier="read")
async def echo(args: Ping) -> Pong:
    """Echo."""
    return Pong(text=args.text)


@tool(tier="read")
async def crash(args: Ping) -> Pong:
    """Crash."""
    raise RuntimeError("secret-CANARY")


@tool(
    tier="destructive",
    risk_policy=DESTRUCTIVE_RISK,
)
async def wipe(args: Ping, ctx: ToolContext) -> Pong:
    """Wipe."""
    return Pong(text="wiped")


class BrokenAudit:
    async def record(self, event: AuditEvent) -> None:
        raise ConnectionError("audit database down")

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        return []


ADA = Principal(subject="ada", tenant_id="acme", scopes=frozenset())
SAM = Principal(subject="sam", tenant_id="acme", scopes=frozenset({"charter:approve"}))


@pytest.mark.anyio
async def test_a_failing_audit_sink_does_not_turn_a_completed_call_into_an_exception() -> None:
    registry = Registry()
    registry.register(echo)
    host = Host(registry, audit=BrokenAudit())
    outcome = await host.invoke("echo", {"text": "x"}, ADA)
    assert outcome.kind == "completed"


@pytest.mark.anyio
async def test_an_unhandled_handler_exception_is_a_provider_error_with_a_reason() -> None:
    registry = Registry()
    registry.register(crash)
    outcome = await Host(registry).invoke("crash", {}, ADA)
    assert isinstance(outcome, Failed)
    assert outcome.code is ErrorCode.PROVIDER_ERROR
    assert outcome.reason == "unhandled_exception"
    assert "CANARY" not in outcome.model_dump_json()


@pytest.mark.anyio
async def test_a_denial_reason_the_store_cannot_hold_is_a_failed_outcome(tmp_path: Path) -> None:
    registry = Registry()
    registry.register(wipe)
    async with SqlStore(sqlite_url(tmp_path / "c.db")) as store:
        host = Host(registry, store=store)
        request = {"_charter": {"requestId": str(uuid.uuid4()), "confirmed": True}}
        pending = await host.invoke("wipe", request, ADA)
        assert pending.kind == "interaction-required"
        decided = await host.approvals.deny(pending.interaction.id, SAM, reason="bad\x00reason")
        assert isinstance(decided, Failed)
        assert decided.code is ErrorCode.INVALID_INPUT
        still = await host.approvals.get(SAM, pending.interaction.id)
        assert still is not None and still.status == "pending"
        await host.aclose()
