"""Tool schemas for providers: normalising tools, the strict-mode transform, ``$ref`` inlining."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..._json_schema import iter_refs, resolve_pointer
from ...manifest import RegisteredTool
from ...tool import Tool
from ..definitions import BoundToolDefinition, ToolSchema
from ..names import ModelNames, model_name_for

__all__ = (
    "ToolLike",
    "add_note",
    "allows_null",
    "inline_refs",
    "strict_or_reason",
    "strict_schema",
    "tool_schemas",
    "with_ref_target",
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
        TypeError: an item is none of those (a manifest entry from ``registry.list()``
            or ``host.discover()``: pass ``host.callable_tools(principal)`` instead).
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
        elif isinstance(item, RegisteredTool | Tool):
            tool = item.tool if isinstance(item, RegisteredTool) else item
            out.append(
                ToolSchema(
                    name=model_name_for(tool.name, tool.model_name),
                    description=tool.description,
                    parameters={k: v for k, v in tool.input_schema.items() if k != "$schema"},
                    tool_name=tool.name,
                )
            )
        else:
            raise _not_a_tool(item)
    ModelNames.build((s.tool_name or s.name, s.name) for s in out)
    return out


def _not_a_tool(item: object) -> TypeError:
    what = type(item).__name__
    if isinstance(item, Mapping):
        what += " (a manifest entry, as registry.list() and host.discover() return it)"
    return TypeError(
        "provider formats take ToolSchema, BoundToolDefinition, RegisteredTool or Tool"
        f" objects, not {what}; pass host.callable_tools(principal) (the tools a"
        " principal may call) or registry.tools() instead"
    )


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
    * a ``$ref`` with sibling keywords (``{"$ref": ..., "description": ...}``) and an
      ``allOf`` of one schema are inlined, because strict mode takes a ``$ref`` only on
      its own and has no ``allOf``; lone ``$ref``s and ``$defs`` are kept (strict mode
      supports them, recursion included). A ``$ref`` to a schema that refers back to
      itself is not inlined (it would never end) but put alone in a one-branch
      ``anyOf`` carrying the keywords.

    The model then sends ``null`` for an optional argument it leaves out; pass the call's
    arguments through ``drop_strict_nulls`` with the original schema (the parsers do, when
    given the tools) so validation sees the argument as omitted and applies its default.

    Raises:
        ValueError: the schema has a part strict mode cannot express without narrowing
            what the tool accepts: an object with keys it does not declare (a
            ``dict[str, X]`` mapping, ``additionalProperties`` or ``patternProperties``,
            an object with no properties), a value of any type, a tuple
            (``prefixItems``), ``not``, ``if``/``then``/``else``, ``dependent*``, an
            ``allOf`` of several schemas, or a root that is not an object. The message
            says where. ``openai_tools`` sends such a tool with ``strict: false``.
    """
    root = copy.deepcopy(dict(schema))
    top = root
    ref = top.get("$ref")
    if isinstance(ref, str):  # a recursive model's schema: {"$ref": ..., "$defs": ...}
        top = with_ref_target(top, ref, root)  # strict mode wants the object itself
    result = _strict(top, root, "")
    kind = result.get("type")
    if (kind != "object" and not (kind is None and "properties" in result)) or "anyOf" in result:
        raise _NotStrict("the root: strict mode takes only an object schema there")
    return result


def strict_or_reason(schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(strict_schema(schema), None)``, or ``(None, why)`` when strict mode cannot say it."""
    try:
        return strict_schema(schema), None
    except _NotStrict as exc:
        return None, str(exc)


class _NotStrict(ValueError):
    """A schema strict mode cannot express; the message says where and why."""


_REFUSED = {
    "not": "'not'",
    "if": "'if'/'then'/'else'",
    "then": "'if'/'then'/'else'",
    "else": "'if'/'then'/'else'",
    "dependentRequired": "'dependentRequired'",
    "dependentSchemas": "'dependentSchemas'",
    "dependencies": "'dependencies'",
    "prefixItems": "a tuple ('prefixItems')",
    "patternProperties": "keys matched by pattern ('patternProperties')",
}
"""Keywords strict mode has no way to say; a schema using one is not sent strict."""

_SHAPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties", "items")
"""Keywords that say what a value is; a schema with none of them accepts anything."""


def _strict(node: Any, root: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise _NotStrict(f"{_at(where)}: the schema {json.dumps(node)}, not an object")
    node = dict(node)
    members = node.get("allOf")
    if isinstance(members, list) and len(members) == 1 and isinstance(members[0], Mapping):
        # One schema and the node's own keywords: a $ref there is handled below.
        node = {**members[0], **{k: v for k, v in node.items() if k != "allOf"}}
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        return _strict(_alone(node, ref, root, where), root, where)
    _refuse(node, where)
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            node[key] = {n: _strict(d, root, f"{where}.{key}.{n}") for n, d in defs.items()}
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required", ()))
        strict_props: dict[str, Any] = {}
        for name, prop in properties.items():
            prop = _strict(prop, root, f"{where}.properties.{name}")
            if name not in required:
                prop = _nullable(prop, root)
            strict_props[name] = prop
        node["properties"] = strict_props
        node["required"] = list(properties)
    if _is_object(node) and not _split_object(node):
        node["additionalProperties"] = False
    items = node.get("items")
    if items is not None:
        node["items"] = _strict(items, root, f"{where}.items")
    if isinstance(node.get("oneOf"), list):
        # Strict mode has no oneOf; anyOf accepts the same arguments here (the host
        # validates them against the real schema).
        node["anyOf"] = node.pop("oneOf")
    variants = node.get("anyOf")
    if isinstance(variants, list):
        node["anyOf"] = [_strict(v, root, f"{where}.anyOf.{i}") for i, v in enumerate(variants)]
    node.pop("discriminator", None)
    return _noted(node)


def _alone(node: dict[str, Any], ref: str, root: dict[str, Any], where: str) -> dict[str, Any]:
    """A ``$ref`` with sibling keywords without them: its target inlined, or an ``anyOf``.

    Strict mode takes a ``$ref`` only alone. Inlining a target that refers back to
    itself would never end (a self-reference with a description), so such a ``$ref``
    stays alone in a one-branch ``anyOf`` that carries the keywords.
    """
    if not _refers_to_itself(ref, root):
        return copy.deepcopy(with_ref_target(node, ref, root))
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    if "anyOf" in siblings or "oneOf" in siblings:
        raise _NotStrict(f"{_at(where)}: a recursive $ref beside anyOf or oneOf")
    return {**siblings, "anyOf": [{"$ref": ref}]}


def _refers_to_itself(ref: str, root: Mapping[str, Any]) -> bool:
    """Whether the schema ``ref`` points at holds a ``$ref`` back to it, at any depth."""
    target = resolve_pointer(root, ref)
    pending, seen = [target], {id(target)}
    while pending:
        for inner in iter_refs(pending.pop()):
            reached = resolve_pointer(root, inner)
            if reached is target:
                return True
            if id(reached) not in seen:
                seen.add(id(reached))
                pending.append(reached)
    return False


def _refuse(node: Mapping[str, Any], where: str) -> None:
    """Raise ``_NotStrict`` when strict mode cannot express ``node`` without narrowing it."""
    for key, what in _REFUSED.items():
        if key in node:
            raise _NotStrict(f"{_at(where)}: {what}, which strict mode does not support")
    extra = node.get("additionalProperties", False)
    if extra is not False:
        raise _NotStrict(
            f"{_at(where)}: an object with keys it does not declare (a mapping such as"
            f" dict[str, X]: additionalProperties {json.dumps(extra)}); strict mode"
            " closes every object, so the model could send only {}"
        )
    if _open_object(node):
        raise _NotStrict(
            f"{_at(where)}: an object with no declared properties (a free-form mapping);"
            " strict mode closes every object, so the model could send only {}"
        )
    if not any(key in node for key in _SHAPED):
        raise _NotStrict(f"{_at(where)}: a value of any type (a schema with no type)")
    if node.get("type") == "array" and "items" not in node:
        raise _NotStrict(f"{_at(where)}: an array whose items may be anything")
    members = node.get("allOf")
    if isinstance(members, list):
        raise _NotStrict(f"{_at(where)}: an allOf of {len(members)} schemas")
    if "anyOf" in node and "oneOf" in node:
        raise _NotStrict(f"{_at(where)}: both anyOf and oneOf")


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return (
        kind == "object" or (isinstance(kind, list) and "object" in kind) or ("properties" in node)
    )


def _open_object(node: Mapping[str, Any]) -> bool:
    """An object that declares nothing: no properties, no variants, no closing keyword."""
    return (
        _is_object(node)
        and "properties" not in node
        and "additionalProperties" not in node
        and not _split_object(node)
    )


def _split_object(node: Mapping[str, Any]) -> bool:
    """``{"type": "object", "anyOf": [...]}``: the branches declare the properties."""
    return "properties" not in node and ("anyOf" in node or "oneOf" in node or "$ref" in node)


def _at(where: str) -> str:
    return where[1:] if where else "the root"


_STRICT_UNSUPPORTED = (
    "default",
    "minLength",
    "maxLength",
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
"""Keywords strict mode refuses that only constrain; their values move into the description."""

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
        add_note(node, "; ".join(notes))
    return node


def add_note(node: dict[str, Any], note: str) -> None:
    """Append ``(note)`` to ``node``'s description: what a provider refuses, still read."""
    described = node.get("description")
    node["description"] = f"{described} ({note})" if described else f"({note})"


def _nullable(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    prop.pop("default", None)
    kind = prop.get("type")
    if allows_null(prop, root):
        return prop
    # A null added to the type would still fail an enum, a const or every variant.
    if not any(key in prop for key in ("$ref", "enum", "const", "anyOf", "oneOf")):
        if isinstance(kind, str):
            prop["type"] = [kind, "null"]
            return prop
        if isinstance(kind, list):
            prop["type"] = [*kind, "null"]
            return prop
    variants = prop.get("anyOf")
    if isinstance(variants, list) and not any(k in prop for k in ("type", "$ref", "enum", "const")):
        prop["anyOf"] = [*variants, {"type": "null"}]  # a union: null is one more variant
        return prop
    description = prop.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [prop, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


def allows_null(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> bool:
    """Whether ``schema`` itself accepts ``null``: by its type, enum, const or a variant.

    With ``root`` (the whole schema), ``$ref``s are followed.
    """
    return _accepts_null(schema, root, ())


def _accepts_null(
    node: Mapping[str, Any], root: Mapping[str, Any] | None, seen: tuple[str, ...]
) -> bool:
    ref = node.get("$ref")
    if root is not None and isinstance(ref, str) and ref not in seen:
        node = with_ref_target(node, ref, root)
        seen = (*seen, ref)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    enum = node.get("enum")
    if (isinstance(enum, list) and None in enum) or ("const" in node and node["const"] is None):
        return True  # Literal["a", None], Literal[None]
    variants = node.get("anyOf") or node.get("oneOf") or ()
    return any(isinstance(v, Mapping) and _accepts_null(v, root, seen) for v in variants)


def with_ref_target(node: Mapping[str, Any], ref: str, root: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (``ref``) replaced by the schema it points at in ``root``.

    The node's own keywords win over the target's (a ``description`` beside the ``$ref``).
    """
    return {**_resolve_ref(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}


def _resolve_ref(root: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """The schema a local ``$ref`` (``#/$defs/Name``) points at, inside ``root``.

    Raises:
        ValueError: the reference is not local, or points at no schema.
    """
    if not ref.startswith("#"):
        raise ValueError(f"cannot resolve non-local $ref {ref!r}")
    node = resolve_pointer(root, ref)
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
            return walk(with_ref_target(node, ref, root), (*seen, ref))
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    result: dict[str, Any] = walk(root, ())
    return result
