"""The SQL of rate-limit buckets: spend in one statement, spend a charge, refund, list, prune.

Spending is one ``INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING``: a new bucket is
inserted spent; an existing one moves its arrival time only when the spend fits in the
window, and returns no row when it does not. PostgreSQL locks the row for the update and
re-checks the condition on the latest version, and SQLite has one writer at a time, so
concurrent spenders never lose an update and never overspend.

A ledgered call spends its charge (``spend_all``) on its ledger transaction's connection,
before that transaction begins, in a transaction of its own: the bucket is never locked
while a handler runs, and the spend needs no connection of its own.

On PostgreSQL that costs no round trip: the spend waits to go in one pipeline with the
ledger transaction's ``BEGIN`` and claim (``_budget_postgres``). Its transaction commits
without waiting for its WAL to reach the disk: a database crash can forget the last few
spends, so a budget may allow a few more calls once; waiting for the flush would cost
every limited call a second disk flush besides its ledger's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from ..ledger.budgets import TOLERANCE, Bucket, BucketUsage
from ._pipelined import Raw, raw
from ._schema import budgets
from ._statements import insert
from ._types import check_storable, is_storable

__all__ = (
    "arrival",
    "prune",
    "refund",
    "refund_statement",
    "spend",
    "spend_all",
    "spend_parameters",
    "spend_raw",
    "spend_statement",
    "usage",
)

_b = budgets.c


async def spend(conn: AsyncConnection, bucket: Bucket, cost: float, now: float) -> bool:
    """Spend ``cost`` seconds of ``bucket`` if it fits; whether it did."""
    parameters = spend_parameters(bucket, cost, now)
    row = (await conn.execute(spend_statement(conn.dialect.name), parameters)).first()
    return row is not None


def spend_parameters(bucket: Bucket, cost: float, now: float) -> dict[str, Any]:
    """The values of ``spend_statement`` spending ``cost`` seconds of ``bucket`` at ``now``."""
    return {
        "bucket_key": bucket.key,
        "tool": bucket.tool,
        "limit_name": bucket.limit,
        "holder": bucket.holder,
        "tenant": bucket.tenant,
        "interval_seconds": bucket.interval,
        "window_seconds": bucket.window,
        "now": now,
        "cost": cost,
        "spent": now + cost,
        "latest": now + bucket.window + TOLERANCE,
    }


def spend_raw(conn: AsyncConnection, bucket: Bucket, cost: float, now: float) -> Raw:
    """PostgreSQL: ``raw(conn, spend_statement(…), spend_parameters(…))``, cheaper per call.

    SQLAlchemy's parameter processing costs a limited call more CPU than its statement's
    round trip shares. The spend's only bind processors check its texts (``SafeText``) and
    its other parameters are constants, so the texts are checked here and the constants
    taken from one ``raw`` made once per dialect.

    Raises:
        UnstorableValue: A text a database cannot hold (as ``raw`` would).
    """
    # The key is made of the tool, the limit and the holder, escaped: storable when they are.
    if not is_storable(bucket.tool + bucket.limit + bucket.holder + bucket.tenant):
        for text in (bucket.tool, bucket.limit, bucket.holder, bucket.tenant):
            check_storable(text)
    sql, constants = _spend_template(conn)
    return Raw(sql, constants | spend_parameters(bucket, cost, now))


def _spend_template(conn: AsyncConnection) -> tuple[str, dict[str, Any]]:
    """The spend's SQL for ``conn``'s dialect, and its parameters that are constants."""
    dialect = conn.dialect
    kind = (type(dialect), dialect.paramstyle)
    template = _SPEND_TEMPLATES.get(kind)
    if template is None:
        sample = spend_parameters(_SAMPLE, 1.0, 0.0)
        made = raw(conn, spend_statement(dialect.name), sample)
        assert made.parameters is not None
        constants = {k: v for k, v in made.parameters.items() if k not in sample}
        template = _SPEND_TEMPLATES[kind] = (made.sql, constants)
    return template


_SAMPLE = Bucket(tool="t", limit="l", holder="h", tenant="", interval=1.0, window=1.0)
_SPEND_TEMPLATES: dict[tuple[type[Dialect], str], tuple[str, dict[str, Any]]] = {}
"""``_spend_template`` by dialect class and parameter style (all its SQL depends on)."""


async def spend_all(
    conn: AsyncConnection, spends: Sequence[tuple[Bucket, float]], now: float
) -> Bucket | None:
    """Spend every bucket, committed before ``conn`` does anything else, or none of them.

    Returns the bucket that had no room (what was spent before it is given back), or None.
    The spends share one short write transaction (SQLite; PostgreSQL defers its spend to
    the ledger transaction's first round trip, ``_budget_postgres``).
    """
    refused: Bucket | None = None
    async with conn.begin():
        for index, (bucket, cost) in enumerate(spends):
            if not await spend(conn, bucket, cost, now):
                refused = bucket
                for done, done_cost in spends[:index]:
                    await refund(conn, done, done_cost)
                break
    return refused


@functools.cache
def spend_statement(dialect: str) -> sa.Executable:
    """The spend's statement for ``dialect``, built once: its values are bound parameters.

    Building it per call (coercing each value, then computing its cache key) cost more
    CPU than the round trip it makes.
    """
    latest = sa.func.greatest if dialect == "postgresql" else sa.func.max
    now = sa.bindparam("now", type_=sa.Double)
    moved = latest(_b.arrival, now) + sa.bindparam("cost", type_=sa.Double)
    statement = insert(dialect, budgets).values(
        bucket_key=sa.bindparam("bucket_key"),
        tool=sa.bindparam("tool"),
        limit_name=sa.bindparam("limit_name"),
        holder=sa.bindparam("holder"),
        tenant=sa.bindparam("tenant"),
        arrival=sa.bindparam("spent", type_=sa.Double) + _without_flush(dialect),
        interval_seconds=sa.bindparam("interval_seconds", type_=sa.Double),
        window_seconds=sa.bindparam("window_seconds", type_=sa.Double),
    )
    statement = statement.on_conflict_do_update(
        index_elements=[_b.bucket_key],
        # The declaration may have changed since the row was written: keep it current.
        set_={
            "arrival": moved,
            "interval_seconds": sa.bindparam("interval_seconds", type_=sa.Double),
            "window_seconds": sa.bindparam("window_seconds", type_=sa.Double),
        },
        where=moved <= sa.bindparam("latest", type_=sa.Double),
    )
    return statement.returning(_b.arrival)


async def arrival(conn: AsyncConnection, bucket: Bucket) -> float | None:
    """The bucket's arrival time, or None."""
    value = await conn.scalar(sa.select(_b.arrival).where(_b.bucket_key == bucket.key))
    return float(value) if value is not None else None


async def refund(conn: AsyncConnection, bucket: Bucket, cost: float) -> None:
    """Move the bucket's arrival time back by ``cost`` seconds."""
    relaxed = _without_flush(conn.dialect.name)
    await conn.execute(
        sa.update(budgets)
        .where(_b.bucket_key == bucket.key)
        .values(arrival=_b.arrival - sa.literal(cost, sa.Double) + relaxed)
    )


@functools.cache
def refund_statement(dialect: str) -> sa.Executable:
    """Give ``cost`` seconds back to the bucket ``key`` (bound parameters), built once."""
    cost = sa.bindparam("cost", type_=sa.Double)
    return (
        sa.update(budgets)
        .where(_b.bucket_key == sa.bindparam("key"))
        .values(arrival=_b.arrival - cost + _without_flush(dialect))
    )


async def usage(conn: AsyncConnection, now: float, tenant: str | None) -> list[BucketUsage]:
    """The buckets not full again at ``now``, by key."""
    statement = sa.select(budgets).where(_b.arrival > now).order_by(_b.bucket_key)
    if tenant is not None:
        statement = statement.where(_b.tenant == tenant)
    return [_usage(row._mapping) for row in await conn.execute(statement)]


async def prune(conn: AsyncConnection, now: float) -> int:
    """Delete the buckets full again at ``now``; how many."""
    result = await conn.execute(sa.delete(budgets).where(_b.arrival <= now))
    return result.rowcount


def _without_flush(dialect: str) -> sa.ColumnElement[float]:
    """Zero; on PostgreSQL it also lets the statement's transaction skip the disk flush.

    A value the statement computes, so turning the flush off costs no round trip.
    """
    if dialect != "postgresql":
        return sa.literal(0.0, sa.Double)
    relaxed = sa.func.set_config("synchronous_commit", "off", sa.true())
    return sa.cast(sa.func.length(relaxed) * 0, sa.Double)


def _usage(row: Any) -> BucketUsage:
    bucket = Bucket(
        tool=row["tool"],
        limit=row["limit_name"],
        holder=row["holder"],
        tenant=row["tenant"],
        interval=float(row["interval_seconds"]),
        window=float(row["window_seconds"]),
    )
    return BucketUsage(bucket=bucket, arrival=float(row["arrival"]))
