"""Numbers a declaration gives: counts and durations, checked the same way everywhere."""

from __future__ import annotations

import math

__all__ = ("is_positive_int", "is_positive_seconds")


def is_positive_int(value: object) -> bool:
    """Whether ``value`` is an int above zero (``True`` is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_positive_seconds(value: object) -> bool:
    """Whether ``value`` is a finite number of seconds above zero (not a bool, not NaN)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
