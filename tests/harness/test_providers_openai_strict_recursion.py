"""A recursive schema stays strict, even where a self-reference carries a description.

Strict mode takes a ``$ref`` only alone, so ``strict_schema`` inlines a ``$ref`` with
sibling keywords. A self-reference with a description
(``list[Annotated[Folder, Field(description=...)]]``) cannot be inlined: its target holds
it again. There the ``$ref`` stays alone in a one-branch ``anyOf`` carrying the keywords.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import jsonschema
from pydantic import BaseModel, Field

from charter import tool
from charter.harness.providers import openai_tool_calls, openai_tools, strict_schema


class Folder(BaseModel):
    name: str
    children: list[Annotated[Folder, Field(description="A folder inside this one.")]] = []


@tool(tier="read", name="files.plan")
def plan_folders(args: Folder) -> int:
    """Plan a folder tree."""
    return len(args.children)


def refs(schema: Any) -> list[dict[str, Any]]:
    """Every subschema holding a ``$ref``."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "$ref" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(refs(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(refs(value))
    return found


def test_a_described_self_reference_stays_strict_with_its_ref_alone_in_an_any_of() -> None:
    (param,) = openai_tools([plan_folders])
    function = param["function"]
    assert function["strict"] is True
    schema = function["parameters"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert refs(schema) and all(set(node) == {"$ref"} for node in refs(schema))
    assert schema["properties"]["children"]["items"] == {
        "description": "A folder inside this one.",
        "anyOf": [{"$ref": "#/$defs/Folder"}],
    }
    assert schema["$defs"]["Folder"]["properties"] == schema["properties"]


def test_a_strict_answer_for_a_described_self_reference_parses_with_the_defaults() -> None:
    schema = openai_tools([plan_folders])[0]["function"]["parameters"]
    sent = {"name": "trips", "children": [{"name": "2026", "children": None}]}
    jsonschema.validate(sent, schema)  # what strict mode makes the model send
    function = {"name": "files_plan", "arguments": json.dumps(sent)}
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
    }
    (call,) = openai_tool_calls(message, tools=[plan_folders])
    assert call.arguments == {"name": "trips", "children": [{"name": "2026"}]}
    assert Folder.model_validate(call.arguments) == Folder(
        name="trips", children=[Folder(name="2026")]
    )


def test_a_cycle_of_described_refs_through_two_definitions_stays_strict() -> None:
    schema = {
        "type": "object",
        "properties": {"trip": {"$ref": "#/$defs/Trip", "description": "The trip."}},
        "required": ["trip"],
        "$defs": {
            "Trip": {
                "type": "object",
                "properties": {
                    "legs": {
                        "type": "array",
                        # older pydantic's way to describe a $ref: an allOf of one
                        "items": {"allOf": [{"$ref": "#/$defs/Leg"}], "description": "A leg."},
                    }
                },
                "required": ["legs"],
            },
            "Leg": {
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "detour": {"$ref": "#/$defs/Trip", "description": "A side trip."},
                },
                "required": ["to"],
            },
        },
    }
    strict = strict_schema(schema)
    jsonschema.Draft202012Validator.check_schema(strict)
    assert all(set(node) == {"$ref"} for node in refs(strict))
    assert "allOf" not in json.dumps(strict)
    text = json.dumps(strict)
    assert "A side trip." in text and "A leg." in text
    deep = {"to": "Porto", "detour": {"legs": [{"to": "Braga", "detour": None}]}}
    jsonschema.validate({"trip": {"legs": [deep]}}, strict)
