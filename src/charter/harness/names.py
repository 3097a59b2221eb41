"""Model-facing tool names: the one mapping every export a model reads goes through.

Model APIs take a narrower name than charter does: a tool called ``trips.search`` is
refused (HTTP 400) by OpenAI, Anthropic and Gemini alike. Each tool therefore has a
model-facing name matching ``MODEL_NAME_PATTERN`` (a letter or ``_``, then letters,
digits, ``_`` or ``-``, at most 64), used by the provider formats, the harness and the
pydantic-ai and LangChain bridges; a model's call maps back to the canonical tool.

* The author's ``model_name=`` wins (it must match the pattern already).
* A canonical name that already matches is kept as it is.
* Otherwise every other character becomes ``_`` (non-ASCII letters lose their accents
  first), a name not starting with a letter or ``_`` gets a ``_`` in front, and a name
  still over 64 characters is cut to 55 and ends with ``_`` and 8 hex digits of the
  SHA-256 of the canonical name.

The name depends on the tool alone, so the same tools always get the same names. Two
tools of one set that would get the same name are a ``ConfigurationError`` naming both,
raised where the set is built (``Harness``, ``CharterToolset``, ``charter_tools``, each
provider format): set ``model_name=`` on one of them.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..manifest import RegisteredTool
from ..tool import MODEL_NAME_PATTERN, Tool

__all__ = ("MODEL_NAME_PATTERN", "ModelNames", "model_name_for", "model_names")

_MAX_LENGTH = 64
_KEPT = 55
"""Characters kept of a too-long name, before ``_`` and 8 hex digits (64 in all)."""
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")


def model_name_for(name: str, override: str | None = None) -> str:
    """The model-facing name of one tool: ``override`` when given, else derived from ``name``.

    Raises:
        ConfigurationError: ``override`` is not a name model APIs accept.
    """
    if override is not None:
        if not MODEL_NAME_PATTERN.fullmatch(override):
            raise ConfigurationError(
                f"tool {name!r}: model name {override!r} must start with a letter or '_' and "
                "use at most 64 letters, digits, '_' or '-'"
            )
        return override
    if MODEL_NAME_PATTERN.fullmatch(name):
        return name
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    derived = _OUTSIDE.sub("_", folded) or "tool"
    if not (derived[0].isalpha() or derived[0] == "_"):
        derived = "_" + derived
    if len(derived) > _MAX_LENGTH:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        derived = f"{derived[:_KEPT]}_{digest}"
    return derived


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelNames:
    """The model-facing names of one set of tools, both ways; build it with ``model_names``."""

    by_tool: Mapping[str, str]
    """Canonical tool name → model-facing name."""
    by_model: Mapping[str, str]
    """Model-facing name → canonical tool name."""

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]]) -> ModelNames:
        """From ``(canonical, model-facing)`` pairs, refusing two tools under one name.

        Raises:
            ConfigurationError: two tools would have the same model-facing name, or one
                tool two of them; the message names both.
        """
        by_tool: dict[str, str] = {}
        by_model: dict[str, str] = {}
        for tool, called in pairs:
            known = by_tool.get(tool)
            if known is not None and known != called:
                raise ConfigurationError(
                    f"tool {tool!r} is offered under two model-facing names, {known!r} and "
                    f"{called!r}"
                )
            other = by_model.get(called)
            if other is not None and other != tool:
                raise ConfigurationError(
                    f"tools {other!r} and {tool!r} would both be called {called!r} by a model; "
                    f"set model_name= on one of them (a letter or '_', then letters, digits, "
                    "'_' or '-', at most 64)"
                )
            by_tool[tool] = called
            by_model[called] = tool
        return cls(by_tool=by_tool, by_model=by_model)

    def model_name(self, tool: str) -> str:
        """The model-facing name of the canonical ``tool`` (derived when not in the set)."""
        return self.by_tool.get(tool) or model_name_for(tool)

    def tool_name(self, called: str) -> str | None:
        """The canonical name of the tool a model called ``called``, or None."""
        return self.by_model.get(called)


def model_names(tools: Iterable[Tool[Any, Any, Any] | RegisteredTool]) -> ModelNames:
    """The model-facing names of ``tools`` (each once: aliases are never offered).

    Raises:
        ConfigurationError: two of the tools would be called the same by a model.
    """
    pairs = []
    for item in tools:
        tool = item.tool if isinstance(item, RegisteredTool) else item
        pairs.append((tool.name, model_name_for(tool.name, tool.model_name)))
    return ModelNames.build(pairs)
