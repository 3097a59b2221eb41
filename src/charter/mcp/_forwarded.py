"""Forwarded results: another MCP server's tool result, carried as a charter tool's output.

A tool whose output model is a ``ForwardedResult`` (the gateway's tools, ``charter.gateway``)
returns an upstream ``tools/call`` result as data: its content blocks, structured content
and error flag. REST returns that data as it is; MCP renders it back into the very result
the upstream sent, and lists the upstream's own output schema (or none) for the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import mcp.types as types
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..tool import Tool

__all__ = ("ForwardedResult", "forwarded_output_schema", "is_forwarded", "render_forwarded")


class ForwardedResult(BaseModel):
    """An upstream MCP tool result as a charter tool's output: content, structure, error flag.

    Subclass it per tool with ``mcp_output_schema`` set to the upstream tool's declared
    output schema (None when it declares none): that is what MCP lists for the tool.
    """

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, populate_by_name=True, serialize_by_alias=True
    )

    mcp_output_schema: ClassVar[dict[str, Any] | None] = None
    """The upstream tool's output schema, listed by MCP in place of this model's."""

    content: list[dict[str, JsonValue]] = Field(
        description="The upstream's content blocks (text, image, audio, resources), unchanged."
    )
    structured_content: dict[str, JsonValue] | None = Field(
        default=None,
        alias="structuredContent",
        description="The upstream's structured content, when it sent any.",
    )
    is_error: bool = Field(
        default=False,
        alias="isError",
        description="The upstream reported the call as a tool error.",
    )

    @classmethod
    def from_result(cls, result: types.CallToolResult) -> ForwardedResult:
        """Carry an SDK ``CallToolResult`` (its ``_meta`` stays behind)."""
        return cls(
            content=[
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                for block in result.content
            ],
            structured_content=result.structured_content,
            is_error=bool(result.is_error),
        )


def is_forwarded(tool: Tool[Any, Any, Any]) -> bool:
    """Whether ``tool`` returns forwarded upstream results."""
    return issubclass(tool.output_model, ForwardedResult)


def forwarded_output_schema(tool: Tool[Any, Any, Any]) -> dict[str, Any] | None:
    """The output schema MCP lists for a forwarded tool: the upstream's, or None."""
    model: type[ForwardedResult] = tool.output_model
    return model.mcp_output_schema


def render_forwarded(output: Mapping[str, Any], *, replayed: bool) -> types.CallToolResult:
    """The upstream's result again, from a forwarded tool's stored output."""
    result = types.CallToolResult.model_validate(
        {
            "content": output.get("content", []),
            "structuredContent": output.get("structuredContent"),
            "isError": bool(output.get("isError", False)),
        }
    )
    if replayed:
        result.meta = {**(result.meta or {}), "charter/replayed": True}
    return result
