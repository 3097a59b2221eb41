"""Why an untrusted payload was refused: the reasons, the exception, and one raiser per reason."""

from __future__ import annotations

from typing import Literal, NoReturn, TypeAlias

__all__ = (
    "PayloadRejected",
    "RejectionReason",
    "reject_depth",
    "reject_int_digits",
    "reject_non_finite",
    "reject_size",
    "reject_width",
)

RejectionReason: TypeAlias = Literal[
    "input_too_large",
    "input_too_deep",
    "input_too_wide",
    "duplicate_key",
    "non_finite_number",
    "invalid_json",
    "invalid_utf8",
    "lone_surrogate",
    "not_json",
]
"""Why a payload was rejected; transports put it in ``meta["reason"]``."""


class PayloadRejected(ValueError):
    """Raised when an untrusted payload breaks a limit or is not strict JSON.

    Reasons: ``input_too_large`` (``max_bytes``, ``max_string_length``,
    ``max_integer_digits``), ``input_too_deep`` (``max_depth``), ``input_too_wide``
    (``max_keys``, ``max_items``), ``duplicate_key``, ``non_finite_number`` (NaN, infinities,
    numbers that overflow a double), ``invalid_json``, ``invalid_utf8``, ``lone_surrogate``
    and ``not_json`` (a Python value of a non-JSON type, or a non-string key).
    Transports answer it as ``INVALID_INPUT`` with the reason in ``meta["reason"]``.
    """

    reason: RejectionReason
    """The machine-readable cause."""

    def __init__(self, reason: RejectionReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[PayloadRejected], tuple[RejectionReason, str]]:
        return (type(self), (self.reason, str(self)))


def reject_size(max_bytes: int) -> NoReturn:
    """Raise ``input_too_large`` for the payload as a whole."""
    raise PayloadRejected(
        "input_too_large", f"payload is larger than max_bytes ({max_bytes} bytes)"
    )


def reject_depth(max_depth: int) -> NoReturn:
    """Raise ``input_too_deep``."""
    raise PayloadRejected(
        "input_too_deep", f"payload nests deeper than max_depth ({max_depth} levels)"
    )


def reject_width(what: str, limit_name: str, limit: int) -> NoReturn:
    """Raise ``input_too_wide`` for too many members or items in total."""
    raise PayloadRejected(
        "input_too_wide", f"payload has more {what} than {limit_name} ({limit} in total)"
    )


def reject_non_finite() -> NoReturn:
    """Raise ``non_finite_number``."""
    raise PayloadRejected(
        "non_finite_number", "payload contains NaN, an infinity, or a number too large for a double"
    )


def reject_int_digits(max_digits: int) -> NoReturn:
    """Raise ``input_too_large`` for an integer with too many digits."""
    raise PayloadRejected(
        "input_too_large",
        f"an integer has more digits than max_integer_digits ({max_digits} digits)",
    )
