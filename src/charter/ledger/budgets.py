"""Where rate-limit buckets live: the ``BudgetStore`` protocol and its in-memory keeper.

A bucket is one declared limit for one holder. It is one number, its theoretical arrival
time (TAT, in Unix seconds): the moment the bucket would be full again if no one spent
more. Spending ``cost`` seconds is allowed when ``max(TAT, now) + cost`` stays within
``now + window``; then that sum is the new TAT. ``charter.host`` turns declarations into
buckets and costs (a generic cell rate algorithm, GCRA); a store only checks and moves one
number, in one statement, so every host on one database shares each bucket.

A ledgered call's spend is a ``Charge`` its ledger transaction makes when the store is a
``SpendingStore``: the spend still commits on its own, before the transaction begins (a
call whose handler ran keeps what it spent even when its transaction rolls back, and a
bucket is never locked while a handler runs), but it needs no connection of its own.
"""

from __future__ import annotations

import math
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .protocols import LedgerTransaction

__all__ = (
    "TOLERANCE",
    "Bucket",
    "BucketUsage",
    "BudgetReport",
    "BudgetRefused",
    "BudgetStore",
    "BudgetUnavailable",
    "Charge",
    "MemoryBudgets",
    "SpendingStore",
    "bucket_key",
)

TOLERANCE = 1e-6
"""Seconds of floating-point slack when a spend exactly fills a window."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Bucket:
    """One limit for one holder: what it is called, whose it is, how fast it refills."""

    tool: str
    """The tool the limit is declared on, or ``*`` for a host-wide limit."""
    limit: str
    """The limit's label (``RateLimit.label``)."""
    holder: str
    """Whose budget: a principal's key, ``tenant:<id>``, or ``all`` (the whole tool)."""
    tenant: str
    """The tenant the calls act for (to list usage per tenant); empty for a whole tool's."""
    interval: float
    """Seconds one unit costs (``per / calls``)."""
    window: float
    """The window in seconds (``per``): a bucket holds at most this much."""

    @property
    def key(self) -> str:
        """The bucket's unique key (``bucket_key``)."""
        return bucket_key(self.tool, self.limit, self.holder)


def bucket_key(tool: str, limit: str, holder: str) -> str:
    """One limit's key for one holder: the three names, ``|``-separated and escaped.

    A subject may hold a ``|`` (``auth0|1234``), so each part escapes ``%`` and ``|`` and
    no two buckets share a key.
    """
    return "|".join(part.replace("%", "%25").replace("|", "%7C") for part in (tool, limit, holder))


@dataclass(frozen=True, kw_only=True, slots=True)
class BucketUsage:
    """A bucket as stored, and how much of it is spent at one moment."""

    bucket: Bucket
    arrival: float
    """The bucket's TAT: when it is full again (Unix seconds)."""

    def used(self, now: float) -> int:
        """The units spent and not yet refilled at ``now``."""
        spent = max(self.arrival - now, 0.0) / self.bucket.interval
        return max(math.ceil(spent - TOLERANCE), 0)

    @property
    def capacity(self) -> int:
        """The units the bucket holds when full."""
        return round(self.bucket.window / self.bucket.interval)


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetReport:
    """The budgets of one tenant a caller may see, as they stood at one moment."""

    tenant: str
    at: float
    """When the report was made (Unix seconds): ``used`` and ``full_in`` are as of then."""
    buckets: list[BucketUsage]

    def full_in(self, usage: BucketUsage) -> float:
        """Seconds until ``usage``'s bucket is full again."""
        return max(usage.arrival - self.at, 0.0)


@runtime_checkable
class BudgetStore(Protocol):
    """Protocol: the buckets of rate limits and quotas, shared by every host on the store."""

    async def spend_budget(self, bucket: Bucket, *, cost: float, now: float) -> bool:
        """Spend ``cost`` seconds of the bucket if it has room, in one atomic step."""
        ...

    async def budget_arrival(self, bucket: Bucket) -> float | None:
        """The bucket's TAT (None when it was never spent)."""
        ...

    async def refund_budget(self, bucket: Bucket, *, cost: float) -> None:
        """Give ``cost`` seconds back to the bucket (the call did not run the handler)."""
        ...

    async def budget_usage(self, *, now: float, tenant: str | None = None) -> list[BucketUsage]:
        """The buckets not yet full again at ``now`` (of one tenant, when given)."""
        ...

    async def prune_budgets(self, *, now: float) -> int:
        """Delete the buckets full again at ``now`` (they mean the same as none)."""
        ...


@dataclass(kw_only=True, slots=True)
class Charge:
    """What a ledgered call spends as its transaction opens: every bucket, or none."""

    spends: tuple[tuple[Bucket, float], ...]
    """The buckets, and the seconds to spend in each."""
    now: float
    """When the call spends (Unix seconds)."""
    spent: bool = field(default=False)
    """Set by the store once every bucket is spent (to give back if the handler then does
    not run); it stays false when the charge was refused or could not be made."""


class BudgetRefused(Exception):
    """Raised by a spending transaction as it opens: ``bucket`` has no room; nothing is spent.

    A store may raise it at the transaction's first statement instead (its spend goes to
    the database with that statement); the transaction then rolls back.
    """

    def __init__(self, bucket: Bucket) -> None:
        """Name the bucket that refused."""
        super().__init__(f"the rate limit bucket {bucket.key!r} has no room")
        self.bucket = bucket


class BudgetUnavailable(Exception):
    """Raised by a spending transaction as it opens: the spend failed (busy or unreachable).

    Or at its first statement, as ``BudgetRefused``. Nothing is spent; the cause is the
    store's ``StoreBusy`` or ``StoreUnavailable``.
    """


@runtime_checkable
class SpendingStore(Protocol):
    """Protocol: a store whose ledger transactions can spend a call's budgets as they open."""

    def spending_transaction(
        self, *, wait: float, charge: Charge
    ) -> AbstractAsyncContextManager[LedgerTransaction]:
        """``transaction(wait=…)``, after spending ``charge`` in statements that commit first.

        Sets ``charge.spent`` once every bucket is spent.

        Raises:
            BudgetRefused: A bucket has no room (on entering, or at the transaction's
                first statement, which then fails); what was spent is given back.
            BudgetUnavailable: The spend failed (likewise); nothing is spent.
        """
        ...


class MemoryBudgets:
    """Buckets in this process: ``MemoryStore``'s, and a host's whose store keeps none."""

    def __init__(self) -> None:
        """No bucket spent yet."""
        self._buckets: dict[str, BucketUsage] = {}

    async def spend_budget(self, bucket: Bucket, *, cost: float, now: float) -> bool:
        """Spend ``cost`` seconds of the bucket if it has room."""
        current = self._buckets.get(bucket.key)
        arrival = max(current.arrival if current is not None else now, now) + cost
        if arrival > now + bucket.window + TOLERANCE:
            return False
        self._buckets[bucket.key] = BucketUsage(bucket=bucket, arrival=arrival)
        return True

    async def budget_arrival(self, bucket: Bucket) -> float | None:
        """The bucket's TAT (None when it was never spent)."""
        current = self._buckets.get(bucket.key)
        return current.arrival if current is not None else None

    async def refund_budget(self, bucket: Bucket, *, cost: float) -> None:
        """Give ``cost`` seconds back to the bucket."""
        current = self._buckets.get(bucket.key)
        if current is not None:
            self._buckets[bucket.key] = BucketUsage(bucket=bucket, arrival=current.arrival - cost)

    async def budget_usage(self, *, now: float, tenant: str | None = None) -> list[BucketUsage]:
        """The buckets not yet full again at ``now`` (of one tenant, when given)."""
        return sorted(
            (
                usage
                for usage in self._buckets.values()
                if usage.arrival > now and (tenant is None or usage.bucket.tenant == tenant)
            ),
            key=lambda usage: usage.bucket.key,
        )

    async def prune_budgets(self, *, now: float) -> int:
        """Delete the buckets full again at ``now``."""
        full = [key for key, usage in self._buckets.items() if usage.arrival <= now]
        for key in full:
            del self._buckets[key]
        return len(full)
