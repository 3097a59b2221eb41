"""A ledgered call's spend on PostgreSQL: one simple query, on the driver's connection.

``spend_all_then_begin`` sends ``BEGIN; SET LOCAL synchronous_commit = off; INSERT …;
COMMIT; BEGIN`` (one ``INSERT … ON CONFLICT DO UPDATE … WHERE <fits> RETURNING`` per
bucket) as one message: the spend commits in a transaction of its own, and the last
``BEGIN`` opens the ledger transaction, which psycopg would otherwise begin with a round
trip of its own before the transaction's first statement. A limited ledgered call
therefore costs no round trip more than the same call without a limit.

The query goes to psycopg below SQLAlchemy: SQLAlchemy has not begun its transaction yet
(its ``begin()`` on psycopg sends nothing, and psycopg sends no ``BEGIN`` on a connection
already in a transaction), and the simple query protocol takes no bound parameters, so
the values are quoted by libpq (``PQescapeLiteral``) and floats written in full (``repr``
round-trips).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import StoreBusy, StoreError, StoreUnavailable
from ..ledger.budgets import TOLERANCE, Bucket
from ._dialects import is_busy, is_connection_lost
from ._schema import budgets

__all__ = ("spend_all_then_begin",)

_TABLE = budgets.name

_SPEND = (
    f"INSERT INTO {_TABLE} AS b (bucket_key, tool, limit_name, holder, tenant, arrival, "
    "interval_seconds, window_seconds) VALUES ({key}, {tool}, {limit}, {holder}, {tenant}, "
    "{spent}, {interval}, {window}) ON CONFLICT (bucket_key) DO UPDATE SET "
    "arrival = greatest(b.arrival, {now}) + {cost}, "
    # The declaration may have changed since the row was written: keep it current.
    "interval_seconds = excluded.interval_seconds, window_seconds = excluded.window_seconds "
    "WHERE greatest(b.arrival, {now}) + {cost} <= {latest} RETURNING 1"
)

_REFUND = f"UPDATE {_TABLE} SET arrival = arrival - {{cost}} WHERE bucket_key = {{key}}"

_RELAXED = "SET LOCAL synchronous_commit = off"


async def spend_all_then_begin(
    conn: AsyncConnection, spends: Sequence[tuple[Bucket, float]], now: float
) -> Bucket | None:
    """Spend every bucket in a transaction that commits, then begin ``conn``'s next one.

    One round trip. Returns the bucket that had no room, or None; when one had none, what
    was spent before it is given back (and committed) before this returns.

    Raises:
        StoreBusy: A bucket's row stayed locked past the session's ``lock_timeout``.
        StoreUnavailable: The connection was lost.
        StoreError: The database failed otherwise.
    """
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None, "a pooled connection always has its driver's"
    quote = _Quoter(driver)
    statements = [
        "BEGIN",
        _RELAXED,
        *(
            _SPEND.format(
                key=quote.text(bucket.key),
                tool=quote.text(bucket.tool),
                limit=quote.text(bucket.limit),
                holder=quote.text(bucket.holder),
                tenant=quote.text(bucket.tenant),
                spent=_number(now + cost),
                interval=_number(bucket.interval),
                window=_number(bucket.window),
                now=_number(now),
                cost=_number(cost),
                latest=_number(now + bucket.window + TOLERANCE),
            )
            for bucket, cost in spends
        ),
        "COMMIT",
        "BEGIN",
    ]
    try:
        results = await _simple_query(driver, statements)
    except StoreUnavailable:
        await conn.invalidate()  # SQLAlchemy did not see the driver's error
        raise
    # BEGIN and SET come first; each INSERT returns its row when the bucket had room.
    for index, result in enumerate(results[2 : 2 + len(spends)]):
        if result.ntuples == 0:
            done = spends[:index]
            if done:  # given back in the transaction just begun, which commits at once
                refunds = [
                    _REFUND.format(cost=_number(cost), key=quote.text(bucket.key))
                    for bucket, cost in done
                ]
                await _simple_query(driver, [_RELAXED, *refunds, "COMMIT"])
            return spends[index][0]
    return None


class _Quoter:
    """SQL literals for one connection (its encoding, its quoting rules)."""

    __slots__ = ("_encoding", "_escaping")

    def __init__(self, driver: Any) -> None:
        from psycopg import pq

        self._escaping = pq.Escaping(driver.pgconn)
        self._encoding = driver.info.encoding

    def text(self, value: str) -> str:
        quoted: bytes = self._escaping.escape_literal(value.encode(self._encoding))
        return quoted.decode(self._encoding)


def _number(value: float) -> str:
    """A float as a SQL literal, exactly (``repr`` round-trips); finite by construction."""
    return f"{value!r}::float8"


async def _simple_query(driver: Any, statements: Sequence[str]) -> list[Any]:
    """Send ``statements`` as one simple query and return their results; raise on an error."""
    import psycopg
    from psycopg import errors, generators, pq

    query = "; ".join(statements).encode(driver.info.encoding)
    try:
        async with driver.lock:
            driver.pgconn.send_query(query)
            results: list[Any] = await driver.wait(generators.execute(driver.pgconn))
        for result in results:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=driver.info.encoding)
    except psycopg.Error as exc:
        if is_busy(exc):
            raise StoreBusy("the database stayed locked while spending a rate limit") from exc
        if is_connection_lost(exc) or isinstance(exc, psycopg.OperationalError):
            raise StoreUnavailable(
                "the database connection was lost while spending a rate limit"
            ) from exc
        name = type(exc).__name__
        raise StoreError(f"the database failed while spending a rate limit ({name})") from exc
    if len(results) != len(statements):
        raise StoreError("the database answered a rate limit's spend with too few results")
    return results
