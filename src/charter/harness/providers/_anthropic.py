"""Anthropic formats: Messages API tool params, ``tool_use`` parsing, ``tool_result`` blocks."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..messages import Message, ToolCall, ToolResult, result_text
from ._schema import ToolLike, tool_schemas
from ._util import field, sendable

__all__ = (
    "anthropic_messages",
    "anthropic_tool_calls",
    "anthropic_tool_result",
    "anthropic_tools",
)


def anthropic_tools(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """``ToolParam``s: name, description and the input schema as it is (``$ref`` allowed)."""
    return [
        {"name": s.name, "description": s.description, "input_schema": dict(s.parameters)}
        for s in tool_schemas(tools)
    ]


def anthropic_tool_calls(message: object) -> list[ToolCall]:
    """Parse the ``tool_use`` blocks of a ``Message`` (or its ``content`` list, or dicts)."""
    content = field(message, "content", message)
    calls: list[ToolCall] = []
    for block in content if isinstance(content, list | tuple) else ():
        if field(block, "type") != "tool_use":
            continue
        arguments = field(block, "input", {})
        calls.append(
            ToolCall(
                call_id=str(field(block, "id", "")),
                name=str(field(block, "name", "")),
                arguments=dict(arguments) if isinstance(arguments, dict) else str(arguments),
            )
        )
    return calls


def anthropic_tool_result(result: ToolResult) -> dict[str, Any]:
    """A ``tool_result`` block (``is_error`` for failures) to put in the next user message."""
    return {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": result_text(result),
        "is_error": result.kind == "failed",
    }


def anthropic_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A harness transcript as Messages API ``MessageParam``s."""
    out: list[dict[str, Any]] = []
    for message in sendable(messages):
        if message.role == "user":
            out.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            out.append(
                {"role": "user", "content": [anthropic_tool_result(r) for r in message.results]}
            )
        else:
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            for call in message.tool_calls:
                arguments = call.arguments
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.call_id,
                        "name": call.name,
                        "input": arguments if isinstance(arguments, dict) else _decoded(call),
                    }
                )
            out.append({"role": "assistant", "content": blocks})
    return out


def _decoded(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments_text())
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
