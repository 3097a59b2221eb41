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

from ..errors import ErrorCode
from ..outcome import Completed, Failed, ToolOutcome
from ..tool import Tool

__all__ = (
    "ForwardedResult",
    "forwarded_output_schema",
    "forwarded_result",
    "is_forwarded",
    "render_forwarded",
)

_ERROR_TEXT_LIMIT = 2000
"""The longest upstream error text a ``Failed`` message carries (the result keeps all)."""


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

    @classmethod
    def reported_error(cls, output: JsonValue) -> str | None:
        """The upstream's error text when it flagged the result ``isError``; else None.

        Its text blocks, joined (cut at 2,000 characters), or a sentence saying the
        upstream reported an error without text.
        """
        if not isinstance(output, Mapping) or output.get("isError") is not True:
            return None
        blocks = output.get("content")
        texts = [
            text
            for block in (blocks if isinstance(blocks, list) else [])
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(text := block.get("text"), str)
        ]
        joined = "\n".join(texts).strip()
        return joined[:_ERROR_TEXT_LIMIT] if joined else "The upstream tool reported an error."


def is_forwarded(tool: Tool[Any, Any, Any]) -> bool:
    """Whether ``tool`` returns forwarded upstream results."""
    return issubclass(tool.output_model, ForwardedResult)


def forwarded_output_schema(tool: Tool[Any, Any, Any]) -> dict[str, Any] | None:
    """The output schema MCP lists for a forwarded tool: the upstream's, or None."""
    model: type[ForwardedResult] = tool.output_model
    return model.mcp_output_schema


def forwarded_result(outcome: ToolOutcome) -> Mapping[str, Any] | None:
    """The upstream result an outcome carries: a completed output, or a reported error's.

    The host answers an upstream ``isError`` result as ``UPSTREAM_ERROR`` with the result
    in ``meta["result"]`` (``ForwardedResult.reported_error``); MCP sends it back as is.
    """
    if isinstance(outcome, Completed) and isinstance(outcome.output, Mapping):
        return outcome.output
    if isinstance(outcome, Failed) and outcome.code is ErrorCode.UPSTREAM_ERROR:
        result = (outcome.meta or {}).get("result")
        return result if isinstance(result, Mapping) else None
    return None


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
