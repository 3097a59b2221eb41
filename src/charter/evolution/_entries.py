"""The shape of a manifest entry as a registry writes it: each field's JSON type, and depth.

An entry no registry would write is an invalid document, not a change to judge. Read
leniently, `"requiredScopes": "trips:read"` would be no scopes at all, `"delegable": "yes"`
would be "not delegable", and a `capabilityVersion` of `1` would be an unreadable version,
which excused every breaking change as a major bump. Fields a registry omits may be absent
(a hand-written or MCP `tools/list` manifest has no `capabilityVersion`); a field present
with the wrong type, `null` included, is refused. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from charter.evolution._json_schema import show

__all__ = ("MAX_DEPTH", "entry_problem")

MAX_DEPTH = 128
"""How deeply an entry may nest JSON values. Real schemas stay far below (a pydantic model
nests a few levels per model); the comparison recurses per level, so a deeper document is
refused up front rather than crashing it."""

_Problem: TypeAlias = tuple[str, str, object]
"""Where inside the field (`""`, or `.confirmationRequired`), the type expected, the value."""
_Check: TypeAlias = Callable[[object], _Problem | None]


def _expect(expected: str, ok: Callable[[object], bool]) -> _Check:
    def check(value: object) -> _Problem | None:
        return None if ok(value) else ("", expected, value)

    return check


_string = _expect("a string", lambda v: isinstance(v, str))
_nonempty_string = _expect("a non-empty string", lambda v: isinstance(v, str) and v != "")
_strings = _expect(
    "a list of strings", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)
)
_boolean = _expect("true or false", lambda v: isinstance(v, bool))
_schema = _expect("a JSON Schema (an object or a boolean)", lambda v: isinstance(v, Mapping | bool))


def _object(**fields: _Check) -> _Check:
    """An object whose listed fields, when present, pass their checks."""

    def check(value: object) -> _Problem | None:
        if not isinstance(value, Mapping):
            return ("", "an object", value)
        for key, field_check in fields.items():
            if key in value and (problem := field_check(value[key])) is not None:
                return (f".{key}{problem[0]}", problem[1], problem[2])
        return None

    return check


def _objects_of(each: _Check) -> _Check:
    """An object whose every value passes `each` (keyed by alias, say)."""

    def check(value: object) -> _Problem | None:
        if not isinstance(value, Mapping):
            return ("", "an object", value)
        for key, item in value.items():
            if (problem := each(item)) is not None:
                return (f"[{key!r}]{problem[0]}", problem[1], problem[2])
        return None

    return check


_DEPRECATION = _object(sinceVersion=_string, message=_string, sunsetDate=_string)
_CONTROLS = _object(required=_strings, optional=_strings)

_FIELDS: dict[str, _Check] = {
    "name": _nonempty_string,
    "description": _string,
    "aliases": _strings,
    "deprecation": _DEPRECATION,
    "aliasDeprecations": _objects_of(_DEPRECATION),
    "capabilityId": _string,
    "capabilityVersion": _nonempty_string,
    "owner": _string,
    "contractVersion": _string,
    "inputSchema": _schema,
    "outputSchema": _schema,
    "requiredScopes": _strings,
    "audience": _strings,
    "tier": _string,
    "deploymentRisk": _string,
    "riskPolicy": _object(confirmationRequired=_boolean),
    "annotations": _object(),
    "auth": _string,
    "delegable": _boolean,
    "tenantField": _string,
    "modelName": _string,
    "actionPolicy": _object(
        approval=_string,
        risk=_string,
        confirmation=_string,
        allowedActorTypes=_strings,
        controls=_CONTROLS,
    ),
    "controls": _CONTROLS,
    "warnings": _strings,
}
"""The fields `charter.manifest.build_entry` writes, with their types; others are not checked."""


def entry_problem(entry: Mapping[str, object]) -> str | None:
    """What makes an entry one no registry would write (naming the field), or None."""
    for key, check in _FIELDS.items():
        if key in entry and (problem := check(entry[key])) is not None:
            where, expected, value = problem
            return f"'{key}{where}' must be {expected}, not {_shown(value)}"
    if _depth(entry) > MAX_DEPTH:
        return f"nests deeper than {MAX_DEPTH} levels"
    return None


def _shown(value: object) -> str:
    """A wrong value for the message: its JSON text when short, else its JSON type."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list" if len(show(value)) > 40 else show(value)
    return show(value)


def _depth(value: object) -> int:
    """How deeply a JSON value nests (a scalar is 0), without recursion."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break  # deep enough to refuse; no need to walk the rest
        if isinstance(node, Mapping):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
    return deepest
