"""Reading provider payloads that may be SDK objects or plain dicts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..messages import Message
from ._schema import ToolLike, tool_schemas

__all__ = ("field", "schemas_by_name", "sendable")


def field(obj: object, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, else ``obj.name``; ``default`` when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def schemas_by_name(tools: Iterable[ToolLike] | None) -> dict[str, dict[str, Any]]:
    """The parameter schemas of ``tools`` by name (empty when None)."""
    if tools is None:
        return {}
    return {schema.name: schema.parameters for schema in tool_schemas(tools)}


def sendable(messages: Iterable[Message]) -> Iterator[Message]:
    """``messages`` without the assistant steps that said nothing (no text, no calls).

    Every provider refuses an assistant message with no content (OpenAI's ``content:
    null`` without ``tool_calls``, Anthropic's ``content: []``, Gemini's ``parts: []``),
    so a step the model answered with nothing (an empty Anthropic answer) is left out
    rather than making every later request of the session fail.
    """
    return (m for m in messages if m.role != "assistant" or m.text or m.tool_calls)
