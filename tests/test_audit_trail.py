"""Who may read which audit events: decided by the host, the same for every transport."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from charter import ErrorCode, Failed, Host, Principal, Registry, tool


class Ping(BaseModel):
    pass


class Pong(BaseModel):
    ok: bool


@tool(tier="read")
async def ping(args: Ping) -> Pong:
    """Ping."""
    return Pong(ok=True)


def principal(subject: str, tenant: str, *scopes: str) -> Principal:
    return Principal(subject=subject, tenant_id=tenant, scopes=frozenset(scopes))


ADA = principal("ada", "acme")
BEN = principal("ben", "acme")
SAM = principal("sam", "acme", "charter:approve")
OLGA = principal("olga", "acme", "admin")
GUS = principal("gus", "globex")


@pytest.fixture
async def host() -> Host:
    registry = Registry()
    registry.register(ping)
    host = Host(registry)
    for caller in (ADA, BEN, SAM, GUS):
        await host.invoke("ping", {}, caller)
    return host


@pytest.mark.anyio
async def test_a_caller_reads_only_its_own_events_in_its_own_tenant(host: Host) -> None:
    trail = await host.audit_events(ADA)
    assert not isinstance(trail, Failed)
    assert trail.tenant == "acme"
    assert [e.subject for e in trail.events] == ["ada"]


@pytest.mark.anyio
async def test_an_approver_reads_every_event_of_its_tenant_and_no_other(host: Host) -> None:
    trail = await host.audit_events(SAM)
    assert not isinstance(trail, Failed)
    assert sorted((e.subject for e in trail.events), key=str) == ["ada", "ben", "sam"]


@pytest.mark.anyio
async def test_only_the_admin_scope_may_read_another_tenant(host: Host) -> None:
    denied = await host.audit_events(SAM, tenant="globex")
    assert isinstance(denied, Failed)
    assert denied.code is ErrorCode.AUTHORIZATION_DENIED
    assert denied.reason == "tenant_forbidden"
    trail = await host.audit_events(OLGA, tenant="  globex ")
    assert not isinstance(trail, Failed)
    assert trail.tenant == "globex"
    assert [e.subject for e in trail.events] == ["gus"]
