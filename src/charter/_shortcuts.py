"""The speed tricks that lean on a library's internals, in one place, each pinned by a test.

charter builds pydantic models per call from values it computed itself (the
``Completed`` of a validated output, the call's ``AuditEvent``, a ledgered call's
``LedgerEntry``) and asks OpenTelemetry per
call whether tracing and metrics are on, and asks each output model for its computed
fields. The public ways cost more than the rest of that work:
``model_construct`` runs a generic loop over the fields (about 4x the instance built
here), and ``trace.get_tracer_provider()`` (and ``metrics.get_meter_provider()``) reads an
environment variable on every call until a provider is installed.
``tests/test_shortcuts.py`` pins each trick to the public behaviour it stands for, so a
library upgrade that changes the internals fails there, not in production.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ("built", "computed_fields", "meter_provider_reader", "tracer_provider_reader")

ModelT = TypeVar("ModelT", bound=BaseModel)


def built(model: type[ModelT], fields: dict[str, Any], fields_set: set[str]) -> ModelT:
    """``model.model_construct(**fields)`` for values already of the right types.

    ``fields`` must name every field (defaults included), in the model's field order, and
    ``fields_set`` the ones the caller set; the instance is then exactly the one
    ``model_construct`` would make (same ``__dict__``, ``model_fields_set``, equality and
    dumps), without its loop.
    The model must have no extra fields and no private attributes.
    """
    instance = model.__new__(model)
    set_ = object.__setattr__
    set_(instance, "__dict__", fields)
    set_(instance, "__pydantic_fields_set__", fields_set)
    set_(instance, "__pydantic_extra__", None)
    set_(instance, "__pydantic_private__", None)
    return instance


def computed_fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model.model_computed_fields``, read without the property's descriptor.

    The class attribute behind that property; every output validation asks for it.
    """
    fields: dict[str, Any] = model.__pydantic_computed_fields__
    return fields


def tracer_provider_reader(trace: ModuleType) -> Callable[[], object]:
    """A reader of OpenTelemetry's installed tracer provider (None until one is set).

    The module global ``_TRACER_PROVIDER`` when the API has it, the public (slower)
    ``get_tracer_provider`` otherwise.
    """
    if hasattr(trace, "_TRACER_PROVIDER"):
        return lambda: trace._TRACER_PROVIDER
    getter: Callable[[], object] = trace.get_tracer_provider
    return getter


def meter_provider_reader(metrics: ModuleType) -> Callable[[], object]:
    """A reader of OpenTelemetry's installed meter provider (None until one is set).

    The global ``_METER_PROVIDER`` of the API's internal module when it has it, the public
    (slower) ``get_meter_provider`` otherwise, whose stand-in proxy then reads as set.
    """
    internal = getattr(metrics, "_internal", None)
    if internal is not None and hasattr(internal, "_METER_PROVIDER"):
        return lambda: internal._METER_PROVIDER
    getter: Callable[[], object] = metrics.get_meter_provider
    return getter
