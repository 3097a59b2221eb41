"""The base classes of the models ``@tool`` builds for a plain function.

A plain-function tool still has an input model and an output model, like any tool; they
are built from the function's signature, and they derive from these two classes so the
``Tool``'s type says what they are: ``Tool[FunctionInput, FunctionOutput[int], Ctx]`` for
``def add(a: int, b: int) -> int``. Both are closed to unknown fields and to NaN and
±Infinity in their own config, the same rule every tool's closed models follow, so they
need no closed copy.
"""

from __future__ import annotations

from typing import Generic

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

__all__ = ("RESULT_FIELD", "WRAP_RESULT_KEYWORD", "FunctionInput", "FunctionOutput", "ResultT")

RESULT_FIELD = "result"
"""The one field of a wrapped output: ``{"result": <the function's return value>}``."""

WRAP_RESULT_KEYWORD = "x-charter-wrap-result"
"""Marks a wrapped output's JSON Schema (``true``): the value is in ``result``."""

ResultT = TypeVar("ResultT")


class FunctionInput(BaseModel):
    """The base of the input model ``@tool`` builds from a plain function's parameters.

    Each parameter but the context is a field, with its annotation, default and
    description; the handler receives the fields back as its arguments.
    """

    # No protected namespaces: a parameter may be called ``model_version``; one that
    # would shadow a BaseModel attribute gets another field name and keeps its own as
    # the alias (``_functions``).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, protected_namespaces=())


class FunctionOutput(BaseModel, Generic[ResultT]):
    """The output model around a return value that is not a model: ``{"result": value}``.

    A tool's structured output is a JSON object (MCP requires one), so a function that
    returns ``int``, ``list[Trip]``, a ``TypedDict`` or a dataclass gets this object, and
    its output schema says so with ``"x-charter-wrap-result": true``.
    """

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, json_schema_extra={WRAP_RESULT_KEYWORD: True}
    )

    result: ResultT
    """What the function returned."""
