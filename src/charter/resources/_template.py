"""URI templates of the simplest RFC 6570 form: ``{name}`` variables within one path segment."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from ..errors import ConfigurationError

__all__ = ("UriTemplate",)

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MAX_VALUE = 1024
"""The longest variable value matched, so a hostile URI cannot make matching slow."""


class UriTemplate:
    """Matches URIs against a template such as ``trip://{trip_id}`` and expands it back."""

    __slots__ = ("_pattern", "template", "variables")

    def __init__(self, template: str) -> None:
        """Compile ``template``; raises ``ConfigurationError`` for a malformed one."""
        self.template = template
        names = _VARIABLE.findall(template)
        if len(set(names)) != len(names):
            raise ConfigurationError(f"URI template {template!r} repeats a variable")
        rest = _VARIABLE.sub("", template)
        if "{" in rest or "}" in rest:
            raise ConfigurationError(
                f"URI template {template!r}: only simple {{name}} variables are supported"
            )
        self.variables: tuple[str, ...] = tuple(names)
        parts: list[str] = []
        last = 0
        for found in _VARIABLE.finditer(template):
            parts.append(re.escape(template[last : found.start()]))
            # One segment: no '/', '?' or '#', so variables never swallow structure.
            parts.append(f"(?P<{found.group(1)}>[^/?#]{{1,{_MAX_VALUE}}})")
            last = found.end()
        parts.append(re.escape(template[last:]))
        self._pattern = re.compile("".join(parts))

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` (percent-decoded), or None when it does not match."""
        found = self._pattern.fullmatch(uri)
        if found is None:
            return None
        return {name: unquote(value) for name, value in found.groupdict().items()}

    def expand(self, values: dict[str, str]) -> str:
        """The URI with each variable replaced by its percent-encoded value."""
        return _VARIABLE.sub(lambda m: quote(values[m.group(1)], safe=""), self.template)
