"""Effects through ``Host.invoke`` on the in-memory store: staged in the call's transaction,
keyed per tenant, caller, request and place, delivered after commit, retried by a worker
pass, parked dead after the limit and re-driven."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel
from tests.builders import Clock
from tests.effects.kit import (
    AGENT,
    SAME_SUBJECT_OTHER_TENANT,
    FakeProvider,
    SecretPayload,
    build,
    refund,
    reuse_after_expiry,
)

import charter
from charter import Completed, ConfigurationError, ErrorCode, Failed, Registry
from charter.effects import EffectRecord, effect_key
from charter.ledger import MemoryStore

pytestmark = pytest.mark.anyio


async def test_an_effect_commits_with_the_call_and_is_delivered_once_after_commit() -> None:
    host, provider = build()
    rid = str(uuid.uuid4())
    outcome = await refund(host, request_id=rid)
    assert isinstance(outcome, Completed)
    [record] = await host.effects.list()
    assert record.status == "delivered"
    assert record.request_id == rid and record.tool == "bookings.refund"
    assert record.payload == {"booking_id": "bk_1", "amount_cents": 500}
    assert provider.calls == {record.key: 1}
    assert provider.refunds[record.key].amount_cents == 500


async def test_a_replayed_request_stages_nothing_and_calls_the_provider_no_more() -> None:
    host, provider = build()
    rid = str(uuid.uuid4())
    await refund(host, request_id=rid)
    replay = await refund(host, request_id=rid)
    assert isinstance(replay, Completed) and replay.replayed
    assert len(await host.effects.list()) == 1
    assert sum(provider.calls.values()) == 1


async def test_a_failed_call_rolls_its_effects_back_and_the_provider_is_never_called() -> None:
    host, provider = build()
    outcome = await refund(host, fail=True)
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.INVALID_INPUT
    assert await host.effects.list() == []
    assert not provider.calls


async def test_the_key_derives_from_tenant_caller_request_claim_time_name_and_place() -> None:
    clock = Clock()
    host, _ = build(clock=clock)
    rid = str(uuid.uuid4())
    await refund(host, request_id=rid, effects=2)
    # A second tenant's caller with the same subject reusing the request id.
    await refund(host, request_id=rid, principal=SAME_SUBJECT_OTHER_TENANT)
    records = await host.effects.list()
    keys = {r.key for r in records}
    assert len(keys) == 3
    acme = sorted((r for r in records if r.tenant_id == "acme"), key=lambda r: r.seq)
    assert [r.seq for r in acme] == [0, 1]
    claimed = clock.now.isoformat()  # the ledger entry's creation time
    assert acme[0].key == effect_key("acme", "acme/agent-ada", rid, claimed, "payments.refund", "0")
    assert acme[0].key.startswith("eff_")


async def test_a_request_id_reused_after_expiry_keys_its_effect_anew_on_the_memory_store() -> None:
    (old, new), provider = await reuse_after_expiry()
    assert old.key != new.key
    assert (old.status, old.payload["amount_cents"]) == ("dead", 100)
    assert (new.status, new.payload["amount_cents"]) == ("delivered", 200)
    assert provider.refunds[new.key].amount_cents == 200


async def test_an_effect_key_already_in_the_outbox_fails_the_call_and_rolls_it_back() -> None:
    clock = Clock()
    store = MemoryStore()
    host, provider = build(store, clock=clock)
    rid = str(uuid.uuid4())
    key = effect_key("acme", "acme/agent-ada", rid, clock.now.isoformat(), "payments.refund", "0")
    held = EffectRecord(
        key=key,
        tenant_id="acme",
        name="payments.refund",
        payload={},
        status="dead",
        max_attempts=1,
        next_attempt_at=clock.now,
        created_at=clock.now,
        updated_at=clock.now,
    )
    store.effects[key] = held
    outcome = await refund(host, request_id=rid)
    assert isinstance(outcome, Failed) and outcome.code == ErrorCode.IDEMPOTENCY_CONFLICT
    assert outcome.meta is not None
    assert outcome.meta["reason"] == "effect_key_in_use"
    assert outcome.meta["effectKey"] == key
    assert store.entries == {}  # rolled back: the request id is free
    assert store.effects == {key: held}
    assert not provider.calls


async def test_a_failing_provider_is_retried_by_a_worker_pass_then_delivered() -> None:
    host, provider = build(provider=FakeProvider(failures=3))
    await refund(host)
    [record] = await host.effects.list()
    assert record.status == "pending" and record.attempts == 1
    assert record.last_error is not None and "ConnectionError" in record.last_error
    while (await host.effects.list())[0].status == "pending":
        await host.effects.work(once=True)
    [record] = await host.effects.list()
    assert record.status == "delivered"
    assert provider.calls[record.key] == 4  # three failures, then the delivery
    actions = [e.action for e in await host.audit.events(tenant="acme")]
    assert actions.count("effect.retried") == 3
    assert actions.count("effect.delivered") == 1


async def test_an_always_failing_effect_is_parked_dead_then_redriven() -> None:
    provider = FakeProvider(failures=10**9)
    host, _ = build(provider=provider, max_attempts=3)
    await refund(host)
    while (await host.effects.list())[0].status == "pending":
        await host.effects.work(once=True)
    [record] = await host.effects.list()
    assert record.status == "dead" and record.attempts == 3
    assert provider.calls[record.key] == 3
    assert await host.effects.work(once=True) == 0  # dead effects are not claimed
    assert "effect.dead" in [e.action for e in await host.audit.events(tenant="acme")]
    provider.failures = 0
    assert await host.effects.retry(record.key)
    assert not await host.effects.retry(record.key)  # pending again: nothing to re-drive
    await host.effects.work(once=True)
    [record] = await host.effects.list()
    assert record.status == "delivered"
    assert provider.refunds[record.key].booking_id == "bk_1"


async def test_a_discarded_effect_is_kept_and_never_run() -> None:
    host, provider = build(provider=FakeProvider(failures=1))
    await refund(host)
    [record] = await host.effects.list()
    assert await host.effects.discard(record.key)
    assert await host.effects.work(once=True) == 0
    [record] = await host.effects.list()
    assert record.status == "discarded"
    assert provider.calls[record.key] == 1


async def test_pruning_deletes_finished_effects_and_keeps_dead_ones_on_the_memory_store() -> None:
    provider = FakeProvider(failures=10**9)
    host, _ = build(provider=provider, max_attempts=1)
    await refund(host)  # one attempt: dead
    provider.failures = 0
    await refund(host)  # delivered
    await refund(host)  # delivered
    store = host.store
    assert isinstance(store, MemoryStore)
    later = datetime.now(UTC) + timedelta(days=1)
    assert await store.prune_effects(later) == 2
    [dead] = await host.effects.list()
    assert dead.status == "dead"
    assert await host.effects.discard(dead.key)
    assert await store.prune_effects(datetime.now(UTC) - timedelta(days=1)) == 0
    assert await store.prune_effects(later) == 1
    assert await host.effects.list() == []


async def test_a_live_lease_keeps_workers_off_and_an_expired_one_lets_them_in() -> None:
    now = [datetime.now(UTC)]
    store = MemoryStore()
    host, provider = build(store, provider=FakeProvider(failures=10**9), max_attempts=5)
    host.effects._clock = lambda: now[0]
    # As if the serving process died after commit: the row is leased to it, unrun.
    record = host.effects.record(
        "payments.refund", {"booking_id": "bk_9", "amount_cents": 1}, tenant_id="acme", key=("c",)
    )
    async with store.transaction(wait=1) as tx:
        await tx.insert_effect(record)
    assert await host.effects.work(once=True) == 0
    now[0] += timedelta(seconds=61)
    provider.failures = 0
    assert await host.effects.work(once=True) == 1
    assert provider.calls[record.key] == 1


async def test_host_code_enqueues_effects_in_its_own_transaction() -> None:
    host, provider = build()
    payload = {"booking_id": "bk_2", "amount_cents": 7}
    async with host.effects.transaction() as batch:
        first = await batch.enqueue(
            "payments.refund", payload, tenant_id="acme", key=("approval", "ap_1", "granted")
        )
    async with host.effects.transaction() as batch:
        again = await batch.enqueue(
            "payments.refund", payload, tenant_id="acme", key=("approval", "ap_1", "granted")
        )
    assert first is not None and again is None  # the same key enqueues once
    assert provider.calls == {first.key: 1}


async def test_a_rolled_back_host_transaction_enqueues_nothing() -> None:
    host, provider = build()
    with pytest.raises(RuntimeError):
        async with host.effects.transaction() as batch:
            await batch.enqueue(
                "payments.refund",
                {"booking_id": "b", "amount_cents": 1},
                tenant_id="acme",
                key=("x",),
            )
            raise RuntimeError("the approval write failed")
    assert await host.effects.list() == []
    assert not provider.calls


async def test_an_unknown_effect_name_is_refused_naming_a_near_one() -> None:
    host, _ = build()
    async with host.effects.transaction() as batch:
        with pytest.raises(ConfigurationError, match=r"Did you mean 'payments\.refund'"):
            await batch.enqueue("payments.refnud", {}, tenant_id="acme", key=("k",))
    with pytest.raises(ConfigurationError, match="already registered"):
        host.registry.register_effect(host.registry.effect("payments.refund"))
    assert Registry().effects() == []


async def test_bad_effect_declarations_are_refused_at_definition() -> None:
    def sync(payload: object, key: str) -> None: ...

    async def one(payload: object) -> None: ...

    async def ok(payload: object, key: str) -> None: ...

    with pytest.raises(ConfigurationError, match="async def"):
        charter.effect("x.y")(sync)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="two parameters"):
        charter.effect("x.y")(one)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_attempts"):
        charter.effect("x.y", max_attempts=0)(ok)
    # Seconds as a number, as a tool's timeout takes them: told what to write instead.
    with pytest.raises(ConfigurationError, match=r"timeout must be a timedelta, e\.g\. timeout="):
        charter.effect("x.y", timeout=5)(ok)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="backoff must be a timedelta"):
        charter.effect("x.y", backoff=0.5)(ok)  # type: ignore[call-overload]
    assert charter.effect(ok).name == "ok"


async def test_a_payload_that_is_not_json_is_refused_and_the_call_rolls_back() -> None:
    host, _ = build()
    async with host.effects.transaction() as batch:
        with pytest.raises(ConfigurationError, match="JSON data or a pydantic model"):
            await batch.enqueue("payments.refund", {"when": object()}, tenant_id="acme", key=("k",))
        with pytest.raises(ConfigurationError, match="JSON data"):
            await batch.enqueue("payments.refund", float("nan"), tenant_id="acme", key=("k",))
    assert await host.effects.list() == []


async def test_secret_fields_are_stored_masked() -> None:
    host, _ = build()
    async with host.effects.transaction() as batch:
        record = await batch.enqueue(
            "payments.refund",
            SecretPayload(card="4242424242424242"),
            tenant_id="acme",
            key=("secret",),
        )
    assert record is not None
    assert "4242" not in str((await host.effects.get(record.key)).payload)  # type: ignore[union-attr]


class _Note(BaseModel):
    text: str


async def test_ctx_effect_in_an_unledgered_call_is_a_clear_error() -> None:
    registry = Registry()

    async def note(args: _Note, ctx: charter.ToolContext) -> _Note:
        ctx.effect("payments.refund", {})
        return args

    registry.register(
        charter.define_tool(
            name="notes.read",
            description="Read a note.",
            input_schema=_Note,
            output_schema=_Note,
            handler=note,
            tier="read",
        )
    )
    outcome = await charter.Host(registry).invoke("notes.read", {"text": "x"}, AGENT)
    assert isinstance(outcome, Failed)
