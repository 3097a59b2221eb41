"""The effect battery's parts: a durable fake payment provider that counts calls per
idempotency key in its own table (so every process's calls are counted, and a crash loses
none), and a host whose ``bookings.refund`` stages ``payments.refund`` effects.

Imported by ``test_battery_effects.py`` and by ``effects_child.py`` (run by path; it puts
the repository root on ``sys.path`` for ``tests.builders``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine
from tests.builders import risk

import charter
from charter import ActionPolicy, Principal, Registry, ToolContext
from charter.host import Host
from charter.ledger import FaultHook
from charter.store import SqlStore

AGENT = Principal(subject="agent-ada", tenant_id="acme", scopes=frozenset({"bookings:refund"}))

provider_metadata = sa.MetaData()
provider_calls = sa.Table(
    "battery_provider_calls",
    provider_metadata,
    sa.Column("idempotency_key", sa.Text, primary_key=True),
    sa.Column("calls", sa.Integer, nullable=False),
)


class Provider:
    """A payment provider outside charter: counts every call per key in its own table.

    The first ``fail_first`` calls of each key fail (after being counted), as an outage
    the provider recovers from would.
    """

    def __init__(self, engine: AsyncEngine, *, fail_first: int = 0) -> None:
        self.engine = engine
        self.fail_first = fail_first

    async def refund(self, key: str) -> None:
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        statement = (
            insert(provider_calls)
            .values(idempotency_key=key, calls=1)
            .on_conflict_do_update(
                index_elements=["idempotency_key"],
                set_={"calls": provider_calls.c.calls + 1},
            )
            .returning(provider_calls.c.calls)
        )
        async with self.engine.begin() as conn:
            calls = int((await conn.execute(statement)).scalar_one())
        if calls <= self.fail_first:
            raise ConnectionError(f"the provider is down (call {calls} with this key)")

    async def calls(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(sa.select(provider_calls))
            return {row.idempotency_key: row.calls for row in rows}


class RefundRequest(BaseModel):
    booking_id: str
    amount_cents: int
    effects: int = 1


class Refund(BaseModel):
    booking_id: str
    keys: list[str]


async def effects_host(
    store: SqlStore,
    *,
    fail_first: int = 0,
    max_attempts: int = 5,
    lease: timedelta = timedelta(seconds=60),
    fault_hook: FaultHook | None = None,
) -> tuple[Host, Provider]:
    """A host on ``store`` with ``bookings.refund`` and the ``payments.refund`` effect."""
    async with store.engine.begin() as conn:
        await conn.run_sync(provider_metadata.create_all)
    provider = Provider(store.engine, fail_first=fail_first)
    registry = Registry()

    @charter.effect("payments.refund", max_attempts=max_attempts, backoff=timedelta(milliseconds=1))
    async def refund_at_provider(payload: dict[str, Any], key: str) -> None:
        await provider.refund(key)

    registry.register_effect(refund_at_provider)

    @charter.tool(
        name="bookings.refund",
        tier="write",
        risk_policy=risk("refund", reversible=False),
        required_scopes=["bookings:refund"],
        action_policy=ActionPolicy(target_type="booking", command_target_field="booking_id"),
    )
    async def refund(args: RefundRequest, ctx: ToolContext) -> Refund:
        """Refund a booking at the payment provider."""
        keys = [
            ctx.effect("payments.refund", {"booking_id": args.booking_id, "part": part})
            for part in range(args.effects)
        ]
        return Refund(booking_id=args.booking_id, keys=keys)

    registry.register(refund)
    host = Host(registry, store=store, effect_lease=lease, fault_hook=fault_hook)
    return host, provider
