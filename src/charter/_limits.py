r"""Limits on untrusted JSON payloads, enforced before any validation.

Everything a caller sends passes through `parse_json` (raw bytes or text) or `check_value`
(a value a transport library already parsed) first, so hostile input ends as a
`PayloadRejected` with a reason, never as a `RecursionError`, a `MemoryError` or a 500.
Nothing here recurses. Error messages name the limit and never echo the payload.

NUL characters (``"a\u0000b"``) are valid JSON and pass this layer; stores that cannot hold
them reject them later.
"""

from __future__ import annotations

import functools
import json
import json.scanner
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from itertools import accumulate, repeat
from typing import Any, Literal, NoReturn, TypeAlias

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

    Text too short to break a per-item limit skips the walk of `check_value`: a payload
    of n characters has at most n/3 object members (each key's quotes and colon are its
    own), n array items and strings of at most n characters, and its integers have at
    most n digits; without a unicode escape (or, for text, a surrogate character) it holds
    no lone surrogate. The parser itself refuses what is left (duplicate keys, NaN,
    overflowing numbers), so the answer is the same, without a second pass over the value.

    Args:
        raw: The payload as received: UTF-8 bytes, or text.
        limits: The limits to enforce.

    Returns:
        The parsed value: dicts, lists, strings, ints, floats, bools and None.

    Raises:
        PayloadRejected: The payload breaks a limit or is not strict JSON.
    """
    text = _decode_within_size(raw, limits.max_bytes)
    size = len(text)
    if size > limits.max_depth:  # each level takes a character: shorter text is shallow
        _check_text_depth(text, limits.max_depth)
    last = _LAST_PARSERS  # `_parsers`' one-entry cache, read here without a call
    parsers = last[1] if last is not None and last[0] is limits else _parsers(limits)
    # Integers no longer than the text allows go to the C parser untouched.
    decoders = parsers.digits_checked if size > limits.max_integer_digits else parsers.plain
    value = _without_repeated_keys(text, decoders.quick) if parsers.quick else _NOT_SURE
    if value is _NOT_SURE:
        value = _decode_strictly(text, decoders.strict, limits)
    if size > parsers.walk_above or "\\u" in text or _may_hold_surrogates(raw, text):
        check_value(value, limits)
    return value


def _decode_strictly(text: str, decoder: json.JSONDecoder, limits: PayloadLimits) -> object:
    """``text`` parsed by a strict decoder, its refusals as ``PayloadRejected``."""
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        # The position is safe to report; the surrounding text is not.
        raise PayloadRejected(
            "invalid_json", f"payload is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None
    except PayloadRejected:
        raise
    except ValueError:  # an integer past the interpreter's own int_max_str_digits
        _reject_int_digits(limits.max_integer_digits)
    except RecursionError:  # only reachable with a max_depth near the interpreter's limit
        _reject_depth(limits.max_depth)


_Scanner: TypeAlias = Callable[[str, int], tuple[object, int]]
"""A decoder's ``scan_once``: the value at an index of the text, and where it ends."""

_NOT_SURE = object()
"""What `_without_repeated_keys` answers when only the strict decoder can tell."""

_JSON_WHITESPACE = " \t\n\r"
_MEMBERS_WALKED_UP_TO = 4096
"""Longest text whose parsed objects `_without_repeated_keys` counts by walking them."""


def _without_repeated_keys(text: str, scan_once: _Scanner) -> object:
    """``text`` parsed in C alone, when that shows no object repeats a key; else `_NOT_SURE`.

    The strict decoders find a repeated key with a Python hook per object, which costs
    more than parsing a small payload. Parsed without it (``json.JSONDecoder.decode``'s
    steps, with the same scalar hooks), an object keeps the last of two values for one
    key, so it has fewer members than the text wrote. Every member in the text has its
    own ``:`` outside strings, so when the parsed objects hold as many members as the text
    holds ``:`` characters, none was lost. Anything else (an error, a ``:`` inside a
    string, a repeated key) is `_NOT_SURE`: the strict decoder then parses the text and
    answers exactly as it always did, refusal and its reason included.
    """
    try:
        # ``decode`` skips JSON's whitespace before the value and after it, as here (a
        # value never ends with whitespace, so only what follows it is stripped).
        value, end = scan_once(text, len(text) - len(text.lstrip(_JSON_WHITESPACE)))
    except Exception:  # StopIteration, JSONDecodeError, a refusal: the strict decoder words it
        return _NOT_SURE
    if len(text.rstrip(_JSON_WHITESPACE)) != end:
        return _NOT_SURE  # extra data after the value
    colons = text.count(":")
    if colons == 0:
        return value  # no object has a member, so none repeats one
    if type(value) is dict and len(value) == colons:
        return value  # one flat object (the common case): every ':' is one of its members
    if len(text) <= _MEMBERS_WALKED_UP_TO and _members(value) == colons:
        return value
    return _NOT_SURE


def _members(value: object) -> int:
    """How many members the objects in a value parsed from JSON hold, all depths summed."""
    members = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            members += len(node)
            node = node.values()
        elif type(node) is not list:
            continue
        for item in node:
            if type(item) is dict or type(item) is list:
                stack.append(item)
    return members


@dataclass(frozen=True, slots=True)
class _Decoders:
    """One strictness of parsing, as a strict decoder and its quick C scanner."""

    strict: json.JSONDecoder
    """Refuses a repeated key with a Python hook per object."""
    quick: _Scanner
    """The same decoder's scanner without the hook (see `_without_repeated_keys`)."""


@dataclass(frozen=True, slots=True)
class _Parsers:
    """The strict decoders for one `PayloadLimits`, built once instead of per payload."""

    plain: _Decoders
    """Integers parsed in C: for text no longer than ``max_integer_digits``."""
    digits_checked: _Decoders
    """Every integer's digits counted before it is converted."""
    walk_above: int
    """Text longer than this may break a per-item limit, so `check_value` walks it."""
    quick: bool
    """Whether to try the quick scanner first: not with a ``max_depth`` so deep that the
    strict decoder's hook could be what meets the interpreter's recursion limit."""


_LAST_PARSERS: tuple[PayloadLimits, _Parsers] | None = None
"""The decoders of the limits used last (a host uses one instance for every call)."""


def _parsers(limits: PayloadLimits) -> _Parsers:
    # A one-entry cache, replaced whole (so threads never see half of it).
    global _LAST_PARSERS
    last = _LAST_PARSERS
    if last is not None and last[0] is limits:
        return last[1]
    parsers = _parsers_for(limits)
    _LAST_PARSERS = (limits, parsers)
    return parsers


_QUICK_DEPTH = 256
"""The deepest ``max_depth`` for which `_without_repeated_keys` is tried first."""


@functools.lru_cache(maxsize=16)
def _parsers_for(limits: PayloadLimits) -> _Parsers:
    scalars = {"parse_constant": _reject_constant, "parse_float": _parse_finite_float}
    max_digits = limits.max_integer_digits
    digits = {"parse_int": lambda digits: _parse_bounded_int(digits, max_digits)}
    return _Parsers(
        plain=_decoders(scalars),
        digits_checked=_decoders({**scalars, **digits}),
        walk_above=min(3 * limits.max_keys, limits.max_items, limits.max_string_length),
        quick=limits.max_depth <= _QUICK_DEPTH,
    )


def _scanner(decoder: json.JSONDecoder) -> _Scanner:
    """The C scanner a decoder parses with (its ``scan_once``), called without ``decode``."""
    return json.scanner.make_scanner(decoder)  # type: ignore[arg-type]


def _decoders(hooks: dict[str, Any]) -> _Decoders:
    return _Decoders(
        strict=json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys, **hooks),
        quick=_scanner(json.JSONDecoder(**hooks)),
    )


def _may_hold_surrogates(raw: bytes | str, text: str) -> bool:
    """Whether parsing ``text`` may have produced a string with a lone surrogate."""
    if "\\u" in text:
        return True
    # Decoded UTF-8 never holds a surrogate; text handed over as ``str`` may.
    return isinstance(raw, str) and not text.isascii() and _SURROGATE.search(text) is not None


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
        members: Iterable[tuple[object, object]]
        if isinstance(node, dict):
            depth += 1
            if depth > max_depth:
                _reject_depth(max_depth)
            keys += len(node)
            if keys > limits.max_keys:
                _reject_width("object members", "max_keys", limits.max_keys)
            members = node.items()
        elif isinstance(node, _CONTAINERS):
            depth += 1
            if depth > max_depth:
                _reject_depth(max_depth)
            items += len(node)
            if items > limits.max_items:
                _reject_width("array items", "max_items", limits.max_items)
            members = zip(repeat(_ITEM), node)
        else:
            text += _check_scalar(node, limits)
            members = ()
        text += _check_members(members, depth, stack, limits)
        if text > limits.max_bytes:
            _reject_size(limits.max_bytes)


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
            _reject_non_finite()
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
            _reject_non_finite()
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
    if not text.isascii() and _SURROGATE.search(text):
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
