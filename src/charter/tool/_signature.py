"""Reading a handler: whether it is async, how many arguments it takes, its annotated models."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..errors import ConfigurationError
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired

__all__ = ("is_async_callable", "output_model", "positional_arity", "type_hints")


def is_async_callable(func: object) -> bool:
    """Whether calling ``func`` gives a coroutine (``functools.partial`` unwrapped)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
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


def type_hints(func: Callable[..., Any], name: str) -> dict[str, Any]:
    """The handler's resolved annotations; ``ConfigurationError`` when they cannot be."""
    try:
        return typing.get_type_hints(func)
    except (NameError, TypeError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot resolve annotations: {exc}") from None


def output_model(annotation: Any) -> Any:
    """Pick the output model out of ``Model``, ``Model | Outcome`` or ``Awaitable[...]``."""
    origin = typing.get_origin(annotation)
    if origin is not None and getattr(origin, "__name__", "") in {"Awaitable", "Coroutine"}:
        return output_model(typing.get_args(annotation)[-1])
    if origin in (typing.Union, types.UnionType):
        models = [
            arg
            for arg in typing.get_args(annotation)
            if isinstance(arg, type)
            and issubclass(arg, BaseModel)
            and not issubclass(arg, _OUTCOME_TYPES)
        ]
        if len(models) == 1:
            return models[0]
    return annotation


_OUTCOME_TYPES: tuple[type[BaseModel], ...] = (
    Completed,
    Denied,
    Failed,
    InteractionRequired,
    Deferred,
)
