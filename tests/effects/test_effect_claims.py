"""A claim never runs an effect past its ``max_attempts``: an effect whose last attempt
started but never recorded a result (its worker died inside it) is parked dead by the next
claim, audited ``effect.dead``, and runs again only when a person re-drives it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.builders import Clock
from tests.effects.kit import FakeProvider, build

from charter.effects import changes
from charter.ledger import LedgerStore

pytestmark = pytest.mark.anyio

LEASE = timedelta(seconds=60)


async def test_an_effect_whose_every_attempt_killed_its_worker_is_parked_dead(
    outbox_store: LedgerStore,
) -> None:
    clock = Clock()
    provider = FakeProvider()
    host, _ = build(outbox_store, provider=provider, max_attempts=2, clock=clock, lease=LEASE)
    store = host.effects.store
    # Attempt 1: the serving process committed the row leased to itself, then died.
    record = host.effects.record(
        "payments.refund", {"booking_id": "bk_1", "amount_cents": 5}, tenant_id="acme", key=("p",)
    )
    async with outbox_store.transaction(wait=1) as tx:
        assert await tx.insert_effect(record)
    # Attempt 2: a worker claims it once the lease ran out, and dies inside the function.
    clock.advance(LEASE + timedelta(seconds=1))
    [claimed] = await store.claim_effects(
        now=clock.now, lease_until=clock.now + LEASE, worker="dying", limit=10
    )
    assert (claimed.status, claimed.attempts) == ("pending", 2)
    # Its lease runs out too: the next claim must not start a third attempt.
    clock.advance(LEASE + timedelta(seconds=1))
    assert await host.effects.run_due(worker="w1") == 1
    assert not provider.calls
    dead = await host.effects.get(record.key)
    assert dead is not None
    assert (dead.status, dead.attempts, dead.leased_by, dead.lease_until) == ("dead", 2, None, None)
    assert dead.last_error == changes.UNFINISHED
    [event] = [e for e in await host.audit.events(tenant="acme") if e.note == record.key]
    assert (event.action, event.outcome) == ("effect.dead", "failed")
    assert event.reason == changes.UNFINISHED
    assert event.tool == "payments.refund"
    assert await host.effects.work(once=True) == 0  # dead: never claimed again
    assert not provider.calls
    # A person re-drives it: fresh attempts, delivered once.
    assert await host.effects.retry(record.key)
    assert await host.effects.run_due(worker="w1") == 1
    assert provider.calls == {record.key: 1}
    delivered = await host.effects.get(record.key)
    assert delivered is not None and delivered.status == "delivered"


async def test_a_claim_parks_only_the_spent_effects_and_runs_the_others(
    outbox_store: LedgerStore,
) -> None:
    clock = Clock()
    provider = FakeProvider()
    host, _ = build(outbox_store, provider=provider, max_attempts=1, clock=clock, lease=LEASE)
    payload = {"booking_id": "bk_1", "amount_cents": 5}
    spent = host.effects.record("payments.refund", payload, tenant_id="acme", key=("spent",))
    fresh = host.effects.record("payments.refund", payload, tenant_id="acme", key=("fresh",))
    fresh = fresh.model_copy(update={"attempts": 0, "lease_until": None, "leased_by": None})
    async with outbox_store.transaction(wait=1) as tx:
        assert await tx.insert_effect(spent)
        assert await tx.insert_effect(fresh)
    clock.advance(LEASE + timedelta(seconds=1))
    assert await host.effects.run_due(worker="w1") == 2
    assert provider.calls == {fresh.key: 1}
    after = {r.key: r for r in await host.effects.list()}
    assert after[spent.key].status == "dead" and after[spent.key].attempts == 1
    assert after[fresh.key].status == "delivered" and after[fresh.key].attempts == 1


async def test_an_effect_written_under_a_lower_max_attempts_dies_of_its_real_error(
    outbox_store: LedgerStore,
) -> None:
    # The row keeps the limit it was written with; a deploy that raised max_attempts
    # applies to new rows. Its last attempt's failure is what the dead row says, never
    # "the last attempt never finished".
    clock = Clock()
    failing = FakeProvider(failures=100)
    old, _ = build(outbox_store, provider=failing, max_attempts=2, clock=clock, lease=LEASE)
    record = old.effects.record(
        "payments.refund", {"booking_id": "bk_1", "amount_cents": 5}, tenant_id="acme", key=("p",)
    )
    async with outbox_store.transaction(wait=1) as tx:
        assert await tx.insert_effect(record)
    clock.advance(LEASE + timedelta(seconds=1))
    new, _ = build(outbox_store, provider=failing, max_attempts=5, clock=clock, lease=LEASE)
    # Attempt 1 was the serving process's, which died; attempt 2, the row's last, fails.
    assert await new.effects.run_due(worker="w1") == 1
    dead = await new.effects.get(record.key)
    assert dead is not None and (dead.status, dead.attempts) == ("dead", 2)
    assert dead.last_error is not None and dead.last_error.startswith("ConnectionError")
    assert failing.calls == {record.key: 1}
