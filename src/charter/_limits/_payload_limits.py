"""The bounds one JSON payload is held to."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ("PayloadLimits",)


@dataclass(frozen=True, kw_only=True, slots=True)
class PayloadLimits:
    """Bounds on one JSON payload; every field must be a positive integer."""

    max_bytes: int = 1_048_576
    """Largest payload in bytes (text is measured encoded as UTF-8); 1 MiB by default.

    A value parsed elsewhere (an MCP client's arguments) is held to it by the characters
    of its strings and keys, a lower bound on its encoded size."""

    max_depth: int = 64
    """Most nested objects and arrays; a scalar has depth 0, ``[]`` and ``{}`` depth 1."""

    max_keys: int = 10_000
    """Most object members in the whole payload, summed over all objects."""

    max_items: int = 100_000
    """Most array items in the whole payload, summed over all arrays."""

    max_string_length: int = 1_000_000
    """Longest string, key or value, in characters (code points)."""

    max_integer_digits: int = 4300
    """Most decimal digits in an integer; 4300 is also CPython's own conversion limit."""

    def __post_init__(self) -> None:
        for field in fields(self):
            limit = getattr(self, field.name)
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(
                    f"PayloadLimits.{field.name} must be a positive int, got {limit!r}"
                )
