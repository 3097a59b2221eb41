from __future__ import annotations

import enum
import hashlib
import json
import random
import struct

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from charter._canonical import NonCanonicalValueError, canonical_json, sha256_fingerprint

BOOKING = {
    "actionName": "booking.cancel",
    "actionVersion": "v1",
    "targetType": "booking",
    "targetId": "book_123",
    "commandInput": {"reason": "customer"},
}


def _policy_inputs(approval: str, reason: str | None) -> dict[str, object]:
    return {
        "approvalPolicy": approval,
        "capabilityId": "bookings:status:cancel",
        "capabilityVersion": "v1",
        "evaluatedRisk": "high",
        "reasonCode": reason,
    }


def _gate_action(policy_inputs: dict[str, object]) -> dict[str, object]:
    return {
        "actionName": "@voyant-travel/test#action.mutate",
        "actionVersion": "v1",
        "targetType": "test-target",
        "targetId": "target_1",
        "commandInput": {"value": 1},
        "policyInputs": policy_inputs,
    }


# --- vectors from the original TypeScript system -------------------------------------------


def test_v1_canonical_text_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json(BOOKING) == (
        '{"actionName":"booking.cancel","actionVersion":"v1",'
        '"commandInput":{"reason":"customer"},"targetId":"book_123","targetType":"booking"}'
    )


REFERENCE_FINGERPRINTS = [
    pytest.param(
        BOOKING,
        "sha256:b3ae75b900929edf6bfb75cb13fe1958991fe44e811ff0f0ce371d0755d1b9fc",
        id="v1",
    ),
    pytest.param(
        {
            **BOOKING,
            "policyInputs": _policy_inputs("conditional", "agent_high_risk_booking_cancel"),
        },
        "sha256:df39fefe7d238c756ecbd751876c8788112e48052614122ccc173baa9c80ba23",
        id="v2-conditional-approval",
    ),
    pytest.param(
        {**BOOKING, "policyInputs": _policy_inputs("required", None)},
        "sha256:013104ef540d6f493fb583fecd0cf45a48de15edaaf92cc6b5bd2ad9a4cb5dcd",
        id="v3-required-approval-null-reason",
    ),
    pytest.param(
        _gate_action(
            {
                "approvalPolicy": "required",
                "capabilityId": "@voyant-travel/test#action.mutate",
                "capabilityVersion": "v1",
                "evaluatedRisk": "high",
                "reasonCode": None,
            }
        ),
        "sha256:2ea16a615febcc7d612e8fc7f0960b68a742bdc7841db568133d0005e24b0329",
        id="v4-gate-approval",
    ),
    pytest.param(
        _gate_action(
            {
                "capabilityId": "@voyant-travel/test#tool.mutate",
                "capabilityVersion": "v1",
                "risk": "high",
                "ledger": "required",
            }
        ),
        "sha256:e23884589b552028dd34d81f091f305a89829d2998931c368d775b2d4f18d88f",
        id="v7-gate-without-approval",
    ),
]
"""The original TypeScript system's actions and the fingerprints it gave them."""


@pytest.mark.parametrize(("value", "expected"), REFERENCE_FINGERPRINTS)
def test_the_fingerprint_matches_the_reference(value: dict[str, object], expected: str) -> None:
    assert sha256_fingerprint(value) == expected


def test_fingerprint_is_the_sha256_of_the_utf8_canonical_text() -> None:
    value = {"b": "€", "a": [1, 2.5]}
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    assert sha256_fingerprint(value) == f"sha256:{digest}"


# --- RFC 8785 examples -----------------------------------------------------------------------

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
RFC_NUMBER_SAMPLES = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


@pytest.mark.parametrize(("bits", "expected"), RFC_NUMBER_SAMPLES)
def test_numbers_follow_the_rfc_8785_sample_table(bits: str, expected: str) -> None:
    assert canonical_json(_double(bits)) == expected


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000"], ids=["NaN", "Infinity"])
def test_the_rfc_non_finite_samples_are_rejected(bits: str) -> None:
    with pytest.raises(NonCanonicalValueError):
        canonical_json(_double(bits))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1.2345678901234568e20, "123456789012345680000"),
        (123e-20, "1.23e-18"),
        (5e-7, "5e-7"),
        (1.5e300, "1.5e+300"),
        (-1.5, "-1.5"),
        (0.1, "0.1"),
        (100.0, "100"),
        (1e16, "10000000000000000"),
        (4.5, "4.5"),
        (2e-3, "0.002"),
    ],
)
def test_floats_are_formatted_like_ecmascript(value: float, expected: str) -> None:
    assert canonical_json(value) == expected


def test_rfc_section_3_2_2_example_is_reproduced() -> None:
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    assert canonical_json(value) == (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_rfc_section_3_2_3_keys_sort_by_utf16_code_units_not_code_points() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    names = list(json.loads(canonical_json(value)).values())
    assert names == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    # By code point the emoji (U+1F600) would come last; by UTF-16 (0xD83D) it does not.
    assert sorted(value)[-1] == "\U0001f600"


# --- strings ---------------------------------------------------------------------------------


def test_strings_escape_only_quote_backslash_and_control_characters() -> None:
    text = '"\\/\b\t\n\f\r\x00\x01\x1f\x7f\u2028é😀'
    assert canonical_json(text) == '"\\"\\\\/\\b\\t\\n\\f\\r\\u0000\\u0001\\u001f\x7f\u2028é😀"'


def test_control_character_escapes_use_lowercase_hex() -> None:
    assert canonical_json("\x1b\x0b") == '"\\u001b\\u000b"'


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\ud83d\ude00"])
def test_surrogate_code_points_in_strings_are_rejected(text: str) -> None:
    with pytest.raises(NonCanonicalValueError, match="surrogate"):
        canonical_json({"k": [text]})


def test_unpaired_surrogates_in_keys_are_rejected() -> None:
    with pytest.raises(NonCanonicalValueError, match="surrogate"):
        canonical_json({"\udc00": 1, "a": 2})


# --- integers, literals, types -----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, 42, 2**53, -(2**53), 2**53 - 1])
def test_integers_up_to_2_pow_53_are_exact(value: int) -> None:
    assert canonical_json(value) == str(value)


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1, 2**53 + 2, 10**20, 10**400])
def test_integers_beyond_2_pow_53_are_rejected_rather_than_rounded(value: int) -> None:
    with pytest.raises(NonCanonicalValueError, match="as a string"):
        canonical_json({"n": value})


def test_integral_floats_beyond_2_pow_53_are_fine() -> None:
    assert canonical_json([1e20, float(2**60)]) == "[100000000000000000000,1152921504606847000]"


def test_literals_and_empty_containers() -> None:
    assert canonical_json([True, False, None, {}, [], ()]) == "[true,false,null,{},[],[]]"


def test_tuples_serialize_as_arrays() -> None:
    assert canonical_json((1, (2, "x"))) == canonical_json([1, [2, "x"]]) == '[1,[2,"x"]]'


class _Colour(enum.StrEnum):
    RED = "red"


class _Size(enum.IntEnum):
    LARGE = 3


def test_subclasses_of_json_types_serialize_as_their_values() -> None:
    assert canonical_json({_Colour.RED: _Size.LARGE}) == '{"red":3}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_are_rejected_with_a_typed_value_error(value: float) -> None:
    with pytest.raises(NonCanonicalValueError, match="not a JSON number") as info:
        canonical_json([value])
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [b"x", {1, 2}, object(), 1 + 2j, bytearray(b"x")])
def test_non_json_types_are_rejected(value: object) -> None:
    with pytest.raises(NonCanonicalValueError, match="not a JSON type"):
        canonical_json({"v": value})


@pytest.mark.parametrize("key", [1, None, ("a",), True])
def test_non_string_keys_are_rejected(key: object) -> None:
    with pytest.raises(NonCanonicalValueError, match="keys must be strings"):
        canonical_json({key: 1})


def test_circular_references_are_rejected() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(NonCanonicalValueError, match="circular"):
        canonical_json({"a": loop})


def test_a_shared_but_acyclic_value_is_serialized_at_each_use() -> None:
    shared = {"x": 1}
    assert canonical_json([shared, {"y": shared}]) == '[{"x":1},{"y":{"x":1}}]'


def test_deep_nesting_does_not_hit_the_recursion_limit() -> None:
    value: object = 0
    for _ in range(100_000):
        value = [value]
    assert canonical_json(value) == "[" * 100_000 + "0" + "]" * 100_000


# --- properties ------------------------------------------------------------------------------

json_text = st.text(st.characters(exclude_categories=["Cs"]))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(json_text, children, max_size=6)
    ),
    max_leaves=40,
)


def _oracle(value: object) -> bytes:
    # rfc8785 types its argument with a private alias; the strategies only build JSON values.
    return rfc8785.dumps(value)  # type: ignore[arg-type]


@given(json_values)
def test_agrees_with_the_rfc8785_package(value: object) -> None:
    assert canonical_json(value).encode("utf-8") == _oracle(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_agree_with_the_rfc8785_package(value: float) -> None:
    assert canonical_json(value).encode("utf-8") == _oracle(value)


@given(st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1))
def test_safe_integers_agree_with_the_rfc8785_package(value: int) -> None:
    assert canonical_json(value).encode("utf-8") == _oracle(value)


@given(json_values)
def test_canonical_text_parsed_as_javascript_would_canonicalizes_to_itself(value: object) -> None:
    text = canonical_json(value)
    # JavaScript's JSON.parse makes every number a double.
    assert canonical_json(json.loads(text, parse_int=float)) == text


@given(st.dictionaries(json_text, json_scalars, max_size=12), st.randoms())
def test_key_insertion_order_does_not_change_the_output(
    value: dict[str, object], rng: random.Random
) -> None:
    items = list(value.items())
    rng.shuffle(items)
    shuffled = dict(items)
    assert canonical_json(shuffled) == canonical_json(value)
    assert sha256_fingerprint(shuffled) == sha256_fingerprint(value)
