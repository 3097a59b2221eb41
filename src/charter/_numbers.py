"""Numbers a declaration gives: counts and durations, checked the same way everywhere."""

from __future__ import annotations

import math

__all__ = ("is_positive_int", "is_positive_seconds")


def is_positive_int(value: object) -> bool:
    """Whether ``value`` is an int above zero (``True`` is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_positive_seconds(value: object) -> bool:
    """Whether ``value`` is a finite number of seconds above zero (not a bool, not NaN).

    An int too large for a float is not: every clock and timer reads seconds as one.
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        seconds = float(value)
    except OverflowError:
        return False
    return math.isfinite(seconds) and seconds > 0
