"""Validating data against a tool's models: input once, output always, never echoed.

Input is parsed with the tool's closed input model, strictly and as JSON: a value must
already have the JSON type its schema publishes (``true`` or ``"2"`` is no integer), as
a JSON Schema validator would decide, unless the input model's config says
``strict=False`` (docs/contract.md, "Strict input"). Output is validated against its
closed output model and returned in its serialised, by-alias form. Issues name where and
what kind of problem, never the values. Numbers must be finite (NaN and infinities are
refused even where pydantic would let them through).
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from .._shortcuts import built, computed_fields
from .._wording import new_error_id
from ..errors import ErrorCode
from ..manifest import RegisteredTool
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired, ToolOutcome, failed

__all__ = ("finish_output", "validate_input")

logger = logging.getLogger("charter")


def validate_input(registered: RegisteredTool, arguments: object) -> BaseModel | Failed:
    """Parse ``arguments`` with the tool's input model; issues never echo the values."""
    # A dict is by far the common case; the ABC check costs more than validation's start.
    if type(arguments) is not dict and not isinstance(arguments, Mapping):
        return failed(
            ErrorCode.INVALID_INPUT,
            f"Invalid input for tool {registered.name!r}: arguments must be a JSON object.",
            reason="not_an_object",
            issues=[],
        )
    validator = registered.tool.validator
    try:
        # JSON mode, so strict means JSON's types: a date-time is a string, an enum its
        # value. Arguments from the host are JSON already; Python callers' dates, UUIDs
        # or models are written as JSON first, as a client would send them.
        document = to_json(arguments, inf_nan_mode="constants")
    except PydanticSerializationError:
        return failed(
            ErrorCode.INVALID_INPUT,
            f"Invalid input for tool {registered.name!r}: the arguments are not JSON data.",
            reason="not_json",
            issues=[],
        )
    try:
        # The model's own validator: what ``model_validate_json`` calls, minus its overhead.
        parsed: BaseModel = validator.__pydantic_validator__.validate_json(
            document, strict=_strict(validator)
        )
    except ValidationError as exc:
        if _integral_float_refused(exc):
            # JSON Schema counts 1.0 an integer; pydantic's strict mode does not. Only on
            # this error path, so a well-typed call pays nothing for it.
            again = _with_integral_floats_as_ints(arguments)
            try:
                parsed = validator.__pydantic_validator__.validate_json(
                    to_json(again, inf_nan_mode="constants"), strict=_strict(validator)
                )
            except ValidationError as second:
                exc = second
            else:
                return _checked_finite(registered, validator, parsed)
        nan_at = _non_finite(arguments) if _may_hold_non_finite(validator) else None
        if nan_at is not None:  # a Python caller's NaN: named as such, not as "no number"
            return _not_finite(registered, nan_at)
        return failed(
            ErrorCode.INVALID_INPUT,
            f"Invalid input for tool {registered.name!r}: {_summary(exc)}",
            reason="validation_failed",
            issues=_issues(exc),
        )
    return _checked_finite(registered, validator, parsed)


def _checked_finite(
    registered: RegisteredTool, validator: type[BaseModel], parsed: BaseModel
) -> BaseModel | Failed:
    loc = _non_finite(parsed) if _may_hold_non_finite(validator) else None
    if loc is not None:
        return _not_finite(registered, loc)
    return parsed


def _integral_float_refused(exc: ValidationError) -> bool:
    """Whether some integer field was refused a float with no fractional part (``1.0``)."""
    return any(
        error["type"] == "int_type"
        and isinstance(error.get("input"), float)
        and math.isfinite(error["input"])
        and error["input"].is_integer()
        for error in exc.errors(include_url=False)
    )


def _with_integral_floats_as_ints(value: object) -> object:
    """``value`` with every float that has no fractional part written as an integer."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _with_integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_with_integral_floats_as_ints(item) for item in value]
    return value


def _not_finite(registered: RegisteredTool, loc: tuple[str, ...]) -> Failed:
    where = ".".join(loc) or "(root)"
    return failed(
        ErrorCode.INVALID_INPUT,
        f"Invalid input for tool {registered.name!r}: {where}: {_FINITE_MSG}",
        reason="validation_failed",
        issues=[{"loc": list(loc), "msg": _FINITE_MSG, "type": "finite_number"}],
    )


def finish_output(registered: RegisteredTool, result: object) -> ToolOutcome:
    """Turn a handler's return value into an outcome, validating output data.

    The output is validated against the output model (closed to unknown fields) and
    returned in its serialised, by-alias form, which is what the output schema describes.
    Data that does not match becomes ``INVALID_OUTPUT``; the data itself is never returned
    or logged, only the locations and kinds of the problems.
    """
    if isinstance(result, (Denied, Failed, InteractionRequired, Deferred)):
        return result
    data = result.output if isinstance(result, Completed) else result
    # The models' own validators and serialisers are called directly: the same work as
    # ``model_validate`` and ``model_dump``, which add microseconds of overhead per call.
    try:
        if isinstance(data, BaseModel):
            # warnings="error": a model built with wrong types (model_construct, assignment)
            # fails here instead of serialising something else. Computed fields are
            # recomputed by validation, and the closed validator would refuse them.
            data = data.__pydantic_serializer__.to_python(
                data, mode="json", by_alias=True, exclude_computed_fields=True, warnings="error"
            )
        elif isinstance(data, Mapping):
            computed = computed_fields(registered.tool.output_model)
            if computed:  # most models have none: nothing to filter, nothing to copy
                keys = {info.alias or name for name, info in computed.items()}
                data = {key: value for key, value in data.items() if key not in keys}
        validator = registered.tool.output_validator
        validated = validator.__pydantic_validator__.validate_python(data)
        problem = _non_finite(validated) if _may_hold_non_finite(validator) else None
        if problem is not None:
            issues: list[dict[str, Any]] = [
                {"loc": list(problem), "msg": _FINITE_MSG, "type": "finite_number"}
            ]
        else:
            output = validator.__pydantic_serializer__.to_python(
                validated, mode="json", by_alias=True
            )
            # Text no JSON encoder can write (a lone surrogate: a file name or a process's
            # output decoded with surrogateescape) would fail every transport afterwards,
            # and drop an MCP session with it; encoding once here is cheaper than a walk.
            to_json(output)
            return _completed(output)
    except ValidationError as exc:
        issues = _issues(exc)
    except PydanticSerializationError:
        issues = [{"loc": [], "msg": "Output could not be serialised", "type": "serialization"}]
    error_id = new_error_id()
    logger.error(
        "tool %s returned invalid output (error id %s): %s", registered.name, error_id, issues
    )
    return failed(
        ErrorCode.INVALID_OUTPUT,
        f"Tool {registered.name!r} produced output that does not match its output schema.",
        errorId=error_id,
    )


_FINITE_MSG = "Input should be a finite number"


def _strict(model: type[BaseModel]) -> bool | None:
    """True (strict), or None (each model's and field's own setting) for a lax model.

    A tool opts out of strict input with ``model_config = ConfigDict(strict=False)`` on
    its input model; its fields then coerce as pydantic does by default, except those
    declared ``Field(strict=True)``.
    """
    return None if model.model_config.get("strict") is False else True


def _completed(output: object) -> Completed:
    """``Completed(output=output)`` for output that is a model's JSON-mode dump already.

    Validating the dump again as ``JsonValue`` would cost more than validating the tool's
    output did (see ``_shortcuts``).
    """
    return built(Completed, {"kind": "completed", "output": output, "replayed": False}, {"output"})


def _non_finite(
    value: object, loc: tuple[str, ...] = (), allowed: bool = False
) -> tuple[str, ...] | None:
    """Return the location of the first NaN or infinity in validated data, if any.

    The tool's own model is closed to NaN/Infinity by its config, but a nested model
    keeps pydantic's default (allowed); this walk closes those too. A model that sets
    ``allow_inf_nan=True`` in its own config keeps its choice for its own fields.
    """
    if isinstance(value, BaseModel):
        own = value.model_config.get("allow_inf_nan") is True
        for name, info in type(value).model_fields.items():
            found = _non_finite(getattr(value, name, None), (*loc, info.alias or name), own)
            if found is not None:
                return found
        for key, item in (value.model_extra or {}).items():
            found = _non_finite(item, (*loc, str(key)), own)
            if found is not None:
                return found
        return None
    if isinstance(value, float | Decimal):
        finite = math.isfinite(value) if isinstance(value, float) else value.is_finite()
        return None if finite or allowed else loc
    if isinstance(value, Mapping):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        return None
    for index, item in items:
        found = _non_finite(item, (*loc, str(index)), allowed)
        if found is not None:
            return found
    return None


_WALKED: dict[weakref.ref[type[BaseModel]], bool] = {}
"""Per validator model: whether ``_non_finite`` must walk what it validated.

Keyed by a weak reference whose callback drops the entry with the model: what a
``WeakKeyDictionary`` does, without its Python frames on every look-up (a reference to a
live model equals the one held)."""

_FLOAT_FREE_TYPES = frozenset(
    {
        # Leaves that never hold a float or a Decimal.
        *("str", "int", "bool", "none", "bytes", "date", "datetime", "time", "timedelta"),
        *("uuid", "url", "multi-host-url", "is-subclass", "callable", "complex"),
        # Containers whose parts the walk below inspects.
        *("model", "model-fields", "model-field", "default", "nullable", "union"),
        *("tagged-union", "list", "set", "frozenset", "tuple", "dict", "chain"),
        *("lax-or-strict", "json-or-python", "definitions", "definition-ref"),
        *("typed-dict", "typed-dict-field", "dataclass", "dataclass-args", "dataclass-field"),
        *("custom-error", "literal", "enum"),
    }
)
"""Core schema types ``_float_free`` knows; any other type (``float``, ``decimal``,
``any``, function validators…) may hold a non-finite number."""

_ANY_ITEMS = {"list": "items_schema", "set": "items_schema", "frozenset": "items_schema"}


def _may_hold_non_finite(model: type[BaseModel]) -> bool:
    """Whether a validated instance of ``model`` can hold NaN or an infinity at all.

    Decided once per model from its core schema: a model made only of strings, integers,
    booleans, dates and the like (in any nesting) never needs the ``_non_finite`` walk,
    which would otherwise cost more than validating the data.
    """
    known = _WALKED.get(weakref.ref(model))
    if known is None:
        try:
            known = not _float_free(model.__pydantic_core_schema__)
        except Exception:  # a schema pydantic could not build yet: walk, to be safe
            known = True
        _WALKED[weakref.ref(model, _forget)] = known
    return known


def _forget(model: weakref.ref[type[BaseModel]]) -> None:
    """Drop a collected model's entry (its reference's callback)."""
    _WALKED.pop(model, None)


def _float_free(node: object) -> bool:
    """Whether no value validated by core schema ``node`` can be a float or a Decimal."""
    if isinstance(node, list):
        return all(_float_free(item) for item in node)
    if not isinstance(node, Mapping):
        return True
    kind = node.get("type")
    if kind is not None:
        if kind not in _FLOAT_FREE_TYPES or "default_factory" in node:
            return False
        if kind in _ANY_ITEMS and _ANY_ITEMS[kind] not in node:
            return False  # list[Any]
        if kind == "dict" and "values_schema" not in node:
            return False
        if kind == "tuple" and "items_schema" not in node:
            return False
        if kind == "enum" and node.get("sub_type") == "float":
            return False
        if kind == "default" and _non_finite(node.get("default")) is not None:
            return False
        if kind == "literal" and _non_finite(list(node.get("expected", ()))) is not None:
            return False
        if kind == "model" and _extra_allowed(node):
            return False
    return all(
        _float_free(value)
        for key, value in node.items()
        if key not in ("metadata", "serialization", "cls", "default", "expected", "config")
    )


def _extra_allowed(node: Mapping[str, Any]) -> bool:
    """Whether a ``model`` schema keeps unknown fields without a schema for them."""
    config = node.get("config") or {}
    inner = node.get("schema") or {}
    return config.get("extra_fields_behavior") == "allow" and "extras_schema" not in inner


def _issues(exc: ValidationError) -> list[dict[str, Any]]:
    """Validation issues with location, message and type, never the offending values."""
    return [
        {"loc": [str(part) for part in error["loc"]], "msg": error["msg"], "type": error["type"]}
        for error in exc.errors(include_input=False, include_url=False, include_context=False)[:50]
    ]


def _summary(exc: ValidationError) -> str:
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(root)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
