"""OpenAI formats: Chat Completions and Responses tool params, call parsing, results."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ..definitions import ToolSchema
from ..messages import Message, ToolCall, ToolResult, result_text
from ._nulls import drop_strict_nulls
from ._schema import ToolLike, strict_or_reason, tool_schemas
from ._util import field, schemas_by_name, sendable

__all__ = (
    "OpenAIApi",
    "openai_messages",
    "openai_tool_calls",
    "openai_tool_result",
    "openai_tools",
)

logger = logging.getLogger("charter.harness")

OpenAIApi = Literal["chat", "responses"]
"""Which OpenAI API the shapes are for: Chat Completions or Responses."""


def openai_tools(
    tools: Iterable[ToolLike], *, api: OpenAIApi = "chat", strict: bool = True
) -> list[dict[str, Any]]:
    """Tool params for OpenAI.

    ``api="chat"`` gives ``ChatCompletionFunctionToolParam``s
    (``{"type": "function", "function": {...}}``); ``api="responses"`` gives the
    Responses API's flat ``FunctionToolParam``s. With ``strict=True`` (the default) the
    parameters go through ``strict_schema`` and ``strict: true`` is set, so the model's
    arguments always parse; the parsers undo the transform's nulls when given the tools.
    A tool whose schema strict mode cannot express (``strict_schema`` raises: a
    ``dict[str, X]`` field, a value of any type, a tuple...) goes out as it is with
    ``strict: false`` instead of narrowed, and the reason is logged at debug level on the
    ``charter.harness`` logger.
    """
    out: list[dict[str, Any]] = []
    for schema in tool_schemas(tools):
        parameters = _strict_parameters(schema) if strict else None
        function: dict[str, Any] = {
            "name": schema.name,
            "description": schema.description,
            "parameters": dict(schema.parameters) if parameters is None else parameters,
            "strict": parameters is not None,
        }
        out.append(
            {"type": "function", "function": function}
            if api == "chat"
            else {"type": "function", **function}
        )
    return out


def _strict_parameters(schema: ToolSchema) -> dict[str, Any] | None:
    """The tool's strict parameters, or None (logged) when strict mode cannot say them."""
    parameters, reason = strict_or_reason(schema.parameters)
    if reason is not None:
        logger.debug(
            "OpenAI tool %r goes out with strict: false; strict mode cannot express %s",
            schema.tool_name or schema.name,
            reason,
        )
    return parameters


def openai_tool_calls(
    message: object, *, tools: Iterable[ToolLike] | None = None, strict: bool = True
) -> list[ToolCall]:
    """Parse the tool calls of an OpenAI answer into unsealed ``ToolCall``s.

    Accepts a Chat Completions message (``ChatCompletionMessage`` or its dict: the
    ``tool_calls`` of type ``function``) or a Responses answer (``Response``, its
    ``output`` list, or dicts: the items of type ``function_call``). With ``tools`` (and
    ``strict`` as given to ``openai_tools``), the nulls strict mode makes the model send
    for left-out optional arguments are removed (``drop_strict_nulls``), for the tools
    that went out strict only: a ``strict: false`` tool's arguments stay as sent.
    """
    by_name = schemas_by_name(tools) if strict else {}
    raw: list[tuple[str, str, object]] = []
    chat_calls = field(message, "tool_calls")
    if chat_calls is not None or field(message, "role") == "assistant":
        for item in chat_calls or ():
            if field(item, "type", "function") != "function":
                continue
            function = field(item, "function")
            raw.append(
                (
                    str(field(item, "id", "")),
                    str(field(function, "name", "")),
                    field(function, "arguments", ""),
                )
            )
    else:
        output = field(message, "output")
        source = output if output is not None else message
        items: Sequence[object] = source if isinstance(source, list | tuple) else ()
        for item in items:
            if field(item, "type") == "function_call":
                raw.append(
                    (
                        str(field(item, "call_id", "")),
                        str(field(item, "name", "")),
                        field(item, "arguments", ""),
                    )
                )
    return [_tool_call(cid, name, args, by_name) for cid, name, args in raw]


def _tool_call(
    call_id: str, name: str, arguments: object, by_name: Mapping[str, Mapping[str, Any]]
) -> ToolCall:
    schema = by_name.get(name)
    if schema is not None and strict_or_reason(schema)[1] is None:
        decoded = _decode(arguments)
        if isinstance(decoded, dict):
            return ToolCall(
                call_id=call_id, name=name, arguments=drop_strict_nulls(decoded, schema)
            )
    text = arguments if isinstance(arguments, str) else str(arguments)
    return ToolCall(call_id=call_id, name=name, arguments=text)


def _decode(arguments: object) -> object:
    if isinstance(arguments, dict):
        return arguments
    try:
        return json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        return None


def openai_tool_result(result: ToolResult, *, api: OpenAIApi = "chat") -> dict[str, Any]:
    """The message (chat) or input item (responses) that returns ``result`` to the model."""
    if api == "chat":
        return {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result)}
    return {
        "type": "function_call_output",
        "call_id": result.call_id,
        "output": result_text(result),
    }


def openai_messages(
    messages: Iterable[Message], *, api: OpenAIApi = "chat"
) -> list[dict[str, Any]]:
    """A harness transcript as Chat Completions messages or Responses input items."""
    out: list[dict[str, Any]] = []
    for message in sendable(messages):
        if message.role == "user":
            out.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            out.extend(openai_tool_result(r, api=api) for r in message.results)
        elif api == "chat":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_text()},
                    }
                    for c in message.tool_calls
                ]
            out.append(entry)
        else:
            if message.text:
                out.append({"role": "assistant", "content": message.text})
            out.extend(
                {
                    "type": "function_call",
                    "call_id": c.call_id,
                    "name": c.name,
                    "arguments": c.arguments_text(),
                }
                for c in message.tool_calls
            )
    return out
