"""Gemini formats: function declarations, ``functionCall`` parsing, ``functionResponse`` parts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..._json_schema import json_type
from ..messages import Message, ToolCall, ToolResult, result_text
from ._schema import ToolLike, add_note, inline_refs, tool_schemas
from ._util import field, sendable

__all__ = (
    "gemini_contents",
    "gemini_tool_calls",
    "gemini_tool_result",
    "gemini_tools",
)

# The OpenAPI 3.0 subset Gemini's `parameters` accepts; other keywords are dropped.
_KEEP = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "anyOf",
        "propertyOrdering",
        "title",
    }
)


def gemini_tools(tools: Iterable[ToolLike]) -> list[dict[str, Any]]:
    """One ``Tool`` holding a ``functionDeclarations`` list (REST / ``google-genai`` dict form).

    Gemini's ``parameters`` is an OpenAPI 3.0 subset: ``$ref``s are inlined (a recursive
    schema raises ``ValueError``), ``anyOf: [T, null]`` becomes ``T`` with
    ``nullable: true``, an ``enum`` or ``const`` keeps to strings (see ``_fit_enum``), and
    keywords outside the subset (``additionalProperties``, ``default``...) are dropped.
    The server validates arguments anyway.
    """
    declarations = [
        {
            "name": s.name,
            "description": s.description,
            "parameters": _openapi(inline_refs(s.parameters)),
        }
        for s in tool_schemas(tools)
    ]
    return [{"functionDeclarations": declarations}]


def _openapi(node: Mapping[str, Any]) -> dict[str, Any]:
    variants = node.get("anyOf")
    if isinstance(variants, list):
        rest = [v for v in variants if not (isinstance(v, Mapping) and v.get("type") == "null")]
        if len(rest) < len(variants):
            if len(rest) == 1:
                merged = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}
                return {**_openapi(merged), "nullable": True}
            node = {**node, "anyOf": rest, "nullable": True}
    kind = node.get("type")
    out: dict[str, Any] = {}
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) > 1:
            # Gemini's type is one name: several become one variant each.
            others = {k: v for k, v in node.items() if k != "type"}
            union: dict[str, Any] = {"anyOf": [{**others, "type": t} for t in types]}
            if "null" in kind:
                union["nullable"] = True
            return _openapi(union)
        out["type"] = types[0] if types else "null"
        if "null" in kind:
            out["nullable"] = True
    for key, value in node.items():
        if key not in _KEEP or key in out or key == "enum":
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _openapi(prop) for name, prop in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _openapi(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_openapi(v) for v in value]
        else:
            out[key] = value
    _fit_enum(node, out)
    return out


def _fit_enum(node: Mapping[str, Any], out: dict[str, Any]) -> None:
    """Write ``node``'s ``enum`` or ``const`` into ``out`` as Gemini takes it: strings only.

    Gemini's ``enum`` is a list of strings (the SDK refuses the whole ``Tool`` otherwise):
    a ``null`` among the values becomes ``nullable``; other values (``Literal[1, 2]``, an
    ``IntEnum``, ``Literal[True]``) are stated in the description instead, since writing
    them as strings would ask the model for ``"1"``, which validation then refuses.
    """
    keyword = "enum" if "enum" in node else "const" if "const" in node else None
    if keyword is None:
        return
    values = node[keyword] if keyword == "enum" else [node[keyword]]
    if not isinstance(values, list):
        return
    if None in values:
        out["nullable"] = True
        values = [v for v in values if v is not None]
    if not values:
        return
    if all(isinstance(v, str) for v in values):
        out["enum"] = values
        out.setdefault("type", "string")
        return
    stated = values if keyword == "enum" else values[0]
    add_note(out, f"{keyword} {json.dumps(stated, ensure_ascii=False)}")
    kinds = {json_type(v) for v in values}
    if len(kinds) == 1:
        out.setdefault("type", kinds.pop())


def gemini_tool_calls(response: object) -> list[ToolCall]:
    """Parse ``functionCall`` parts (a response, a ``Content``, or a list of parts).

    Gemini may omit call ids; a missing id becomes ``"<name>-<index>"`` so results pair.
    """
    parts = _parts(response)
    calls: list[ToolCall] = []
    for index, part in enumerate(parts):
        call = field(part, "functionCall") or field(part, "function_call")
        if call is None:
            continue
        name = str(field(call, "name", ""))
        arguments = field(call, "args", {}) or {}
        calls.append(
            ToolCall(
                call_id=str(field(call, "id", None) or f"{name}-{index}"),
                name=name,
                arguments=dict(arguments) if isinstance(arguments, Mapping) else str(arguments),
            )
        )
    return calls


def _parts(response: object) -> list[object]:
    candidates = field(response, "candidates")
    if isinstance(candidates, list) and candidates:
        response = field(candidates[0], "content")
    parts = field(response, "parts", response)
    return list(parts) if isinstance(parts, list | tuple) else []


def gemini_tool_result(result: ToolResult) -> dict[str, Any]:
    """A ``functionResponse`` part: ``{"output": ...}`` or ``{"error": text}``."""
    response: dict[str, Any] = (
        {"output": result.output} if result.kind == "completed" else {"error": result_text(result)}
    )
    # The name the model called: it pairs the response with the model's functionCall.
    name = result.model_name or result.tool_name
    return {"functionResponse": {"id": result.call_id, "name": name, "response": response}}


def gemini_contents(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A harness transcript as Gemini ``contents`` (roles ``user`` and ``model``)."""
    out: list[dict[str, Any]] = []
    for message in sendable(messages):
        if message.role == "user":
            out.append({"role": "user", "parts": [{"text": message.content}]})
        elif message.role == "tool":
            out.append({"role": "user", "parts": [gemini_tool_result(r) for r in message.results]})
        else:
            parts: list[dict[str, Any]] = []
            if message.text:
                parts.append({"text": message.text})
            parts.extend(
                {"functionCall": {"id": c.call_id, "name": c.name, "args": _args(c)}}
                for c in message.tool_calls
            )
            out.append({"role": "model", "parts": parts})
    return out


def _args(call: ToolCall) -> dict[str, Any]:
    if isinstance(call.arguments, dict):
        return call.arguments
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
