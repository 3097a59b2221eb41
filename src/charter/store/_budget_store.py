"""``SqlStore``'s rate-limit bucket methods (``charter.ledger.budgets``)."""

from __future__ import annotations

import functools
from contextlib import AbstractAsyncContextManager

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import StoreBusy, StoreUnavailable
from ..ledger.budgets import (
    Bucket,
    BucketUsage,
    BudgetRefused,
    BudgetUnavailable,
    Charge,
)
from . import _budget_rows as rows
from ._access import SqlAccess
from ._budget_postgres import defer_spend
from ._connections import Prelude, run_to_completion
from ._errors import translated
from ._transaction import SqlTransaction

__all__ = ("SqlBudgets",)


class SqlBudgets(SqlAccess):
    """The rate-limit half of ``SqlStore``: spend, refund, read, list and prune buckets."""

    def _transaction_after(
        self, wait: float, prelude: Prelude
    ) -> AbstractAsyncContextManager[SqlTransaction]:
        """``transaction(wait=…)`` whose connection first runs ``prelude``."""
        raise NotImplementedError  # SqlStore's

    def spending_transaction(
        self, *, wait: float, charge: Charge
    ) -> AbstractAsyncContextManager[SqlTransaction]:
        """``transaction(wait=…)`` on a connection that first spends ``charge`` (``SpendingStore``).

        The spend commits on its own before the transaction begins, so the call keeps it
        whatever the transaction does, and the bucket is not locked while the handler
        runs. On PostgreSQL it is a transaction of its own sent in one pipeline with the
        ledger transaction's ``BEGIN`` and first statement (``_budget_postgres``).

        Raises:
            BudgetRefused: A bucket has no room (on entering; on PostgreSQL at the
                transaction's first statement, or its commit if none ran); nothing
                stays spent, and the transaction rolls back.
            BudgetUnavailable: The spend failed (when ``BudgetRefused`` would be raised);
                nothing stays spent.
        """
        return self._transaction_after(wait, functools.partial(_spend_first, charge))

    @run_to_completion
    async def spend_budget(self, bucket: Bucket, *, cost: float, now: float) -> bool:
        """Spend ``cost`` seconds of the bucket if it has room: one statement, no lost update."""
        async with self._statement("spending a rate limit") as conn:
            return await rows.spend(conn, bucket, cost, now)

    @run_to_completion
    async def budget_arrival(self, bucket: Bucket) -> float | None:
        """The bucket's theoretical arrival time (None when it was never spent)."""
        async with self._connection(None) as conn:
            with translated("reading a rate limit"):
                return await rows.arrival(conn, bucket)

    @run_to_completion
    async def refund_budget(self, bucket: Bucket, *, cost: float) -> None:
        """Give ``cost`` seconds back to the bucket (the call did not run its handler)."""
        async with self._statement("refunding a rate limit") as conn:
            await rows.refund(conn, bucket, cost)

    @run_to_completion
    async def budget_usage(self, *, now: float, tenant: str | None = None) -> list[BucketUsage]:
        """The buckets not yet full again at ``now`` (of one tenant, when given)."""
        async with self._connection(None) as conn:
            with translated("listing rate limits"):
                return await rows.usage(conn, now, tenant)

    @run_to_completion
    async def prune_budgets(self, *, now: float) -> int:
        """Delete the buckets full again at ``now`` (they mean the same as no row)."""
        async with self._connection(self.busy_timeout) as conn:
            with translated("pruning rate limits"):
                return await rows.prune(conn, now)


async def _spend_first(charge: Charge, conn: AsyncConnection) -> None:
    """Spend ``charge`` on ``conn`` before its transaction begins; raise when it cannot.

    PostgreSQL: only queued, to go with the transaction's first statement.
    """
    if conn.dialect.name == "postgresql":
        defer_spend(conn, charge)
        return
    try:
        with translated("spending a rate limit"):
            refused = await rows.spend_all(conn, charge.spends, charge.now)
    except (StoreBusy, StoreUnavailable) as exc:
        raise BudgetUnavailable("the rate limits could not be spent") from exc
    if refused is not None:
        raise BudgetRefused(refused)
    charge.spent = True
