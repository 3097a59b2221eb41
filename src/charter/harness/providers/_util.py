"""Reading provider payloads that may be SDK objects or plain dicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._schema import ToolLike, tool_schemas

__all__ = ("field", "schemas_by_name")


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
