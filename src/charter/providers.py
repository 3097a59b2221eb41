"""Provider formats; they live in ``charter.harness.providers``, re-exported here.

The formats are part of the harness (they read its transcript and tool definitions);
this module keeps ``from charter.providers import ...`` working.
"""

from __future__ import annotations

from .harness.providers import (
    AnthropicModel,
    ModelNames,
    OpenAIApi,
    OpenAIChatModel,
    ToolLike,
    anthropic_messages,
    anthropic_tool_calls,
    anthropic_tool_result,
    anthropic_tools,
    drop_strict_nulls,
    gemini_contents,
    gemini_tool_calls,
    gemini_tool_result,
    gemini_tools,
    inline_refs,
    model_names,
    openai_messages,
    openai_tool_calls,
    openai_tool_result,
    openai_tools,
    strict_schema,
    tool_schemas,
)

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
