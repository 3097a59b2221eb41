"""A ledgered call's spend on PostgreSQL: one simple query, on the driver's connection.

``spend_all_then_begin`` sends ``BEGIN; SET LOCAL synchronous_commit = off; EXECUTE …;
COMMIT; BEGIN`` (one prepared ``INSERT … ON CONFLICT DO UPDATE … WHERE <fits> RETURNING``
per bucket) as one message: the spend commits in a transaction of its own, and the last
``BEGIN`` opens the ledger transaction, which psycopg would otherwise begin with a round
trip of its own before the transaction's first statement. A limited ledgered call
therefore costs no round trip more than the same call without a limit. A connection's
first spend also sends the ``PREPARE`` in the same message, so the server parses and plans
the statement once per connection.

The query goes to psycopg below SQLAlchemy: SQLAlchemy has not begun its transaction yet
(its ``begin()`` on psycopg sends nothing, and psycopg sends no ``BEGIN`` on a connection
already in a transaction), and the simple query protocol takes no bound parameters, so
strings are quoted by libpq (``PQescapeLiteral``) and floats written in full (``repr``
round-trips). Through SQLAlchemy the same spend cost more CPU than the whole round trip:
an autocommit statement switches the connection's isolation level there and back, and
each execution processes its parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import StoreBusy, StoreError, StoreUnavailable
from ..ledger.budgets import TOLERANCE, Bucket
from ._dialects import is_busy, is_connection_lost
from ._schema import budgets

__all__ = ("PREPARED_INFO", "spend_all_then_begin")

_TABLE = budgets.name

_PREPARED = "charter_spend_budget"
"""The spend's prepared statement, made once per connection (``PREPARED_INFO``)."""

PREPARED_INFO = "charter_spend_prepared"
"""Connection info: this connection has prepared ``_PREPARED``.

A connection's info lives as long as its driver connection (SQLAlchemy clears it when it
replaces one), and a prepared statement as long as its session, rolled back or not.
"""

_PREPARE = (
    f"PREPARE {_PREPARED} (text, text, text, text, text, float8, float8, float8, float8, "
    f"float8, float8) AS INSERT INTO {_TABLE} AS b (bucket_key, tool, limit_name, holder, "
    "tenant, arrival, interval_seconds, window_seconds) VALUES ($1, $2, $3, $4, $5, $6, $7, "
    "$8) ON CONFLICT (bucket_key) DO UPDATE SET arrival = greatest(b.arrival, $9) + $10, "
    # The declaration may have changed since the row was written: keep it current.
    "interval_seconds = excluded.interval_seconds, window_seconds = excluded.window_seconds "
    "WHERE greatest(b.arrival, $9) + $10 <= $11 RETURNING 1"
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
    # The checked-out connection's driver, read without a round trip to SQLAlchemy's
    # greenlet (``get_raw_connection`` would spawn one).
    sync = conn.sync_connection
    assert sync is not None, "the connection is open"
    driver: Any = sync.connection.driver_connection
    info = sync.connection.info
    encoding = driver.info.encoding
    quote = _Quoter(driver, encoding)
    prepare = not info.get(PREPARED_INFO)
    statements = [_PREPARE] if prepare else []
    statements += ["BEGIN", _RELAXED]
    statements += [
        f"EXECUTE {_PREPARED}({quote.text(bucket.key)}, {quote.text(bucket.tool)}, "
        f"{quote.text(bucket.limit)}, {quote.text(bucket.holder)}, {quote.text(bucket.tenant)}, "
        f"{now + cost!r}, {bucket.interval!r}, {bucket.window!r}, {now!r}, {cost!r}, "
        f"{now + bucket.window + TOLERANCE!r})"
        for bucket, cost in spends
    ]
    statements += ["COMMIT", "BEGIN"]
    try:
        results = await _simple_query(
            driver, statements, encoding, prepared=info if prepare else None
        )
    except StoreUnavailable:
        await conn.invalidate()  # SQLAlchemy did not see the driver's error
        raise
    # PREPARE, BEGIN and SET come first; each spend returns a row when its bucket had room.
    first = 3 if prepare else 2
    for index, result in enumerate(results[first : first + len(spends)]):
        if result.ntuples == 0:
            done = spends[:index]
            if done:  # given back in the transaction just begun, which commits at once
                refunds = [
                    _REFUND.format(cost=_number(cost), key=quote.text(bucket.key))
                    for bucket, cost in done
                ]
                await _simple_query(driver, [_RELAXED, *refunds, "COMMIT"], encoding)
            return spends[index][0]
    return None


class _Quoter:
    """SQL string literals for one connection (its encoding, its quoting rules)."""

    __slots__ = ("_encoding", "_escaping")

    def __init__(self, driver: Any, encoding: str) -> None:
        from psycopg import pq

        self._escaping = pq.Escaping(driver.pgconn)
        self._encoding = encoding

    def text(self, value: str) -> str:
        quoted: bytes = self._escaping.escape_literal(value.encode(self._encoding))
        return quoted.decode(self._encoding)


def _number(value: float) -> str:
    """A float as a SQL literal, exactly (``repr`` round-trips); finite by construction."""
    return f"{value!r}::float8"


async def _simple_query(
    driver: Any,
    statements: Sequence[str],
    encoding: str,
    *,
    prepared: dict[Any, Any] | None = None,
) -> list[Any]:
    """Send ``statements`` as one simple query and return their results; raise on an error.

    With ``prepared`` (the connection's info), the first statement is the spend's PREPARE:
    once it ran, the connection keeps it, whatever the statements after it do.
    """
    import psycopg
    from psycopg import errors, generators, pq

    query = "; ".join(statements).encode(encoding)
    try:
        async with driver.lock:
            driver.pgconn.send_query(query)
            results: list[Any] = await driver.wait(generators.execute(driver.pgconn))
        if prepared is not None and results and results[0].status == pq.ExecStatus.COMMAND_OK:
            prepared[PREPARED_INFO] = True
        for result in results:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=encoding)
    except psycopg.Error as exc:
        if is_busy(exc):
            raise StoreBusy("the database stayed locked while spending a rate limit") from exc
        # 26000: the session lost the prepared spend (an application's DEALLOCATE ALL on
        # its transaction's connection); the connection is dropped, its next one prepares.
        lost = exc.sqlstate == "26000" or isinstance(exc, psycopg.OperationalError)
        if lost or is_connection_lost(exc):
            raise StoreUnavailable(
                "the database connection was lost while spending a rate limit"
            ) from exc
        name = type(exc).__name__
        raise StoreError(f"the database failed while spending a rate limit ({name})") from exc
    if len(results) != len(statements):
        raise StoreError("the database answered a rate limit's spend with too few results")
    return results
