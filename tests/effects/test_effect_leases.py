"""The fast path's lease: a handler's effects are leased from when they are written, just
before the commit, not from when the handler staged them; and each effect of a slow batch
is leased again when its turn comes, or left to the worker that claimed it meanwhile.
Checked by a rival worker claiming from inside the effect function: while the fast path
runs an effect, no worker can take it."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import Clock, risk

import charter
from charter import Completed, Principal, Registry, ToolContext, tool
from charter.effects import EffectRecord
from charter.host import Host
from charter.ledger import LedgerStore

pytestmark = pytest.mark.anyio

LEASE = timedelta(seconds=60)
"""The host's effect lease; the effect's timeout is the default 30 s."""
SENDER = Principal(subject="agent-ada", tenant_id="acme", scopes=frozenset({"mail:send"}))


class SendBatch(BaseModel):
    count: int = 1
    work_seconds: float = 0


class Sent(BaseModel):
    keys: list[str]


Hook = Callable[[int, str], Awaitable[None]]


class Mailer:
    """A host whose ``mail.send_batch`` stages ``count`` mails, then works ``work_seconds``
    more on the test's clock; ``on_send(n, key)`` runs inside each mail's delivery."""

    def __init__(self, store: LedgerStore, on_send: Hook) -> None:
        self.clock = Clock()
        self.store = store
        self.sent: Counter[int] = Counter()
        registry = Registry()

        @charter.effect("mail.send", max_attempts=5)
        async def send(payload: dict[str, Any], key: str) -> None:
            self.sent[payload["n"]] += 1
            await on_send(payload["n"], key)

        @tool(
            name="mail.send_batch",
            tier="write",
            risk_policy=risk("email"),
            required_scopes=["mail:send"],
        )
        async def send_batch(args: SendBatch, ctx: ToolContext) -> Sent:
            """Stage mails, then keep working."""
            keys = [ctx.effect("mail.send", {"n": n}) for n in range(args.count)]
            self.clock.advance(timedelta(seconds=args.work_seconds))
            return Sent(keys=keys)

        registry.register_effect(send)
        registry.register(send_batch)
        self.host = Host(registry, store=store, clock=self.clock, effect_lease=LEASE)

    async def call(self, **arguments: Any) -> list[str]:
        payload = {**arguments, "_charter": {"requestId": str(uuid.uuid4())}}
        outcome = await self.host.invoke("mail.send_batch", payload, SENDER)
        assert isinstance(outcome, Completed) and isinstance(outcome.output, dict), outcome
        keys = outcome.output["keys"]
        assert isinstance(keys, list)
        return [str(key) for key in keys]

    async def rival_claims(self) -> list[EffectRecord]:
        """What a worker running beside the server claims right now."""
        now = self.clock()
        return await self.host.effects.store.claim_effects(
            now=now, lease_until=now + LEASE, worker="rival", limit=10
        )

    async def row(self, key: str) -> EffectRecord:
        found = await self.host.effects.get(key)
        assert found is not None
        return found


async def test_a_handler_working_past_the_lease_after_staging_commits_a_held_effect(
    outbox_store: LedgerStore,
) -> None:
    rivals: list[EffectRecord] = []

    async def send(n: int, key: str) -> None:
        rivals.extend(await mailer.rival_claims())

    mailer = Mailer(outbox_store, send)
    [key] = await mailer.call(work_seconds=90)  # staged, then 90 s more work (lease 60 s)
    assert rivals == []  # the row committed leased to the fast path
    row = await mailer.row(key)
    assert (row.status, row.attempts) == ("delivered", 1)
    assert mailer.sent == {0: 1}


async def test_a_later_effect_of_a_slow_batch_is_leased_again_when_its_turn_comes(
    outbox_store: LedgerStore,
) -> None:
    rivals: list[EffectRecord] = []

    async def send(n: int, key: str) -> None:
        # A slow provider on the host's clock (the timeout counts the event loop's): the
        # first takes 50 s, the second 20 s, ending 70 s after the commit's 60 s lease.
        mailer.clock.advance(timedelta(seconds=50 if n == 0 else 20))
        rivals.extend(await mailer.rival_claims())

    mailer = Mailer(outbox_store, send)
    keys = await mailer.call(count=2)
    assert rivals == []
    for key in keys:
        row = await mailer.row(key)
        assert (row.status, row.attempts, row.leased_by) == ("delivered", 1, None)
    assert mailer.sent == {0: 1, 1: 1}


async def test_an_effect_a_worker_claimed_before_its_turn_is_left_to_that_worker(
    outbox_store: LedgerStore,
) -> None:
    taken: list[EffectRecord] = []

    async def send(n: int, key: str) -> None:
        if n == 0:  # so slow that every lease of the batch runs out and a worker steps in
            mailer.clock.advance(LEASE + timedelta(seconds=1))
            taken.extend(await mailer.rival_claims())

    mailer = Mailer(outbox_store, send)
    first, second = await mailer.call(count=2)
    assert {r.key for r in taken} == {first, second}
    assert mailer.sent == {0: 1}  # the fast path never ran the second beside the worker
    row = await mailer.row(second)
    assert (row.status, row.attempts, row.leased_by) == ("pending", 2, "rival")


async def test_only_the_holder_of_a_pending_effect_renews_its_lease(
    outbox_store: LedgerStore,
) -> None:
    mailer = Mailer(outbox_store, lambda n, key: _nothing())
    store = mailer.host.effects.store
    record = mailer.host.effects.record("mail.send", {"n": 0}, tenant_id="acme", key=("r",))
    async with outbox_store.transaction(wait=1) as tx:
        assert await tx.insert_effect(record)
    owner, now = mailer.host.effects.owner, mailer.clock()
    later = now + 2 * LEASE
    assert not await store.renew_effect(record.key, worker="rival", lease_until=later, now=now)
    assert await store.renew_effect(record.key, worker=owner, lease_until=later, now=now)
    assert (await mailer.row(record.key)).lease_until == later
    assert await mailer.host.effects.discard(record.key)
    assert not await store.renew_effect(record.key, worker=owner, lease_until=later, now=now)
    assert not await store.renew_effect("eff_unknown", worker=owner, lease_until=later, now=now)


async def _nothing() -> None:
    return None


async def test_an_attempt_never_runs_past_its_lease(outbox_store: LedgerStore) -> None:
    # The effect's timeout (30 s) outlasts the host's lease (half a second): an attempt
    # still running when its lease ends would overlap the one a worker then starts, so it
    # is cut off as timed out, and the effect stays pending for its next attempt.
    finished: list[str] = []
    registry = Registry()

    @charter.effect("mail.send", max_attempts=5)
    async def send(payload: dict[str, Any], key: str) -> None:
        await anyio.sleep(5)
        finished.append(key)

    @tool(
        name="mail.send_one", tier="write", risk_policy=risk("email"), required_scopes=["mail:send"]
    )
    async def send_one(args: SendBatch, ctx: ToolContext) -> Sent:
        """Stage one mail."""
        return Sent(keys=[ctx.effect("mail.send", {"n": 0})])

    registry.register_effect(send)
    registry.register(send_one)
    host = Host(registry, store=outbox_store, effect_lease=timedelta(seconds=0.5))
    payload = {"_charter": {"requestId": str(uuid.uuid4())}}
    with anyio.fail_after(4):  # the attempt would take 5 s
        outcome = await host.invoke("mail.send_one", payload, SENDER)
    assert isinstance(outcome, Completed) and isinstance(outcome.output, dict), outcome
    keys = outcome.output["keys"]
    assert isinstance(keys, list) and len(keys) == 1
    row = await host.effects.get(str(keys[0]))
    assert row is not None and (row.status, row.attempts) == ("pending", 1)
    assert row.last_error is not None and row.last_error.startswith("TimeoutError")
    assert finished == []
