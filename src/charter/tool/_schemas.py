"""JSON Schemas of a tool's models, computed once when the tool is defined."""

from __future__ import annotations

import weakref
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.errors import PydanticUserError

__all__ = ("JSON_SCHEMA_DIALECT", "json_schema")

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect of every schema charter publishes (``$schema``)."""

Mode = Literal["validation", "serialization"]

# Each model's schemas, by mode, made once: tools that share a model (an output model most
# often) share the one dict, as they share its closed copy (``_closed_models``). Weak keys:
# a model made at run time (a gateway's upstream tools) is not kept alive by its schema.
_made: weakref.WeakKeyDictionary[type[BaseModel], dict[Mode, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def json_schema(model: type[BaseModel], mode: Mode, name: str) -> dict[str, Any]:
    """The model's JSON Schema with its dialect, or a placeholder when it has none.

    The schema is made once per model and mode, and shared: read it, copy it to change it.
    """
    made = _made.get(model)
    if made is not None and mode in made:
        return made[mode]
    try:
        schema = model.model_json_schema(mode=mode)
    except PydanticUserError:
        return {  # not kept: it names the tool
            "$schema": JSON_SCHEMA_DIALECT,
            "type": "object",
            "description": f"The {mode} schema of {name!r} is not JSON-Schema-serialisable; "
            "it is validated server-side.",
            "x-charter-schema-quality": "runtime-only",
        }
    published = {"$schema": JSON_SCHEMA_DIALECT, **schema}
    _made.setdefault(model, {})[mode] = published
    return published
