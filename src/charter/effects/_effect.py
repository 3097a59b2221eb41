"""An effect: a named async function charter runs after commit, durably and with a key."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, overload

from pydantic import BaseModel

from ..errors import ConfigurationError

__all__ = ("Effect", "EffectFunction", "effect")

EffectFunction = Callable[[Any, str], Awaitable[object]]
"""``async def fn(payload, key)``: does the outside work; raises to ask for a retry.

``payload`` is the JSON the handler staged, or the pydantic model the function's first
parameter is annotated with; ``key`` is the effect's idempotency key, for the outside
system's own deduplication.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class Effect:
    """A registered effect: its name, its function and how hard charter tries."""

    name: str
    """The dotted name handlers stage it by (``payments.refund``)."""
    fn: EffectFunction
    max_attempts: int = 8
    """Attempts before the effect is parked dead (kept, and re-drivable)."""
    backoff: timedelta = timedelta(seconds=2)
    """The delay before the second attempt; it doubles each time, with jitter."""
    max_backoff: timedelta = timedelta(minutes=10)
    """The longest delay between two attempts."""
    timeout: timedelta = timedelta(seconds=30)
    """How long one attempt may run; keep it well under the host's effect lease."""
    payload_model: type[BaseModel] | None = field(default=None)
    """The model the payload is validated into before the call (from the annotation)."""

    async def call(self, payload: object, key: str) -> None:
        """Run one attempt: the payload validated into its model when there is one."""
        value = self.payload_model.model_validate(payload) if self.payload_model else payload
        await self.fn(value, key)


@overload
def effect(
    name: str,
    *,
    max_attempts: int = ...,
    backoff: timedelta = ...,
    max_backoff: timedelta = ...,
    timeout: timedelta = ...,
) -> Callable[[EffectFunction], Effect]: ...


@overload
def effect(name: EffectFunction) -> Effect: ...


def effect(
    name: str | EffectFunction,
    *,
    max_attempts: int = 8,
    backoff: timedelta = timedelta(seconds=2),
    max_backoff: timedelta = timedelta(minutes=10),
    timeout: timedelta = timedelta(seconds=30),
) -> Effect | Callable[[EffectFunction], Effect]:
    """Declare an effect: ``@charter.effect("payments.refund")`` over ``async def fn(p, key)``.

    Registers nothing: pass the ``Effect`` to ``Registry.register_effect``.

    Raises:
        ConfigurationError: the function is not async, takes other than two parameters,
            or a limit is not positive.
    """
    if callable(name):
        return _build(name.__name__, name, max_attempts, backoff, max_backoff, timeout)
    label = name

    def decorate(fn: EffectFunction) -> Effect:
        return _build(label, fn, max_attempts, backoff, max_backoff, timeout)

    return decorate


def _build(
    name: str,
    fn: EffectFunction,
    max_attempts: int,
    backoff: timedelta,
    max_backoff: timedelta,
    timeout: timedelta,
) -> Effect:
    where = f"effect {name!r}"
    if not name or not name.strip() or len(name) > 200:
        raise ConfigurationError(f"{where}: the name must be 1 to 200 characters")
    if not inspect.iscoroutinefunction(fn):
        raise ConfigurationError(f"{where}: the function must be `async def fn(payload, key)`")
    parameters = list(inspect.signature(fn).parameters.values())
    if len(parameters) != 2:
        raise ConfigurationError(
            f"{where}: the function takes exactly two parameters, (payload, key); "
            f"it takes {len(parameters)}"
        )
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigurationError(f"{where}: max_attempts must be a whole number, at least 1")
    given = {"backoff": backoff, "max_backoff": max_backoff, "timeout": timeout}
    for option, value in given.items():
        if not isinstance(value, timedelta):
            raise ConfigurationError(
                f"{where}: {option} must be a timedelta, e.g. {option}=timedelta(seconds=5), "
                f"not {value!r}"
            )
    if min(backoff, max_backoff, timeout) <= timedelta(0):
        raise ConfigurationError(f"{where}: backoff, max_backoff and timeout must be positive")
    return Effect(
        name=name,
        fn=fn,
        max_attempts=max_attempts,
        backoff=backoff,
        max_backoff=max_backoff,
        timeout=timeout,
        payload_model=_payload_model(fn, parameters[0].name),
    )


def _payload_model(fn: EffectFunction, parameter: str) -> type[BaseModel] | None:
    """The pydantic model the payload parameter is annotated with, if any."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an unresolvable annotation: take the payload as plain JSON
        return None
    hint = hints.get(parameter)
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return hint
    return None
