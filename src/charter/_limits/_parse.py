"""Parsing untrusted JSON text: size, depth and strictness checked before a value exists."""

from __future__ import annotations

import json
import re
from itertools import accumulate

from ._decoders import Parsers, Scanner, parsers_for
from ._payload_limits import PayloadLimits
from ._rejection import PayloadRejected, reject_depth, reject_int_digits, reject_size
from ._values import SURROGATE, check_value

__all__ = ("parse_json",)

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1
_MAX_UTF8_BYTES_PER_CHAR = 4


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
        reject_int_digits(limits.max_integer_digits)
    except RecursionError:  # only reachable with a max_depth near the interpreter's limit
        reject_depth(limits.max_depth)


_NOT_SURE = object()
"""What `_without_repeated_keys` answers when only the strict decoder can tell."""

_JSON_WHITESPACE = " \t\n\r"
_MEMBERS_WALKED_UP_TO = 4096
"""Longest text whose parsed objects `_without_repeated_keys` counts by walking them."""


def _without_repeated_keys(text: str, scan_once: Scanner) -> object:
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


_LAST_PARSERS: tuple[PayloadLimits, Parsers] | None = None
"""The decoders of the limits used last (a host uses one instance for every call)."""


def _parsers(limits: PayloadLimits) -> Parsers:
    # A one-entry cache, replaced whole (so threads never see half of it).
    global _LAST_PARSERS
    last = _LAST_PARSERS
    if last is not None and last[0] is limits:
        return last[1]
    parsers = parsers_for(limits)
    _LAST_PARSERS = (limits, parsers)
    return parsers


def _may_hold_surrogates(raw: bytes | str, text: str) -> bool:
    """Whether parsing ``text`` may have produced a string with a lone surrogate."""
    if "\\u" in text:
        return True
    # Decoded UTF-8 never holds a surrogate; text handed over as ``str`` may.
    return isinstance(raw, str) and not text.isascii() and SURROGATE.search(text) is not None


def _decode_within_size(raw: bytes | str, max_bytes: int) -> str:
    """Return the payload as text, rejecting it if it is larger than ``max_bytes``."""
    if isinstance(raw, str):
        # Measuring text exactly means encoding it; skip that when the length alone decides.
        if len(raw) > max_bytes or (
            len(raw) * _MAX_UTF8_BYTES_PER_CHAR > max_bytes
            and len(raw.encode("utf-8", "surrogatepass")) > max_bytes
        ):
            reject_size(max_bytes)
        return raw
    if len(raw) > max_bytes:
        reject_size(max_bytes)
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
        reject_depth(max_depth)
