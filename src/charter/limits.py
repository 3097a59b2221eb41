"""Budgets for agents: rate limits, quotas and in-flight caps, declared beside a tool.

``RateLimit(calls=10, per=60, key="principal")`` lets each principal make 10 calls a
minute; with ``cost`` it is a quota (``RateLimit(calls=2_000, per=86_400,
cost=lambda args: args.amount_cents)``: at most 2,000 cents a day). ``InFlight(limit=2)``
caps the calls running at once. Declare them on a tool (``limits=[...]`` in ``@tool`` or
``define_tool``: counted per tool) or on the host (``Host(rate_limits=[...])``: counted
across all tools). The host enforces them after authentication and validation and before
the handler; a refused call is ``Failed`` with ``RATE_LIMITED`` and a retry-after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._numbers import is_positive_int, is_positive_seconds
from .errors import ConfigurationError

__all__ = ("InFlight", "Limit", "LimitKey", "RateLimit", "check_limits")

LimitKey: TypeAlias = Literal["principal", "tenant", "tool"]
"""Whose budget a call spends: its principal's (home tenant and subject), its tenant's
(the tenant it acts for), or everyone's together (``tool``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    """At most ``calls`` units per ``per`` seconds for each ``key``, a burst of all of them.

    A generic cell rate algorithm (GCRA): each unit is one ``per / calls`` slice of the
    window; a call may spend its units when the budget of the last ``per`` seconds has
    room, and the budget refills continuously. One statement checks and spends it, so
    replicas on one PostgreSQL database share it without lost updates.
    """

    calls: int
    """Units allowed per window (calls, or what ``cost`` counts)."""
    per: float
    """The window, in seconds (60 a minute, 86,400 a day)."""
    key: LimitKey = "principal"
    cost: Callable[[Any], int] | None = None
    """The units a call spends, from its validated input (default 1): a quota."""
    name: str | None = None
    """The limit's name in refusals and headers (default ``"{calls}/{per}s by {key}"``)."""

    @property
    def label(self) -> str:
        """The limit's name, given or derived."""
        return self.name or f"{self.calls}/{_seconds(self.per)}s by {self.key}"


@dataclass(frozen=True, kw_only=True, slots=True)
class InFlight:
    """At most ``limit`` calls running at once for each ``key``, in each server process."""

    limit: int
    key: LimitKey = "principal"
    name: str | None = None

    @property
    def label(self) -> str:
        """The cap's name, given or derived."""
        return self.name or f"{self.limit} in flight by {self.key}"


Limit: TypeAlias = RateLimit | InFlight
"""A budget a tool or a host declares."""


def check_limits(owner: str, limits: object) -> tuple[Limit, ...]:
    """The limits as a tuple, or ``ConfigurationError`` naming what is wrong.

    Args:
        owner: what declares them, for the message (``tool 'trips.search'``, ``the host``).
        limits: a sequence of ``RateLimit`` and ``InFlight``.
    """
    if isinstance(limits, str | bytes) or not hasattr(limits, "__iter__"):
        raise ConfigurationError(f"{owner}: limits must be a list of RateLimit or InFlight")
    checked: list[Limit] = []
    for limit in limits:
        if isinstance(limit, RateLimit):
            if not (is_positive_int(limit.calls) and is_positive_seconds(limit.per)):
                raise ConfigurationError(
                    f"{owner}: RateLimit needs calls > 0 (an integer) and per > 0 seconds, "
                    f"got calls={limit.calls!r}, per={limit.per!r}"
                )
            if limit.cost is not None and not callable(limit.cost):
                raise ConfigurationError(f"{owner}: RateLimit.cost must be callable")
        elif isinstance(limit, InFlight):
            if not is_positive_int(limit.limit):
                raise ConfigurationError(
                    f"{owner}: InFlight needs limit > 0 (an integer), got {limit.limit!r}"
                )
        else:
            raise ConfigurationError(
                f"{owner}: limits must be RateLimit or InFlight, got {type(limit).__name__}"
            )
        if limit.key not in ("principal", "tenant", "tool"):
            raise ConfigurationError(
                f"{owner}: a limit's key is 'principal', 'tenant' or 'tool', not {limit.key!r}"
            )
        checked.append(limit)
    return tuple(checked)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
