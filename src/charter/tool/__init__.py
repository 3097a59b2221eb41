"""The tool contract: one typed declaration every transport trusts.

Import every name from ``charter.tool`` (or ``charter``); the modules behind it are private:

- ``_tool``: the ``Tool`` type, its type parameters and the ``Handler`` and
  ``TargetResolver`` shapes; schemas and validators are computed once, when it is built.
- ``_define``: declaring a tool, with ``define_tool`` from explicit models or ``@tool``
  (``ToolDecorator``) from a function's annotations and docstring.
- ``_metadata``: what a declaration carries besides models and handler (``Deprecation``,
  ``Alias``, ``ToolAnnotations``) and the deployment facts a registration binds
  (``ToolBinding``).
- ``_checks``: definition-time checks (``NAME_PATTERN``, ``check_action_policy``).
- ``_signature``: reading a handler: async or not, its arity, its annotated models.
- ``_closed_models``: the validators, closed copies of the models, cached on each model.
- ``_schemas``: the JSON Schemas of the models (``JSON_SCHEMA_DIALECT``).
"""

from __future__ import annotations

from ._checks import NAME_PATTERN as NAME_PATTERN
from ._checks import check_action_policy as check_action_policy
from ._define import ToolDecorator as ToolDecorator
from ._define import define_tool as define_tool
from ._define import tool as tool
from ._metadata import Alias as Alias
from ._metadata import Deprecation as Deprecation
from ._metadata import ToolAnnotations as ToolAnnotations
from ._metadata import ToolBinding as ToolBinding
from ._schemas import JSON_SCHEMA_DIALECT as JSON_SCHEMA_DIALECT
from ._tool import Handler as Handler
from ._tool import TargetResolver as TargetResolver
from ._tool import Tool as Tool

__all__ = (
    "JSON_SCHEMA_DIALECT",
    "NAME_PATTERN",
    "Alias",
    "Deprecation",
    "Handler",
    "TargetResolver",
    "Tool",
    "ToolAnnotations",
    "ToolBinding",
    "ToolDecorator",
    "check_action_policy",
    "define_tool",
    "tool",
)
