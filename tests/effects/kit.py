"""A travel-shaped kit for effect tests: ``bookings.refund`` stages ``payments.refund``,
and a fake payment provider counts calls per idempotency key (it can be told to fail)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr
from tests.builders import Clock, booking_policy, risk

import charter
from charter import (
    Completed,
    ErrorCode,
    Principal,
    Registry,
    ToolContext,
    ToolError,
    tool,
)
from charter.effects import EffectRecord
from charter.host import Host
from charter.ledger import LedgerStore

WRITE = risk("refund", reversible=False)
AGENT = Principal(subject="agent-ada", tenant_id="acme", scopes=frozenset({"bookings:refund"}))
SAME_SUBJECT_OTHER_TENANT = Principal(
    subject="agent-ada", tenant_id="globex", scopes=frozenset({"bookings:refund"})
)


class RefundRequest(BaseModel):
    booking_id: str
    amount_cents: int
    effects: int = 1
    fail: bool = False


class RefundPayload(BaseModel):
    booking_id: str
    amount_cents: int


class Refund(BaseModel):
    booking_id: str
    refunded_cents: int


class FakeProvider:
    """Counts calls per idempotency key; fails the first ``failures`` calls of each key."""

    def __init__(self, failures: int = 0) -> None:
        self.calls: Counter[str] = Counter()
        self.refunds: dict[str, RefundPayload] = {}
        self.failures = failures

    async def refund(self, payload: RefundPayload, key: str) -> None:
        self.calls[key] += 1
        if self.calls[key] <= self.failures:
            raise ConnectionError(f"provider unavailable (call {self.calls[key]})")
        self.refunds.setdefault(key, payload)


def build(
    store: LedgerStore | None = None,
    *,
    provider: FakeProvider | None = None,
    max_attempts: int = 4,
    lease: timedelta = timedelta(seconds=60),
    **options: Any,
) -> tuple[Host, FakeProvider]:
    """A host with ``bookings.refund`` and the ``payments.refund`` effect."""
    provider = provider or FakeProvider()
    registry = Registry()

    @charter.effect("payments.refund", max_attempts=max_attempts, backoff=timedelta(milliseconds=1))
    async def refund_effect(payload: RefundPayload, key: str) -> None:
        await provider.refund(payload, key)

    registry.register_effect(refund_effect)

    @tool(
        name="bookings.refund",
        tier="write",
        risk_policy=WRITE,
        required_scopes=["bookings:refund"],
        action_policy=booking_policy(),
    )
    async def refund(args: RefundRequest, ctx: ToolContext) -> Refund:
        """Refund part of a booking."""
        for _ in range(args.effects):
            ctx.effect(
                "payments.refund",
                RefundPayload(booking_id=args.booking_id, amount_cents=args.amount_cents),
            )
        if args.fail:
            raise ToolError(ErrorCode.INVALID_INPUT, "The booking cannot be refunded.")
        return Refund(booking_id=args.booking_id, refunded_cents=args.amount_cents)

    registry.register(refund)
    return Host(registry, store=store, effect_lease=lease, **options), provider


async def refund(
    host: Host,
    *,
    request_id: str | None = None,
    principal: Principal = AGENT,
    **arguments: Any,
) -> Any:
    """Call ``bookings.refund`` with a request id (a fresh one unless given)."""
    payload: dict[str, Any] = {"booking_id": "bk_1", "amount_cents": 500, **arguments}
    payload["_charter"] = {"requestId": request_id or str(uuid.uuid4())}
    return await host.invoke("bookings.refund", payload, principal)


class SecretPayload(BaseModel):
    card: SecretStr


async def reuse_after_expiry(
    store: LedgerStore | None = None,
) -> tuple[list[EffectRecord], FakeProvider]:
    """A call whose effect goes dead, its ledger entry expired and pruned, then a new call
    reusing the request id; the request's effects (oldest first) and the provider.

    The old effect is still in the outbox (dead effects are never pruned), so a key
    derived from the request id alone would collide with it.
    """
    provider = FakeProvider(failures=10**9)
    clock = Clock()
    retention = timedelta(days=1)
    host, _ = build(store, provider=provider, max_attempts=1, clock=clock, retention=retention)
    rid = str(uuid.uuid4())
    first = await refund(host, request_id=rid, amount_cents=100)
    assert isinstance(first, Completed), first
    [dead] = await host.effects.list(request_id=rid)
    assert dead.status == "dead"
    clock.now += retention + timedelta(minutes=1)
    assert await host.store.prune(clock.now) == 1  # the ledger entry, not the dead effect
    provider.failures = 0
    second = await refund(host, request_id=rid, amount_cents=200)
    assert isinstance(second, Completed) and not second.replayed, second
    records = await host.effects.list(request_id=rid)
    return sorted(records, key=lambda r: r.created_at), provider
