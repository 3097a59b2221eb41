"""Tool schemas for providers: normalising tools, the strict-mode transform, ``$ref`` inlining."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ...manifest import RegisteredTool
from ...tool import Tool
from ..definitions import BoundToolDefinition, ToolSchema
from ..names import ModelNames, model_name_for

__all__ = (
    "ToolLike",
    "drop_strict_nulls",
    "inline_refs",
    "strict_schema",
    "tool_schemas",
)

ToolLike = ToolSchema | BoundToolDefinition | RegisteredTool | Tool[Any, Any, Any]
"""Anything a provider format accepts as a tool."""


def tool_schemas(tools: Iterable[ToolLike]) -> list[ToolSchema]:
    """Normalise tools to ``ToolSchema``: model-facing name, description, parameters.

    Names go through ``charter.harness.names``: a tool's (or a hand-built schema's) name
    becomes its model-facing name, which the ``ToolSchema`` of a bound tool already is;
    the canonical name stays in ``tool_name``. Parameters lose ``$schema``.

    Raises:
        ConfigurationError: two of the tools would have the same model-facing name.
    """
    out: list[ToolSchema] = []
    for item in tools:
        if isinstance(item, ToolSchema):
            if item.tool_name is None:
                item = ToolSchema(
                    name=model_name_for(item.name),
                    description=item.description,
                    parameters=item.parameters,
                    tool_name=item.name,
                )
            else:
                model_name_for(item.tool_name, item.name)  # a hand-built name must be valid
            out.append(item)
        elif isinstance(item, BoundToolDefinition):
            out.append(item.schema)
        else:
            tool = item.tool if isinstance(item, RegisteredTool) else item
            out.append(
                ToolSchema(
                    name=model_name_for(tool.name, tool.model_name),
                    description=tool.description,
                    parameters={k: v for k, v in tool.input_schema.items() if k != "$schema"},
                    tool_name=tool.name,
                )
            )
    ModelNames.build((s.tool_name or s.name, s.name) for s in out)
    return out


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Transform a JSON Schema for OpenAI's strict mode (structured outputs).

    Strict mode accepts a schema only when every object lists all of its properties in
    ``required`` and sets ``additionalProperties: false``. So, on every object (nested
    ones and ``$defs`` too):

    * every property becomes required;
    * a property that was optional becomes nullable (``type: [T, "null"]``, or
      ``anyOf: [..., {"type": "null"}]``) so the model can still leave it out by sending
      ``null``, and its ``default`` is dropped (strict mode rejects it);
    * ``additionalProperties`` is set to ``false``;
    * a ``$ref`` with sibling keywords (``{"$ref": ..., "description": ...}``) is
      inlined, because strict mode takes a ``$ref`` only on its own; lone ``$ref``s and
      ``$defs`` are kept (strict mode supports them, recursion included).

    The model then sends ``null`` for an optional argument it leaves out; pass the call's
    arguments through ``drop_strict_nulls`` with the original schema (the parsers do, when
    given the tools) so validation sees the argument as omitted and applies its default.
    """
    root = copy.deepcopy(dict(schema))
    return _strict(root, root)


def _strict(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        resolved = _resolve(root, ref)
        merged = {**copy.deepcopy(resolved), **{k: v for k, v in node.items() if k != "$ref"}}
        return _strict(merged, root)
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            node[key] = {name: _strict(dict(d), root) for name, d in defs.items()}
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required", ()))
        strict_props: dict[str, Any] = {}
        for name, prop in properties.items():
            prop = _strict(dict(prop), root)
            if name not in required:
                prop = _nullable(prop)
            strict_props[name] = prop
        node["properties"] = strict_props
        node["required"] = list(properties)
    if node.get("type") == "object" or isinstance(properties, dict):
        node["additionalProperties"] = False
    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = _strict(dict(items), root)
    if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
        # Strict mode has no oneOf; anyOf accepts the same arguments here (the host
        # validates them against the real schema).
        node["anyOf"] = node.pop("oneOf")
    for key in ("anyOf", "allOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            node[key] = [_strict(dict(v), root) for v in variants]
    node.pop("discriminator", None)
    return _noted(node)


_STRICT_UNSUPPORTED = (
    "default",
    "minLength",
    "maxLength",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
)
"""Keywords strict mode refuses; their values move into the description."""

_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""The string formats strict mode accepts; another format moves into the description."""


def _noted(node: dict[str, Any]) -> dict[str, Any]:
    """Move what strict mode refuses into the description, so the model still reads it."""
    if node.get("default", 0) is None:
        node.pop("default")  # says nothing the nullable type does not
    notes = [
        f"{key} {json.dumps(node.pop(key), ensure_ascii=False)}"
        for key in _STRICT_UNSUPPORTED
        if key in node
    ]
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt not in _STRICT_FORMATS:
        notes.append(f"format {json.dumps(node.pop('format'))}")
    if notes:
        text = "; ".join(notes)
        described = node.get("description")
        node["description"] = f"{described} ({text})" if described else f"({text})"
    return node


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    prop.pop("default", None)
    kind = prop.get("type")
    if _allows_null(prop):
        return prop
    if isinstance(kind, str) and "$ref" not in prop and "enum" not in prop:
        prop["type"] = [kind, "null"]
        return prop
    if isinstance(kind, list) and "enum" not in prop:
        prop["type"] = [*kind, "null"]
        return prop
    description = prop.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [prop, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def _allows_null(prop: Mapping[str, Any]) -> bool:
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    variants = prop.get("anyOf") or prop.get("oneOf") or ()
    return any(isinstance(v, Mapping) and _allows_null(v) for v in variants)


def _resolve(root: Mapping[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"cannot resolve non-local $ref {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} does not point at a schema")
    return dict(node)


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Replace every local ``$ref`` with its target and drop ``$defs`` (for Gemini).

    Raises:
        ValueError: the schema is recursive (it cannot be written without ``$ref``).
    """
    root = dict(schema)

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                raise ValueError(f"recursive schema at {ref!r} cannot be inlined")
            merged = {**_resolve(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged, (*seen, ref))
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    result: dict[str, Any] = walk(root, ())
    return result


def drop_strict_nulls(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """Undo the strict transform on decoded arguments.

    A ``null`` for an optional property that does not itself allow null means "left
    out", so the key is removed (then validation applies the property's default).
    """
    return _drop(arguments, dict(schema), dict(schema))


def _drop(value: Any, node: dict[str, Any], root: dict[str, Any]) -> Any:
    ref = node.get("$ref")
    if isinstance(ref, str):
        node = {**_resolve(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
    if isinstance(value, dict):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = set(node.get("required", ()))
        out: dict[str, Any] = {}
        for key, item in value.items():
            prop = properties.get(key)
            if not isinstance(prop, Mapping):
                out[key] = item
                continue
            if item is None and key not in required and not _allows_null_resolved(prop, root):
                continue
            out[key] = _drop(item, dict(prop), root)
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_drop(item, dict(node["items"]), root) for item in value]
    return value


def _allows_null_resolved(prop: Mapping[str, Any], root: dict[str, Any]) -> bool:
    ref = prop.get("$ref")
    if isinstance(ref, str):
        return _allows_null(_resolve(root, ref))
    return _allows_null(prop)
