"""Reading a function for ``@tool``: its models, its description and the handler to run.

One rule for each side of the call:

- **Input.** A function whose first parameter is a model (a ``BaseModel`` that describes
  an object), with at most the context beside it, takes that model as its input: the
  model form. Any other signature is a plain function: every parameter but the context
  becomes a field of a ``FunctionInput`` model (annotation, default, description from
  the docstring), and the handler passes the validated fields back as arguments.
- **Output.** A return annotation that is a model is the output model. Anything else
  (``int``, ``list[Trip]``, a ``TypedDict``, a dataclass, ``X | None``) is wrapped: the
  output model is a ``FunctionOutput[X]``, whose one field ``result`` holds the value.

The context is the parameter annotated with ``ToolContext`` or a subclass, wherever it
stands. Outcomes in a return union (``int | Denied``) are what the function may return
instead of its value; they pass through unwrapped.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeAlias

from pydantic import BaseModel, Field, RootModel, create_model
from pydantic.errors import PydanticUserError
from pydantic.fields import FieldInfo
from pydantic_core import SchemaError

from ..context import ToolContext
from ..errors import ConfigurationError
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired
from ._docstrings import FunctionDocs, read_docstring
from ._function_models import RESULT_FIELD, FunctionInput, FunctionOutput
from ._signature import is_async_callable, positional_arity, refuse_generators, type_hints

__all__ = ("FunctionParts", "read_function")

_OUTCOME_TYPES = (Completed, Denied, Failed, InteractionRequired, Deferred)
_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL = (_POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_EMPTY = inspect.Parameter.empty

_Call: TypeAlias = Callable[[BaseModel, ToolContext], Any]
"""Calls the function with a validated input and the context; returns what it returns."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionParts:
    """What ``define_tool`` needs, read from a function."""

    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    handler: Callable[..., Any]
    """The function itself when its input and output are models; else a handler around it
    that takes ``(input, ctx)``, calls the function and wraps a plain return value."""


def read_function(func: Callable[..., Any], name: str, description: str | None) -> FunctionParts:
    """Read ``func``'s models, description and handler; ``description`` wins over the docstring.

    Raises:
        ConfigurationError: an annotation is missing or cannot be resolved, a parameter
            cannot be an input field, a type has no JSON form, or nothing describes the tool.
    """
    refuse_generators(func, name)
    hints = type_hints(func, name, include_extras=True)
    if "return" not in hints:
        raise ConfigurationError(
            f"tool {name!r}: annotate the return type with the output model (or any type "
            "pydantic can serialise; it is returned as {'result': ...})"
        )
    value_type = _output_type(hints["return"], name)
    output_model = _object_model(value_type)
    module = getattr(func, "__module__", None)
    parameters = list(inspect.signature(func).parameters.values())
    input_model = _model_form_input(parameters, hints)
    if input_model is not None:
        text = description if description is not None else inspect.getdoc(func)
        if not text:
            raise _undescribed(name)
        if output_model is not None:
            handler: Callable[..., Any] = func
        else:
            output_model = _wrapped_output(value_type, name, None, module)
            handler = _handler(func, _model_call(func, positional_arity(func, name) == 2))
        return FunctionParts(
            description=text, input_model=input_model, output_model=output_model, handler=handler
        )
    doc = inspect.getdoc(func)
    docs = read_docstring(doc, name) if doc else FunctionDocs(description="")
    text = description if description is not None else docs.description
    if not text:
        raise _undescribed(name)
    plan = _CallPlan.read(parameters, hints, name)
    wrap = output_model is None
    if output_model is None:
        output_model = _wrapped_output(value_type, name, docs.returns, module)
    return FunctionParts(
        description=text,
        input_model=plan.input_model(hints, docs.parameters, name, module),
        output_model=output_model,
        handler=_handler(func, plan.caller(func), wrap=wrap),
    )


def _undescribed(name: str) -> ConfigurationError:
    return ConfigurationError(
        f"tool {name!r}: give a docstring or description= for the model to read"
    )


# -- the two forms ----------------------------------------------------------------------------


def _model_form_input(
    parameters: list[inspect.Parameter], hints: dict[str, Any]
) -> type[BaseModel] | None:
    """The input model of a ``(model)`` or ``(model, ctx)`` function, else None.

    The second parameter is the context when it is unannotated (as it always could be)
    or annotated with a ``ToolContext`` class; anything else makes a plain function.
    """
    if not parameters or len(parameters) > 2 or parameters[0].kind not in _POSITIONAL:
        return None
    model = _object_model(hints.get(parameters[0].name))
    if model is None or len(parameters) == 1:
        return model
    second = parameters[1]
    if second.kind not in _POSITIONAL:
        return None
    if second.name in hints and not _is_context(hints[second.name]):
        return None
    return model


@dataclass(frozen=True, kw_only=True, slots=True)
class _CallPlan:
    """How a plain function's parameters map to input fields and back."""

    parameters: tuple[inspect.Parameter, ...]
    """Every parameter, in order, the context included."""
    fields: dict[str, str]
    """Parameter name → field name (a name that shadows a ``BaseModel`` attribute gets a
    field name of its own and keeps its name on the wire as the field's alias)."""
    context: str | None
    """The context parameter's name, if the function takes one."""

    @classmethod
    def read(
        cls, parameters: list[inspect.Parameter], hints: dict[str, Any], name: str
    ) -> _CallPlan:
        context: str | None = None
        taken = {parameter.name for parameter in parameters}
        fields: dict[str, str] = {}
        for parameter in parameters:
            hint = hints.get(parameter.name, _EMPTY)
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                stars = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
                raise ConfigurationError(
                    f"tool {name!r}: {stars}{parameter.name} cannot be part of a tool's input; "
                    "name each parameter"
                )
            if hint is not _EMPTY and _is_context(hint):
                if context is not None:
                    raise ConfigurationError(
                        f"tool {name!r}: {context!r} and {parameter.name!r} are both "
                        "annotated as the context; a tool takes one"
                    )
                context = parameter.name
                continue
            _check_field(parameter, hint, name)
            field_name = parameter.name
            while hasattr(FunctionInput, field_name) or (
                field_name != parameter.name and field_name in taken
            ):
                field_name += "_"
            taken.add(field_name)
            fields[parameter.name] = field_name
        return cls(parameters=tuple(parameters), fields=fields, context=context)

    def input_model(
        self,
        hints: dict[str, Any],
        descriptions: dict[str, str],
        name: str,
        module: str | None,
    ) -> type[BaseModel]:
        """The ``FunctionInput`` model: one field per parameter but the context."""
        definitions: dict[str, Any] = {}
        for parameter in self.parameters:
            field_name = self.fields.get(parameter.name)
            if field_name is None:
                continue
            info: dict[str, Any] = {}
            if field_name != parameter.name:
                info["alias"] = parameter.name
            if parameter.name in descriptions:
                info["description"] = descriptions[parameter.name]
            annotation = hints[parameter.name]
            if info:
                # First in the metadata, so the annotation's own Field(...) and a Field
                # default override the docstring.
                annotation = _annotated(annotation, Field(**info))
            default = ... if parameter.default is _EMPTY else parameter.default
            definitions[field_name] = (annotation, default)
        return _build(
            lambda: create_model(
                _model_name(name, "Input"),
                __base__=FunctionInput,
                __module__=module or __name__,
                **definitions,
            ),
            name,
            "input",
        )

    def caller(self, func: Callable[..., Any]) -> _Call:
        """A function that calls ``func`` with the input's fields and the context."""
        context = self.context
        renamed = any(field != parameter for parameter, field in self.fields.items())
        if not renamed and all(p.kind is not _POSITIONAL_ONLY for p in self.parameters):
            # The common case: every field is the keyword argument of the same name.
            if context is None:
                return lambda args, ctx: func(**args.__dict__)
            return lambda args, ctx: func(**args.__dict__, **{context: ctx})
        kinds = {parameter.name: parameter.kind for parameter in self.parameters}
        # Positional-only parameters in order (None stands for the context), then the rest
        # by keyword.
        positional = tuple(
            self.fields.get(p.name) for p in self.parameters if p.kind is _POSITIONAL_ONLY
        )
        keyword = tuple(
            (field, parameter)
            for parameter, field in self.fields.items()
            if kinds[parameter] is not _POSITIONAL_ONLY
        )
        context_keyword = (
            context if context is not None and kinds[context] is not _POSITIONAL_ONLY else None
        )

        def call(args: BaseModel, ctx: ToolContext) -> Any:
            values = args.__dict__
            arguments = {parameter: values[field] for field, parameter in keyword}
            if context_keyword is not None:
                arguments[context_keyword] = ctx
            return func(*[ctx if f is None else values[f] for f in positional], **arguments)

        return call


def _check_field(parameter: inspect.Parameter, hint: Any, name: str) -> None:
    """Refuse a parameter that cannot be an input field, saying why."""
    if hint is _EMPTY:
        raise ConfigurationError(
            f"tool {name!r}: annotate the parameter {parameter.name!r} with its type (the "
            "input model, as the first parameter, or a type for each parameter); the context "
            "parameter is recognised by its ToolContext annotation"
        )
    if parameter.name.startswith("_"):
        raise ConfigurationError(
            f"tool {name!r}: the parameter {parameter.name!r} cannot be an input field: "
            "names starting with '_' are private to pydantic (and '_charter' is reserved)"
        )
    members = typing.get_args(hint) if _is_union(hint) else ()
    if any(_is_context(member) for member in members):
        raise ConfigurationError(
            f"tool {name!r}: annotate the context parameter {parameter.name!r} with the "
            "context class alone; the host always passes one"
        )


def _model_call(func: Callable[..., Any], takes_context: bool) -> _Call:
    if takes_context:
        return func
    return lambda args, ctx: func(args)


# -- the output ---------------------------------------------------------------------------------


def _output_type(annotation: Any, name: str) -> Any:
    """The return annotation without ``Awaitable[...]`` and without the outcomes in a union."""
    origin = typing.get_origin(annotation)
    if origin is not None and getattr(origin, "__name__", "") in {"Awaitable", "Coroutine"}:
        return _output_type(typing.get_args(annotation)[-1], name)
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if not _is_outcome(a)]
        if not members:
            raise _only_outcomes(name)
        if len(members) == 1:
            return members[0]
        return typing.Union[tuple(members)]  # noqa: UP007 - a union built at run time
    if _is_outcome(annotation):
        raise _only_outcomes(name)
    return annotation


def _only_outcomes(name: str) -> ConfigurationError:
    return ConfigurationError(
        f"tool {name!r}: the return annotation names only outcomes; add the output type "
        "(for example `-> Trip | Denied`)"
    )


def _wrapped_output(
    value_type: Any, name: str, description: str | None, module: str | None
) -> type[BaseModel]:
    """The ``FunctionOutput[value_type]`` model of a tool: ``{"result": value}``."""
    definitions: dict[str, Any] = {}
    if description:
        definitions[RESULT_FIELD] = (_annotated(value_type, Field(description=description)), ...)

    def build() -> type[BaseModel]:
        base: type[BaseModel] = FunctionOutput[value_type]
        return create_model(
            _model_name(name, "Output"),
            __base__=base,
            __module__=module or __name__,
            **definitions,
        )

    return _build(build, name, "output")


def _handler(func: Callable[..., Any], call: _Call, *, wrap: bool = True) -> Callable[..., Any]:
    """The ``(input, ctx)`` handler around ``func``; wraps a plain return value if ``wrap``."""
    handler: Callable[..., Any]
    if is_async_callable(func):
        if wrap:

            async def handler(args: BaseModel, ctx: ToolContext) -> Any:
                value = await call(args, ctx)
                return value if isinstance(value, _OUTCOME_TYPES) else {RESULT_FIELD: value}

        else:

            async def handler(args: BaseModel, ctx: ToolContext) -> Any:
                return await call(args, ctx)

    elif wrap:

        def handler(args: BaseModel, ctx: ToolContext) -> Any:
            value = call(args, ctx)
            return value if isinstance(value, _OUTCOME_TYPES) else {RESULT_FIELD: value}

    else:

        def handler(args: BaseModel, ctx: ToolContext) -> Any:
            return call(args, ctx)

    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(func, attribute):
            setattr(handler, attribute, getattr(func, attribute))
    # The function stays reachable (inspect.unwrap, tests); the registry reads the
    # handler's own signature, (input, ctx), which __signature__ pins.
    setattr(handler, "__wrapped__", func)  # noqa: B010 - a function attribute mypy does not know
    setattr(handler, "__signature__", _HANDLER_SIGNATURE)  # noqa: B010
    return handler


_HANDLER_SIGNATURE = inspect.Signature(
    [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("args", "ctx")]
)


# -- types ----------------------------------------------------------------------------------------


def _object_model(annotation: Any) -> type[BaseModel] | None:
    """``annotation`` (``Annotated`` unwrapped) if it is a model of a JSON object, else None."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and not issubclass(annotation, RootModel)
    ):
        return annotation
    return None


def _is_context(annotation: Any) -> bool:
    """Whether ``annotation`` is ``ToolContext``, a subclass, or a TypeVar bound to one."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, typing.TypeVar):
        annotation = annotation.__bound__
    annotation = typing.get_origin(annotation) or annotation
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def _is_outcome(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, _OUTCOME_TYPES)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _annotated(annotation: Any, info: FieldInfo) -> Any:
    """``Annotated[annotation, info]``, with ``info`` before any metadata already there."""
    if typing.get_origin(annotation) is Annotated:
        inner, *metadata = typing.get_args(annotation)
        return Annotated[(inner, info, *metadata)]
    return Annotated[annotation, info]


def _model_name(name: str, suffix: str) -> str:
    """``get_weather`` → ``GetWeatherInput``: the schema title of a generated model."""
    words = re.split(r"[^0-9A-Za-z]+", name)
    return "".join(word[:1].upper() + word[1:] for word in words) + suffix


def _build(build: Callable[[], type[BaseModel]], name: str, role: str) -> type[BaseModel]:
    """Run ``build`` and make sure the model is complete; pydantic's refusals, as ours."""
    try:
        model = build()
        if not model.__pydantic_complete__:
            model.model_rebuild(raise_errors=True)
    except (PydanticUserError, SchemaError, NameError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigurationError(
            f"tool {name!r}: cannot build the {role} model from the function's annotations: {first}"
        ) from None
    return model
