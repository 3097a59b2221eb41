"""The canonical form of a validated input (``charter._fingerprint``): what a fingerprint binds.

The form is persistent, so the golden values here must never change: a change turns every
retry in flight into ``IDEMPOTENCY_CONFLICT``. Add a type by giving a refused one a form.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum, IntEnum, StrEnum
from fractions import Fraction
from ipaddress import IPv4Address, IPv4Network, IPv6Interface
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, NamedTuple
from uuid import UUID

import pytest
import rfc8785
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    PlainSerializer,
    PrivateAttr,
    RootModel,
    Secret,
    SecretBytes,
    SecretStr,
    computed_field,
    field_serializer,
    model_serializer,
)
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass

from charter import Failed, Registry, RiskPolicy, ToolContext, define_tool
from charter._canonical import NonCanonicalValueError, canonical_json, sha256_fingerprint
from charter._fingerprint import MASKED_SECRET, canonical_input, shown_input
from charter.policy import command_fingerprint

SRC = Path(__file__).resolve().parents[1] / "src"


class Colour(Enum):
    RED = "red"


class Size(IntEnum):
    LARGE = 3


class Mode(StrEnum):
    FAST = "fast"


class Pair(NamedTuple):
    left: int
    right: str


@dataclass(frozen=True)
class Point:
    x: int
    y: int


class Ids(RootModel[list[int]]):
    pass


class Inner(BaseModel):
    note: str
    token: SecretStr


class Everything(BaseModel):
    """One field of each kind form 1 knows, with serializers that would hide them."""

    model_config = ConfigDict(extra="allow")

    text: str
    count: int
    big: int
    negative_big: int
    ratio: float
    negative_zero: float
    whole_float: float
    flag: bool
    nothing: None
    secret: SecretStr
    secret_bytes: SecretBytes
    secret_int: Secret[int]
    data: bytes
    hidden: str = Field(exclude=True)
    masked: Annotated[str, PlainSerializer(lambda _: "same for all")]
    renamed: str = Field(alias="renamedAlias")
    tags: frozenset[str]
    numbers: set[int]
    pair: Pair
    ordered: tuple[int, ...]
    queue: deque[int]
    inner: list[Inner]
    by_id: dict[int, str]
    by_name: dict[str, int]
    dollars: dict[str, str]
    colour: Colour
    size: Size
    mode: Mode
    when: datetime
    naive: datetime
    day: date
    clock: time
    span: timedelta
    amount: Decimal
    ident: UUID
    site: HttpUrl
    path: PurePosixPath
    address: IPv4Address
    interface: IPv6Interface
    network: IPv4Network
    point: Point
    ids: Ids
    _private: str = PrivateAttr(default="private")

    @field_serializer("text")
    def _hide_text(self, value: str) -> str:
        return "hidden by a serializer"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def derived(self) -> str:
        return self.text.upper()


EVERYTHING: dict[str, Any] = {
    "text": "héllo\n",
    "count": -7,
    "big": 2**53 + 1,
    "negative_big": -(2**64),
    "ratio": 0.1,
    "negative_zero": -0.0,
    "whole_float": 1.0,
    "flag": True,
    "nothing": None,
    "secret": "DE89 3704 0044 0532 0130 00",
    "secret_bytes": b"\x00pin",
    "secret_int": 1234,
    "data": b"\xff\x00bytes",
    "hidden": "excluded from dumps",
    "masked": "shown to no serializer",
    "renamedAlias": "by its Python name",
    "tags": ["pear", "fig", "apple"],
    "numbers": [10, 9, 100, -1],
    "pair": (1, "one"),
    "ordered": [3, 1, 2],
    "queue": [5, 4],
    "inner": [{"note": "n", "token": "t0k3n"}],
    "by_id": {2: "two", 10: "ten"},
    "by_name": {"b": 2, "a": 1},
    "dollars": {"$secret": "not a secret", "$$x": "y"},
    "colour": "red",
    "size": 3,
    "mode": "fast",
    "when": "2030-01-01T12:00:00.5+01:00",
    "naive": "2030-01-01T12:00:00",
    "day": "2030-01-01",
    "clock": "23:59:59",
    "span": "P1DT1.5S",
    "amount": "100.50",
    "ident": "6F1C4A46-0C1D-4C2B-9C39-7B5B0F8E1A2D",
    "site": "https://example.com/pay?x=1",
    "path": "/srv/data/../file.txt",
    "address": "192.0.2.1",
    "interface": "2001:db8::1/64",
    "network": "192.0.2.0/24",
    "point": {"x": 1, "y": 2},
    "ids": [3, 2, 1],
    "extra_field": {"k": [1, 2]},
}
"""Validated into ``Everything``; ``extra_field`` is an extra (``extra="allow"``)."""

EVERYTHING_TEXT = (
    '{"address":{"$ipaddress":"192.0.2.1"},"amount":{"$decimal":"100.50"},'
    '"big":{"$int":"9007199254740993"},"by_id":{"$map":[[10,"ten"],[2,"two"]]},'
    '"by_name":{"a":1,"b":2},"clock":{"$time":"23:59:59"},"colour":{"$enum":"red"},'
    '"count":-7,"data":{"$bytes":"/wBieXRlcw=="},"day":{"$date":"2030-01-01"},'
    '"dollars":{"$$$x":"y","$$secret":"not a secret"},"extra_field":{"k":[1,2]},'
    '"flag":true,"hidden":"excluded from dumps",'
    '"ident":{"$uuid":"6f1c4a46-0c1d-4c2b-9c39-7b5b0f8e1a2d"},"ids":[3,2,1],'
    '"inner":[{"note":"n","token":{"$secret":"t0k3n"}}],'
    '"interface":{"$ipinterface":"2001:db8::1/64"},"masked":"shown to no serializer",'
    '"mode":"fast","naive":{"$datetime":"2030-01-01T12:00:00"},'
    '"negative_big":{"$int":"-18446744073709551616"},"negative_zero":0,'
    '"network":{"$ipnetwork":"192.0.2.0/24"},"nothing":null,'
    '"numbers":{"$set":[-1,10,100,9]},"ordered":[3,1,2],"pair":[1,"one"],'
    '"path":{"$path":"/srv/data/../file.txt"},"point":{"x":1,"y":2},"queue":[5,4],'
    '"ratio":0.1,"renamed":"by its Python name",'
    '"secret":{"$secret":"DE89 3704 0044 0532 0130 00"},'
    '"secret_bytes":{"$secret":{"$bytes":"AHBpbg=="}},"secret_int":{"$secret":1234},'
    '"site":{"$url":"https://example.com/pay?x=1"},"size":3,'
    '"span":{"$timedelta":[1,1,500000]},"tags":{"$set":["apple","fig","pear"]},'
    '"text":"h\u00e9llo\\n","when":{"$datetime":"2030-01-01T12:00:00.500000+01:00"},'
    '"whole_float":1}'
)
"""Form 1 of ``everything()``; check it against the rules in ``charter._fingerprint``."""
EVERYTHING_FINGERPRINT = "sha256:c7a46051bea8a3a7af4f4a49bd1e0102cbe84fcaae1504ee7fc4c0497ded2953"


def everything(**changes: Any) -> Everything:
    return Everything.model_validate({**EVERYTHING, **changes})


def fingerprint(model: BaseModel) -> str:
    return sha256_fingerprint(canonical_input(model))


# -- golden values ----------------------------------------------------------------------------


def test_every_kind_of_value_has_its_pinned_canonical_text() -> None:
    assert canonical_json(canonical_input(everything())) == EVERYTHING_TEXT


def test_every_kind_of_value_has_its_pinned_fingerprint() -> None:
    assert fingerprint(everything()) == EVERYTHING_FINGERPRINT


def test_the_pinned_text_is_rfc8785_canonical_json() -> None:
    # The reference implementation writes the same bytes: the form is plain JSON data.
    assert rfc8785.dumps(json.loads(EVERYTHING_TEXT)).decode() == EVERYTHING_TEXT


class Line(BaseModel):
    sku: str
    quantity: int


class Plain(BaseModel):
    name: str
    size: int = 1
    price: float
    active: bool
    note: str | None = None
    lines: list[Line]
    meta: dict[str, Any]


PLAIN_COMMAND = "sha256:cc64b34375d21e6adf458658a6a07cdde819efd81ab469fe41f8da30d5eb3803"
"""The command fingerprint of ``plain()``, the same before form 1 (``model_dump``) and now."""


def plain() -> Plain:
    return Plain(
        name="Büro",
        price=-0.0,
        active=True,
        lines=[Line(sku="a", quantity=2)],
        meta={"z": [1, 2.5, None], "a": {"b": "c"}},
    )


def test_a_plain_model_keeps_the_fingerprint_it_had_before_form_1() -> None:
    # JSON types map to themselves, so retries in flight across the upgrade still match.
    model = plain()
    envelope: dict[str, Any] = {
        "capability_id": "orders.place",
        "capability_version": "v1",
        "tenant_id": "acme",
        "target": "order:1",
    }
    now = command_fingerprint(**envelope, arguments=canonical_input(model))
    assert now == PLAIN_COMMAND
    assert command_fingerprint(**envelope, arguments=model.model_dump(mode="json")) == now


SEEDED_CHILD = """
import sys
from pydantic import BaseModel
from charter import Failed, Registry, RiskPolicy, ToolContext, define_tool
from charter._canonical import canonical_json, sha256_fingerprint
from charter._fingerprint import canonical_input

class Basket(BaseModel):
    fruit: set[str]
    pairs: frozenset[tuple[str, int]]
    by_flag: dict[frozenset[str], int]

fruit = ["pear", "fig", "kiwi", "lime", "plum", "date", "sloe", "yuzu", "apple", "quince"]
basket = Basket(
    fruit=fruit,
    pairs=[(name, len(name)) for name in fruit],
    by_flag={frozenset(fruit[:5]): 1, frozenset(fruit[5:]): 2},
)
form = canonical_input(basket)
print(",".join(basket.fruit))
print(sha256_fingerprint(form))
print(canonical_json(form))
"""
BASKET_TEXT = (
    '{"by_flag":{"$map":[[{"$set":["apple","date","quince","sloe","yuzu"]},2],'
    '[{"$set":["fig","kiwi","lime","pear","plum"]},1]]},'
    '"fruit":{"$set":["apple","date","fig","kiwi","lime","pear","plum","quince","sloe","yuzu"]},'
    '"pairs":{"$set":[["apple",5],["date",4],["fig",3],["kiwi",4],["lime",4],["pear",4],'
    '["plum",4],["quince",6],["sloe",4],["yuzu",4]]}}'
)
BASKET_FINGERPRINT = "sha256:ed216987681f8352e5c61459737a964b463cc735fc9ed8afed970aa869a498a2"


def test_a_set_has_one_form_in_every_process_whatever_its_hash_seed() -> None:
    outputs = []
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", SEEDED_CHILD],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        outputs.append(done.stdout.splitlines())
    # The seeds really iterate the set in different orders...
    assert len({iterated for iterated, _, _ in outputs}) > 1
    # ...and the form is the same in every process, and pinned.
    assert {(digest, text) for _, digest, text in outputs} == {(BASKET_FINGERPRINT, BASKET_TEXT)}


# -- what is bound --------------------------------------------------------------------------


def test_a_secret_is_hashed_by_its_value_and_shown_only_as_bound() -> None:
    original = everything(data=b"utf-8 for the dump")
    swapped = everything(data=b"utf-8 for the dump", secret="DE44 5001 0517 5407 3249 31")
    # What a dump shows cannot tell them apart.
    assert original.model_dump(mode="json") == swapped.model_dump(mode="json")
    assert fingerprint(original) != fingerprint(swapped)
    assert shown_input(original) == shown_input(swapped)
    shown = shown_input(original)
    assert shown["secret"] == shown["secret_bytes"] == shown["secret_int"] == MASKED_SECRET
    assert shown["inner"] == [{"note": "n", "token": MASKED_SECRET}]
    text = json.dumps(shown)
    for secret in ("DE89", "AHBpbg", "1234", "t0k3n"):
        assert secret not in text
    # Everything but the secrets is shown exactly as it is hashed.
    secrets = dict.fromkeys(("secret", "secret_bytes", "secret_int"), MASKED_SECRET)
    masked_inner = {"inner": [{"note": "n", "token": MASKED_SECRET}]}
    assert shown == {**canonical_input(original), **secrets, **masked_inner}


@pytest.mark.parametrize(
    "changes",
    [
        {"hidden": "another"},  # Field(exclude=True)
        {"masked": "another"},  # PlainSerializer returning a constant
        {"text": "another"},  # @field_serializer returning a constant
        {"secret_bytes": b"\x00pim"},
        {"secret_int": 1235},
        {"inner": [{"note": "n", "token": "other"}]},
        {"tags": ["pear", "fig"]},
        {"by_id": {2: "two", 11: "ten"}},
        {"extra_field": {"k": [2, 1]}},
        {"amount": "100.5"},  # Decimal is exact: 100.5 is not 100.50
        {"when": "2030-01-01T11:00:00.5Z"},  # the same instant, another offset
        {"naive": "2030-01-01T12:00:00Z"},  # aware is not naive
        {"big": 2**53 + 2},
        {"ordered": [1, 2, 3]},
    ],
    ids=repr,
)
def test_no_serializer_hides_a_change_from_the_fingerprint(changes: dict[str, Any]) -> None:
    assert fingerprint(everything(**changes)) != fingerprint(everything())


class Wrapped(BaseModel):
    name: str
    pin: SecretStr

    @model_serializer
    def _nothing(self) -> dict[str, Any]:
        return {}


def test_a_model_serializer_cannot_hide_the_fields() -> None:
    first, second = Wrapped(name="a", pin="1111"), Wrapped(name="a", pin="2222")
    assert first.model_dump() == second.model_dump() == {}
    assert fingerprint(first) != fingerprint(second)
    assert shown_input(first) == {"name": "a", "pin": MASKED_SECRET}


def test_computed_fields_and_private_attributes_are_derived_so_left_out() -> None:
    model = everything()
    changed = everything()
    changed._private = "changed"
    assert "derived" not in canonical_input(model) and "_private" not in canonical_input(model)
    assert fingerprint(changed) == fingerprint(model)


@pytest.mark.parametrize(
    "changes",
    [
        {"tags": ["apple", "pear", "fig"]},  # a set in another order
        {"numbers": [-1, 100, 9, 10, 9]},
        {"by_id": {10: "ten", 2: "two"}},  # a map in another order
        {"by_name": {"a": 1, "b": 2}},
        {"negative_zero": 0.0},  # RFC 8785: -0 is 0
        {"whole_float": 1},  # a float field validates 1 to 1.0
        {"ident": "6f1c4a460c1d4c2b9c397b5b0f8e1a2d"},  # a UUID in another spelling
        {"span": 86401.5},  # the same timedelta in seconds
        {"pair": ["1", "one"]},  # coerced to the same validated value
    ],
    ids=repr,
)
def test_calls_that_validate_to_the_same_values_share_a_fingerprint(
    changes: dict[str, Any],
) -> None:
    assert fingerprint(everything(**changes)) == fingerprint(everything())


class Loose(BaseModel):
    value: Any = None
    values: dict[int | str, str] = {}


def test_a_key_starting_with_a_dollar_never_reads_as_a_tag() -> None:
    posing = Loose(value={"$secret": "bound"})
    assert shown_input(posing) == {"value": {"$$secret": "bound"}, "values": {}}
    assert fingerprint(posing) != fingerprint(Loose(value=SecretStr("bound")))


class CamelPayout(BaseModel):
    """A common style: camelCase on the wire, and extra fields kept."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    booking_id: str
    amount_cents: int


@pydantic_dataclass(config=ConfigDict(extra="allow"))
class OpenNote:
    text: str


class Noted(BaseModel):
    note: OpenNote


def test_a_field_sent_by_alias_and_by_name_binds_both_values_apart() -> None:
    # Pydantic gives the field the alias's value and keeps the name's as an extra field.
    # Under one key the extra would replace the value the handler gets, in the hash and
    # in what the approver is shown.
    sent = {"bookingId": "bkg_1", "amountCents": 999_999, "amount_cents": 1}
    spoofed = CamelPayout.model_validate(sent)
    assert spoofed.amount_cents == 999_999
    assert shown_input(spoofed) == {
        "booking_id": "bkg_1",
        "amount_cents": 999_999,
        "$extra": {"amount_cents": 1},
    }
    honest = CamelPayout.model_validate({"bookingId": "bkg_1", "amountCents": 1})
    assert fingerprint(spoofed) != fingerprint(honest)
    assert fingerprint(spoofed) != fingerprint(
        CamelPayout.model_validate({"bookingId": "bkg_1", "amountCents": 999_999})
    )
    # An extra that names no field keeps the form it always had.
    other = CamelPayout.model_validate({"bookingId": "bkg_1", "amountCents": 1, "memo": "x"})
    assert canonical_input(other) == {"booking_id": "bkg_1", "amount_cents": 1, "memo": "x"}


def test_the_extra_fields_of_a_pydantic_dataclass_are_bound() -> None:
    # They live on the instance, beside its fields, where the handler can read them.
    noted = Noted.model_validate({"note": {"text": "hi", "priority": "urgent"}})
    assert shown_input(noted) == {"note": {"text": "hi", "priority": "urgent"}}
    assert fingerprint(noted) != fingerprint(Noted.model_validate({"note": {"text": "hi"}}))


def test_integers_beyond_two_to_the_53_are_exact_and_distinct_from_doubles() -> None:
    assert canonical_input(Loose(value=2**53)) == {"value": 2**53, "values": {}}
    assert canonical_input(Loose(value=-(2**53) - 1))["value"] == {"$int": "-9007199254740993"}
    assert fingerprint(Loose(value=2**53 + 1)) != fingerprint(Loose(value=2**53))
    # A double is its value: 2**53 + 1 as a float is 2**53, as in any JSON.
    assert fingerprint(Loose(value=float(2**53 + 1))) == fingerprint(Loose(value=2**53))


def test_keys_of_other_types_are_pairs_distinct_from_string_keys() -> None:
    mixed = Loose(values={1: "int", "1": "str"})
    assert canonical_input(mixed)["values"] == {"$map": [["1", "str"], [1, "int"]]}
    assert fingerprint(Loose(values={1: "x"})) != fingerprint(Loose(values={"1": "x"}))


def test_a_tuple_and_a_list_with_the_same_items_are_the_same_array() -> None:
    assert canonical_input(Loose(value=(1, "a"))) == canonical_input(Loose(value=[1, "a"]))


# -- refusals -------------------------------------------------------------------------------


class Opaque:
    """A type form 1 does not know."""

    def __repr__(self) -> str:
        # Stable across processes: pytest-xdist workers must collect the same test ids.
        return "Opaque()"


class Odd(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    ratio: float = 0.0
    amount: Annotated[Decimal, Field(allow_inf_nan=True)] = Decimal(0)
    thing: Opaque | None = None
    stream: Iterable[int] | None = None
    fraction: Fraction | None = None
    nested: list[dict[str, Any]] = []


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"ratio": float("nan")}, "input.ratio"),
        ({"ratio": float("-inf")}, "input.ratio"),
        ({"amount": "NaN"}, "input.amount"),
        ({"thing": Opaque()}, "input.thing"),
        ({"stream": [1, 2]}, "input.stream"),
        ({"fraction": "1/3"}, "input.fraction"),
        ({"nested": [{"ok": 1}, {"deep": [float("nan")]}]}, "input.nested[1].deep[0]"),
    ],
    ids=repr,
)
def test_a_value_without_a_form_is_refused_naming_where(
    changes: dict[str, Any], where: str
) -> None:
    model = Odd.model_validate(changes)
    for form in (canonical_input, shown_input):
        with pytest.raises(NonCanonicalValueError) as refused:
            form(model)
        assert str(refused.value).startswith(f"{where}: ")


def test_an_iterable_field_is_refused_without_being_consumed() -> None:
    model = Odd(stream=[1, 2])
    with pytest.raises(NonCanonicalValueError):
        canonical_input(model)
    assert model.stream is not None and list(model.stream) == [1, 2]


def test_a_value_that_contains_itself_is_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(NonCanonicalValueError, match="nested too deeply or contains itself"):
        canonical_input(Loose(value=cycle))


def test_a_secret_without_a_form_is_refused_in_the_view_too() -> None:
    class Hidden(BaseModel):
        pin: Secret[float]

    model = Hidden(pin=float("nan"))
    for form in (canonical_input, shown_input):
        with pytest.raises(NonCanonicalValueError, match=r"^input\.pin\.\$secret: "):
            form(model)


# -- the prepared action ----------------------------------------------------------------------


class Payment(BaseModel):
    iban: SecretStr
    amount: int
    memo: str = Field(default="", exclude=True)


class Paid(BaseModel):
    ok: bool


@pytest.mark.anyio
async def test_a_prepared_action_carries_the_hashed_form_and_the_shown_one() -> None:
    async def pay(payment: Payment) -> Paid:
        return Paid(ok=True)

    registry = Registry()
    registry.register(
        define_tool(
            name="pay",
            description="Pay.",
            input_schema=Payment,
            output_schema=Paid,
            handler=pay,
            tier="write",
            risk_policy=RiskPolicy(destructive=False, reversible=False, dry_run_supported=False),
        )
    )
    arguments = {"iban": "DE89 3704", "amount": 5, "memo": "rent"}
    prepared = await registry.prepare_action("pay", arguments, ToolContext(tenant_id="t"))
    assert not isinstance(prepared, Failed)
    assert prepared.canonical_input == {
        "iban": {"$secret": "DE89 3704"},
        "amount": 5,
        "memo": "rent",
    }
    assert prepared.arguments == {"iban": MASKED_SECRET, "amount": 5, "memo": "rent"}
    assert "DE89" not in repr(prepared)
