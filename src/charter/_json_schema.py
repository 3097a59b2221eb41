"""Reading JSON Schema: local ``$ref``s, and the type name of a JSON value.

Where a reference points (RFC 6901) and which ones a schema holds; one reading for every
package that reads schemas: ``charter diff`` comparing definitions, the gateway reading an
upstream's schemas, the provider formats inlining targets and rewriting enums. Standard
library only; references are walked without recursion, so no schema's nesting can exhaust
the stack.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from urllib.parse import unquote

__all__ = ("iter_refs", "json_type", "resolve_pointer")


def resolve_pointer(root: object, ref: str) -> object | None:
    """What the local reference ``ref`` (``#/$defs/Name``, ``#``) points at in ``root``.

    The fragment is percent-decoded, then each token unescaped (``~1`` is ``/``, ``~0`` is
    ``~``); a token steps into an object's key or an array's index. None when ``ref`` is
    not local (``https://…``, ``other.json#…``) or names nothing in ``root``.
    """
    if not ref.startswith("#"):
        return None
    node = root
    for raw in unquote(ref[1:]).split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def iter_refs(value: object) -> Iterator[str]:
    """Every ``$ref`` string anywhere inside a JSON value, not followed."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            target = node.get("$ref")
            if isinstance(target, str):
                yield target
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def json_type(value: object) -> str:
    """The JSON Schema type name of a JSON value (``1.0`` is an integer, as the spec says)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array"
