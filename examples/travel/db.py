"""The travel back office's own tables, in the same database as charter's ledger.

Handlers write through ``ctx.db`` — the connection of the call's ledger transaction — so
a booking, its claim and its stored outcome commit together or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

metadata = sa.MetaData()

trips = sa.Table(
    "travel_trips",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant_id", sa.String(200), nullable=False, index=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("destination", sa.String(200), nullable=False),
    sa.Column("nights", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False, default="planned"),
    sa.Column("created_at", sa.String(40), nullable=False),
)

bookings = sa.Table(
    "travel_bookings",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant_id", sa.String(200), nullable=False, index=True),
    sa.Column("trip_id", sa.String(40), nullable=False),
    sa.Column("supplier", sa.String(200), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("refunded_cents", sa.Integer, nullable=False, default=0),
)

memories = sa.Table(
    "travel_memories",
    metadata,
    sa.Column("tenant_id", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

payment_calls = sa.Table(
    "travel_payment_calls",
    metadata,
    # The fake payment provider's own record of refunds, keyed by the idempotency key of
    # charter's effect: a repeated delivery never refunds twice. ``calls`` counts how often
    # the provider was asked with the key.
    sa.Column("idempotency_key", sa.String(200), primary_key=True),
    sa.Column("booking_id", sa.String(40), nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("calls", sa.Integer, nullable=False, default=1),
)


def new_id(prefix: str) -> str:
    """A fresh id such as ``trp_5f0c…``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def now_iso() -> str:
    """The current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def trip_row(
    trip_id: str, tenant_id: str, name: str, destination: str, nights: int
) -> dict[str, Any]:
    """The row of a trip just created: planned, created now."""
    return {
        "id": trip_id,
        "tenant_id": tenant_id,
        "name": name,
        "destination": destination,
        "nights": nights,
        "status": "planned",
        "created_at": now_iso(),
    }


class TripService:
    """Reads and writes the travel tables for one tenant at a time."""

    def __init__(self, engine: AsyncEngine) -> None:
        """Use ``engine`` (the store's ``reader``) for reads made outside a call."""
        self.engine = engine

    @asynccontextmanager
    async def connect(self, db: AsyncConnection | None) -> AsyncIterator[AsyncConnection]:
        """Use the call's transaction when there is one, else a short read connection."""
        if db is not None:
            yield db
            return
        async with self.engine.connect() as conn:
            yield conn

    async def search(
        self, db: AsyncConnection | None, tenant_id: str, text: str | None, limit: int
    ) -> list[dict[str, Any]]:
        """Trips of a tenant whose name or destination contains ``text``."""
        query = sa.select(trips).where(trips.c.tenant_id == tenant_id)
        if text:
            pattern = f"%{text.lower()}%"
            query = query.where(
                sa.or_(
                    sa.func.lower(trips.c.name).like(pattern),
                    sa.func.lower(trips.c.destination).like(pattern),
                )
            )
        query = query.order_by(trips.c.created_at, trips.c.id).limit(limit)
        async with self.connect(db) as conn:
            return [dict(row._mapping) for row in await conn.execute(query)]

    async def get(
        self, db: AsyncConnection | None, tenant_id: str, trip_id: str
    ) -> dict[str, Any] | None:
        """One trip of a tenant (None when absent or another tenant's: no oracle)."""
        query = sa.select(trips).where(trips.c.id == trip_id, trips.c.tenant_id == tenant_id)
        async with self.connect(db) as conn:
            row = (await conn.execute(query)).first()
        return dict(row._mapping) if row is not None else None

    async def create(
        self, db: AsyncConnection, tenant_id: str, name: str, destination: str, nights: int
    ) -> dict[str, Any]:
        """Insert a trip and return it."""
        row = trip_row(new_id("trp"), tenant_id, name, destination, nights)
        await db.execute(trips.insert().values(**row))
        return row

    async def update(
        self, db: AsyncConnection, tenant_id: str, trip_id: str, **values: Any
    ) -> dict[str, Any] | None:
        """Update a trip of a tenant; None when it does not exist there."""
        result = await db.execute(
            trips.update()
            .where(trips.c.id == trip_id, trips.c.tenant_id == tenant_id)
            .values(**values)
        )
        if result.rowcount == 0:
            return None
        return await self.get(db, tenant_id, trip_id)

    async def tenants(self) -> list[str]:
        """Every tenant that has trips (for the admin tool)."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(trips.c.tenant_id).distinct().order_by(trips.c.tenant_id)
            )
        return [row.tenant_id for row in rows]

    async def booking(
        self, db: AsyncConnection | None, tenant_id: str, booking_id: str
    ) -> dict[str, Any] | None:
        """One booking of a tenant."""
        query = sa.select(bookings).where(
            bookings.c.id == booking_id, bookings.c.tenant_id == tenant_id
        )
        async with self.connect(db) as conn:
            row = (await conn.execute(query)).first()
        return dict(row._mapping) if row is not None else None

    async def refund(
        self, db: AsyncConnection, tenant_id: str, booking_id: str, amount_cents: int
    ) -> int:
        """Add to a booking's refunded amount; returns the new total refunded."""
        await db.execute(
            bookings.update()
            .where(bookings.c.id == booking_id, bookings.c.tenant_id == tenant_id)
            .values(refunded_cents=bookings.c.refunded_cents + amount_cents)
        )
        booking = await self.booking(db, tenant_id, booking_id)
        assert booking is not None
        return int(booking["refunded_cents"])


class PaymentProvider:
    """A fake external payment provider that honours idempotency keys (like Stripe)."""

    def __init__(self, engine: AsyncEngine) -> None:
        """Record refunds in the provider's own table."""
        self.engine = engine

    async def refund(self, idempotency_key: str, booking_id: str, amount_cents: int) -> bool:
        """Refund once per key; returns False when the key was already used (counted)."""
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    payment_calls.insert().values(
                        idempotency_key=idempotency_key,
                        booking_id=booking_id,
                        amount_cents=amount_cents,
                        calls=1,
                    )
                )
        except sa.exc.IntegrityError:
            async with self.engine.begin() as conn:
                await conn.execute(
                    payment_calls.update()
                    .where(payment_calls.c.idempotency_key == idempotency_key)
                    .values(calls=payment_calls.c.calls + 1)
                )
            return False
        return True

    async def calls(self, idempotency_key: str) -> int:
        """How many times the provider was asked with one key (0 for never)."""
        async with self.engine.connect() as conn:
            result = await conn.execute(
                sa.select(payment_calls.c.calls).where(
                    payment_calls.c.idempotency_key == idempotency_key
                )
            )
            return int(result.scalar_one_or_none() or 0)

    async def refunds(self, booking_id: str) -> int:
        """How many refunds the provider made for a booking."""
        async with self.engine.connect() as conn:
            result = await conn.execute(
                sa.select(sa.func.count())
                .select_from(payment_calls)
                .where(payment_calls.c.booking_id == booking_id)
            )
            return int(result.scalar_one())


class MemoryService:
    """Key/value memories per tenant (the delegable tools' data)."""

    def __init__(self, engine: AsyncEngine) -> None:
        """Use ``engine`` (the store's ``reader``) for reads made outside a call."""
        self.engine = engine

    async def recall(self, tenant_id: str, key: str | None) -> dict[str, str]:
        """A tenant's memories (one key, or all)."""
        query = sa.select(memories).where(memories.c.tenant_id == tenant_id)
        if key is not None:
            query = query.where(memories.c.key == key)
        async with self.engine.connect() as conn:
            rows = await conn.execute(query.order_by(memories.c.key))
        return {row.key: row.value for row in rows}

    async def update(self, db: AsyncConnection, tenant_id: str, key: str, value: str) -> None:
        """Set one memory."""
        await db.execute(
            memories.delete().where(memories.c.tenant_id == tenant_id, memories.c.key == key)
        )
        await db.execute(memories.insert().values(tenant_id=tenant_id, key=key, value=value))

    async def delete(self, db: AsyncConnection, tenant_id: str, key: str) -> bool:
        """Delete one memory; False when it did not exist."""
        result = await db.execute(
            memories.delete().where(memories.c.tenant_id == tenant_id, memories.c.key == key)
        )
        return bool(result.rowcount)


async def create_tables(engine: AsyncEngine) -> None:
    """Create the travel tables if they are missing."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)


DEMO_TRIPS = (
    ("acme", "trp_lisbon01", "Lisbon offsite", "Lisbon", 4),
    ("acme", "trp_kyoto001", "Kyoto research trip", "Kyoto", 7),
    ("globex", "trp_oslo0001", "Oslo sales visit", "Oslo", 2),
)

DEMO_BOOKINGS = (
    ("acme", "bkg_hotel001", "trp_lisbon01", "Hotel Alfama", 84_000),
    ("acme", "bkg_flight01", "trp_kyoto001", "Pacific Air", 132_500),
    ("globex", "bkg_train001", "trp_oslo0001", "Nordic Rail", 9_900),
)


async def seed_demo_data(engine: AsyncEngine) -> None:
    """Insert the demo trips and bookings once."""
    async with engine.begin() as conn:
        if (await conn.execute(sa.select(sa.func.count()).select_from(trips))).scalar_one():
            return
        for tenant_id, trip_id, name, destination, nights in DEMO_TRIPS:
            await conn.execute(
                trips.insert().values(**trip_row(trip_id, tenant_id, name, destination, nights))
            )
        for tenant_id, booking_id, trip_id, supplier, amount in DEMO_BOOKINGS:
            await conn.execute(
                bookings.insert().values(
                    id=booking_id,
                    tenant_id=tenant_id,
                    trip_id=trip_id,
                    supplier=supplier,
                    amount_cents=amount,
                    refunded_cents=0,
                )
            )
