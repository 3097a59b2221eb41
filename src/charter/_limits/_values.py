"""Checking a value a transport library already parsed, without recursion."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from itertools import repeat

from ._payload_limits import PayloadLimits
from ._rejection import (
    PayloadRejected,
    reject_depth,
    reject_int_digits,
    reject_non_finite,
    reject_size,
    reject_width,
)

__all__ = ("SURROGATE", "check_value", "replace_surrogates")

SURROGATE = re.compile(r"[\ud800-\udfff]")
"""A UTF-16 surrogate code point, which no store can hold unpaired."""


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that UTF-8 can encode it."""
    return text if text.isascii() else SURROGATE.sub("\ufffd", text)


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
    max_depth = limits.max_depth
    # Scalars are checked where they are found; only containers go on the stack.
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        # The level this container opens. Only the root can be a scalar (its members are
        # checked in place), and depth 1 never exceeds a max_depth, which is positive.
        depth += 1
        if depth > max_depth:
            reject_depth(max_depth)
        members: Iterable[tuple[object, object]]
        if isinstance(node, dict):
            keys += len(node)
            if keys > limits.max_keys:
                reject_width("object members", "max_keys", limits.max_keys)
            members = node.items()
        elif isinstance(node, _CONTAINERS):
            items += len(node)
            if items > limits.max_items:
                reject_width("array items", "max_items", limits.max_items)
            members = zip(repeat(_ITEM), node)
        else:
            text += _check_scalar(node, limits)
            members = ()
        text += _check_members(members, depth, stack, limits)
        if text > limits.max_bytes:
            reject_size(limits.max_bytes)


def _check_members(
    members: Iterable[tuple[object, object]],
    depth: int,
    stack: list[tuple[object, int]],
    limits: PayloadLimits,
) -> int:
    """Check each member's key, then its value, pushing containers on ``stack``; the characters.

    The common types (short ASCII strings, ints of few digits, booleans, null) are decided
    here, each other one by `_check_string`, `_check_int_digits` or `_check_scalar`.
    """
    text = 0
    max_string = limits.max_string_length
    # An int of at most this many bits has at most max_integer_digits digits (2**3 < 10).
    short_int_bits = 3 * limits.max_integer_digits
    for key, member in members:
        if key is not _ITEM:
            if not isinstance(key, str):
                raise PayloadRejected("not_json", "object keys must be strings")
            if len(key) > max_string or not key.isascii():
                _check_string(key, limits)
            text += len(key)
        if type(member) is str:
            if len(member) > max_string or not member.isascii():
                _check_string(member, limits)
            text += len(member)
        elif type(member) is int:
            if member.bit_length() > short_int_bits:
                _check_int_digits(member, limits.max_integer_digits)
        elif member is None or type(member) is bool:
            pass
        elif isinstance(member, _CONTAINERS):
            stack.append((member, depth))
        else:
            text += _check_scalar(member, limits)
    return text


_ITEM = object()
"""The key `check_value` pairs with each array item (an item has none)."""
_CONTAINERS = (dict, list, tuple)


def _check_scalar(node: object, limits: PayloadLimits) -> int:
    """Check a leaf of a parsed value (its type, size or finiteness); its characters."""
    kind = type(node)
    if kind is str:
        _check_string(node, limits)  # type: ignore[arg-type]
        return len(node)  # type: ignore[arg-type]
    if node is None or kind is bool:
        return 0
    if kind is int:
        _check_int_digits(node, limits.max_integer_digits)  # type: ignore[arg-type]
        return 0
    if kind is float:
        if not math.isfinite(node):  # type: ignore[arg-type]
            reject_non_finite()
        return 0
    # Subclasses (an IntEnum, a str subclass): the same checks, found the slower way.
    if isinstance(node, str):
        _check_string(node, limits)
        return len(node)
    if isinstance(node, bool):
        return 0
    if isinstance(node, int):
        _check_int_digits(node, limits.max_integer_digits)
        return 0
    if isinstance(node, float):
        if not math.isfinite(node):
            reject_non_finite()
        return 0
    raise PayloadRejected("not_json", f"{type(node).__name__} is not a JSON type")


def _check_string(text: str, limits: PayloadLimits) -> None:
    """Reject an overlong string, or one holding an unpaired surrogate."""
    if len(text) > limits.max_string_length:
        raise PayloadRejected(
            "input_too_large",
            f"a string is longer than max_string_length ({limits.max_string_length} characters)",
        )
    # ASCII text (known without reading it) holds no surrogate.
    if not text.isascii() and SURROGATE.search(text):
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
    reject_int_digits(max_digits)
