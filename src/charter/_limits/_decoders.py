"""The strict JSON decoders: hooks that refuse what Python's parser lets through.

Python's ``json`` accepts ``NaN`` and infinities, lets the last of two equal keys win, and
converts integers of any length; these decoders refuse each, as ``PayloadRejected``.
"""

from __future__ import annotations

import functools
import json
import json.scanner
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeAlias

from ._payload_limits import PayloadLimits
from ._rejection import PayloadRejected, reject_int_digits, reject_non_finite

__all__ = ("QUICK_DEPTH", "Decoders", "Parsers", "Scanner", "check_unique_keys", "parsers_for")

Scanner: TypeAlias = Callable[[str, int], tuple[object, int]]
"""A decoder's ``scan_once``: the value at an index of the text, and where it ends."""


@dataclass(frozen=True, slots=True)
class Decoders:
    """One strictness of parsing, as a strict decoder and its quick C scanner."""

    strict: json.JSONDecoder
    """Refuses a repeated key with a Python hook per object."""
    quick: Scanner
    """The same decoder's scanner without the hook (see ``parse_json``'s quick path)."""


@dataclass(frozen=True, slots=True)
class Parsers:
    """The strict decoders for one `PayloadLimits`, built once instead of per payload."""

    plain: Decoders
    """Integers parsed in C: for text no longer than ``max_integer_digits``."""
    digits_checked: Decoders
    """Every integer's digits counted before it is converted."""
    walk_above: int
    """Text longer than this may break a per-item limit, so `check_value` walks it."""
    quick: bool
    """Whether to try the quick scanner first: not with a ``max_depth`` so deep that the
    strict decoder's hook could be what meets the interpreter's recursion limit."""


QUICK_DEPTH = 256
"""The deepest ``max_depth`` for which the quick scanner is tried first."""


@functools.lru_cache(maxsize=16)
def parsers_for(limits: PayloadLimits) -> Parsers:
    """The decoders that enforce ``limits`` while parsing (cached per limits)."""
    scalars = {"parse_constant": _reject_constant, "parse_float": _parse_finite_float}
    max_digits = limits.max_integer_digits
    digits = {"parse_int": lambda digits: _parse_bounded_int(digits, max_digits)}
    return Parsers(
        plain=_decoders(scalars),
        digits_checked=_decoders({**scalars, **digits}),
        walk_above=min(3 * limits.max_keys, limits.max_items, limits.max_string_length),
        quick=limits.max_depth <= QUICK_DEPTH,
    )


def _scanner(decoder: json.JSONDecoder) -> Scanner:
    """The C scanner a decoder parses with (its ``scan_once``), called without ``decode``."""
    return json.scanner.make_scanner(decoder)  # type: ignore[arg-type]


def _decoders(hooks: dict[str, Any]) -> Decoders:
    return Decoders(
        strict=json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys, **hooks),
        quick=_scanner(json.JSONDecoder(**hooks)),
    )


def check_unique_keys(raw: bytes | str) -> None:
    """Refuse JSON in which an object repeats a key, as ``parse_json`` does.

    For a transport that must hand the raw text to a library whose parser lets the last
    duplicate win (the MCP SDK): a caller could otherwise send two values for one field
    and have a check read one while the tool runs with the other. Text that is not JSON
    passes; the library answers it.

    Raises:
        PayloadRejected: an object has the same key twice (reason ``duplicate_key``).
    """
    try:
        # One decoder for every body: ``json.loads`` with a hook builds one per call. (The
        # C scanner first, as parse_json does, saves nothing on a JSON-RPC body: counting
        # the members of its nested objects costs what the hook does.)
        _UNIQUE_KEYS.decode(raw if isinstance(raw, str) else raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        # Not UTF-8, not JSON: the library refuses it in its own words.
        if isinstance(exc, PayloadRejected):
            raise


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """Build an object from parsed members, rejecting a repeated key."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise PayloadRejected("duplicate_key", "an object has the same key twice")
    return obj


_UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys)
"""The decoder of ``check_unique_keys`` (stateless: safe to share across threads)."""


def _reject_constant(name: str) -> NoReturn:
    """Reject the ``NaN``, ``Infinity`` and ``-Infinity`` literals Python accepts by default."""
    reject_non_finite()


def _parse_finite_float(text: str) -> float:
    """Parse a JSON number with a fraction or exponent, rejecting one that overflows."""
    number = float(text)
    if not math.isfinite(number):
        reject_non_finite()
    return number


def _parse_bounded_int(text: str, max_digits: int) -> int:
    """Parse a JSON integer, rejecting more than ``max_digits`` digits before converting."""
    if len(text.lstrip("-")) > max_digits:
        reject_int_digits(max_digits)
    try:
        return int(text)
    except ValueError:  # max_digits above the interpreter's int_max_str_digits
        reject_int_digits(max_digits)
