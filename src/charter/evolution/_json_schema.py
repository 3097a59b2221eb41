"""Reading JSON Schema documents: following `$ref`s, union members, admitted types and values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from charter._json_schema import json_type, resolve_pointer

__all__ = (
    "ANNOTATIONS",
    "REPORTED_ANNOTATIONS",
    "Resolved",
    "branches",
    "canon",
    "covers",
    "label",
    "mapping",
    "merge",
    "names",
    "number",
    "resolve",
    "show",
    "types_of",
    "values_of",
)

REPORTED_ANNOTATIONS = ("title", "description", "default", "deprecated")
"""Annotations whose changes are reported (always as compatible)."""

ANNOTATIONS = frozenset(
    {
        *REPORTED_ANNOTATIONS,
        "examples",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "$anchor",
        "$defs",
        "definitions",
        "discriminator",  # OpenAPI's hint; the members' `const`s carry the meaning.
        "contentMediaType",
        "contentEncoding",
    }
)
"""Keywords that describe a value without constraining it."""


def canon(value: object) -> str:
    """Canonical JSON text of a value, for equality tests."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def show(value: object) -> str:
    """Short JSON text of a value, for messages."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def mapping(value: object) -> Mapping[str, object]:
    """The value if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def names(value: object) -> frozenset[str]:
    """The strings in a JSON array (such as `required`), else none."""
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str))


def number(value: object) -> float | None:
    """The value as a float if it is a JSON number (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def values_of(schema: Mapping[str, object]) -> list[object] | None:
    """The values a schema is limited to by `const` or `enum`, or None."""
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return list(enum) if isinstance(enum, list) else None


def types_of(schema: Mapping[str, object]) -> frozenset[str] | None:
    """The JSON types a schema admits (from `type`, else from `const`/`enum`); None for any."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(t for t in declared if isinstance(t, str))
    values = values_of(schema)
    if values is not None:
        return frozenset(json_type(v) for v in values)
    return None


def covers(types: frozenset[str] | None, type_name: str) -> bool:
    """Whether a set of types (None: any) admits every value of `type_name`."""
    if types is None:
        return True
    return type_name in types or (type_name == "integer" and "number" in types)


def merge(schema: object, siblings: Mapping[str, object]) -> object:
    """Apply keywords that sat beside a `$ref`/`allOf`/`anyOf` to the schema they qualify.

    JSON Schema ANDs them; pydantic only puts annotations there, so a plain update suffices.
    """
    if not siblings:
        return schema
    if schema is True:
        return dict(siblings)
    if not isinstance(schema, Mapping):
        return schema
    return {**schema, **siblings}


@dataclass(frozen=True, slots=True)
class Resolved:
    """A schema with its `$ref`s and single-member `allOf`s followed."""

    schema: Mapping[str, object] | bool
    ref: str | None = None
    """The last `$ref` followed (the definition's pointer), if any."""
    site: str = ""
    """Canonical JSON of the keywords beside the first `$ref` (they differ between use sites)."""
    error: str | None = None
    """Why the schema could not be resolved, if it could not."""


def resolve(schema: object, root: object) -> Resolved:
    """Follow `$ref`s (against `root`) and single-member `allOf`s to a plain schema."""
    seen: set[str] = set()
    ref: str | None = None
    site = ""
    current = schema
    while True:
        if isinstance(current, bool):
            return Resolved(current, ref, site)
        if not isinstance(current, Mapping):
            return Resolved(False, ref, site, f"not a schema: {show(current)}")
        target = current.get("$ref")
        members = current.get("allOf")
        if isinstance(target, str):
            if target in seen:
                return Resolved(False, ref, site, f"$ref {target!r} refers to itself")
            seen.add(target)
            found = resolve_pointer(root, target)
            if found is None:
                return Resolved(False, ref, site, f"$ref {target!r} cannot be resolved")
            siblings = {
                k: v for k, v in current.items() if k not in {"$ref", "$defs", "definitions"}
            }
            site = canon(siblings) if ref is None else site
            ref = target
            current = merge(found, siblings)
        elif isinstance(members, list) and len(members) == 1:
            current = merge(members[0], {k: v for k, v in current.items() if k != "allOf"})
        else:
            return Resolved(current, ref, site)


def branches(schema: Mapping[str, object]) -> list[object]:
    """Split a schema, minus its annotations, into union members.

    `anyOf` and `oneOf` members (flattened), or one member per entry of a `type` list (exact:
    type-specific keywords only apply to values of their type); the keywords beside the union
    apply to each member. A schema that is no union is its own single member.
    """
    rest = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    for keyword, other in (("anyOf", "oneOf"), ("oneOf", "anyOf")):
        members = rest.get(keyword)
        if isinstance(members, list) and members and other not in rest:
            siblings = {k: v for k, v in rest.items() if k != keyword}
            result: list[object] = []
            for member in members:
                merged = merge(member, siblings)
                if isinstance(merged, Mapping) and "$ref" not in merged:
                    result += branches(merged)
                else:
                    result.append(merged)
            return result
    declared = rest.get("type")
    if isinstance(declared, list) and declared:
        return [{**rest, "type": t} for t in declared]
    return [rest]


def label(resolved: Resolved) -> str:
    """A short name for a union member: its `$defs` name, title, const or type."""
    if resolved.ref is not None:
        return resolved.ref.rsplit("/", 1)[-1]
    schema = resolved.schema
    if not isinstance(schema, Mapping):
        return "anything" if schema else "nothing"
    title = schema.get("title")
    if isinstance(title, str):
        return title
    if "const" in schema:
        return show(schema["const"])
    types = types_of(schema)
    return "|".join(sorted(types)) if types else "schema"
