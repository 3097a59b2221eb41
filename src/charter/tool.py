"""The tool contract: one typed declaration every transport trusts."""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Generic, Literal, Protocol, cast, get_args, overload

from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, RootModel
from pydantic.errors import PydanticUserError
from typing_extensions import TypeVar

from .auth import AuthMode, validate_required_scope
from .context import ToolContext
from .errors import ConfigurationError
from .outcome import Completed, Deferred, Denied, Failed, InteractionRequired
from .policy import CONTROL_FIELD, ActionPolicy
from .risk import READ_ONLY_RISK, DeploymentRisk, RiskPolicy, RiskTier

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

InT = TypeVar("InT", bound=BaseModel, default=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel, default=BaseModel)
CtxT = TypeVar("CtxT", bound=ToolContext, default=ToolContext)

Outcome = Completed | Denied | Failed | InteractionRequired | Deferred

Handler = Callable[[InT, CtxT], Awaitable[OutT | Outcome]] | Callable[[InT, CtxT], OutT | Outcome]
"""A tool's handler: ``(parsed_input, ctx)``, sync or async, returning output or an outcome.

Usage ``Handler[TripQuery, TripList, TravelContext]``.
"""

TargetResolver = Callable[[InT, CtxT], Awaitable[str] | str]
"""Resolves the target id of an action from the parsed input. Usage ``TargetResolver[In, Ctx]``."""

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
"""Tool names and aliases: 1-128 letters, digits, ``_``, ``.`` or ``-``."""

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True, kw_only=True, slots=True)
class Deprecation:
    """Marks a tool (or its old name) as on its way out."""

    since_version: str
    message: str
    replacement_capability_id: str | None = None
    sunset_date: date | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Alias:
    """An older name that still dispatches to the tool, optionally deprecated.

    ``aliases=["trips.find"]`` and ``aliases=[Alias(name="trips.find", deprecation=...)]``
    both work; the second says when callers should stop using the old name.
    """

    name: str
    deprecation: Deprecation | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolAnnotations:
    """MCP hints that override the ones derived from the risk policy."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolBinding:
    """Deployment facts supplied at registration; each must agree with the definition."""

    name: str | None = None
    capability_id: str | None = None
    owner: str | None = None
    capability_version: str | None = None
    required_scopes: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    deployment_risk: DeploymentRisk | None = None
    action_policy: ActionPolicy | None = None
    annotations: ToolAnnotations | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool(Generic[InT, OutT, CtxT]):
    """A headless, typed capability; build it with ``define_tool`` or ``@tool``.

    Its JSON Schemas and validators are computed once, when it is defined.
    """

    name: str
    description: str
    input_model: type[InT]
    output_model: type[OutT]
    handler: Handler[InT, CtxT, OutT]
    tier: RiskTier
    risk_policy: RiskPolicy
    required_scopes: tuple[str, ...] = ()
    capability_id: str | None = None
    owner: str | None = None
    capability_version: str | None = None
    aliases: tuple[str, ...] = ()
    deprecation: Deprecation | None = None
    """The whole tool is deprecated (see ``alias_deprecations`` for old names)."""
    alias_deprecations: dict[str, Deprecation] = field(default_factory=dict)
    """Deprecations of individual aliases, from ``Alias(name, deprecation=...)``."""
    audience: tuple[str, ...] | None = None
    annotations: ToolAnnotations | None = None
    auth: AuthMode = "identity"
    delegable: bool = False
    tenant_field: str | None = None
    action_policy: ActionPolicy | None = None
    enforcement: Literal["generic", "handler"] = "generic"
    resolve_action_target: TargetResolver[InT, CtxT] | None = None
    timeout: float | None = None
    is_async: bool = field(init=False)
    """Whether the handler is a coroutine function (decided once)."""
    takes_context: bool = field(init=False)
    """Whether the handler accepts the context as its second argument."""
    validator: type[BaseModel] = field(init=False)
    """The model that validates input: the input model, closed to unknown fields."""
    output_validator: type[BaseModel] = field(init=False)
    """The model that validates output, closed to unknown fields so nothing extra leaks."""
    input_schema: dict[str, Any] = field(init=False)
    output_schema: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        _check_definition(self)
        set_ = object.__setattr__
        set_(self, "is_async", _is_async_callable(self.handler))
        set_(self, "takes_context", _positional_arity(self.handler, self.name) >= 2)
        set_(self, "validator", _closed_model(self.input_model))
        set_(self, "output_validator", _closed_model(self.output_model))
        set_(self, "input_schema", _json_schema(self.validator, "validation", self.name))
        set_(self, "output_schema", _json_schema(self.output_model, "serialization", self.name))
        properties = self.input_schema.get("properties", {})
        if _declares_control_field(self.input_model) or (
            isinstance(properties, dict) and CONTROL_FIELD in properties
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: the input may not declare {CONTROL_FIELD!r}; "
                "it is reserved for invocation controls"
            )
        if self.tenant_field is not None and self.tenant_field not in properties:
            raise ConfigurationError(
                f"tool {self.name!r}: tenant_field {self.tenant_field!r} is not a field "
                "of the input model"
            )

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, tier={self.tier.value!r})"


def _check_definition(tool: Tool[Any, Any, Any]) -> None:
    for name in (tool.name, *tool.aliases):
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(
                f"tool name or alias {name!r} must use 1-128 letters, digits, '_', '.' or '-'"
            )
    if tool.name in tool.aliases:
        raise ConfigurationError(f"tool {tool.name!r}: an alias repeats the canonical name")
    for role, model in (("input", tool.input_model), ("output", tool.output_model)):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigurationError(
                f"tool {tool.name!r}: the {role} schema must be a pydantic BaseModel subclass, "
                f"got {model!r}"
            )
        if issubclass(model, RootModel):
            raise ConfigurationError(
                f"tool {tool.name!r}: the {role} model must describe a JSON object, not a RootModel"
            )
    if not tool.description.strip():
        raise ConfigurationError(f"tool {tool.name!r}: a description is required")
    _check_options(tool)
    if tool.action_policy is not None:
        check_action_policy(tool.name, tool.action_policy, tool.enforcement)


def _check_options(tool: Tool[Any, Any, Any]) -> None:
    for scope in tool.required_scopes:
        try:
            validate_required_scope(scope)
        except ValueError as exc:
            raise ConfigurationError(f"tool {tool.name!r}: {exc}") from None
    if tool.auth not in get_args(AuthMode):
        raise ConfigurationError(
            f"tool {tool.name!r}: auth must be one of {list(get_args(AuthMode))}, got {tool.auth!r}"
        )
    if tool.enforcement not in ("generic", "handler"):
        raise ConfigurationError(
            f"tool {tool.name!r}: enforcement must be 'generic' or 'handler', "
            f"got {tool.enforcement!r}"
        )
    if not isinstance(tool.delegable, bool):
        raise ConfigurationError(f"tool {tool.name!r}: delegable must be True or False")
    if tool.auth == "public" and tool.delegable:
        raise ConfigurationError(f"tool {tool.name!r}: a public tool cannot be delegable")
    if tool.timeout is not None and not _is_positive_seconds(tool.timeout):
        raise ConfigurationError(
            f"tool {tool.name!r}: timeout must be a finite, positive number of seconds, "
            f"got {tool.timeout!r}"
        )


def check_action_policy(
    name: str, policy: ActionPolicy, enforcement: Literal["generic", "handler"]
) -> None:
    """Reject an action policy the host cannot enforce; raises ``ConfigurationError``."""
    if policy.target_lifecycle == "created":
        problems = []
        if policy.created_target is None:
            problems.append("missing created_target command metadata")
        if enforcement != "handler":
            problems.append('requires enforcement="handler"')
        if policy.kind != "execute":
            problems.append('requires kind="execute"')
        if policy.ledger != "required":
            problems.append('requires ledger="required"')
        if problems:
            raise ConfigurationError(
                f"tool {name!r}: a created-target action policy {'; '.join(problems)}"
            )
        created = policy.created_target
        assert created is not None
        if not created.command_target_type.strip() or not created.result_reference_type.strip():
            raise ConfigurationError(f"tool {name!r}: created_target types must be non-empty")
        if ":" in created.result_reference_type:
            raise ConfigurationError(f"tool {name!r}: result_reference_type may not contain ':'")
    elif policy.created_target is not None:
        raise ConfigurationError(
            f'tool {name!r}: declares created_target without target_lifecycle="created"'
        )
    if not policy.target_type.strip():
        raise ConfigurationError(f"tool {name!r}: action policy target_type must be non-empty")
    if policy.ledger == "never" and (policy.approval != "never" or enforcement == "handler"):
        raise ConfigurationError(
            f'tool {name!r}: ledger="never" cannot be combined with approvals or handler '
            "enforcement (both need the ledger)"
        )


def _is_positive_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _declares_control_field(model: type[BaseModel]) -> bool:
    """Whether any field of ``model`` can be populated from the reserved control field.

    The schema's property names show plain aliases; validation aliases with several
    choices or paths do not appear there, so they are checked here.
    """
    for name, info in model.model_fields.items():
        names: list[object] = [name, info.alias]
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        for choice in choices:
            names.append(choice.path[0] if isinstance(choice, AliasPath) else choice)
        if CONTROL_FIELD in names:
            return True
    return False


def _is_async_callable(func: object) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def _positional_arity(func: Callable[..., object], name: str) -> int:
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


def _closed_model(model: type[BaseModel]) -> type[BaseModel]:
    """Return ``model`` closed to unknown fields and NaN/Infinity, unless it opted out.

    A model that sets ``extra`` or ``allow_inf_nan`` in its own config keeps its choice.
    """
    # One closed copy per model: tools sharing an output model share its validator (a
    # closed copy costs ~8 KiB). It lives on the model itself, so it goes with the model.
    cached = model.__dict__.get(_CLOSED_ATTRIBUTE)
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
    type.__setattr__(model, _CLOSED_ATTRIBUTE, closed)
    return closed


_CLOSED_ATTRIBUTE = "__charter_closed_model__"


def _json_schema(
    model: type[BaseModel], mode: Literal["validation", "serialization"], name: str
) -> dict[str, Any]:
    try:
        schema = model.model_json_schema(mode=mode)
    except PydanticUserError:
        return {
            "$schema": JSON_SCHEMA_DIALECT,
            "type": "object",
            "description": f"The {mode} schema of {name!r} is not JSON-Schema-serialisable; "
            "it is validated server-side.",
            "x-charter-schema-quality": "runtime-only",
        }
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[InT],
    output_schema: type[OutT],
    handler: Callable[[InT, CtxT], Awaitable[OutT | Outcome]],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, OutT, CtxT]: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[InT],
    output_schema: type[OutT],
    handler: Callable[[InT, CtxT], OutT | Outcome],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, OutT, CtxT]: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[InT],
    output_schema: type[OutT],
    handler: Callable[[InT], Awaitable[OutT | Outcome]],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, OutT, ToolContext]: ...


@overload
def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[InT],
    output_schema: type[OutT],
    handler: Callable[[InT], OutT | Outcome],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, OutT, ToolContext]: ...


def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[BaseModel],
    output_schema: type[BaseModel],
    handler: Callable[..., Any],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[Any, Any, Any]:
    """Declare a tool from explicit models and a handler.

    Options are the remaining ``Tool`` fields (``required_scopes``, ``capability_id``,
    ``owner``, ``capability_version``, ``aliases``, ``deprecation``, ``audience``,
    ``annotations``, ``auth``, ``delegable``, ``tenant_field``, ``action_policy``,
    ``enforcement``, ``resolve_action_target``, ``timeout``). ``risk_policy`` may be
    omitted for ``read`` tools only.

    Raises:
        ConfigurationError: the declaration is invalid; the message names the problem.
    """
    tier = _coerce_tier(tier, name)
    if risk_policy is None:
        if tier is not RiskTier.READ:
            raise ConfigurationError(
                f"tool {name!r}: a {tier.value!r} tool must declare its risk_policy"
            )
        risk_policy = READ_ONLY_RISK
    for key in ("required_scopes", "aliases", "audience"):
        if key in options and options[key] is not None:
            value = options[key]
            if isinstance(value, str):
                raise ConfigurationError(f"tool {name!r}: {key} must be a list, not a string")
            options[key] = tuple(value)
    if "aliases" in options:
        aliases = options["aliases"] or ()
        options["aliases"] = tuple(a.name if isinstance(a, Alias) else a for a in aliases)
        options["alias_deprecations"] = {
            a.name: a.deprecation
            for a in aliases
            if isinstance(a, Alias) and a.deprecation is not None
        }
    unknown = set(options) - _OPTION_NAMES - {"alias_deprecations"}
    if unknown:
        raise ConfigurationError(f"tool {name!r}: unknown option(s) {sorted(unknown)}")
    return Tool(
        name=name,
        description=description,
        input_model=input_schema,
        output_model=output_schema,
        handler=handler,
        tier=tier,
        risk_policy=risk_policy,
        **options,
    )


_OPTION_NAMES = frozenset(
    {
        "required_scopes",
        "capability_id",
        "owner",
        "capability_version",
        "aliases",
        "deprecation",
        "audience",
        "annotations",
        "auth",
        "delegable",
        "tenant_field",
        "action_policy",
        "enforcement",
        "resolve_action_target",
        "timeout",
    }
)


def _coerce_tier(tier: object, name: str) -> RiskTier:
    try:
        return RiskTier(str(tier))
    except ValueError:
        raise ConfigurationError(
            f"tool {name!r}: tier must be one of {[t.value for t in RiskTier]}, got {tier!r}"
        ) from None


class ToolDecorator(Protocol):
    """What ``@tool(...)`` returns: turns a handler into a ``Tool`` with its types."""

    @overload
    def __call__(
        self, func: Callable[[InT, CtxT], Awaitable[OutT | Outcome]], /
    ) -> Tool[InT, OutT, CtxT]: ...

    @overload
    def __call__(self, func: Callable[[InT, CtxT], OutT | Outcome], /) -> Tool[InT, OutT, CtxT]: ...

    @overload
    def __call__(
        self, func: Callable[[InT], Awaitable[OutT | Outcome]], /
    ) -> Tool[InT, OutT, ToolContext]: ...

    @overload
    def __call__(
        self, func: Callable[[InT], OutT | Outcome], /
    ) -> Tool[InT, OutT, ToolContext]: ...


def tool(
    *,
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    name: str | None = None,
    description: str | None = None,
    **options: Any,
) -> ToolDecorator:
    """Declare a tool from a function: models from its annotations, text from its docstring.

    The first parameter's annotation is the input model, the return annotation the
    output model (``Awaitable`` unwrapped for async handlers); the name defaults to
    the function's. ``@tool`` registers nothing: pass the result to ``Registry.register``.
    """

    def decorate(func: Callable[..., Any]) -> Tool[Any, Any, Any]:
        tool_name: str = name or str(getattr(func, "__name__", ""))
        hints = _type_hints(func, tool_name)
        parameters = list(inspect.signature(func).parameters)
        if not parameters or parameters[0] not in hints:
            raise ConfigurationError(
                f"tool {tool_name!r}: annotate the first parameter with the input model"
            )
        if "return" not in hints:
            raise ConfigurationError(
                f"tool {tool_name!r}: annotate the return type with the output model"
            )
        text = description if description is not None else inspect.getdoc(func)
        if not text:
            raise ConfigurationError(
                f"tool {tool_name!r}: give a docstring or description= for the model to read"
            )
        return define_tool(
            name=tool_name,
            description=text,
            input_schema=hints[parameters[0]],
            output_schema=_output_model(hints["return"]),
            handler=func,
            tier=tier,
            risk_policy=risk_policy,
            **options,
        )

    return cast(ToolDecorator, decorate)


def _type_hints(func: Callable[..., Any], name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except (NameError, TypeError) as exc:
        raise ConfigurationError(f"tool {name!r}: cannot resolve annotations: {exc}") from None


def _output_model(annotation: Any) -> Any:
    """Pick the output model out of ``Model``, ``Model | Outcome`` or ``Awaitable[...]``."""
    origin = typing.get_origin(annotation)
    if origin is not None and getattr(origin, "__name__", "") in {"Awaitable", "Coroutine"}:
        return _output_model(typing.get_args(annotation)[-1])
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
