"""Spending a call's budgets: rate limits and quotas on the store, in-flight caps here.

A ``RateLimit`` of ``calls`` per ``per`` seconds is a generic cell rate algorithm (GCRA):
one unit costs ``per / calls`` seconds of a bucket that holds ``per`` seconds and refills
continuously, so a holder may burst the whole budget and then gets one unit back every
``per / calls`` seconds. The store checks and spends in one statement
(``charter.ledger.budgets``). ``InFlight`` caps are counted in this process.

A call spends after it is authenticated, authorised and validated, just before the ledger
runs it; what it spent is given back when the handler did not run after all (a replay, a
request still in progress, an approval that stops it), so a replay is free. A ledgered
call on a ``SpendingStore`` (``SqlStore``) leaves its rate limits to its ledger
transaction, which spends them as it opens, on its own connection (``Spent.charge``).

A spend that stops early gives back what it spent first, whatever stops it: a limit
without room, a store busy or unreachable, an error, a cancellation (a store's spend under
way then runs to its end, and is given back; a give-back is never cut short). A ``cost``
function is called before anything is spent; one that raises fails the call
(``PROVIDER_ERROR``, ``invalid_limit_cost``, naming the limit).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._completion import to_completion
from .._safe_log import log_exception
from .._wording import new_error_id
from ..errors import ErrorCode, StoreBusy, StoreUnavailable
from ..ledger import LedgerKey
from ..ledger.budgets import (
    Bucket,
    BucketUsage,
    BudgetRefused,
    BudgetStore,
    BudgetUnavailable,
    Charge,
    MemoryBudgets,
    SpendingStore,
    bucket_key,
)
from ..limits import MAX_WINDOW, InFlight, Limit, RateLimit
from ..outcome import Completed, Failed, ToolOutcome, failed
from ._calls import PreparedCall

__all__ = ("Budgets", "Spent", "handler_skipped")

logger = logging.getLogger("charter")

_NOT_RUN = frozenset({ErrorCode.REQUEST_IN_PROGRESS, ErrorCode.IDEMPOTENCY_CONFLICT})
"""Failures the ledger answers without running the handler."""


@dataclass(kw_only=True, slots=True)
class Spent:
    """What one call spent: to give back if its handler does not run, and to release."""

    buckets: list[tuple[Bucket, float]] = field(default_factory=list)
    """Rate-limit buckets and the seconds spent in each."""
    held: list[str] = field(default_factory=list)
    """In-flight counters this call holds until it ends."""
    charge: Charge | None = None
    """The rate limits the call's ledger transaction spends as it opens (not yet spent)."""
    limits: list[RateLimit] = field(default_factory=list)
    """The limit of each bucket in ``charge``, in its order (to word a refusal)."""
    request: LedgerKey | None = None
    """The ledgered request the call runs, counted as running here until it ends."""


@dataclass(slots=True)
class _Running:
    """The calls of one ledgered request that spent here and have not ended."""

    calls: int = 1
    ended: asyncio.Event | None = None
    """Set when the last of them ends (made for the first retry that waits)."""


class Budgets:
    """Spends and gives back the budgets of one host's calls."""

    def __init__(
        self,
        *,
        store: BudgetStore,
        host_limits: Sequence[Limit],
        clock: Callable[[], datetime],
    ) -> None:
        """Keep buckets on ``store``; ``host_limits`` apply to every call, across tools."""
        self.store = store
        # Ledgered calls leave their rate limits to the transaction on such a store.
        self.in_transaction = isinstance(store, SpendingStore)
        self.host_limits = tuple(host_limits)
        self._clock = clock
        self._in_flight: dict[str, int] = {}
        # The in-memory buckets never suspend, so nothing can cut their spend short.
        self._atomic = type(store) is MemoryBudgets
        self._running: dict[LedgerKey, _Running] = {}

    def applies(self, prepared: PreparedCall) -> bool:
        """Whether any budget applies to the call (most calls have none: a fast no)."""
        return bool(self.host_limits or prepared.action.tool.tool.limits)

    async def spend(self, prepared: PreparedCall) -> Spent | Failed:
        """Spend every budget the call is under, or refuse it with nothing spent.

        Whatever ends the spend early gives back what it spent before it answers or
        raises (see the module's docstring).
        """
        units = self._units(prepared)
        if isinstance(units, Failed):
            return units
        spent = Spent()
        # A ledgered call on a SpendingStore only counts here: its transaction spends.
        deferred = self.in_transaction and prepared.ledger_key is not None
        try:
            if self._atomic or deferred:
                refused = await self._spend_all(prepared, units, spent, deferred=deferred)
            else:
                spending = self._spend_all(prepared, units, spent, deferred=False)
                refused = await to_completion(spending)
        except (StoreBusy, StoreUnavailable):
            await self.give_back(spent)
            return _unavailable()
        except BaseException:
            await self.give_back(spent)
            raise
        if refused is not None:
            await self.give_back(spent)
            return refused
        if prepared.ledger_key is not None:
            self._start(prepared.ledger_key, spent)
        return spent

    def _units(self, prepared: PreparedCall) -> list[tuple[str, Limit, int]] | Failed:
        """Each limit the call is under, its scope and the units it costs; or why it cannot."""
        tool = prepared.action.tool
        declared = [(tool.name, limit) for limit in tool.tool.limits]
        declared += [("*", limit) for limit in self.host_limits]
        units: list[tuple[str, Limit, int]] = []
        for scope, limit in declared:
            if isinstance(limit, InFlight) or limit.cost is None:
                units.append((scope, limit, 1))
                continue
            try:
                cost = limit.cost(prepared.action.input)
            except Exception:
                return _cost_failed(limit, prepared.name)
            if not isinstance(cost, int) or isinstance(cost, bool) or cost < 0:
                return _invalid_cost(limit, "did not return a whole number of units (0 or more)")
            if cost > limit.calls:
                return _never(limit, cost)
            units.append((scope, limit, cost))
        return units

    async def _spend_all(
        self,
        prepared: PreparedCall,
        units: list[tuple[str, Limit, int]],
        spent: Spent,
        *,
        deferred: bool,
    ) -> Failed | None:
        """Spend each limit into ``spent``; the refusal of the first without room, or None.

        ``deferred``: leave the rate limits to the call's ledger transaction (``charge``).
        """
        for scope, limit, cost in units:
            holder = _holder(limit, prepared)
            if isinstance(limit, InFlight):
                refused = self._hold(bucket_key(scope, limit.label, holder), limit, spent)
            elif cost == 0:
                continue
            else:
                bucket = Bucket(
                    tool=scope,
                    limit=limit.label,
                    holder=holder,
                    # A whole tool's budget is no one tenant's (listed by the operator only).
                    tenant="" if limit.key == "tool" else prepared.context.tenant_id,
                    interval=limit.per / limit.calls,
                    window=float(limit.per),
                )
                refused = await self._spend(bucket, limit, cost, spent, deferred=deferred)
            if refused is not None:
                return refused
        return None

    async def refusal(self, spent: Spent, error: BudgetRefused | BudgetUnavailable) -> Failed:
        """The answer to a call whose ledger transaction could not spend ``spent.charge``."""
        self.release(spent)
        charge = spent.charge
        if isinstance(error, BudgetUnavailable) or charge is None:
            return _unavailable()
        key = error.bucket.key
        index = next(i for i, (bucket, _) in enumerate(charge.spends) if bucket.key == key)
        bucket, cost = charge.spends[index]
        try:
            return await self._refused(bucket, spent.limits[index], cost, charge.now)
        except (StoreBusy, StoreUnavailable):
            return _unavailable()

    async def settle(self, spent: Spent, outcome: ToolOutcome) -> None:
        """The call ended with ``outcome``: release its holds, refund if nothing ran."""
        charge, spent.charge = spent.charge, None
        if charge is not None and charge.spent:
            spent.buckets.extend(charge.spends)
        if handler_skipped(outcome):
            await self.give_back(spent)
        else:
            self.release(spent)

    async def give_back(self, spent: Spent) -> None:
        """Return what ``spent`` spent and release its holds; a cancellation does not stop it."""
        self.release(spent)
        buckets, spent.buckets = spent.buckets, []
        if not buckets:
            return
        if self._atomic:
            await self._refund(buckets)
        else:
            await to_completion(self._refund(buckets))

    def running(self, key: LedgerKey) -> bool:
        """Whether a call of the ledgered request ``key`` spent here and has not ended."""
        return key in self._running

    async def until_ended(self, key: LedgerKey, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for request ``key``'s calls to end; whether they did."""
        running = self._running.get(key)
        if running is None:
            return True
        if running.ended is None:
            running.ended = asyncio.Event()
        try:
            async with asyncio.timeout(timeout):
                await running.ended.wait()
        except TimeoutError:
            return False
        return True

    async def _refund(self, buckets: list[tuple[Bucket, float]]) -> None:
        for bucket, cost in buckets:
            try:
                await self.store.refund_budget(bucket, cost=cost)
            except Exception:
                # The call's outcome stands; the holder is only charged for a call that
                # did not run, and the bucket refills on its own.
                log_exception(logger, "could not refund the bucket %r", bucket.key)

    async def usage(self, tenant: str) -> tuple[float, list[BucketUsage]]:
        """Now, and the buckets of calls for ``tenant`` not yet full again."""
        now = self._clock().timestamp()
        return now, await self.store.budget_usage(now=now, tenant=tenant)

    def release(self, spent: Spent) -> None:
        """Release the in-flight counters ``spent`` holds (the call ended)."""
        for key in spent.held:
            left = self._in_flight.get(key, 1) - 1
            if left > 0:
                self._in_flight[key] = left
            else:
                self._in_flight.pop(key, None)
        spent.held.clear()
        request, spent.request = spent.request, None
        if request is not None:
            self._stop(request)

    def _start(self, key: LedgerKey, spent: Spent) -> None:
        running = self._running.get(key)
        if running is None:
            self._running[key] = _Running()
        else:
            running.calls += 1
        spent.request = key

    def _stop(self, key: LedgerKey) -> None:
        running = self._running.get(key)
        if running is None:
            return
        running.calls -= 1
        if running.calls <= 0:
            del self._running[key]
            if running.ended is not None:
                running.ended.set()

    def _hold(self, key: str, limit: InFlight, spent: Spent) -> Failed | None:
        running = self._in_flight.get(key, 0)
        if running >= limit.limit:
            return _refused(limit.label, retry_after=1.0, reason="too_many_in_flight")
        self._in_flight[key] = running + 1
        spent.held.append(key)
        return None

    async def _spend(
        self,
        bucket: Bucket,
        limit: RateLimit,
        units: int,
        spent: Spent,
        *,
        deferred: bool,
    ) -> Failed | None:
        cost = units * bucket.interval
        now = self._clock().timestamp()
        if deferred:
            charge = spent.charge
            if charge is None:
                charge = spent.charge = Charge(spends=(), now=now)
            charge.spends += ((bucket, cost),)
            spent.limits.append(limit)
            return None
        if await self.store.spend_budget(bucket, cost=cost, now=now):
            spent.buckets.append((bucket, cost))
            return None
        return await self._refused(bucket, limit, cost, now)

    async def _refused(self, bucket: Bucket, limit: RateLimit, cost: float, now: float) -> Failed:
        """``RATE_LIMITED``, with the wait until ``cost`` fits in ``bucket`` again."""
        arrival = await self.store.budget_arrival(bucket)
        wait = max(arrival if arrival is not None else now, now) + cost - now - bucket.window
        # Never more than a window (a replica's clock ahead of ours could say more).
        return _refused(
            limit.label,
            retry_after=min(max(wait, 0.0), bucket.window),
            quota=limit.calls,
            window=limit.per,
        )


def handler_skipped(outcome: ToolOutcome) -> bool:
    """Whether a call ended without running its handler (a replay, a pause, a refusal)."""
    if isinstance(outcome, Completed):
        return outcome.replayed
    if isinstance(outcome, Failed):
        return outcome.replayed or outcome.code in _NOT_RUN
    return outcome.kind in ("denied", "interaction-required")


def _holder(limit: Limit, prepared: PreparedCall) -> str:
    if limit.key == "tool":
        return "all"
    if limit.key == "tenant":
        return "tenant:" + prepared.context.tenant_id
    principal = prepared.principal
    return principal.key if principal is not None else "anonymous"


def _cost_failed(limit: RateLimit, tool: str) -> Failed:
    """A cost function raised; call it in the ``except`` block (it logs the error)."""
    error_id = new_error_id()
    log_exception(
        logger,
        "the cost function of the limit %r raised on a call to %r (error id %s)",
        limit.label,
        tool,
        error_id,
    )
    return _invalid_cost(limit, f"failed (error id {error_id})", errorId=error_id)


def _invalid_cost(limit: RateLimit, what: str, **meta: Any) -> Failed:
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"The cost function of the limit {limit.label!r} {what}; nothing ran and nothing "
        "was spent.",
        next_steps=(
            "Report the limit (and the error id, if any) to the operator; retrying will not help.",
        ),
        reason="invalid_limit_cost",
        limit=limit.label,
        **meta,
    )


def _unavailable() -> Failed:
    return failed(
        ErrorCode.PROVIDER_UNAVAILABLE,
        "The call's rate limits could not be checked: the database is busy or "
        "unreachable. Nothing ran.",
        retryable=True,
        next_steps=("Retry the same call with the same requestId shortly.",),
        reason="budgets_unavailable",
    )


def _never(limit: RateLimit, units: int) -> Failed:
    return failed(
        ErrorCode.RATE_LIMITED,
        f"This call costs {units} units, more than the limit {limit.label!r} allows in a "
        f"whole window ({limit.calls}); it can never run as it is.",
        retryable=False,
        next_steps=("Split the action into smaller ones, or ask the operator to raise the limit.",),
        reason="over_quota",
        limit=limit.label,
        quota=limit.calls,
        units=units,
    )


def _refused(
    label: str,
    *,
    retry_after: float,
    reason: str = "rate_limited",
    quota: int | None = None,
    window: float | None = None,
) -> Failed:
    if not retry_after <= MAX_WINDOW:  # never expected: a bound, for infinity and NaN too
        retry_after = float(MAX_WINDOW)
    seconds = math.ceil(retry_after * 10) / 10 or 0.1
    meta: dict[str, Any] = {"limit": label, "retryAfter": seconds}
    if quota is not None:
        meta["quota"] = quota
    if window is not None:
        meta["window"] = window
    return failed(
        ErrorCode.RATE_LIMITED,
        f"The limit {label!r} is spent for now; retry in {seconds:g} s.",
        next_steps=(
            f"Wait {seconds:g} seconds, then retry the same call (with the same requestId).",
        ),
        reason=reason,
        **meta,
    )
