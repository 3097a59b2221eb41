"""The base of the REST transport's JSON bodies: frozen, no unknown fields, camelCase names."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ("WireModel",)


class WireModel(BaseModel):
    """A body on the wire: fields are snake_case in Python and camelCase in JSON."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )
