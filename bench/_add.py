"""The add tool the registry, harness and scale benchmarks call: two integers in, their total out.

Its models are the ones the hand-written baselines validate and dump, so both sides of a
case do the same work but for what charter adds.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from charter import Registry, define_tool
from charter.tool import Tool

__all__ = ("AddIn", "AddOut", "add", "add_registry", "add_tool")


class AddIn(BaseModel):
    a: int
    b: int


class AddOut(BaseModel):
    total: int


async def add(args: AddIn) -> AddOut:
    """The handler: ``a + b``."""
    return AddOut(total=args.a + args.b)


def add_tool(name: str = "add", required_scopes: Sequence[str] = ()) -> Tool[AddIn, AddOut]:
    """The ``add`` read tool under ``name``, needing ``required_scopes``."""
    return define_tool(
        name=name,
        description="Add two integers.",
        input_schema=AddIn,
        output_schema=AddOut,
        handler=add,
        tier="read",
        required_scopes=required_scopes,
    )


def add_registry(name: str = "add", required_scopes: Sequence[str] = ()) -> Registry:
    """A registry holding only ``add_tool(name, required_scopes)``."""
    registry = Registry()
    registry.register(add_tool(name, required_scopes))
    return registry
