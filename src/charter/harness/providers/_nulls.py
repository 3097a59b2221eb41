"""Undoing strict mode's nulls: a ``null`` for a left-out optional property is removed.

``strict_schema`` makes every optional property required but nullable, at every depth
(nested objects, ``$defs``, the branches of a union, array items), so a strict model
sends ``null`` for what it leaves out. ``drop_strict_nulls`` walks the arguments beside
the *original* schema the same way and removes those keys, so validation applies the
defaults. Inside a union it first picks the branch the value is an instance of.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._schema import allows_null, with_ref_target

__all__ = ("drop_strict_nulls",)

_ABSENT = object()


def drop_strict_nulls(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """Undo the strict transform on decoded arguments.

    A ``null`` for an optional property whose schema does not itself allow ``null``
    means "left out": the key is removed, at every depth, so validation applies the
    property's default. A ``null`` the original schema allows is a value and stays.
    Inside a union (``anyOf`` / ``oneOf``) the branch is the one the value matches: the
    discriminator's, else the only branch whose types, constants and properties fit
    the value (strict mode's nulls allowed); when several fit and one takes the value
    unchanged, nothing is removed.
    """
    root = dict(schema)
    return _drop(arguments, root, root)


def _drop(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    node = _deref(node, root)
    variants = _variants(node)
    if variants and value is not None:
        value = _through_union(value, node, variants, root)
    for member in node.get("allOf") or ():
        if isinstance(member, Mapping):
            value = _drop(value, member, root)
    if isinstance(value, dict):
        return _drop_in_object(value, node, root)
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return [_drop(item, items, root) for item in value]
    return value


def _drop_in_object(
    value: dict[str, Any], node: Mapping[str, Any], root: Mapping[str, Any]
) -> dict[str, Any]:
    properties = node.get("properties")
    if not isinstance(properties, Mapping):
        return value
    required = set(node.get("required", ()))
    out: dict[str, Any] = {}
    for key, item in value.items():
        prop = properties.get(key)
        if not isinstance(prop, Mapping):
            out[key] = item
        elif item is None and key not in required and not allows_null(prop, root):
            continue  # strict mode's "left out"
        else:
            out[key] = _drop(item, prop, root)
    return out


def _through_union(
    value: Any,
    node: Mapping[str, Any],
    variants: list[Mapping[str, Any]],
    root: Mapping[str, Any],
) -> Any:
    """``value`` with the nulls of the union branch it is an instance of dropped."""
    chosen = _discriminated(value, node)
    if chosen is not None:
        return _drop(value, chosen, root)
    fitting = [v for v in variants if _fits(value, v, root)]
    if not fitting:
        return value  # validation will say what is wrong
    results = [_drop(value, v, root) for v in fitting]
    # Two branches may both fit, one reading a null as a value: never drop that null.
    return value if value in results else results[0]


def _discriminated(value: Any, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The branch a discriminator's mapping names for ``value`` (pydantic's tagged unions)."""
    discriminator = node.get("discriminator")
    if not isinstance(discriminator, Mapping) or not isinstance(value, dict):
        return None
    mapping = discriminator.get("mapping")
    tag = value.get(discriminator.get("propertyName", _ABSENT))
    if not isinstance(mapping, Mapping) or not isinstance(tag, str):
        return None
    ref = mapping.get(tag)
    return {"$ref": ref} if isinstance(ref, str) else None


def _fits(value: Any, node: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether ``value`` is an instance of the strict form of ``node``, structurally.

    Types, ``const``, ``enum``, variants, required and declared properties (an object
    is closed in strict mode), items; optional properties may be ``null``. Value
    constraints (``minimum``, ``pattern``...) are left to validation.
    """
    node = _deref(node, root)
    if "const" in node and not _same(value, node["const"]):
        return False
    enum = node.get("enum")
    if isinstance(enum, list) and not any(_same(value, e) for e in enum):
        return False
    kind = node.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds is not None and not any(_is_type(value, k) for k in kinds):
        return False
    variants = _variants(node)
    if variants and not any(_fits(value, v, root) for v in variants):
        return False
    members = [m for m in node.get("allOf") or () if isinstance(m, Mapping)]
    if not all(_fits(value, m, root) for m in members):
        return False
    if isinstance(value, dict):
        return _fits_object(value, node, root)
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return all(_fits(item, items, root) for item in value)
    return True


def _fits_object(value: dict[str, Any], node: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    properties = node.get("properties")
    if not isinstance(properties, Mapping):
        return True
    required = set(node.get("required", ()))
    if not required <= value.keys():
        return False
    # Strict mode closes every object: a key it does not declare is another branch's.
    open_ = node.get("additionalProperties", False) not in (False, None)
    for key, item in value.items():
        prop = properties.get(key, _ABSENT)
        if prop is _ABSENT:
            if not open_:
                return False
        elif item is None and key not in required:
            continue
        elif isinstance(prop, Mapping) and not _fits(item, prop, root):
            return False
    return True


def _deref(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` with its ``$ref`` replaced by the target (the node's own keys win)."""
    for _ in range(32):  # a chain of references; a cycle of bare $refs is no schema
        ref = node.get("$ref")
        if not isinstance(ref, str):
            break
        node = with_ref_target(node, ref, root)
    return node


def _variants(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    variants = node.get("anyOf")
    if not isinstance(variants, list):
        variants = node.get("oneOf")
    if not isinstance(variants, list):
        return []
    return [v for v in variants if isinstance(v, Mapping)]


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def _same(value: Any, expected: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return bool(value == expected) and isinstance(value, bool) == isinstance(expected, bool)
