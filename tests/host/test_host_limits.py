"""Raw payload limits, enforced by ``Host.invoke`` before parsing or validation (I01-I07).

Every hostile payload ends as a clean ``INVALID_INPUT`` with a reason, never an exception,
never a handler call and never a ledger row.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue
from tests.builders import tiered_tool

from charter import ErrorCode, Principal, Registry, RiskTier
from charter._limits import PayloadLimits
from charter.host import Host
from charter.ledger import MemoryStore
from charter.outcome import Completed, Failed

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset())


class Payload(BaseModel):
    data: JsonValue = None
    count: int = 0


class Ok(BaseModel):
    ok: bool


class Kit:
    def __init__(self, limits: PayloadLimits | None = None) -> None:
        self.calls = 0
        self.store = MemoryStore()
        registry = Registry()

        async def handler(payload: Payload) -> Ok:
            self.calls += 1
            return Ok(ok=True)

        for name, tier in (("store_data", RiskTier.WRITE), ("read_data", RiskTier.READ)):
            registry.register(tiered_tool(name, tier, handler, Payload, Ok))
        self.host = Host(registry, store=self.store, limits=limits)

    async def rejected(self, arguments: object, reason: str, tool: str = "store_data") -> Failed:
        outcome = await self.host.invoke(tool, arguments, PRINCIPAL)
        assert isinstance(outcome, Failed), outcome
        assert outcome.code is ErrorCode.INVALID_INPUT
        assert outcome.reason == reason
        assert self.calls == 0 and self.store.entries == {}
        event = (await self.host.audit.events(limit=1))[0]
        assert (event.code, event.reason) == ("INVALID_INPUT", reason)
        return outcome


def _with_request_id(data: object) -> dict[str, Any]:
    return {"data": data, "_charter": {"requestId": str(uuid.uuid4())}}


def _nested_text(depth: int, kind: str = "array") -> str:
    opening, closing = ("[", "]") if kind == "array" else ('{"a":', "}")
    return '{"data": ' + opening * (depth - 1) + "1" + closing * (depth - 1) + "}"


def _nested_value(depth: int, kind: str = "array") -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value] if kind == "array" else {"a": value}
    return {"data": value}


# -- size -----------------------------------------------------------------------------------


async def test_raw_json_over_the_byte_limit_is_rejected_before_parsing() -> None:
    kit = Kit()
    body = json.dumps({"data": "x" * (1_048_576 - 11)})
    assert len(body.encode()) == 1_048_576 + 1
    for raw in (body, body.encode()):
        failed = await kit.rejected(raw, "input_too_large")
        assert "x" * 20 not in failed.message


async def test_multibyte_text_is_measured_in_utf8_bytes() -> None:
    kit = Kit(PayloadLimits(max_bytes=100))
    body = json.dumps({"data": "é" * 45}, ensure_ascii=False)  # 45 chars, 90 bytes of é
    assert len(body) < 100 < len(body.encode())
    await kit.rejected(body, "input_too_large")


async def test_a_python_string_over_the_length_limit_is_rejected() -> None:
    kit = Kit(PayloadLimits(max_string_length=1000))
    await kit.rejected({"data": "x" * 1001}, "input_too_large")
    await kit.rejected({"x" * 1001: 1}, "input_too_large")


async def test_parsed_arguments_whose_strings_add_up_past_max_bytes_are_rejected() -> None:
    # What an MCP client's parsed arguments can be: every string under the length limit,
    # few of them, and still more text in all than the payload may hold.
    kit = Kit(PayloadLimits(max_bytes=10_000, max_string_length=4_000))
    await kit.rejected(_with_request_id(["x" * 4_000] * 3), "input_too_large")
    await kit.rejected({"data": ["x" * 4_000] * 3}, "input_too_large", tool="read_data")
    assert isinstance(
        await kit.host.invoke("read_data", {"data": ["x" * 4_000] * 2}, PRINCIPAL), Completed
    )


# -- depth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("depth", [65, 200, 1000, 100_000])
async def test_nesting_past_the_depth_limit_is_rejected_as_text_and_as_values(
    kind: str, depth: int
) -> None:
    kit = Kit()
    text = _nested_text(depth, kind)
    await kit.rejected(text, "input_too_deep")
    await kit.rejected(text.encode(), "input_too_deep")
    await kit.rejected(_nested_value(depth, kind), "input_too_deep")


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("depth", [32, 64])
async def test_nesting_within_the_depth_limit_runs(kind: str, depth: int) -> None:
    kit = Kit()
    # The arguments object itself is one level: data nests depth - 1 more.
    for arguments in (_nested_text(depth, kind), _nested_value(depth, kind)):
        outcome = await kit.host.invoke("read_data", arguments, PRINCIPAL)
        assert isinstance(outcome, Completed)


# -- width ----------------------------------------------------------------------------------


async def test_too_many_object_members_are_rejected() -> None:
    kit = Kit()
    wide = {"data": {f"k{i}": i for i in range(10_001)}}
    await kit.rejected(wide, "input_too_wide")
    await kit.rejected(json.dumps(wide), "input_too_wide")


async def test_too_many_array_items_are_rejected() -> None:
    kit = Kit()
    long = {"data": [0] * 100_001}
    await kit.rejected(long, "input_too_wide")
    await kit.rejected(json.dumps(long).encode(), "input_too_wide")


# -- strict JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    ['{"data": 1, "data": 2}', '{"data": {"a": 1, "a": 1}}', '{"data": [{"k": 1, "k": 2}]}'],
    ids=["top", "nested", "in-array"],
)
async def test_duplicate_keys_are_rejected(raw: str) -> None:
    kit = Kit()
    await kit.rejected(raw, "duplicate_key")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
async def test_non_finite_numbers_in_text_are_rejected(literal: str) -> None:
    kit = Kit()
    await kit.rejected('{"data": ' + literal + "}", "non_finite_number")


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")], ids=repr)
async def test_non_finite_python_floats_are_rejected(number: float) -> None:
    kit = Kit()
    await kit.rejected({"data": number}, "non_finite_number")
    await kit.rejected({"data": [1.0, {"x": number}]}, "non_finite_number")


async def test_a_five_thousand_digit_integer_is_rejected_as_text_and_as_a_value() -> None:
    kit = Kit()
    digits = "9" * 5000
    await kit.rejected('{"count": ' + digits + "}", "input_too_large")
    await kit.rejected({"count": 10**5000}, "input_too_large")
    await kit.rejected({"count": -(10**5000)}, "input_too_large")


async def test_an_integer_past_two_to_the_53_is_fingerprinted_exactly() -> None:
    # JSON numbers are doubles, where 2**53 + 1 rounds to 2**53; the fingerprint's form
    # writes such an integer as {"$int": "<digits>"}, so the two are different commands.
    kit = Kit()
    big = 2**53 + 1
    controls = {"_charter": {"requestId": str(uuid.uuid4())}}
    first = await kit.host.invoke("store_data", {"count": big, **controls}, PRINCIPAL)
    assert isinstance(first, Completed) and not first.replayed
    again = await kit.host.invoke("store_data", json.dumps({"count": big, **controls}), PRINCIPAL)
    assert isinstance(again, Completed) and again.replayed
    for other in ({"count": 2**53}, {"count": big, "data": [{"deep": big}]}):
        outcome = await kit.host.invoke("store_data", {**other, **controls}, PRINCIPAL)
        assert isinstance(outcome, Failed) and outcome.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert kit.calls == 1


async def test_a_lone_surrogate_is_rejected_in_text_escapes_and_python_strings() -> None:
    kit = Kit()
    await kit.rejected('{"data": "\\ud800"}', "lone_surrogate")
    await kit.rejected(b'{"data": "a\\udfffb"}', "lone_surrogate")
    await kit.rejected({"data": "a\ud800b"}, "lone_surrogate")
    await kit.rejected({"\udc00": 1}, "lone_surrogate")
    # A paired surrogate escape is an ordinary character.
    assert isinstance(
        await kit.host.invoke("read_data", '{"data": "\\ud83d\\ude00"}', PRINCIPAL), Completed
    )


async def test_bytes_that_are_not_utf8_are_rejected() -> None:
    kit = Kit()
    await kit.rejected(b'{"data": "\xff\xfe"}', "invalid_utf8")


@pytest.mark.parametrize("raw", ["{", '{"data": }', "", "tru", '{"data": 1} trailing'])
async def test_text_that_is_not_json_is_rejected(raw: str) -> None:
    kit = Kit()
    await kit.rejected(raw, "invalid_json")


@pytest.mark.parametrize("arguments", ["[1, 2]", '"text"', "42", "null", [1, 2], "true"], ids=repr)
async def test_arguments_that_are_not_an_object_are_rejected(arguments: object) -> None:
    kit = Kit()
    await kit.rejected(arguments, "not_an_object")


@pytest.mark.parametrize(
    "value", [{1, 2}, b"bytes", object(), {1: "int key"}, (1j,)], ids=lambda v: type(v).__name__
)
async def test_python_values_of_non_json_types_are_rejected(value: object) -> None:
    kit = Kit()
    await kit.rejected({"data": value}, "not_json")


async def test_limits_run_before_the_tool_is_looked_up() -> None:
    kit = Kit()
    outcome = await kit.host.invoke("no_such_tool", '{"a": NaN}', PRINCIPAL)
    assert isinstance(outcome, Failed) and outcome.reason == "non_finite_number"
