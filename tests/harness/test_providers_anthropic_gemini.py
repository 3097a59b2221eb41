"""Anthropic shapes against the official SDK's typed params; Gemini's OpenAPI subset."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal

import pytest
from provider_tools import DENIED_SEARCH, SEARCH
from pydantic import BaseModel
from tests.builders import tiered_tool
from typed_params import assert_conforms, sdk

from charter.harness import ToolCall, ToolResult
from charter.harness.providers import (
    anthropic_messages,
    anthropic_tool_calls,
    anthropic_tool_result,
    anthropic_tools,
    gemini_contents,
    gemini_tool_calls,
    gemini_tool_result,
    gemini_tools,
    inline_refs,
)


def test_anthropic_tools_are_valid_sdk_params_with_the_schema_unchanged() -> None:
    (param,) = anthropic_tools([SEARCH])
    assert_conforms(sdk("anthropic.types").ToolParam, param)
    assert param["input_schema"]["properties"]["lead"] == {
        "$ref": "#/$defs/Traveller",
        "description": "Who books.",
    }
    assert "$schema" not in param["input_schema"]


def test_anthropic_tool_use_blocks_parse_from_the_sdks_message() -> None:
    message = sdk("anthropic.types").Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "tu_1", "name": "search_trips", "input": {"city": "X"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    assert anthropic_tool_calls(message) == [
        ToolCall(call_id="tu_1", name="search_trips", arguments={"city": "X"})
    ]


def test_anthropic_results_flag_failures_as_errors() -> None:
    failed = ToolResult(kind="failed", call_id="tu_1", tool_name="t", code="TIMEOUT", message="x")
    done = ToolResult(kind="completed", call_id="tu_2", tool_name="t", output={"a": 1})
    assert_conforms(sdk("anthropic.types").ToolResultBlockParam, anthropic_tool_result(failed))
    assert anthropic_tool_result(failed)["is_error"] is True
    assert anthropic_tool_result(done) == {
        "type": "tool_result",
        "tool_use_id": "tu_2",
        "content": '{"a":1}',
        "is_error": False,
    }


def test_an_anthropic_transcript_is_valid_message_params() -> None:
    converted = anthropic_messages(DENIED_SEARCH)
    for message in converted:
        assert_conforms(sdk("anthropic.types").MessageParam, message)
    assert converted[1]["content"][1]["input"] == {"city": "Rome"}
    assert [m["role"] for m in converted] == ["user", "assistant", "user"]


def test_gemini_declarations_inline_refs_and_keep_to_the_openapi_subset() -> None:
    ((declarations,),) = [t["functionDeclarations"] for t in gemini_tools([SEARCH])]
    params = declarations["parameters"]
    text = str(params)
    for keyword in ("$ref", "$defs", "additionalProperties", "default"):
        assert keyword not in text
    assert params["properties"]["note"] == {"type": "string", "nullable": True, "title": "Note"}
    assert params["properties"]["lead"]["properties"]["age"]["nullable"] is True
    assert params["properties"]["cabin"]["enum"] == ["economy", "business"]
    assert params["required"] == ["city", "lead"]


class Priority(IntEnum):
    low = 1
    high = 2


class HotelQuery(BaseModel):
    stars: Literal[1, 2, 3, 4, 5]
    priority: Priority = Priority.low
    refundable: Literal[True] = True
    cabin: Literal["economy", "business", None] = None


class HotelsOut(BaseModel):
    hotels: list[str]


def enums(schema: Any) -> list[list[Any]]:
    """Every ``enum`` list inside a schema."""
    if isinstance(schema, list):
        return [e for item in schema for e in enums(item)]
    if not isinstance(schema, dict):
        return []
    found = [schema["enum"]] if isinstance(schema.get("enum"), list) else []
    return found + [e for key, value in schema.items() if key != "enum" for e in enums(value)]


def test_gemini_enums_are_strings_and_other_allowed_values_are_stated_in_the_description() -> None:
    hotels = tiered_tool(
        "hotels_search", "read", lambda args: HotelsOut(hotels=[]), HotelQuery, HotelsOut
    )
    ((declaration,),) = [t["functionDeclarations"] for t in gemini_tools([hotels])]
    params = declaration["parameters"]
    # Gemini's Schema.enum is list[str]: one number or boolean there refuses the whole Tool.
    assert all(isinstance(value, str) for enum in enums(params) for value in enum)
    props = params["properties"]
    assert props["stars"] == {
        "title": "Stars",
        "type": "integer",
        "description": "(enum [1, 2, 3, 4, 5])",
    }
    assert props["priority"] == {
        "title": "Priority",
        "type": "integer",
        "description": "(enum [1, 2])",
    }
    assert props["refundable"] == {
        "title": "Refundable",
        "type": "boolean",
        "description": "(const true)",
    }
    # A null among string values is Gemini's nullable.
    assert props["cabin"] == {
        "title": "Cabin",
        "type": "string",
        "enum": ["economy", "business"],
        "nullable": True,
    }
    # The values the model reads there are the ones validation takes.
    assert HotelQuery.model_validate({"stars": 4, "priority": 2, "refundable": True})


def test_gemini_refuses_a_recursive_schema() -> None:
    class Node(BaseModel):
        children: list[Node] = []

    class TreeOut(BaseModel):
        ok: bool

    recursive = tiered_tool(
        "tree", "read", lambda args: TreeOut(ok=True), Node, TreeOut, description="Walk a tree."
    )
    with pytest.raises(ValueError, match="recursive"):
        gemini_tools([recursive])


def test_gemini_calls_without_ids_get_stable_ones_and_results_pair_by_name() -> None:
    response = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "ok"},
                        {"functionCall": {"name": "search_trips", "args": {"city": "Oslo"}}},
                        {"functionCall": {"id": "g2", "name": "search_trips", "args": {}}},
                    ],
                }
            }
        ]
    }
    first, second = gemini_tool_calls(response)
    assert (first.call_id, first.arguments) == ("search_trips-1", {"city": "Oslo"})
    assert second.call_id == "g2"
    result = ToolResult(kind="completed", call_id="g2", tool_name="search_trips", output={"n": 1})
    assert gemini_tool_result(result) == {
        "functionResponse": {"id": "g2", "name": "search_trips", "response": {"output": {"n": 1}}}
    }
    contents = gemini_contents(DENIED_SEARCH)
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"error": "Denied: no"}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("#/$defs/Missing", "does not point at a schema"),
        ("#/$defs/Leg/type", "does not point at a schema"),
        ("https://example.com/leg.json", "cannot resolve non-local"),
    ],
)
def test_inlining_a_reference_to_nothing_is_a_value_error_naming_it(ref: str, message: str) -> None:
    schema = {
        "type": "object",
        "properties": {"leg": {"$ref": ref}},
        "$defs": {"Leg": {"type": "string"}},
    }
    with pytest.raises(ValueError, match=message):
        inline_refs(schema)


def test_escaped_definition_names_are_inlined() -> None:
    schema = {
        "type": "object",
        "properties": {"leg": {"$ref": "#/$defs/trips~1Leg", "description": "one leg"}},
        "$defs": {"trips/Leg": {"type": "string", "description": "a leg"}},
    }
    assert inline_refs(schema) == {
        "type": "object",
        "properties": {"leg": {"type": "string", "description": "one leg"}},
    }
