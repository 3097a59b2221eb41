"""JSON Schemas of a tool's models, computed once when the tool is defined."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from pydantic.errors import PydanticUserError

__all__ = ("JSON_SCHEMA_DIALECT", "json_schema")

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect of every schema charter publishes (``$schema``)."""


def json_schema(
    model: type[BaseModel], mode: Literal["validation", "serialization"], name: str
) -> dict[str, Any]:
    """The model's JSON Schema with its dialect, or a placeholder when it has none."""
    try:
        schema = model.model_json_schema(mode=mode)
    except PydanticUserError:
        return {
            "$schema": JSON_SCHEMA_DIALECT,
            "type": "object",
            "description": f"The {mode} schema of {name!r} is not JSON-Schema-serialisable; "
            "it is validated server-side.",
            "x-charter-schema-quality": "runtime-only",
        }
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}
