"""Audit: exactly one event per invocation, carrying who acted, for which tenant, how."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel
from tests.builders import request_id as _rid
from tests.builders import tiered_tool

from charter import ErrorCode, Principal, Registry, ToolBinding, ToolError
from charter.audit import AuditEvent, MemoryAuditSink
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed
from charter.tool import Tool

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
USER = Principal(
    subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:read", "notes:write"})
)
ADMIN = Principal(subject="admin-1", tenant_id="tenant-a", scopes=frozenset({"admin"}))


class NoteIn(BaseModel):
    tenant_id: str | None = None
    fail: bool = False


class NoteOut(BaseModel):
    ok: bool


async def handler(note: NoteIn) -> NoteOut:
    if note.fail:
        raise ToolError(ErrorCode.PROVIDER_UNAVAILABLE, "down")
    return NoteOut(ok=True)


def _registry() -> Registry:
    registry = Registry()
    read = _note_tool(
        "read_notes", "read", scopes=("notes:read",), tenant_field="tenant_id", delegable=True
    )
    binding = ToolBinding(capability_id="notes.read", capability_version="v3", owner="notes-team")
    registry.register(read, binding)
    registry.register(_note_tool("write_note", "write", scopes=("notes:write",)))
    registry.register(_note_tool("publish_note", "sensitive"))
    return registry


def _note_tool(
    name: str, tier: str, scopes: tuple[str, ...] = (), **options: Any
) -> Tool[Any, Any, Any]:
    """A note tool on ``handler``; a write gets ``WRITE_RISK``."""
    return tiered_tool(name, tier, handler, NoteIn, NoteOut, required_scopes=scopes, **options)


async def test_an_event_carries_every_field_the_issue_lists() -> None:
    host = Host(_registry(), clock=lambda: NOW)
    rid = _rid()
    outcome = await host.invoke(
        "read_notes", {"tenant_id": "tenant-b", "_charter": {"requestId": rid}}, ADMIN
    )
    assert isinstance(outcome, Completed)
    [event] = await host.audit.events()
    assert event.time == NOW
    assert event.subject == "admin-1"
    assert event.principal_tenant == "tenant-a"
    assert event.tenant == "tenant-b"
    assert event.delegated is True
    assert event.admin_used is True
    assert event.tool == "read_notes"
    assert (event.capability_id, event.capability_version) == ("notes.read", "v3")
    assert event.request_id == rid
    assert (event.outcome, event.code, event.reason) == ("completed", None, None)
    assert event.replayed is False
    assert isinstance(event.duration_ms, float) and event.duration_ms >= 0
    assert event.id.startswith("aud_")


async def test_a_failed_call_records_its_code_and_reason() -> None:
    host = Host(_registry(), clock=lambda: NOW)
    outcome = await host.invoke("read_notes", {"tenant_id": "tenant-b"}, USER)
    assert isinstance(outcome, Failed)
    [event] = await host.audit.events()
    assert (event.outcome, event.code, event.reason) == (
        "failed",
        "AUTHORIZATION_DENIED",
        "tenant_forbidden",
    )
    assert (event.subject, event.principal_tenant, event.tenant) == (
        "user-1",
        "tenant-a",
        "tenant-a",
    )
    assert event.delegated is False and event.admin_used is False


async def test_every_invocation_records_exactly_one_event_whatever_its_outcome() -> None:
    host = Host(_registry())
    rid = _rid()
    calls: list[tuple[str, object, Principal | None, str, str | None]] = [
        ("read_notes", {}, USER, "completed", None),
        ("read_notes", {}, None, "failed", "UNAUTHENTICATED"),
        ("read_notes", {}, ADMIN, "completed", None),
        ("no_such_tool", {}, USER, "failed", "NOT_FOUND"),
        ("read_notes", '{"a": NaN}', USER, "failed", "INVALID_INPUT"),
        ("read_notes", {"bogus": 1}, USER, "failed", "INVALID_INPUT"),
        ("write_note", {}, USER, "failed", "INVALID_INPUT"),
        ("write_note", {"_charter": {"requestId": rid}}, USER, "completed", None),
        ("write_note", {"_charter": {"requestId": rid}}, USER, "completed", None),
        ("write_note", {"fail": True, "_charter": {"requestId": _rid()}}, USER, "failed", None),
        ("publish_note", {"_charter": {"requestId": _rid()}}, USER, "interaction-required", None),
    ]
    for name, arguments, principal, _, _ in calls:
        await host.invoke(name, arguments, principal)
    events = list(reversed(await host.audit.events(limit=100)))
    assert len(events) == len(calls)
    assert len({e.id for e in events}) == len(calls)
    for event, (name, _, principal, kind, code) in zip(events, calls, strict=True):
        assert event.tool == name
        assert event.outcome == kind
        if code is not None:
            assert event.code == code
        assert event.subject == (principal.subject if principal else None)
    assert [e.replayed for e in events if e.tool == "write_note" and e.outcome == "completed"] == [
        False,
        True,
    ]


async def test_events_go_to_the_given_sink_and_not_to_the_store() -> None:
    sink = MemoryAuditSink()
    store = MemoryStore()
    host = Host(_registry(), store=store, audit=sink)
    assert host.audit is sink
    await host.invoke("write_note", {"_charter": {"requestId": _rid()}}, USER)
    await host.invoke("read_notes", {}, USER)
    assert [e.tool for e in await sink.events()] == ["read_notes", "write_note"]
    assert await store.events() == []


async def test_with_the_store_as_sink_a_ledgered_event_commits_with_the_action() -> None:
    store = MemoryStore()
    host = Host(_registry(), store=store)
    assert host.audit is store
    rid = _rid()
    await host.invoke("write_note", {"_charter": {"requestId": rid}}, USER)
    [event] = await store.events()
    [entry] = store.entries.values()
    assert event.request_id == entry.request_id == rid
    # A rolled-back call leaves no row, and its one event is recorded outside it.
    await host.invoke("write_note", {"fail": True, "_charter": {"requestId": _rid()}}, USER)
    assert len(store.entries) == 1
    assert [e.code for e in await store.events()] == ["PROVIDER_UNAVAILABLE", None]


class ListSink(list[AuditEvent]):
    """A sink that is also a list, so it is falsy while empty."""

    async def record(self, event: AuditEvent) -> None:
        self.append(event)

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        return list(reversed(self))[:limit]


async def test_a_sink_that_is_empty_and_falsy_is_still_the_sink() -> None:
    sink = ListSink()
    host = Host(_registry(), audit=sink)
    assert host.audit is sink
    await host.invoke("read_notes", {}, USER)
    assert [e.tool for e in sink] == ["read_notes"]


async def test_events_can_be_listed_by_tenant_including_delegated_ones() -> None:
    host = Host(_registry())
    await host.invoke("read_notes", {}, USER)
    await host.invoke("read_notes", {"tenant_id": "tenant-b"}, ADMIN)
    other = Principal(subject="u2", tenant_id="tenant-c", scopes=frozenset({"notes:read"}))
    await host.invoke("read_notes", {}, other)
    tenant_b: list[Any] = await host.audit.events(tenant="tenant-b")
    assert [(e.subject, e.tenant) for e in tenant_b] == [("admin-1", "tenant-b")]
    assert len(await host.audit.events(tenant="tenant-a")) == 2
