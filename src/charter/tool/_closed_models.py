"""Closed copies of models: input and output validated without unknown fields or NaN.

The one trick here: each closed copy is cached on the user's model class, as the
attribute ``__charter_closed_model__``, so tools that share a model share one copy (a
copy costs about 8 KiB) and the copy lives exactly as long as the model. It relies on
pydantic behaviour pinned by ``tests/test_tool.py``
(``test_the_closed_copy_cache_relies_on_pydantic_as_pinned_here``): a subclass whose
namespace holds only ``model_config`` keeps its parent's fields and validators and merges
the config; an attribute set on a model class after it is built is not a field and
changes neither validation nor the schema; and a subclass inherits that attribute, so it
is read from the class's own namespace (``vars``), never through inheritance.
"""

from __future__ import annotations

from typing import cast

from pydantic import BaseModel, ConfigDict

__all__ = ("CLOSED_MODEL_ATTRIBUTE", "closed_model")

CLOSED_MODEL_ATTRIBUTE = "__charter_closed_model__"
"""The class attribute that caches a model's closed copy on the model itself."""


def closed_model(model: type[BaseModel]) -> type[BaseModel]:
    """Return ``model`` closed to unknown fields and NaN/Infinity, unless it opted out.

    A model that sets ``extra`` or ``allow_inf_nan`` in its own config keeps its choice.
    """
    cached = vars(model).get(CLOSED_MODEL_ATTRIBUTE)
    if cached is not None:
        return cast("type[BaseModel]", cached)
    config = model.model_config
    overrides = ConfigDict()
    if "extra" not in config:
        overrides["extra"] = "forbid"
    if "allow_inf_nan" not in config:
        overrides["allow_inf_nan"] = False
    if not overrides:
        return model
    closed = type(model.__name__, (model,), {"model_config": overrides, "__doc__": model.__doc__})
    closed.__module__ = model.__module__
    closed.__qualname__ = model.__qualname__
    setattr(model, CLOSED_MODEL_ATTRIBUTE, closed)
    return closed
