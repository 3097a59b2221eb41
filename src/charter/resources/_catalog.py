"""Where a registry keeps its resources, resource templates and prompts."""

from __future__ import annotations

from ..errors import ConfigurationError
from ._definitions import Prompt, Resource

__all__ = ("ContentCatalog",)


class ContentCatalog:
    """The resources, templates and prompts of one registry, in registration order."""

    def __init__(self) -> None:
        """An empty catalog."""
        self._resources: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}

    def add(self, item: Resource | Prompt) -> None:
        """Register a resource, template or prompt; raises ``ConfigurationError`` on a clash."""
        if isinstance(item, Prompt):
            if item.name in self._prompts:
                raise ConfigurationError(f"prompt {item.name!r} is already registered")
            self._prompts[item.name] = item
            return
        if item.uri in self._resources:
            raise ConfigurationError(f"resource {item.uri!r} is already registered")
        self._resources[item.uri] = item

    def resources(self) -> list[Resource]:
        """Every fixed resource."""
        return [r for r in self._resources.values() if not r.is_template]

    def templates(self) -> list[Resource]:
        """Every resource template."""
        return [r for r in self._resources.values() if r.is_template]

    def prompts(self) -> list[Prompt]:
        """Every prompt."""
        return list(self._prompts.values())

    def prompt(self, name: str) -> Prompt | None:
        """The prompt named ``name``, or None."""
        return self._prompts.get(name)

    def template(self, uri_template: str) -> Resource | None:
        """The template declared with exactly ``uri_template``, or None."""
        found = self._resources.get(uri_template)
        return found if found is not None and found.is_template else None

    def find(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource ``uri`` names (a fixed one first, then the first matching template)."""
        fixed = self._resources.get(uri)
        if fixed is not None and not fixed.is_template:
            return fixed, {}
        for candidate in self._resources.values():
            values = candidate.match(uri) if candidate.is_template else None
            if values is not None:
                return candidate, values
        return None
