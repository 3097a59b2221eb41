"""``ToolDecorator``: what ``@tool(...)`` returns, typed for every shape of function it takes.

The overloads mirror the two rules of ``_functions`` so that mypy gives a tool the
types charter builds at run time:

- input: ``(In)`` or ``(In, Ctx)`` with ``In`` a model keeps ``In``; any other signature
  is a plain function, ``FunctionInput``. The context type is ``Ctx`` when the context
  is a model-form handler's second parameter or a plain function's first; a plain
  function that takes it elsewhere (or not at all) is typed with ``ToolContext``.
- output: a model return keeps its model; any other return ``R`` is ``FunctionOutput[R]``.

Overloads are tried in order, so a model (which would also match the free ``R``) is
caught first, and the async forms come before the sync ones, which would otherwise take
the coroutine as ``R``; mypy's overlap warnings for exactly that are silenced one by one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, Protocol, overload

from typing_extensions import TypeVar

from ..context import ToolContext
from ._function_models import FunctionInput, FunctionOutput
from ._tool import CtxT, InT, Outcome, OutT, Tool

__all__ = ("ToolDecorator",)

ParamsT = ParamSpec("ParamsT")
ResultT = TypeVar("ResultT")


class ToolDecorator(Protocol):
    """What ``@tool(...)`` returns: turns a function into a ``Tool`` with its types."""

    # -- the model form: (In) or (In, Ctx) ----------------------------------------------------

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT, CtxT], Awaitable[OutT | Outcome]], /
    ) -> Tool[InT, OutT, CtxT]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT, CtxT], Awaitable[ResultT | Outcome]], /
    ) -> Tool[InT, FunctionOutput[ResultT], CtxT]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT, CtxT], OutT | Outcome], /
    ) -> Tool[InT, OutT, CtxT]: ...

    @overload
    def __call__(
        self, func: Callable[[InT, CtxT], ResultT | Outcome], /
    ) -> Tool[InT, FunctionOutput[ResultT], CtxT]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT], Awaitable[OutT | Outcome]], /
    ) -> Tool[InT, OutT, ToolContext]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT], Awaitable[ResultT | Outcome]], /
    ) -> Tool[InT, FunctionOutput[ResultT], ToolContext]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[InT], OutT | Outcome], /
    ) -> Tool[InT, OutT, ToolContext]: ...

    @overload
    def __call__(
        self, func: Callable[[InT], ResultT | Outcome], /
    ) -> Tool[InT, FunctionOutput[ResultT], ToolContext]: ...

    # -- a plain function whose first parameter is the context ---------------------------------

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[Concatenate[CtxT, ParamsT], Awaitable[OutT | Outcome]], /
    ) -> Tool[FunctionInput, OutT, CtxT]: ...

    @overload
    def __call__(
        self, func: Callable[Concatenate[CtxT, ParamsT], Awaitable[ResultT | Outcome]], /
    ) -> Tool[FunctionInput, FunctionOutput[ResultT], CtxT]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[Concatenate[CtxT, ParamsT], OutT | Outcome], /
    ) -> Tool[FunctionInput, OutT, CtxT]: ...

    @overload
    def __call__(
        self, func: Callable[Concatenate[CtxT, ParamsT], ResultT | Outcome], /
    ) -> Tool[FunctionInput, FunctionOutput[ResultT], CtxT]: ...

    # -- any other plain function ----------------------------------------------------------------

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[ParamsT, Awaitable[OutT | Outcome]], /
    ) -> Tool[FunctionInput, OutT, ToolContext]: ...

    @overload
    def __call__(
        self, func: Callable[ParamsT, Awaitable[ResultT | Outcome]], /
    ) -> Tool[FunctionInput, FunctionOutput[ResultT], ToolContext]: ...

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[ParamsT, OutT | Outcome], /
    ) -> Tool[FunctionInput, OutT, ToolContext]: ...

    @overload
    def __call__(
        self, func: Callable[ParamsT, ResultT | Outcome], /
    ) -> Tool[FunctionInput, FunctionOutput[ResultT], ToolContext]: ...
