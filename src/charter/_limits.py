r"""Limits on untrusted JSON payloads, enforced before any validation.

Everything a caller sends passes through `parse_json` (raw bytes or text) or `check_value`
(a value a transport library already parsed) first, so hostile input ends as a
`PayloadRejected` with a reason, never as a `RecursionError`, a `MemoryError` or a 500.
Nothing here recurses. Error messages name the limit and never echo the payload.

NUL characters (``"a\u0000b"``) are valid JSON and pass this layer; stores that cannot hold
them reject them later.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields
from itertools import accumulate
from typing import Literal, NoReturn, TypeAlias

__all__ = (
    "PayloadLimits",
    "PayloadRejected",
    "RejectionReason",
    "check_unique_keys",
    "check_value",
    "parse_json",
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

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_MAX_UTF8_BYTES_PER_CHAR = 4


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


def parse_json(raw: bytes | str, limits: PayloadLimits) -> object:
    """Parse untrusted JSON after checking its size and depth, then check its structure.

    Order: size (cheap), UTF-8 decoding, a non-recursive depth scan of the text, strict
    parsing (no duplicate keys, no NaN or infinities, no overlong integers), then
    `check_value`. NUL characters are allowed here; stores that cannot hold them reject
    them later.

    Args:
        raw: The payload as received: UTF-8 bytes, or text.
        limits: The limits to enforce.

    Returns:
        The parsed value: dicts, lists, strings, ints, floats, bools and None.

    Raises:
        PayloadRejected: The payload breaks a limit or is not strict JSON.
    """
    text = _decode_within_size(raw, limits.max_bytes)
    if len(text) > limits.max_depth:  # each level takes a character: shorter text is shallow
        _check_text_depth(text, limits.max_depth)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicate_keys,
            parse_constant=_reject_constant,
            parse_float=_parse_finite_float,
            parse_int=lambda digits: _parse_bounded_int(digits, limits.max_integer_digits),
        )
    except json.JSONDecodeError as exc:
        # The position is safe to report; the surrounding text is not.
        raise PayloadRejected(
            "invalid_json", f"payload is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:  # only reachable with a max_depth near the interpreter's limit
        _reject_depth(limits.max_depth)
    check_value(value, limits)
    return value


def check_value(value: object, limits: PayloadLimits) -> None:
    """Check an already-parsed value against the limits.

    ``max_bytes`` is checked against the characters of its strings and keys, a lower
    bound on its JSON size (the exact size would mean encoding it).

    Walks the value with an explicit stack, so a hostile nesting depth (or a cycle, which
    only ever looks deeper) is rejected rather than overflowing the interpreter's stack.

    Args:
        value: The value to check, for example arguments an MCP library parsed.
        limits: The limits to enforce.

    Raises:
        PayloadRejected: The value breaks a limit, holds a non-finite float or an unpaired
            surrogate, or contains a type JSON does not have.
    """
    keys = 0
    items = 0
    # Characters in all strings and keys: a lower bound on the encoded size, so that many
    # strings each under max_string_length cannot add up past max_bytes.
    text = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            depth += 1
            if depth > limits.max_depth:
                _reject_depth(limits.max_depth)
            keys += len(node)
            if keys > limits.max_keys:
                _reject_width("object members", "max_keys", limits.max_keys)
            for key, member in node.items():
                if not isinstance(key, str):
                    raise PayloadRejected("not_json", "object keys must be strings")
                _check_string(key, limits)
                text += len(key)
                stack.append((member, depth))
        elif isinstance(node, list | tuple):
            depth += 1
            if depth > limits.max_depth:
                _reject_depth(limits.max_depth)
            items += len(node)
            if items > limits.max_items:
                _reject_width("array items", "max_items", limits.max_items)
            stack.extend((item, depth) for item in node)
        else:
            if isinstance(node, str):
                text += len(node)
            _check_scalar(node, limits)
        if text > limits.max_bytes:
            _reject_size(limits.max_bytes)


def _decode_within_size(raw: bytes | str, max_bytes: int) -> str:
    """Return the payload as text, rejecting it if it is larger than ``max_bytes``."""
    if isinstance(raw, str):
        # Measuring text exactly means encoding it; skip that when the length alone decides.
        if len(raw) > max_bytes or (
            len(raw) * _MAX_UTF8_BYTES_PER_CHAR > max_bytes
            and len(raw.encode("utf-8", "surrogatepass")) > max_bytes
        ):
            _reject_size(max_bytes)
        return raw
    if len(raw) > max_bytes:
        _reject_size(max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadRejected(
            "invalid_utf8", f"payload is not valid UTF-8 (byte offset {exc.start})"
        ) from None


def _check_text_depth(text: str, max_depth: int) -> None:
    """Reject JSON text nested deeper than ``max_depth``, scanning linearly without recursion.

    Brackets inside strings do not count. An unterminated string ends the scan: the parser
    rejects it as invalid JSON right after. Each step runs in C (regex, bytes.translate,
    accumulate), because a Python loop over a megabyte of brackets would cost a third of a
    second.
    """
    outside_strings = _JSON_STRING.sub("", text)
    unterminated = outside_strings.find('"')
    if unterminated >= 0:
        outside_strings = outside_strings[:unterminated]
    brackets = outside_strings.encode("utf-8", "surrogatepass").translate(None, _NOT_A_BRACKET)
    deepest = max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)
    if deepest > max_depth:
        _reject_depth(max_depth)


def _check_scalar(node: object, limits: PayloadLimits) -> None:
    """Check a leaf of a parsed value: its type, and its size or finiteness."""
    if node is None or isinstance(node, bool):
        return
    if isinstance(node, str):
        _check_string(node, limits)
    elif isinstance(node, int):
        _check_int_digits(node, limits.max_integer_digits)
    elif isinstance(node, float):
        if not math.isfinite(node):
            _reject_non_finite()
    else:
        raise PayloadRejected("not_json", f"{type(node).__name__} is not a JSON type")


def _check_string(text: str, limits: PayloadLimits) -> None:
    """Reject an overlong string, or one holding an unpaired surrogate."""
    if len(text) > limits.max_string_length:
        raise PayloadRejected(
            "input_too_large",
            f"a string is longer than max_string_length ({limits.max_string_length} characters)",
        )
    if _SURROGATE.search(text):
        raise PayloadRejected(
            "lone_surrogate",
            "a string contains an unpaired UTF-16 surrogate, which cannot be stored",
        )


def _check_int_digits(number: int, max_digits: int) -> None:
    """Reject an integer with more than ``max_digits`` decimal digits, without printing it."""
    magnitude = abs(number)
    # 2**(3*d) < 10**d, so anything that short has at most d digits: skip the big power.
    if magnitude.bit_length() <= 3 * max_digits or magnitude < 10**max_digits:
        return
    _reject_int_digits(max_digits)


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
        json.loads(raw, object_pairs_hook=_reject_duplicate_keys)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, PayloadRejected):
            raise


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """Build an object from parsed members, rejecting a repeated key."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise PayloadRejected("duplicate_key", "an object has the same key twice")
    return obj


def _reject_constant(name: str) -> NoReturn:
    """Reject the ``NaN``, ``Infinity`` and ``-Infinity`` literals Python accepts by default."""
    _reject_non_finite()


def _parse_finite_float(text: str) -> float:
    """Parse a JSON number with a fraction or exponent, rejecting one that overflows."""
    number = float(text)
    if not math.isfinite(number):
        _reject_non_finite()
    return number


def _parse_bounded_int(text: str, max_digits: int) -> int:
    """Parse a JSON integer, rejecting more than ``max_digits`` digits before converting."""
    if len(text.lstrip("-")) > max_digits:
        _reject_int_digits(max_digits)
    try:
        return int(text)
    except ValueError:  # max_digits above the interpreter's int_max_str_digits
        _reject_int_digits(max_digits)


def _reject_size(max_bytes: int) -> NoReturn:
    """Raise ``input_too_large`` for the payload as a whole."""
    raise PayloadRejected(
        "input_too_large", f"payload is larger than max_bytes ({max_bytes} bytes)"
    )


def _reject_depth(max_depth: int) -> NoReturn:
    """Raise ``input_too_deep``."""
    raise PayloadRejected(
        "input_too_deep", f"payload nests deeper than max_depth ({max_depth} levels)"
    )


def _reject_width(what: str, limit_name: str, limit: int) -> NoReturn:
    """Raise ``input_too_wide`` for too many members or items in total."""
    raise PayloadRejected(
        "input_too_wide", f"payload has more {what} than {limit_name} ({limit} in total)"
    )


def _reject_non_finite() -> NoReturn:
    """Raise ``non_finite_number``."""
    raise PayloadRejected(
        "non_finite_number", "payload contains NaN, an infinity, or a number too large for a double"
    )


def _reject_int_digits(max_digits: int) -> NoReturn:
    """Raise ``input_too_large`` for an integer with too many digits."""
    raise PayloadRejected(
        "input_too_large",
        f"an integer has more digits than max_integer_digits ({max_digits} digits)",
    )
