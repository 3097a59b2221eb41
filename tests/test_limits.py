from __future__ import annotations

import contextlib
import json
import pickle
from collections.abc import Iterator
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter import _limits
from charter._limits import (
    PayloadLimits,
    PayloadRejected,
    RejectionReason,
    check_value,
    parse_json,
)

DEFAULTS = PayloadLimits()
SMALL = PayloadLimits(max_depth=3, max_keys=4, max_items=5, max_string_length=8)


def _nested_text(kind: str, depth: int) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1)


def _nested_value(kind: str, depth: int) -> object:
    value: object = [] if kind == "array" else {}
    for _ in range(depth - 1):
        value = [value] if kind == "array" else {"k": value}
    return value


def _rejected(raw: bytes | str, limits: PayloadLimits = DEFAULTS) -> PayloadRejected:
    with pytest.raises(PayloadRejected) as info:
        parse_json(raw, limits)
    return info.value


def _value_rejected(value: object, limits: PayloadLimits = DEFAULTS) -> PayloadRejected:
    with pytest.raises(PayloadRejected) as info:
        check_value(value, limits)
    return info.value


# --- the limits object ---------------------------------------------------------------------


def test_defaults_are_the_documented_ones() -> None:
    assert DEFAULTS == PayloadLimits(
        max_bytes=1_048_576,
        max_depth=64,
        max_keys=10_000,
        max_items=100_000,
        max_string_length=1_000_000,
        max_integer_digits=4300,
    )


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_limits_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        PayloadLimits(max_depth=bad)  # type: ignore[arg-type]


def test_limits_are_frozen_and_keyword_only() -> None:
    with pytest.raises(AttributeError):
        DEFAULTS.max_depth = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        PayloadLimits(10)  # type: ignore[call-arg]


# --- the error -----------------------------------------------------------------------------


def test_rejection_is_a_value_error_with_a_reason_and_survives_pickling() -> None:
    error = _rejected(b"[1,")
    assert isinstance(error, ValueError)
    assert error.reason == "invalid_json"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, str(copy)) == (error.reason, str(error))


@pytest.mark.parametrize(
    ("raw", "secret"),
    [
        (b'{"password-hunter2": 1, "password-hunter2": 2}', "hunter2"),
        (b'{"a": "hunter2", "b": NaN}', "hunter2"),
        (b'["hunter2", 1e400]', "hunter2"),
        (b'["hunter2", ', "hunter2"),
        (b'["hunter2\xff"]', "hunter2"),
        (b'["hunter2", "\\ud800"]', "hunter2"),
        (b'["hunter2", "123456789"]', "hunter2"),
    ],
)
def test_messages_never_echo_the_payload(raw: bytes, secret: str) -> None:
    error = _rejected(raw, SMALL)
    assert secret not in str(error)
    assert secret not in repr(error)


def test_every_reason_is_reachable() -> None:
    payloads: dict[RejectionReason, bytes] = {
        "input_too_large": b"[" + b"1," * 600_000 + b"1]",
        "input_too_deep": b"[" * 65 + b"]" * 65,
        "input_too_wide": b"[" + b"1," * 100_000 + b"1]",
        "duplicate_key": b'{"a":1,"a":1}',
        "non_finite_number": b"[NaN]",
        "invalid_json": b"{'a': 1}",
        "invalid_utf8": b'["\xc3\x28"]',
        "lone_surrogate": b'["\\udc00"]',
    }
    for reason, raw in payloads.items():
        assert _rejected(raw).reason == reason
    assert _value_rejected({"a": {1, 2}}).reason == "not_json"
    assert set(payloads) | {"not_json"} == set(get_args(RejectionReason))


# --- size ----------------------------------------------------------------------------------


def test_one_mebibyte_is_accepted_and_one_more_byte_is_not() -> None:
    exact = b'"' + b"x" * (DEFAULTS.max_bytes - 2) + b'"'
    assert len(exact) == DEFAULTS.max_bytes
    assert parse_json(exact, PayloadLimits(max_string_length=2_000_000)) == "x" * (
        DEFAULTS.max_bytes - 2
    )
    error = _rejected(exact + b" ")
    assert error.reason == "input_too_large"
    assert "max_bytes (1048576 bytes)" in str(error)


def test_parsed_strings_that_add_up_past_max_bytes_are_rejected() -> None:
    # Each string is under max_string_length and there are few of them: only the total
    # breaks a limit. A transport that parsed the JSON itself (MCP) hands us such a value.
    limits = PayloadLimits(max_bytes=100, max_string_length=40)
    check_value({"a": "x" * 40, "b": "y" * 40, "c": "z" * 17}, limits)  # 3 + 97 = 100
    error = _value_rejected({"a": "x" * 40, "b": "y" * 40, "c": "z" * 18}, limits)
    assert error.reason == "input_too_large"
    assert "max_bytes (100 bytes)" in str(error)
    assert _value_rejected(["x" * 40] * 3, limits).reason == "input_too_large"
    assert _value_rejected({"k" * 40 + str(i): 1 for i in range(3)}, limits).reason == (
        "input_too_large"
    )


def test_text_is_measured_in_utf8_bytes_not_characters() -> None:
    limits = PayloadLimits(max_bytes=10)
    assert parse_json('"éé"', limits) == "éé"  # 6 bytes
    assert parse_json('"€€"', limits) == "€€"  # 8 bytes
    assert _rejected('"€€€"', limits).reason == "input_too_large"  # 5 characters, 11 bytes


def test_size_is_checked_before_anything_else() -> None:
    assert _rejected(b"\xff" * 20, PayloadLimits(max_bytes=10)).reason == "input_too_large"
    assert _rejected("[" * 20, PayloadLimits(max_bytes=10)).reason == "input_too_large"


# --- depth ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["array", "object"])
def test_text_nested_exactly_max_depth_is_accepted(kind: str) -> None:
    assert parse_json(_nested_text(kind, 64), DEFAULTS) == _nested_value(kind, 64)


@pytest.mark.parametrize("kind", ["array", "object"])
def test_text_nested_one_deeper_than_max_depth_is_rejected(kind: str) -> None:
    error = _rejected(_nested_text(kind, 65))
    assert error.reason == "input_too_deep"
    assert "max_depth (64 levels)" in str(error)


@pytest.mark.parametrize("kind", ["array", "object"])
def test_value_nested_exactly_max_depth_is_accepted(kind: str) -> None:
    check_value(_nested_value(kind, 64), DEFAULTS)


@pytest.mark.parametrize("kind", ["array", "object"])
def test_value_nested_one_deeper_than_max_depth_is_rejected(kind: str) -> None:
    assert _value_rejected(_nested_value(kind, 65)).reason == "input_too_deep"


def test_a_scalar_has_depth_zero() -> None:
    assert parse_json(b"7", PayloadLimits(max_depth=1)) == 7
    assert parse_json(b"[7]", PayloadLimits(max_depth=1)) == [7]


@pytest.mark.parametrize("kind", ["array", "object"])
def test_depth_100000_text_is_rejected_cleanly(kind: str) -> None:
    assert _rejected(_nested_text(kind, 100_000)).reason == "input_too_deep"


def test_depth_100000_text_is_rejected_even_when_unbalanced() -> None:
    assert _rejected("[" * 100_000).reason == "input_too_deep"


@pytest.mark.parametrize("kind", ["array", "object"])
def test_depth_100000_python_value_is_rejected_cleanly(kind: str) -> None:
    assert _value_rejected(_nested_value(kind, 100_000)).reason == "input_too_deep"


def test_a_max_depth_beyond_what_the_parser_can_nest_still_fails_cleanly() -> None:
    limits = PayloadLimits(max_depth=1_000_000)
    assert _rejected("[" * 100_000 + "]" * 100_000, limits).reason == "input_too_deep"


def test_brackets_inside_strings_do_not_count_toward_depth() -> None:
    text = json.dumps(["[[[[{{{{", 'a \\" [[[[', "\\\\[[[["])
    assert parse_json(text, PayloadLimits(max_depth=1)) == json.loads(text)


def test_an_unterminated_string_is_invalid_json_not_a_depth_error() -> None:
    assert _rejected('["' + "[" * 100, PayloadLimits(max_depth=2)).reason == "invalid_json"


def test_a_cycle_is_rejected_as_too_deep_rather_than_looping() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert _value_rejected({"a": loop}).reason == "input_too_deep"


def test_tuples_count_as_arrays() -> None:
    check_value((1, (2, (3,))), PayloadLimits(max_depth=3))
    assert _value_rejected((1, (2, ((),))), PayloadLimits(max_depth=3)).reason == "input_too_deep"
    assert _value_rejected((1, 2, (3, 4, 5)), PayloadLimits(max_items=5)).reason == "input_too_wide"


# --- width and strings ---------------------------------------------------------------------


def test_object_members_are_counted_across_the_whole_payload() -> None:
    assert parse_json(b'[{"a":1,"b":2},{"c":3,"d":4}]', SMALL) is not None
    error = _rejected(b'[{"a":1,"b":2},{"c":3,"d":4},{"e":5}]', SMALL)
    assert error.reason == "input_too_wide"
    assert "max_keys (4 in total)" in str(error)


def test_array_items_are_counted_across_the_whole_payload() -> None:
    check_value([[1, 2], [3]], SMALL)  # 2 + 2 + 1 = 5 items
    error = _value_rejected([[1, 2], [3, 4]], SMALL)
    assert error.reason == "input_too_wide"
    assert "max_items (5 in total)" in str(error)


def test_strings_and_keys_as_long_as_the_limit_are_accepted() -> None:
    check_value({"x" * 8: "y" * 8}, SMALL)


@pytest.mark.parametrize("value", [["x" * 9], {"x" * 9: 1}])
def test_strings_and_keys_longer_than_the_limit_are_rejected(value: object) -> None:
    error = _value_rejected(value, SMALL)
    assert error.reason == "input_too_large"
    assert "max_string_length (8 characters)" in str(error)


def test_string_length_is_counted_in_characters() -> None:
    assert parse_json('"😀😀😀😀😀😀😀😀"', SMALL) == "😀" * 8


# --- strictness ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b'{"a":1,"a":2}', b'{"a":1,"b":{"c":1,"c":1}}', b'[{"x":[{"k":1,"j":2,"k":3}]}]'],
)
def test_duplicate_keys_are_rejected_top_level_and_nested(raw: bytes) -> None:
    assert _rejected(raw).reason == "duplicate_key"


@pytest.mark.parametrize(
    "raw", [b"NaN", b"Infinity", b"-Infinity", b"[1, NaN]", b'{"a": -Infinity}']
)
def test_nan_and_infinity_literals_are_rejected(raw: bytes) -> None:
    assert _rejected(raw).reason == "non_finite_number"


@pytest.mark.parametrize("raw", [b"1e400", b"-1e400", b"[1.5e99999]", b'{"a": 1E+309}'])
def test_numbers_that_overflow_a_double_are_rejected(raw: bytes) -> None:
    assert _rejected(raw).reason == "non_finite_number"


def test_numbers_that_underflow_become_zero() -> None:
    assert parse_json(b"1e-400", DEFAULTS) == 0.0


def test_a_5000_digit_integer_is_rejected() -> None:
    error = _rejected(b"1" * 5000)
    assert error.reason == "input_too_large"
    assert "max_integer_digits (4300 digits)" in str(error)


def test_integer_digits_are_counted_without_the_sign() -> None:
    limits = PayloadLimits(max_integer_digits=3)
    assert parse_json(b"[-999, 999]", limits) == [-999, 999]
    assert _rejected(b"-1000", limits).reason == "input_too_large"
    check_value([-999, 999], limits)
    assert _value_rejected(-1000, limits).reason == "input_too_large"


def test_a_huge_python_integer_is_rejected_without_converting_it_to_text() -> None:
    assert _value_rejected(10**5000).reason == "input_too_large"
    check_value(10**4299, DEFAULTS)
    assert _value_rejected(10**4300).reason == "input_too_large"


def test_a_digit_limit_above_the_interpreters_is_still_a_clean_rejection() -> None:
    limits = PayloadLimits(max_integer_digits=10_000)
    assert _rejected(b"1" * 5000, limits).reason == "input_too_large"


@pytest.mark.parametrize("raw", [b"\xff", b'["\xc3"]', b'"\xed\xa0\x80"', b'"\xc0\xaf"'])
def test_invalid_utf8_bytes_are_rejected(raw: bytes) -> None:
    assert _rejected(raw).reason == "invalid_utf8"


@pytest.mark.parametrize(
    "raw", [b'"\\ud800"', b'["a\\udfffb"]', b'{"\\ud83d": 1}', b'"\\ude00\\ud83d"']
)
def test_lone_surrogate_escapes_are_rejected(raw: bytes) -> None:
    assert _rejected(raw).reason == "lone_surrogate"


def test_a_surrogate_pair_escape_is_one_character_and_accepted() -> None:
    assert parse_json(b'"\\ud83d\\ude00"', DEFAULTS) == "😀"


def test_raw_surrogates_in_text_input_are_rejected() -> None:
    assert _rejected('["\ud800"]').reason == "lone_surrogate"


def test_nul_characters_are_allowed_by_this_layer() -> None:
    assert parse_json(b'"a\\u0000b"', DEFAULTS) == "a\x00b"
    check_value({"a\x00": "b\x00"}, DEFAULTS)


@pytest.mark.parametrize(
    "raw", [b"", b"   ", b"{'a': 1}", b"[1,]", b'{"a" 1}', b"01", b"\xef\xbb\xbf[]", b"[1] [2]"]
)
def test_malformed_json_is_rejected(raw: bytes) -> None:
    assert _rejected(raw).reason == "invalid_json"


@pytest.mark.parametrize("raw", [b'["a\nb"]', b'"\t"'])
def test_raw_control_characters_inside_strings_are_invalid(raw: bytes) -> None:
    assert _rejected(raw).reason == "invalid_json"


# --- check_value types ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [b"bytes", {1, 2}, object(), 1 + 2j, {1: "a"}, {("a",): 1}, [float], {"a": [None, {"b": b""}]}],
)
def test_non_json_types_are_rejected(value: object) -> None:
    assert _value_rejected(value).reason == "not_json"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_in_values_are_rejected(value: float) -> None:
    assert _value_rejected({"a": [value]}).reason == "non_finite_number"


@pytest.mark.parametrize("value", ["\ud800", {"\udfff": 1}, ["ok", "x\udc00"]])
def test_lone_surrogates_in_values_are_rejected(value: object) -> None:
    assert _value_rejected(value).reason == "lone_surrogate"


def test_check_value_accepts_every_json_type() -> None:
    check_value({"a": [1, 2.5, -0.0, True, False, None, "s", (), {}]}, DEFAULTS)


# --- round trip ----------------------------------------------------------------------------

json_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(json_text, children, max_size=5)
    ),
    max_leaves=30,
)


@given(json_values, st.booleans(), st.booleans())
def test_json_dumps_output_parses_back_equal(
    value: object, as_bytes: bool, ensure_ascii: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ensure_ascii)
    raw: bytes | str = text.encode("utf-8") if as_bytes else text
    assert parse_json(raw, DEFAULTS) == value


tight_limits = st.builds(
    PayloadLimits,
    max_depth=st.integers(1, 4),
    max_keys=st.integers(1, 6),
    max_items=st.integers(1, 8),
    max_string_length=st.integers(1, 10),
    max_integer_digits=st.integers(1, 5),
)


def _verdict(call: object) -> str | None:
    try:
        call()  # type: ignore[operator]
    except PayloadRejected as exc:
        return exc.reason
    return None


@given(json_values, tight_limits, st.booleans())
def test_parsing_decides_as_the_walk_of_the_parsed_value(
    value: object, limits: PayloadLimits, as_bytes: bool
) -> None:
    # parse_json skips the walk for text too short to break a limit, and counts integer
    # digits only in text long enough to hold one too many: it refuses what the walk does
    # (with the reason of whichever limit it meets first).
    text = json.dumps(value, ensure_ascii=False)
    raw: bytes | str = text.encode("utf-8", "surrogatepass") if as_bytes else text
    if len(raw) > limits.max_bytes:
        return
    walked = _verdict(lambda: check_value(json.loads(text), limits))
    assert (_verdict(lambda: parse_json(raw, limits)) is None) == (walked is None)


# --- the C scanner first, the strict decoder when it cannot tell ---------------------------

# JSON texts written directly, so objects can repeat keys (a small alphabet, written plainly
# or escaped, some holding ':') and strings can hold ':' in both forms; a few leaves break a
# rule (NaN, a float past a double, a very long integer), and some texts are cut short or
# followed by more.
_KEYS = st.sampled_from(["a", "b", "a:b", ":", "\\u0061", "\\u003a", 'k\\"', ""])
_LEAVES = st.sampled_from(
    ["1", "-0", "2.5", "1e999", "NaN", "true", "null", '"x"', '"a:b"', '"\\u003a"', "9" * 30]
)
_SPACE = st.sampled_from(["", " ", "\n", "\t "])
json_texts = st.recursive(
    _LEAVES,
    lambda children: (
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(_KEYS, _SPACE, children), max_size=4).map(
            lambda members: (
                "{"
                + ",".join(f'"{key}"{space}:{space}{value}' for key, space, value in members)
                + "}"
            )
        )
    ),
    max_leaves=20,
)
hostile_texts = st.tuples(
    _SPACE, json_texts, st.sampled_from(["", " ", "\n", "x", "]", ",1", "{}"])
).map("".join) | st.tuples(json_texts, st.integers(0, 200)).map(lambda cut: cut[0][: cut[1]])


def _answer(call: object) -> tuple[str, str]:
    try:
        value = call()  # type: ignore[operator]
    except PayloadRejected as exc:
        return exc.reason, str(exc)
    return "parsed", repr(value)  # repr: key order and types (1, 1.0, True) count too


@contextlib.contextmanager
def _strict_only() -> Iterator[None]:
    """``parse_json`` with the strict decoder alone, as it was."""
    with pytest.MonkeyPatch.context() as strict:
        strict.setattr(
            _limits._parse, "_without_repeated_keys", lambda text, scan: _limits._parse._NOT_SURE
        )
        yield


@given(
    hostile_texts,
    st.sampled_from([DEFAULTS, PayloadLimits(max_integer_digits=5), SMALL]),
    st.booleans(),
)
def test_parsing_answers_as_the_strict_decoder_alone(
    text: str, limits: PayloadLimits, as_bytes: bool
) -> None:
    # A repeated key anywhere is refused whether or not the C scanner parsed the text
    # first; every other answer (the value, or the refusal with its reason and message) is
    # the strict decoder's own.
    raw: bytes | str = text.encode() if as_bytes else text
    quick = _answer(lambda: parse_json(raw, limits))
    with _strict_only():
        assert quick == _answer(lambda: parse_json(raw, limits))


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": 1, "b": 2}',  # one flat object: its ':' count its members
        '{"a": {"b": [1, {"c": 2}]}, "d": []}',  # nested: the walk counts them
        "[1, 2, 3]",  # no ':' at all
        '{"url": "http://x", "a": 1}',  # a ':' in a string: the strict decoder decides
        '{"a": 1, "a": 2}',
        '{"a": {"b": 1, "b": 1}}',
        '{"a": 1} x',
    ],
)
def test_each_way_through_the_quick_parse_answers_as_the_strict_one(raw: str) -> None:
    quick = _answer(lambda: parse_json(raw, DEFAULTS))
    with _strict_only():
        assert quick == _answer(lambda: parse_json(raw, DEFAULTS))
