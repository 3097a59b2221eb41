"""The add tool the registry, harness and scale benchmarks call: two integers in, their total out.

Its models are the ones the hand-written baselines validate and dump, so both sides of a
case do the same work but for what charter adds.
"""

from __future__ import annotations

from typing import Any

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


def add_tool(name: str = "add", **options: Any) -> Tool[AddIn, AddOut]:
    """The add tool: a read needing no scope unless ``options`` give ``required_scopes``."""
    options.setdefault("tier", "read")
    return define_tool(
        name=name,
        description="Add two integers.",
        input_schema=AddIn,
        output_schema=AddOut,
        handler=add,
        **options,
    )


def add_registry(name: str = "add", **options: Any) -> Registry:
    """A registry holding only ``add_tool(name, **options)``."""
    registry = Registry()
    registry.register(add_tool(name, **options))
    return registry
