"""A value each transport derives from a registered tool once, kept while it stays registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from .manifest import RegisteredTool

__all__ = ("PerRegistration",)

_ValueT = TypeVar("_ValueT")


class PerRegistration(Generic[_ValueT]):
    """Builds one value per registered tool (an MCP listing, an OpenAPI fragment), once.

    A tool registered anew under the same name is a new ``RegisteredTool`` object, so the
    value is rebuilt for it; the cache holds one entry per name.
    """

    def __init__(self, build: Callable[[RegisteredTool], _ValueT]) -> None:
        """Build each value with ``build``."""
        self._build = build
        self._values: dict[str, tuple[RegisteredTool, _ValueT]] = {}

    def get(self, registered: RegisteredTool) -> _ValueT:
        """The value for ``registered``, built now if this registration has none yet."""
        cached = self._values.get(registered.name)
        if cached is not None and cached[0] is registered:
            return cached[1]
        value = self._build(registered)
        self._values[registered.name] = (registered, value)
        return value
