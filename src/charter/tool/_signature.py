"""Reading a handler: whether it is async, how many arguments it takes, its annotations."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError

__all__ = ("is_async_callable", "positional_arity", "refuse_generators", "type_hints")


def is_async_callable(func: object) -> bool:
    """Whether calling ``func`` gives a coroutine (``functools.partial`` unwrapped)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def refuse_generators(func: object, name: str) -> None:
    """``ConfigurationError`` for a generator function: a handler returns its one result."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise ConfigurationError(
            f"tool {name!r}: the handler is a generator function (it uses yield); a handler "
            "returns its result (report progress with ctx.report_progress)"
        )


def positional_arity(func: Callable[..., object], name: str) -> int:
    """How many positional arguments the handler takes: 1 (input) or 2 (input, ctx)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return 2
    arity = sum(1 for p in parameters if p.kind in kinds)
    if arity not in (1, 2):
        raise ConfigurationError(
            f"tool {name!r}: the handler must take (input) or (input, ctx), got {arity} "
            "positional parameters"
        )
    return arity


def type_hints(
    func: Callable[..., Any], name: str, *, include_extras: bool = False
) -> dict[str, Any]:
    """The handler's resolved annotations; ``ConfigurationError`` when they cannot be.

    ``include_extras`` keeps ``Annotated[...]`` metadata (a parameter's ``Field(...)``).
    """
    try:
        return typing.get_type_hints(func, include_extras=include_extras)
    except (NameError, TypeError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot resolve annotations: {exc}") from None
