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

from ._numbers import is_positive_int
from .errors import ConfigurationError

__all__ = ("MAX_WINDOW", "MIN_UNIT", "InFlight", "Limit", "LimitKey", "RateLimit", "check_limits")

MAX_WINDOW = 3_660 * 86_400
"""The longest ``RateLimit.per``: ten years (3,660 days, 316,224,000 seconds).

A bucket is a theoretical arrival time in Unix seconds, a float: a window this long keeps
it well within the range a float counts to the microsecond, and every retry-after and
``RateLimit-Policy`` window a finite, printable number."""

MIN_UNIT = 1e-5
"""The least seconds one unit of a ``RateLimit`` may be worth (``per / calls``): 10 µs.

A spend moves the bucket's arrival time, a float of Unix seconds, by ``units * per /
calls``; near today's time a float counts in steps of about a quarter of a microsecond,
so a unit worth less would be rounded away (a quota of 10**13 units a day counted
nothing). At 10 µs a one-unit spend is off by at most about 1.2 % (2.4 % once Unix times
pass 2**31, in 2038): at most 100,000 units a second, 8.64 billion a day."""

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
    """Units allowed per window (calls, or what ``cost`` counts); one unit is worth
    ``per / calls`` seconds, at least ``MIN_UNIT`` (at most 100,000 units a second)."""
    per: float
    """The window, in seconds (60 a minute, 86,400 a day), at most ``MAX_WINDOW`` (ten years)."""
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

    Each limit's label (its ``name``, or the one derived) must differ from the others'
    in ``limits``: the label is the bucket's identity, so two limits under one label would
    share a bucket.
    """
    if isinstance(limits, str | bytes) or not hasattr(limits, "__iter__"):
        raise ConfigurationError(f"{owner}: limits must be a list of RateLimit or InFlight")
    checked: list[Limit] = []
    labels: set[str] = set()
    for limit in limits:
        if isinstance(limit, RateLimit):
            _check_rate_limit(owner, limit)
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
        name = limit.name
        if name is not None and not (isinstance(name, str) and name.strip() and name.isprintable()):
            raise ConfigurationError(
                f"{owner}: a limit's name is None (derived) or a non-empty, printable str "
                f"(no control characters, tabs or line breaks), got {name!r}"
            )
        if limit.label in labels:
            raise ConfigurationError(
                f"{owner}: two limits are named {limit.label!r}; a limit's name is its "
                "bucket, so give each one a name of its own (name=...)"
            )
        labels.add(limit.label)
        checked.append(limit)
    return tuple(checked)


def _check_rate_limit(owner: str, limit: RateLimit) -> None:
    calls, per = limit.calls, limit.per
    # Compared, not converted: an int too large for a float is refused, not an OverflowError.
    seconds = isinstance(per, int | float) and not isinstance(per, bool) and per > 0
    if not (is_positive_int(calls) and seconds):
        raise ConfigurationError(
            f"{owner}: RateLimit needs calls > 0 (an integer) and per > 0 seconds, "
            f"got calls={calls!r}, per={per!r}"
        )
    if per > MAX_WINDOW:  # infinity too
        raise ConfigurationError(
            f"{owner}: RateLimit per={per!r} is longer than the longest window, "
            f"{MAX_WINDOW:,} seconds (ten years)"
        )
    if not per / calls >= MIN_UNIT:
        raise ConfigurationError(
            f"{owner}: RateLimit calls={calls!r} per={per!r} makes one unit worth "
            f"{per / calls:.3g} s, under the least, {MIN_UNIT:g} s (at most 100,000 units a "
            "second): count in larger units (kilobytes rather than bytes) or a longer window"
        )
    if limit.cost is not None and not callable(limit.cost):
        raise ConfigurationError(f"{owner}: RateLimit.cost must be callable")


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
