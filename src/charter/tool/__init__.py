"""The tool contract: one typed declaration every transport trusts.

Import every name from ``charter.tool`` (or ``charter``); the modules behind it are private:

- ``_tool``: the ``Tool`` type, its type parameters and the ``Handler`` and
  ``TargetResolver`` shapes; schemas and validators are computed once, when it is built.
- ``_define``: declaring a tool, with ``define_tool`` from explicit models or ``@tool``
  from a function's annotations and docstring.
- ``_decorator``: ``ToolDecorator``, the type of ``@tool(...)``, with an overload for each
  shape of function it takes.
- ``_functions``: reading a function for ``@tool``: the model form or a plain function,
  the generated input and output models, the handler around a plain function.
- ``_function_models``: ``FunctionInput`` and ``FunctionOutput``, the bases of the
  generated models (``RESULT_FIELD``, ``WRAP_RESULT_KEYWORD``).
- ``_docstrings``: a plain function's docstring split into prose and parameter
  descriptions (Google, NumPy and Sphinx styles, through griffe).
- ``_metadata``: what a declaration carries besides models and handler (``Deprecation``,
  ``Alias``, ``ToolAnnotations``) and the deployment facts a registration binds
  (``ToolBinding``).
- ``_checks``: definition-time checks (``NAME_PATTERN``, ``MODEL_NAME_PATTERN``,
  ``check_action_policy``).
- ``_signature``: reading a handler: async or not, its arity, its annotations.
- ``_closed_models``: the validators, closed copies of the models, cached on each model.
- ``_schemas``: the JSON Schemas of the models (``JSON_SCHEMA_DIALECT``).
"""

from __future__ import annotations

from ._checks import MODEL_NAME_PATTERN as MODEL_NAME_PATTERN
from ._checks import NAME_PATTERN as NAME_PATTERN
from ._checks import check_action_policy as check_action_policy
from ._decorator import ToolDecorator as ToolDecorator
from ._define import define_tool as define_tool
from ._define import tool as tool
from ._function_models import RESULT_FIELD as RESULT_FIELD
from ._function_models import WRAP_RESULT_KEYWORD as WRAP_RESULT_KEYWORD
from ._function_models import FunctionInput as FunctionInput
from ._function_models import FunctionOutput as FunctionOutput
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
    "MODEL_NAME_PATTERN",
    "NAME_PATTERN",
    "RESULT_FIELD",
    "WRAP_RESULT_KEYWORD",
    "Alias",
    "Deprecation",
    "FunctionInput",
    "FunctionOutput",
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
