"""Provider formats, part of the harness: OpenAI, Anthropic and Gemini shapes.

A mapping layer between charter's tools and each provider's wire shapes; it decides no
policy. ``OpenAIChatModel`` and ``AnthropicModel`` are harness ``Model``s over an SDK
client you pass in. Parsers return unsealed ``charter.harness.ToolCall``s: sealing
(validation, unknown tools, duplicate ids) needs the registry, and happens in the
harness. Nothing here imports a provider SDK; the shapes are the SDKs' typed params as
plain dicts. ``charter.providers`` re-exports everything here.
"""

from __future__ import annotations

from ..names import ModelNames, model_names
from ._anthropic import (
    anthropic_messages,
    anthropic_tool_calls,
    anthropic_tool_result,
    anthropic_tools,
)
from ._gemini import gemini_contents, gemini_tool_calls, gemini_tool_result, gemini_tools
from ._models import AnthropicModel, OpenAIChatModel
from ._nulls import drop_strict_nulls
from ._openai import OpenAIApi, openai_messages, openai_tool_calls, openai_tool_result, openai_tools
from ._schema import ToolLike, inline_refs, strict_schema, tool_schemas

__all__ = (
    "AnthropicModel",
    "ModelNames",
    "OpenAIApi",
    "OpenAIChatModel",
    "ToolLike",
    "anthropic_messages",
    "anthropic_tool_calls",
    "anthropic_tool_result",
    "anthropic_tools",
    "drop_strict_nulls",
    "gemini_contents",
    "gemini_tool_calls",
    "gemini_tool_result",
    "gemini_tools",
    "inline_refs",
    "model_names",
    "openai_messages",
    "openai_tool_calls",
    "openai_tool_result",
    "openai_tools",
    "strict_schema",
    "tool_schemas",
)
