"""RFC 8785 (JSON Canonicalization Scheme) serialization and the fingerprints built on it.

The ledger compares fingerprints across processes, replicas and releases, so the bytes must
never depend on dict order, float repr quirks or the serializer's defaults. Output matches the
original TypeScript system (`JSON.stringify` over keys sorted by UTF-16 code units) for every
value this module accepts.

Integers are exact within ``-(2**53) <= n <= 2**53``, where every integer is a double. Beyond
that JavaScript would round them to a nearby double, so two different integers could share one
fingerprint; rather than round silently, `canonical_json` rejects them (as I-JSON, RFC 7493,
advises). Send such numbers as strings. Floats of any finite magnitude are fine.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

__all__ = ("NonCanonicalValueError", "canonical_json", "sha256_fingerprint")

_MAX_EXACT_INTEGER = 2**53

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class NonCanonicalValueError(ValueError):
    """Raised when a value has no RFC 8785 form: NaN, infinities, integers past 2**53, bad types.

    Also raised for non-string object keys, unpaired surrogates and circular references.
    It subclasses `ValueError` so callers that treat any bad value alike need no new clause.
    """


@dataclass(frozen=True, slots=True)
class _Emit:
    """Literal output text queued on the work stack (distinct from a string value)."""

    text: str


@dataclass(frozen=True, slots=True)
class _Leave:
    """Marks the end of a container, so it may appear again outside its own subtree."""

    ident: int


def canonical_json(value: object) -> str:
    """Serialize a JSON value to its RFC 8785 canonical text.

    Accepts ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``
    and ``None``, including their subclasses. Works iteratively, so nesting depth is bounded
    only by memory.

    Args:
        value: The value to serialize.

    Returns:
        The canonical JSON text; encode it as UTF-8 to get the canonical bytes.

    Raises:
        NonCanonicalValueError: The value, or something inside it, has no canonical form.
    """
    out: list[str] = []
    open_containers: set[int] = set()
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Emit):
            out.append(item.text)
        elif isinstance(item, _Leave):
            open_containers.discard(item.ident)
        elif isinstance(item, dict | list | tuple):
            ident = id(item)
            if ident in open_containers:
                raise NonCanonicalValueError("value contains a circular reference")
            open_containers.add(ident)
            stack.append(_Leave(ident))
            if isinstance(item, dict):
                out.append("{")
                _push_members(item, stack)
            else:
                out.append("[")
                _push_items(item, stack)
        else:
            out.append(_scalar(item))
    return "".join(out)


def sha256_fingerprint(value: object) -> str:
    """Return ``"sha256:"`` plus the hex SHA-256 of the value's canonical JSON in UTF-8.

    Args:
        value: The value to fingerprint.

    Returns:
        The fingerprint, for example ``"sha256:b3ae75b9..."``.

    Raises:
        NonCanonicalValueError: The value has no canonical form.
    """
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


def _push_members(obj: dict[object, object], stack: list[object]) -> None:
    """Queue an object's members in canonical key order, then its closing brace."""
    keys: list[str] = []
    for key in obj:
        if not isinstance(key, str):
            raise NonCanonicalValueError(f"object keys must be strings, got {type(key).__name__}")
        keys.append(key)
    # Encoding to UTF-16 first also rejects unpaired surrogates in keys.
    keys.sort(key=_utf16_sort_key)
    stack.append(_Emit("}"))
    for index in range(len(keys) - 1, -1, -1):
        key = keys[index]
        stack.append(obj[key])
        prefix = "," if index else ""
        stack.append(_Emit(f"{prefix}{_string(key)}:"))


def _push_items(items: list[object] | tuple[object, ...], stack: list[object]) -> None:
    """Queue an array's items in order, then its closing bracket."""
    stack.append(_Emit("]"))
    for index in range(len(items) - 1, -1, -1):
        stack.append(items[index])
        if index:
            stack.append(_Emit(","))


def _utf16_sort_key(key: str) -> bytes:
    """Return a key whose byte order is the UTF-16 code unit order RFC 8785 sorts by."""
    try:
        return key.encode("utf-16-be")
    except UnicodeEncodeError:
        raise NonCanonicalValueError("object key contains an unpaired surrogate") from None


def _scalar(value: object) -> str:
    """Serialize a string, number, boolean or null."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, float):
        return _number(float(value))
    raise NonCanonicalValueError(f"{type(value).__name__} is not a JSON type")


def _string(text: str) -> str:
    """Quote a string the way RFC 8785 (and ECMAScript ``JSON.stringify``) does."""
    if _SURROGATE.search(text):
        raise NonCanonicalValueError("string contains an unpaired surrogate")
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    r"""Escape one character: a short form where JSON has one, else ``\u00xx``."""
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _integer(value: int) -> str:
    """Serialize an integer within +/-2**53, where every integer is exactly a double."""
    number = int(value)  # an IntEnum member's str() may be its name
    if -_MAX_EXACT_INTEGER <= number <= _MAX_EXACT_INTEGER:
        return str(number)
    raise NonCanonicalValueError(
        f"a {number.bit_length()}-bit integer is beyond +/-2**53, where JSON numbers round; "
        f"send the value as a string"
    )


def _number(value: float) -> str:
    """Serialize a finite double like ECMAScript ``Number.prototype.toString``."""
    if not math.isfinite(value):
        raise NonCanonicalValueError(f"{value!r} is not a JSON number (only finite values are)")
    if value == 0:
        return "0"  # also for -0.0
    sign = "-" if value < 0 else ""
    # repr() gives the shortest digits that round-trip, which is what ECMAScript requires.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # value == 0.<digits> * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    return sign + _place_point(digits, point)


def _place_point(digits: str, point: int) -> str:
    """Lay out significant digits and a decimal exponent per ECMAScript Number::toString."""
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return f"{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return f"0.{'0' * -point}{digits}"
    exponent = point - 1
    exponent_text = f"e+{exponent}" if exponent >= 0 else f"e-{-exponent}"
    if count == 1:
        return digits + exponent_text
    return f"{digits[0]}.{digits[1:]}{exponent_text}"
