"""A tool whose schema strict mode cannot express goes out with ``strict: false``, unnarrowed.

Strict mode closes every object, so a ``dict[str, X]`` field would become "only ``{}``";
it has no way to say "any value", a tuple, ``not`` or ``if``. Such a tool is sent as it
is, not strict (the reason logged at debug level), the other tools stay strict, and the
parsers leave its arguments as the model sent them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import jsonschema
import pytest
from provider_tools import OneCallChat
from pydantic import BaseModel, ConfigDict, Field

from charter import Principal, Registry, tool
from charter.harness import Harness
from charter.harness.providers import (
    OpenAIChatModel,
    openai_tool_calls,
    openai_tools,
    strict_schema,
)
from charter.host import Host

pytestmark = pytest.mark.anyio


class TagIn(BaseModel):
    trip_id: str
    labels: dict[str, str]
    note: str = ""


class TagOut(BaseModel):
    trip_id: str
    labels: dict[str, str]


@tool(tier="read", name="trips.tag")
def tag(args: TagIn) -> TagOut:
    """Label a trip."""
    return TagOut(trip_id=args.trip_id, labels=args.labels)


class SearchIn(BaseModel):
    text: str
    limit: int = 5


@tool(tier="read", name="trips.search")
def search(args: SearchIn) -> list[str]:
    """Search trips."""
    return [args.text]


@tool(tier="read")
def foobar(a: int, b: str, c: dict[str, list[float]]) -> str:
    """Get me foobar (docs/migrating.md's ported pydantic-ai tool).

    Args:
        a: apple pie
        b: banana cake
        c: carrot smoothie
    """
    return f"{a} {b} {c}"


def parameters(t: Any) -> dict[str, Any]:
    return {k: v for k, v in t.input_schema.items() if k != "$schema"}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_dict_field_sends_its_tool_unnarrowed_with_strict_false(api: Any) -> None:
    sent = openai_tools([search, tag, foobar], api=api)
    functions = [entry["function"] if api == "chat" else entry for entry in sent]
    by_name = {f["name"]: f for f in functions}
    assert by_name["trips_search"]["strict"] is True
    for name, t in (("trips_tag", tag), ("foobar", foobar)):
        assert by_name[name]["strict"] is False
        assert by_name[name]["parameters"] == parameters(t)
    labels = by_name["trips_tag"]["parameters"]["properties"]["labels"]
    assert labels["additionalProperties"] == {"type": "string"}


def test_the_reason_a_tool_is_not_strict_is_logged_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="charter.harness"):
        openai_tools([search, tag])
    (record,) = [r for r in caplog.records if "strict: false" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "'trips.tag'" in record.getMessage()
    assert "properties.labels" in record.getMessage()


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    city: str


def _model_property(annotation: Any) -> dict[str, Any]:
    """The input schema of a one-field model whose field is ``annotation``."""

    class One(BaseModel):
        value: annotation

    return One.model_json_schema()


@pytest.mark.parametrize(
    ("schema", "where", "why"),
    [
        (parameters(tag), "properties.labels", "keys it does not declare"),
        (_model_property(dict[str, Any]), "properties.value", "keys it does not declare"),
        (_model_property(dict[str, int] | None), "properties.value.anyOf.0", "dict"),
        (_model_property(Any), "properties.value", "any type"),
        (_model_property(list[Any]), "properties.value.items", "any type"),
        (_model_property(tuple[int, str]), "properties.value", "prefixItems"),
        (_model_property(Loose), "$defs.Loose", "keys it does not declare"),
        (
            {"type": "object", "properties": {"meta": {"type": "object"}}},
            "properties.meta",
            "no declared properties",
        ),
        (
            {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
            "the root",
            "patternProperties",
        ),
        (
            {"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 0}}}},
            "properties.n",
            "'not'",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "if": {}, "then": {}},
            "the root",
            "'if'",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "stay": {
                        "allOf": [
                            {"type": "object", "properties": {"city": {"type": "string"}}},
                            {"type": "object", "properties": {"nights": {"type": "integer"}}},
                        ]
                    }
                },
            },
            "properties.stay",
            "allOf of 2",
        ),
        (
            {"anyOf": [{"type": "object", "properties": {}}, {"type": "null"}]},
            "the root",
            "object schema",
        ),
    ],
)
def test_strict_schema_refuses_what_strict_mode_cannot_express_and_says_where(
    schema: dict[str, Any], where: str, why: str
) -> None:
    with pytest.raises(ValueError) as raised:
        strict_schema(schema)
    message = str(raised.value)
    assert message.startswith(f"{where}:"), message
    assert why in message, message


class Stay(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    nights: int = Field(default=1, ge=1)


class PlanIn(BaseModel):
    stays: list[Stay]
    first: Stay = Field(description="Where it starts.")


def test_what_strict_mode_can_express_stays_strict() -> None:
    schema = PlanIn.model_json_schema()
    # A one-member allOf (older pydantic's way to describe a $ref) is inlined.
    schema["properties"]["first"] = {
        "allOf": [{"$ref": "#/$defs/Stay"}],
        "description": "Where it starts.",
    }
    strict = strict_schema(schema)
    jsonschema.Draft202012Validator.check_schema(strict)
    assert "allOf" not in json.dumps(strict)
    assert strict["properties"]["first"]["additionalProperties"] is False
    assert strict["$defs"]["Stay"]["properties"]["nights"]["type"] == ["integer", "null"]


def _message(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }


def test_the_arguments_of_a_tool_not_sent_strict_are_kept_as_the_model_sent_them() -> None:
    sent = {"trip_id": "trp_1", "labels": {"mood": "beach"}, "note": None}
    (call,) = openai_tool_calls(_message("trips_tag", sent), tools=[tag])
    assert call.arguments == json.dumps(sent)  # the model's text, untouched


def test_with_strict_false_no_nulls_are_dropped_even_for_a_strict_capable_tool() -> None:
    sent = {"text": "Lisbon", "limit": None}
    (call,) = openai_tool_calls(_message("trips_search", sent), tools=[search], strict=False)
    assert call.arguments == json.dumps(sent)
    (call,) = openai_tool_calls(_message("trips_search", sent), tools=[search])
    assert call.arguments == {"text": "Lisbon"}


async def test_the_openai_chat_model_lets_the_model_send_real_labels() -> None:
    registry = Registry()
    registry.register(search)
    registry.register(tag)
    client = OneCallChat("trips_tag", {"trip_id": "trp_1", "labels": {"mood": "beach"}})
    harness = Harness(Host(registry), OpenAIChatModel(client, model="gpt-test"))
    ada = Principal(subject="ada", tenant_id="acme", scopes=frozenset())
    result = await harness.session(ada).run("Tag trp_1 as a beach trip")
    (done,) = result.results
    assert (done.kind, done.output) == (
        "completed",
        {"trip_id": "trp_1", "labels": {"mood": "beach"}},
    )
    strict = {t["function"]["name"]: t["function"]["strict"] for t in client.requests[0]["tools"]}
    assert strict == {"trips_search": True, "trips_tag": False}
