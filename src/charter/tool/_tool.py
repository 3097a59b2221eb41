"""The ``Tool`` type: a headless, typed capability, with its schemas and validators."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal

from pydantic import BaseModel
from typing_extensions import TypeVar

from ..auth import AuthMode
from ..context import ToolContext
from ..limits import Limit, check_limits
from ..outcome import Completed, Deferred, Denied, Failed, InteractionRequired
from ..policy import ActionPolicy
from ..risk import RiskPolicy, RiskTier
from ._checks import check_declaration, check_input_fields
from ._closed_models import closed_model
from ._metadata import Deprecation, ToolAnnotations
from ._schemas import json_schema
from ._signature import is_async_callable, positional_arity, refuse_generators

__all__ = ("CtxT", "Handler", "InT", "Outcome", "OutT", "TargetResolver", "Tool")

InT = TypeVar("InT", bound=BaseModel, default=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel, default=BaseModel)
CtxT = TypeVar("CtxT", bound=ToolContext, default=ToolContext)

Outcome = Completed | Denied | Failed | InteractionRequired | Deferred

Handler = Callable[[InT, CtxT], Awaitable[OutT | Outcome]] | Callable[[InT, CtxT], OutT | Outcome]
"""A tool's handler: ``(parsed_input, ctx)``, sync or async, returning output or an outcome.

Usage ``Handler[TripQuery, TravelContext, TripList]``: input, context, output, the order in
which the type variables first appear in the alias (as ``Tool.handler`` writes it).
"""

TargetResolver = Callable[[InT, CtxT], Awaitable[str] | str]
"""Resolves the target id of an action from the parsed input. Usage ``TargetResolver[In, Ctx]``."""


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
    cancellable: bool = True
    """False: once the handler starts, a caller that leaves or cancels does not stop it;
    the call runs to its end (its ``timeout`` still applies) and a ledgered call's outcome
    is stored, so a retry with the same request id replays it. For handlers that call
    out of the process and must not be cut off mid-call."""
    limits: tuple[Limit, ...] = ()
    """Budgets spent per tool (``charter.limits``): rate limits, quotas, in-flight caps."""
    model_name: str | None = None
    """The name model APIs see, when the author sets it (``charter.harness.names``)."""
    is_async: bool = field(init=False)
    """Whether the handler is a coroutine function (decided once)."""
    takes_context: bool = field(init=False)
    """Whether the handler accepts the context as its second argument."""
    validator: type[BaseModel] = field(init=False)
    """The model that validates input: the input model, closed to unknown fields."""
    output_validator: type[BaseModel] = field(init=False)
    """The model that validates output, closed to unknown fields so nothing extra leaks."""
    input_schema: dict[str, Any] = field(init=False)
    """The JSON Schema of the input (of ``validator``); shared by the tools of one model:
    read it, copy it to change it."""
    output_schema: dict[str, Any] = field(init=False)
    """The JSON Schema of the output, as serialized; shared like ``input_schema``."""

    def __post_init__(self) -> None:
        check_declaration(
            name=self.name,
            aliases=self.aliases,
            input_model=self.input_model,
            output_model=self.output_model,
            description=self.description,
            required_scopes=self.required_scopes,
            auth=self.auth,
            enforcement=self.enforcement,
            delegable=self.delegable,
            timeout=self.timeout,
            action_policy=self.action_policy,
            model_name=self.model_name,
        )
        set_ = object.__setattr__
        set_(self, "limits", check_limits(f"tool {self.name!r}", self.limits))
        refuse_generators(self.handler, self.name)
        set_(self, "is_async", is_async_callable(self.handler))
        set_(self, "takes_context", positional_arity(self.handler, self.name) >= 2)
        set_(self, "validator", closed_model(self.input_model))
        set_(self, "output_validator", closed_model(self.output_model))
        set_(self, "input_schema", json_schema(self.validator, "validation", self.name))
        set_(self, "output_schema", json_schema(self.output_model, "serialization", self.name))
        check_input_fields(self.name, self.input_model, self.input_schema, self.tenant_field)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, tier={self.tier.value!r})"
