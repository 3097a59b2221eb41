"""A ledgered call's spend on PostgreSQL: in the pipeline of its transaction's first statement.

A spending transaction begins like the gate's (``begin_deferred``): its ``BEGIN`` waits to
go with its first statement, the claim. The spend waits ahead of it (``defer_spend``): one
``INSERT … ON CONFLICT DO UPDATE … WHERE <fits> RETURNING`` per bucket (each also turns the
disk flush off for its transaction), then a ``Sync``, which commits them as the implicit
transaction they share (``_pipelined.SYNC``; without one, ``BEGIN`` … ``COMMIT`` around
them). The spend, the ledger transaction's ``BEGIN`` and the claim then go in one psycopg
pipeline: a limited ledgered call takes as many round trips as the same call without a
limit, and one statement more. The spend still commits in a transaction of its own before
the ledger transaction begins, so no bucket stays locked while the handler runs.

The spend's results are read where the pipeline is sent (``_pipelined.watch``):

- every bucket had room: ``charge.spent`` is set, and the pipeline's statements go on;
- a bucket had none (its INSERT returned no row): the ledger transaction is rolled back,
  the buckets that were spent are given back (one round trip more, on this rare path)
  and ``BudgetRefused`` names the first bucket that had no room;
- the spend failed (an INSERT did not run, or its transaction did not commit: a bucket's
  row stayed locked, the connection was lost): ``BudgetUnavailable``; nothing was spent
  (the failure rolled the spend's transaction back), and the ledger transaction rolls
  back with the connection.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import StoreBusy, StoreUnavailable
from ..ledger.budgets import BudgetRefused, BudgetUnavailable, Charge
from . import _budget_rows as rows
from ._errors import translated
from ._pipelined import COMMIT, SYNC, Raw, Sent, defer, pipelined, raw, syncs, watch

__all__ = ("defer_spend",)

_BEGIN = Raw("BEGIN")
_ROLLBACK = Raw("ROLLBACK")


def defer_spend(conn: AsyncConnection, charge: Charge) -> None:
    """Queue ``charge``'s spend, in a transaction of its own, before ``conn``'s next one."""
    spends = [rows.spend_raw(conn, bucket, cost, charge.now) for bucket, cost in charge.spends]
    if syncs():
        first = defer(conn, *spends, SYNC)
    else:
        first = defer(conn, _BEGIN, *spends, COMMIT) + 1
    watch(conn, functools.partial(_settle, conn, charge, first))


async def _settle(
    conn: AsyncConnection,
    charge: Charge,
    first: int,
    sent: Sequence[Sent],
    error: sa.exc.DBAPIError | None,
) -> None:
    """Read the spend's results (``first`` is its first INSERT's place among ``sent``)."""
    spends = sent[first : first + len(charge.spends)]
    end = sent[first + len(charge.spends)].status
    committed = end == "COMMIT" or (end == "SYNC" and all(done.status for done in spends))
    if not committed:
        # The spend's transaction did not commit: it failed, and with it what came after.
        try:
            with translated("spending a rate limit"):
                raise error or sa.exc.InvalidRequestError("the spend did not commit")
        except (StoreBusy, StoreUnavailable) as exc:
            raise BudgetUnavailable("the rate limits could not be spent") from exc
    results = list(zip(charge.spends, spends, strict=True))
    refused = next((bucket for (bucket, _), done in results if done.rowcount != 1), None)
    if refused is None:
        charge.spent = True
        return
    spent = [spend for spend, done in results if done.rowcount == 1]
    try:
        await _give_back(conn, spent)
    except (StoreBusy, StoreUnavailable) as exc:
        raise BudgetUnavailable("the rate limits could not be given back") from exc
    raise BudgetRefused(refused)


async def _give_back(conn: AsyncConnection, spent: list[tuple[Any, float]]) -> None:
    """Roll back the ledger transaction, then give ``spent`` back in a transaction that commits."""
    statements = [_ROLLBACK]
    if spent:
        refund = rows.refund_statement(conn.dialect.name)
        statements += [_BEGIN]
        statements += [raw(conn, refund, {"key": b.key, "cost": cost}) for b, cost in spent]
        statements += [COMMIT]
    with translated("giving back a rate limit"):
        await pipelined(conn, statements)
