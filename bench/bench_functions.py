"""Plain functions as tools: what ``@tool`` costs over a model-based tool and over the SDK.

Two cases. Registering 1,000 plain-function tools (``@tool`` reads each signature and
docstring, builds the input and the wrapped output model, and ``Registry.register`` adds
the manifest entry) against the MCP SDK's ``MCPServer.add_tool`` given the same 1,000
functions. Dispatching a plain-function tool against the same tool written with models:
the price of the handler around the function (arguments from the validated fields, the
return value wrapped in ``{"result": ...}``).
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel

from bench import Case, Sides
from bench._add import AddIn
from bench.bench_scale import TOOLS, registering, registration_case
from charter import Completed, Registry, ToolContext, define_tool, tool

ARGUMENTS = {"a": 1, "b": 2}


def _function(index: int) -> Any:
    """A fresh ``add(a, b) -> int`` with a Google docstring, as a user's module would have."""

    async def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.

        Returns:
            Their sum.
        """
        return a + b

    add.__name__ = add.__qualname__ = f"add_{index}"
    return add


def charter_registry() -> Registry:
    """1,000 plain-function tools on one registry."""
    registry = Registry()
    for index in range(TOOLS):
        registry.register(tool(tier="read")(_function(index)))
    return registry


def mcp_server() -> Any:
    """The same 1,000 functions on the MCP SDK's ``MCPServer``."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    for index in range(TOOLS):
        function = _function(index)
        server.add_tool(function, name=function.__name__)
    return server


class AddResult(BaseModel):
    result: int


async def add_models(args: AddIn) -> AddResult:
    return AddResult(result=args.a + args.b)


@tool(tier="read")
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _dispatch_case() -> Case:
    plain = Registry()
    plain.register(add)
    models = Registry()
    models.register(
        define_tool(
            name="add",
            description="Add two integers.",
            input_schema=AddIn,
            output_schema=AddResult,
            handler=add_models,
            tier="read",
        )
    )

    async def dispatch_plain() -> object:
        return await plain.dispatch("add", ARGUMENTS, ToolContext())

    async def dispatch_models() -> object:
        return await models.dispatch("add", ARGUMENTS, ToolContext())

    async def check() -> None:
        for operation in (dispatch_plain, dispatch_models):
            outcome = await operation()
            if outcome != Completed(output={"result": 3}):
                raise AssertionError(f"dispatch did not add: {outcome!r}")

    return Sides(dispatch_plain, dispatch_models, check).case(
        "Registry.dispatch: plain-function tool",
        "the same tool written with models",
        target=1.1,
        note=(
            "`Registry.dispatch` of `@tool async def add(a: int, b: int) -> int` against "
            "`define_tool` with `AddIn(a, b)` and `AddResult(result)` models and an async "
            "handler returning `AddResult`; both answer `{'result': 3}`. The plain side "
            "validates the generated `FunctionInput`, calls the function with the fields "
            "as keyword arguments and validates the wrapped `{'result': 3}`. Target: "
            "within 1.1x."
        ),
    )


def cases() -> list[Case]:
    """Dispatch against the model form; registration against ``MCPServer.add_tool``."""
    result = [_dispatch_case()]
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        print(
            "bench_functions: the MCP SDK is not installed; its case is left out",
            file=sys.stderr,
        )
        return result

    result.append(
        registration_case(
            registering(charter_registry, mcp_server),
            "Register 1,000 plain-function tools",
            note=(
                "one operation registers 1,000 async functions `add_i(a: int, b: int) -> int` "
                "with a Google docstring: charter's `@tool` reads the signature and the "
                "docstring (griffe), builds the `FunctionInput` model with the parameter "
                "descriptions and the wrapped `FunctionOutput[int]`, both JSON Schemas, and "
                "`register` the manifest entry; the SDK derives its arguments model and its "
                "wrapped output model from the same signature (it does not read parameter "
                "descriptions). Target: within 1.5x."
            ),
        )
    )
    return result
