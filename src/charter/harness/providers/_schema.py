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
    "allows_null",
    "inline_refs",
    "resolve_ref",
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
        resolved = resolve_ref(root, ref)
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
                prop = _nullable(prop, root)
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


def _nullable(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    prop.pop("default", None)
    kind = prop.get("type")
    if allows_null(prop, root):
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


def allows_null(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> bool:
    """Whether ``schema`` itself accepts ``null``: by its type or one of its variants.

    With ``root`` (the whole schema), ``$ref``s are followed.
    """
    return _accepts_null(schema, root, ())


def _accepts_null(
    node: Mapping[str, Any], root: Mapping[str, Any] | None, seen: tuple[str, ...]
) -> bool:
    ref = node.get("$ref")
    if root is not None and isinstance(ref, str) and ref not in seen:
        node = {**resolve_ref(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
        seen = (*seen, ref)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    variants = node.get("anyOf") or node.get("oneOf") or ()
    return any(isinstance(v, Mapping) and _accepts_null(v, root, seen) for v in variants)


def resolve_ref(root: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """The schema a local ``$ref`` (``#/$defs/Name``) points at, inside ``root``.

    Raises:
        ValueError: the reference is not local, or points at no schema.
    """
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
            merged = {**resolve_ref(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged, (*seen, ref))
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    result: dict[str, Any] = walk(root, ())
    return result
