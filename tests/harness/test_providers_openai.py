"""OpenAI shapes, checked against the official SDK's own typed params and models."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from harness_support import ALICE, World
from provider_tools import COMPLETED_SEARCH, SEARCH, SearchIn
from typed_params import assert_conforms, sdk

from charter.harness import ToolCall, ToolResult
from charter.harness.providers import (
    drop_strict_nulls,
    openai_messages,
    openai_tool_calls,
    openai_tool_result,
    openai_tools,
    strict_schema,
)

pytestmark = pytest.mark.anyio


def objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(objects(value))
    return found


def test_chat_tools_are_valid_sdk_params() -> None:
    (param,) = openai_tools([SEARCH])
    assert_conforms(sdk("openai.types.chat").ChatCompletionFunctionToolParam, param)
    assert param["function"]["strict"] is True
    assert param["function"]["name"] == "search_trips"


def test_responses_tools_are_valid_sdk_params() -> None:
    (param,) = openai_tools([SEARCH], api="responses")
    assert_conforms(sdk("openai.types.responses").FunctionToolParam, param)
    assert param["parameters"]["additionalProperties"] is False


def test_strict_mode_requires_every_property_closes_every_object_and_makes_optional_nullable() -> (
    None
):
    schema = openai_tools([SEARCH])[0]["function"]["parameters"]
    for obj in objects(schema):
        assert obj["required"] == list(obj["properties"])
        assert obj["additionalProperties"] is False
    props = schema["properties"]
    assert props["city"] == {"description": "Where to.", "title": "City", "type": "string"}
    assert props["nights"]["type"] == ["integer", "null"] and "default" not in props["nights"]
    assert {"type": "null"} in props["cabin"]["anyOf"]
    # A $ref with a sibling description is inlined; plain $refs stay.
    assert "$ref" not in props["lead"] and props["lead"]["properties"]["name"]["type"] == "string"
    assert props["others"]["type"] == ["array", "null"]
    assert props["others"]["items"] == {"$ref": "#/$defs/Traveller"}
    jsonschema.Draft202012Validator.check_schema(schema)


def test_strict_mode_agrees_with_the_sdks_own_transform_on_what_is_required() -> None:
    ours = strict_schema({k: v for k, v in SEARCH.input_schema.items() if k != "$schema"})
    theirs = sdk("openai.lib._pydantic").to_strict_json_schema(SearchIn)
    assert [o["required"] for o in objects(ours)] == [o["required"] for o in objects(theirs)]


STRICT_SENT = {
    "city": "Oslo",
    "nights": None,
    "note": None,
    "cabin": None,
    "lead": {"name": "Ann", "age": None},
    "others": None,
}
"""What a model in strict mode sends for a search that leaves the optional arguments out."""


def test_strict_nulls_for_left_out_arguments_are_dropped_so_defaults_apply() -> None:
    cleaned = drop_strict_nulls(STRICT_SENT, SEARCH.input_schema)
    # "note" and "age" allow null themselves, so their nulls are values and stay.
    assert cleaned == {"city": "Oslo", "note": None, "lead": {"name": "Ann", "age": None}}
    assert SearchIn.model_validate(cleaned).nights == 2


def test_a_strict_schema_accepts_what_the_model_must_send() -> None:
    schema = openai_tools([SEARCH])[0]["function"]["parameters"]
    jsonschema.validate(STRICT_SENT, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"city": "Oslo"}, schema)


def test_chat_tool_calls_parse_from_the_sdks_message_and_drop_strict_nulls() -> None:
    message = sdk("openai.types.chat").ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "search_trips",
                        "arguments": json.dumps({"city": "Rome", "nights": None}),
                    },
                },
                {"id": "call_2", "type": "function", "function": {"name": "x", "arguments": "{"}},
            ],
        }
    )
    first, second = openai_tool_calls(message, tools=[SEARCH])
    assert first == ToolCall(call_id="call_1", name="search_trips", arguments={"city": "Rome"})
    assert second == ToolCall(call_id="call_2", name="x", arguments="{")


def test_responses_tool_calls_parse_from_the_sdks_output_items() -> None:
    item = sdk("openai.types.responses").ResponseFunctionToolCall.model_validate(
        {"type": "function_call", "call_id": "fc_1", "name": "search_trips", "arguments": "{}"}
    )
    (parsed,) = openai_tool_calls([{"type": "message"}, item])
    assert (parsed.call_id, parsed.name, parsed.arguments) == ("fc_1", "search_trips", "{}")


def test_results_are_valid_tool_messages_and_output_items() -> None:
    result = ToolResult(kind="failed", call_id="c1", tool_name="t", code="TIMEOUT", message="x")
    chat = openai_tool_result(result)
    assert_conforms(sdk("openai.types.chat").ChatCompletionToolMessageParam, chat)
    assert chat["content"] == "[TIMEOUT] x"
    assert_conforms(
        sdk("openai.types.responses").ResponseInputItemParam,
        openai_tool_result(result, api="responses"),
    )


def test_a_transcript_converts_to_valid_messages_for_both_apis() -> None:
    for message in openai_messages(COMPLETED_SEARCH):
        assert_conforms(sdk("openai.types.chat").ChatCompletionMessageParam, message)
    for item in openai_messages(COMPLETED_SEARCH, api="responses"):
        assert_conforms(sdk("openai.types.responses").ResponseInputItemParam, item)


async def test_the_harness_runs_on_parsed_openai_calls(world: World) -> None:
    from charter.harness import ModelRequest, ModelResponse
    from charter.harness.testing import FunctionModel

    sdk_message = sdk("openai.types.chat").ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 5}'},
                }
            ],
        }
    )

    def step(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            tools = openai_tools(request.tools)
            assert {t["function"]["name"] for t in tools} >= {"add"}
            return ModelResponse(tool_calls=openai_tool_calls(sdk_message, tools=request.tools))
        return ModelResponse(text="7")

    model = FunctionModel(step)
    result = await world.harness(model).session(ALICE).run("add")
    assert [r.output for r in result.results] == [{"sum": 7}]
    history = openai_messages(model.requests[1].messages)
    assert history[-1] == {"role": "tool", "tool_call_id": "call_9", "content": '{"sum":7}'}
