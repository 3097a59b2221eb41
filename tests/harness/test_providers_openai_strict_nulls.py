"""Strict mode's nulls are dropped at every depth: nested models, unions, array items.

``strict_schema`` makes every optional field required but nullable, inside ``$defs`` and
union branches too, so a model answering exactly as the schema asks sends ``null`` for
each optional field it leaves out, wherever it is. Each test checks the answer against
the strict schema first (it is what the model must send), then that the parsed
arguments validate against the tool's own model with the defaults applied.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from provider_tools import OneCallChat
from pydantic import BaseModel, Field

from charter import Principal, Registry, tool
from charter.harness import Harness
from charter.harness.providers import (
    OpenAIChatModel,
    drop_strict_nulls,
    openai_tool_calls,
    openai_tools,
    strict_schema,
)
from charter.host import Host

pytestmark = pytest.mark.anyio


class Address(BaseModel):
    city: str
    floor: int = 0
    note: str | None = None


class Traveller(BaseModel):
    name: str
    seat: Literal["aisle", "window", "any"] = "any"


class Card(BaseModel):
    kind: Literal["card"] = "card"
    last4: str
    installments: int = 1


class Transfer(BaseModel):
    kind: Literal["transfer"] = "transfer"
    iban: str
    reference: str = "trip"


class Stop(BaseModel):
    city: str
    nights: int = 1
    then: Stop | None = None


class BookIn(BaseModel):
    trip_id: str
    billing: Address | None = None
    payment: Card | Transfer
    deposit: Annotated[Card | Transfer, Field(discriminator="kind")] | None = None
    companions: list[Traveller] | None = None
    route: Stop | None = None


class BookOut(BaseModel):
    booking_id: str


@tool(tier="read", name="trips.book")
def book(args: BookIn) -> BookOut:
    """Book a trip."""
    return BookOut(booking_id=f"bk_{args.trip_id}")


STRICT = openai_tools([book])[0]["function"]["parameters"]


def parsed(answer: dict[str, Any]) -> dict[str, Any]:
    """The arguments ``openai_tool_calls`` makes of a strict model's answer."""
    jsonschema.validate(answer, STRICT)  # the model sent exactly what strict mode demands
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "trips_book", "arguments": json.dumps(answer)},
            }
        ],
    }
    (call,) = openai_tool_calls(message, tools=[book])
    assert isinstance(call.arguments, dict)
    return call.arguments


CARD = {"kind": "card", "last4": "4242", "installments": None}
"""A card payment whose optional ``installments`` the model left out."""


def answer(**fields: Any) -> dict[str, Any]:
    """A strict answer: every field present, ``null`` for those left out."""
    base: dict[str, Any] = {
        "trip_id": "trp_1",
        "billing": None,
        "payment": CARD,
        "deposit": None,
        "companions": None,
        "route": None,
    }
    return {**base, **fields}


def test_a_null_inside_an_optional_nested_model_is_dropped_so_its_default_applies() -> None:
    arguments = parsed(answer(billing={"city": "Lisbon", "floor": None, "note": None}))
    # "note" is str | None: its null is a value and stays, as at the top level.
    assert arguments["billing"] == {"city": "Lisbon", "note": None}
    assert BookIn.model_validate(arguments).billing == Address(city="Lisbon", floor=0)


def test_a_null_inside_a_union_member_is_dropped_in_the_branch_the_value_matches() -> None:
    arguments = parsed(answer())
    assert arguments["payment"] == {"kind": "card", "last4": "4242"}
    assert BookIn.model_validate(arguments).payment == Card(last4="4242", installments=1)

    transfer = {"kind": "transfer", "iban": "PT50000201231234567890154", "reference": None}
    arguments = parsed(answer(payment=transfer))
    assert arguments["payment"] == {"kind": "transfer", "iban": transfer["iban"]}
    assert BookIn.model_validate(arguments).payment == Transfer(iban=transfer["iban"])


def test_a_discriminated_union_drops_the_nulls_of_the_branch_its_tag_names() -> None:
    assert "discriminator" in json.dumps(book.input_schema)
    arguments = parsed(answer(deposit=CARD))
    assert arguments["deposit"] == {"kind": "card", "last4": "4242"}
    assert BookIn.model_validate(arguments).deposit == Card(last4="4242")


def test_nulls_inside_the_items_of_an_optional_list_of_models_are_dropped() -> None:
    companions = [{"name": "Ann", "seat": None}, {"name": "Bo", "seat": "aisle"}]
    arguments = parsed(answer(companions=companions))
    assert arguments["companions"] == [{"name": "Ann"}, {"name": "Bo", "seat": "aisle"}]
    assert [t.seat for t in BookIn.model_validate(arguments).companions or ()] == ["any", "aisle"]


def test_nulls_are_dropped_through_a_recursive_ref_at_every_depth() -> None:
    route = {"city": "Lisbon", "nights": None, "then": {"city": "Porto", "nights": 2, "then": None}}
    arguments = parsed(answer(route=route))
    # "then" is Stop | None: its null is a value; "nights" is int = 1: its null is dropped.
    assert arguments["route"] == {
        "city": "Lisbon",
        "then": {"city": "Porto", "nights": 2, "then": None},
    }
    stop = BookIn.model_validate(arguments).route
    assert stop is not None and stop.nights == 1 and stop.then == Stop(city="Porto", nights=2)


def test_a_null_for_an_optional_nested_model_itself_is_kept_as_none() -> None:
    # billing is Address | None: its null is a value (as for a top-level x: int | None).
    arguments = parsed(answer())
    assert arguments["billing"] is None and arguments["route"] is None
    assert BookIn.model_validate(arguments).billing is None


def test_a_null_that_one_fitting_branch_accepts_as_a_value_is_never_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {
            "leg": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
                        "required": ["city"],
                    },
                    {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "nights": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                        },
                        "required": ["city"],
                    },
                ]
            }
        },
        "required": ["leg"],
    }
    leg = {"city": "Rome", "nights": None}
    assert drop_strict_nulls({"leg": leg}, schema) == {"leg": leg}


class Seating(BaseModel):
    side: Literal["left", "right", None] = "left"


@pytest.mark.parametrize(
    "side",
    [
        Seating.model_json_schema()["properties"]["side"],  # enum: ["left", "right", null]
        {"anyOf": [{"const": "left"}, {"const": None}], "default": "left"},
    ],
)
def test_a_null_an_enum_or_const_lists_is_a_value_and_stays(side: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"side": side}}
    jsonschema.validate({"side": None}, strict_schema(schema))
    assert drop_strict_nulls({"side": None}, schema) == {"side": None}
    assert Seating.model_validate(drop_strict_nulls({"side": None}, schema)).side is None


def test_a_value_no_branch_fits_is_left_for_validation_to_report() -> None:
    arguments = parsed(answer())
    wrong = {**arguments, "payment": {"kind": "cheque", "number": None}}
    assert drop_strict_nulls(wrong, book.input_schema) == wrong


async def test_the_openai_chat_model_runs_a_strict_call_with_nested_nulls() -> None:
    registry = Registry()
    registry.register(book)
    client = OneCallChat(
        "trips_book",
        answer(
            billing={"city": "Lisbon", "floor": None, "note": None},
            companions=[{"name": "Ann", "seat": None}],
        ),
    )
    harness = Harness(Host(registry), OpenAIChatModel(client, model="gpt-test"))
    ada = Principal(subject="ada", tenant_id="acme", scopes=frozenset())
    result = await harness.session(ada).run("Book trp_1 for Ann and me")
    (done,) = result.results
    assert (done.kind, done.output) == ("completed", {"booking_id": "bk_trp_1"})
    assert client.requests[0]["tools"][0]["function"]["strict"] is True


def test_an_optional_literal_or_union_field_can_be_left_out_with_null() -> None:
    # kind: Literal["card"] = "card" is a const: the null is a variant beside it, not a
    # type the const would still refuse.
    kind = STRICT["$defs"]["Card"]["properties"]["kind"]
    assert {"type": "null"} in kind["anyOf"] and "null" not in json.dumps(kind["anyOf"][0])
    card = {"kind": None, "last4": "4242", "installments": None}
    arguments = parsed(answer(payment=card))
    assert arguments["payment"] == {"last4": "4242"}
    assert BookIn.model_validate(arguments).payment == Card(last4="4242")
