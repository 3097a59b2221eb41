"""``Lax``: one field of a strict tool that coerces its input as pydantic's lax mode does."""

from __future__ import annotations

from typing import Any

from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, core_schema

__all__ = ("Lax",)


class Lax:
    """Marks a field of a tool's input that accepts more than its JSON type, coerced.

    Tool input is strict by default: ``"2"`` is no integer, ``"true"`` no boolean
    (docs/contract.md, "Strict input"). ``Annotated[int, Lax()]`` lets this one field
    coerce as pydantic does in lax mode (``"2"`` → 2) while the rest stays strict; a value
    lax mode refuses too is refused with the field's usual error. For a whole tool, give
    its input model ``model_config = ConfigDict(strict=False)`` instead.
    """

    __slots__ = ()

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        """The field's own schema, after a lax conversion of what the caller sent."""
        adapter: TypeAdapter[Any] = TypeAdapter(source)

        def coerce(value: Any) -> Any:
            try:
                return adapter.validate_python(value, strict=False)
            except ValidationError:
                return value  # the strict schema reports it, with its own message

        return core_schema.no_info_before_validator_function(coerce, handler(source))

    def __repr__(self) -> str:
        return "Lax()"
