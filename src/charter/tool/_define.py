"""Declaring a tool: ``define_tool`` from explicit models, ``@tool`` from a function."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

from ..errors import ConfigurationError
from ..risk import READ_ONLY_RISK, RiskPolicy, RiskTier
from ._decorator import ToolDecorator
from ._functions import read_function
from ._metadata import Alias
from ._tool import CtxT, Handler, InT, Outcome, OutT, Tool

__all__ = ("ToolDecorator", "define_tool", "tool")


def define_tool(
    *,
    name: str,
    description: str,
    input_schema: type[InT],
    output_schema: type[OutT],
    handler: Callable[[InT, CtxT], Awaitable[OutT | Outcome]]
    | Callable[[InT, CtxT], OutT | Outcome]
    | Callable[[InT], Awaitable[OutT | Outcome]]
    | Callable[[InT], OutT | Outcome],
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, OutT, CtxT]:
    """Declare a tool from explicit models and a handler.

    The handler takes the parsed input and, if it wants one, the context; it may be sync
    or async and return output or an outcome. Without a context parameter the tool's
    context type is ``ToolContext`` (the default of ``CtxT``).

    Options are the remaining ``Tool`` fields (``required_scopes``, ``capability_id``,
    ``owner``, ``capability_version``, ``aliases``, ``deprecation``, ``audience``,
    ``annotations``, ``auth``, ``delegable``, ``tenant_field``, ``action_policy``,
    ``enforcement``, ``resolve_action_target``, ``timeout``, ``cancellable``, ``limits``,
    ``model_name``).
    ``risk_policy`` may be omitted for ``read`` tools only.

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
    elif tier is RiskTier.READ and risk_policy.destructive:
        # A read runs with no request id, confirmation or approval: a risk that says it
        # destroys would be shown to clients (destructiveHint) and gate nothing.
        raise ConfigurationError(
            f"tool {name!r}: a 'read' tool runs ungated, but its risk_policy says "
            "destructive=True; declare the tier of what it does ('write', 'sensitive' or "
            "'destructive'), which decides its gates"
        )
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
        # A handler without a context parameter is adapted by ``Tool`` (its arity is read).
        handler=cast("Handler[Any, Any, Any]", handler),
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
        "cancellable",
        "limits",
        "model_name",
    }
)


def _coerce_tier(tier: object, name: str) -> RiskTier:
    try:
        return RiskTier(str(tier))
    except ValueError:
        raise ConfigurationError(
            f"tool {name!r}: tier must be one of {[t.value for t in RiskTier]}, got {tier!r}"
        ) from None


def tool(
    function: None = None,
    /,
    *,
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"],
    risk_policy: RiskPolicy | None = None,
    name: str | None = None,
    description: str | None = None,
    **options: Any,
) -> ToolDecorator:
    """Declare a tool from a function: models from its annotations, text from its docstring.

    A first parameter annotated with a model (beside, at most, the context) is the input
    model; any other signature is a plain function, whose parameters become the fields
    of a generated ``FunctionInput`` model. A model return annotation is the output
    model; any other return type is wrapped as ``{"result": value}`` (``FunctionOutput``).
    The context is the parameter annotated with a ``ToolContext`` class, wherever it
    stands. The name defaults to the function's, the description to its docstring (a
    plain function's docstring also describes its parameters). ``@tool`` registers
    nothing: pass the result to ``Registry.register``.
    """
    if function is not None:
        raise ConfigurationError(
            "@tool takes keywords only: write @tool(tier=...) above the function"
        )

    def decorate(func: Callable[..., Any]) -> Tool[Any, Any, Any]:
        if isinstance(func, Tool):
            raise ConfigurationError(f"tool {func.name!r}: @tool is applied twice")
        tool_name: str = name or str(getattr(func, "__name__", ""))
        parts = read_function(func, tool_name, description)
        return define_tool(
            name=tool_name,
            description=parts.description,
            input_schema=parts.input_model,
            output_schema=parts.output_model,
            handler=parts.handler,
            tier=tier,
            risk_policy=risk_policy,
            **options,
        )

    return cast(ToolDecorator, decorate)
