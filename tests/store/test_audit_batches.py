"""Group commit of audit events (``SqlStore.record``): events recorded while a write is in
flight share the next one, and every lost event still reaches its recorder as an error."""

from __future__ import annotations

import asyncio

import pytest
from tests.store.store_records import all_at_once, audit_event, statements_sent

from charter.audit import AuditEvent
from charter.errors import StoreUnavailable
from charter.store import SqlStore, UnstorableValue
from charter.store._audit_batch import AuditBatches

pytestmark = pytest.mark.anyio


async def test_concurrent_events_are_all_stored_with_fewer_statements(
    sql_store: SqlStore,
) -> None:
    events = [audit_event() for _ in range(20)]
    pending = iter(events)
    with statements_sent(sql_store) as sent:
        await all_at_once(lambda: sql_store.record(next(pending)), len(events))
    inserts = [s for s in sent if s.startswith("INSERT INTO charter_audit_events")]
    stored = await sql_store.events(limit=100)
    assert sorted(e.id for e in stored) == sorted(e.id for e in events)
    assert 1 <= len(inserts) < len(events)


class _Writer:
    """A fake write: records the batches it was given, fails as told."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.refused: set[str] = set()
        self.unavailable = False
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, events: list[AuditEvent]) -> None:
        self.batches.append([e.id for e in events])
        await self.release.wait()
        if self.unavailable:
            raise StoreUnavailable("the database is down")
        if any(e.id in self.refused for e in events):
            raise UnstorableValue("refused")


async def _record_all(
    batches: AuditBatches, events: list[AuditEvent]
) -> list[BaseException | None]:
    async def one(event: AuditEvent) -> BaseException | None:
        try:
            await batches.record(event)
        except Exception as exc:
            return exc
        return None

    return list(await asyncio.gather(*(one(e) for e in events)))


async def test_events_recorded_during_a_write_go_together_in_the_next() -> None:
    write = _Writer()
    write.release.clear()
    batches = AuditBatches(write)
    events = [audit_event() for _ in range(5)]
    first = asyncio.ensure_future(batches.record(events[0]))
    while not write.batches:
        await asyncio.sleep(0)
    rest = asyncio.ensure_future(_record_all(batches, events[1:]))
    await asyncio.sleep(0.01)
    write.release.set()
    await first
    assert await rest == [None] * 4
    assert write.batches == [[events[0].id], [e.id for e in events[1:]]]


async def test_an_event_the_database_refuses_fails_alone() -> None:
    write = _Writer()
    events = [audit_event() for _ in range(4)]
    write.refused = {events[2].id}
    results = await _record_all(AuditBatches(write), events)
    assert [type(r) for r in results] == [type(None), type(None), UnstorableValue, type(None)]
    # The batch failed, so each of its events was written on its own.
    assert write.batches == [[e.id for e in events], *([e.id] for e in events)]


async def test_an_unreachable_database_fails_every_recorder_without_retrying_each() -> None:
    write = _Writer()
    write.unavailable = True
    events = [audit_event() for _ in range(4)]
    results = await _record_all(AuditBatches(write), events)
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert write.batches == [[e.id for e in events]]


async def test_a_cancelled_recorder_waits_until_its_event_is_written() -> None:
    write = _Writer()
    write.release.clear()
    batches = AuditBatches(write)
    task = asyncio.ensure_future(batches.record(audit_event()))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0.01)
    assert not task.done()  # still waiting for the write in flight
    write.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(write.batches) == 1
