"""Models for tests and examples: scripted steps instead of a provider (no network)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .messages import ModelRequest, ModelResponse, ToolCall

__all__ = ("FunctionModel", "ScriptedModel", "call")

StepFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
"""A function that answers one model step. Usage ``FunctionModel(step_function)``."""


def call(name: str, call_id: str, /, **arguments: Any) -> ToolCall:
    """A tool call with decoded arguments: ``call("add", "c1", a=1, b=2)``."""
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


class FunctionModel:
    """A model whose every step is answered by a function; records each request."""

    def __init__(self, function: StepFunction) -> None:
        """Answer steps with ``function`` (sync or async)."""
        self.function = function
        self.requests: list[ModelRequest] = []

    async def step(self, request: ModelRequest) -> ModelResponse:
        """Record the request and answer it."""
        self.requests.append(request)
        answer = self.function(request)
        if inspect.isawaitable(answer):
            return await answer
        return answer


class ScriptedModel(FunctionModel):
    """A model that answers with scripted responses, in order; records each request.

    Once the script runs out it answers ``"done"`` with no tool calls.
    """

    def __init__(self, responses: Iterable[ModelResponse]) -> None:
        """Answer the next steps with ``responses``, one each."""
        self.script = list(responses)
        super().__init__(self._next)

    def _next(self, request: ModelRequest) -> ModelResponse:
        if not self.script:
            return ModelResponse(text="done")
        return self.script.pop(0)
