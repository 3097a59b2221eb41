"""The echo tool the host and transport benchmarks call: a read whose handler does nothing.

Its input and output models are the ones the hand-written baselines validate and dump, so
both sides of a case do the same work but for what charter adds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from charter import Principal, Registry, define_tool
from charter.tool import Tool

__all__ = ("PRINCIPAL", "Echo", "Query", "echo", "echo_registry", "echo_tool")


class Query(BaseModel):
    text: str
    limit: int = 10


class Echo(BaseModel):
    text: str
    limit: int


async def echo(query: Query) -> Echo:
    """The handler: the query back."""
    return Echo(text=query.text, limit=query.limit)


PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:read"}))
"""The caller of every echo case (it holds the tool's scope)."""


def echo_tool(
    name: str = "echo", description: str = "Echo the query back.", **options: Any
) -> Tool[Query, Echo]:
    """The echo tool: a read needing ``notes:read`` unless ``options`` give another tier
    (with its ``risk_policy``) or ``required_scopes``."""
    options.setdefault("tier", "read")
    options.setdefault("required_scopes", ["notes:read"])
    return define_tool(
        name=name,
        description=description,
        input_schema=Query,
        output_schema=Echo,
        handler=echo,
        **options,
    )


def echo_registry() -> Registry:
    """A registry holding only ``echo_tool()``."""
    registry = Registry()
    registry.register(echo_tool())
    return registry
