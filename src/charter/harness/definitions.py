"""Tools as a model sees them: prepared definitions, capabilities, owners and sealed calls."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, RootModel
from typing_extensions import TypeVar

from ..context import ToolContext
from ..errors import ConfigurationError
from ..risk import RiskPolicy, RiskTier
from ..tool import Tool, define_tool
from .names import ModelNames, model_name_for, model_names

if TYPE_CHECKING:
    from ..manifest import RegisteredTool
    from ..registry import Registry

__all__ = (
    "BoundToolDefinition",
    "Capability",
    "JsonObjectOutput",
    "SealedToolCall",
    "StateFactory",
    "ToolOwner",
    "ToolSchema",
    "bind_tools",
    "bound_names",
    "lookup",
    "tool",
)

InT = TypeVar("InT", bound=BaseModel, default=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel, default=BaseModel)
CtxT = TypeVar("CtxT", bound=ToolContext, default=ToolContext)
StateT = TypeVar("StateT", default=object)

StateFactory = Callable[[], StateT | Awaitable[StateT]]
"""Creates a capability's session-local state, once per session. Usage ``StateFactory[Cart]``."""


class JsonObjectOutput(BaseModel):
    """The output model of a harness tool that declares none: any JSON object."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOwner:
    """Where a tool came from: the capability (or middleware) and the slot that supplied it."""

    middleware_id: str
    """The capability or middleware id (``host`` for tools taken from the registry)."""
    slot: str
    """The slot within it (``tools`` for a capability's own tools)."""


HOST_OWNER = ToolOwner(middleware_id="host", slot="registry")
"""The owner of tools the harness takes straight from the host's registry."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSchema:
    """What a model is told about one tool: name, description and parameter JSON Schema."""

    name: str
    """The model-facing name (``charter.harness.names``): what the model calls it."""
    description: str
    parameters: dict[str, Any]
    """The input JSON Schema (draft 2020-12, without ``$schema``)."""
    tool_name: str | None = None
    """The canonical tool name, when known (None: a schema built by hand, named ``name``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SealedToolCall:
    """A validated, executable model tool call."""

    call_id: str
    tool_name: str
    """The tool's canonical name (an alias the model used is resolved)."""
    args: dict[str, JsonValue]
    """The arguments as the model sent them, JSON-copied, after they validated."""


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class Capability(Generic[StateT]):
    """Tools that belong together and share session-local state.

    Each tool of a capability sees the capability's state as ``ctx.state``; the state is
    created by ``state_factory`` (sync or async) the first time one of its tools is called in a
    session, and lives as long as the harness keeps that session in this process (until
    it is stopped, or forgotten as one of the least recently run: ``charter.harness.live``).
    """

    id: str
    """The capability id; it is the ``middleware_id`` of its tools' owner."""
    tools: tuple[Tool[Any, Any, Any], ...]
    state_factory: StateFactory[StateT] | None = None
    slot: str = "tools"
    """The slot name reported in the tools' owner."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ConfigurationError("a capability needs a non-empty id")
        object.__setattr__(self, "tools", tuple(self.tools))
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"capability {self.id!r} lists a tool name twice")

    @property
    def owner(self) -> ToolOwner:
        """The owner reported for this capability's tools."""
        return ToolOwner(middleware_id=self.id, slot=self.slot)

    def register(self, registry: Registry) -> list[RegisteredTool]:
        """Register every tool of the capability in ``registry`` (the harness needs them there)."""
        return registry.register_all(self.tools)

    async def create_state(self) -> StateT | None:
        """Run the state factory (awaiting it when async); None when there is none."""
        if self.state_factory is None:
            return None
        made = self.state_factory()
        if inspect.isawaitable(made):
            return await made
        return made


@dataclass(frozen=True, kw_only=True, slots=True)
class BoundToolDefinition:
    """A tool after binding: its registered form, model-visible schema and owner."""

    registered: RegisteredTool
    owner: ToolOwner
    capability: Capability[Any] | None = None
    model_name: str | None = None
    """The model-facing name; None derives it from the tool alone (``model_name_for``)."""
    schema: ToolSchema = field(init=False)
    """The model-visible definition, computed once."""

    def __post_init__(self) -> None:
        tool = self.registered.tool
        parameters = {k: v for k, v in tool.input_schema.items() if k != "$schema"}
        called = self.model_name or model_name_for(tool.name, tool.model_name)
        object.__setattr__(self, "model_name", called)
        object.__setattr__(
            self,
            "schema",
            ToolSchema(
                name=called,
                description=tool.description,
                parameters=parameters,
                tool_name=tool.name,
            ),
        )

    @property
    def name(self) -> str:
        """The canonical tool name."""
        return self.registered.name


def tool(
    *,
    name: str,
    parameters: type[InT],
    execute: Callable[..., Any],
    description: str | None = None,
    output: type[OutT] | None = None,
    tier: RiskTier | Literal["read", "write", "sensitive", "destructive"] = "read",
    risk_policy: RiskPolicy | None = None,
    **options: Any,
) -> Tool[InT, Any, Any]:
    """Prepare a tool for model use, in the seed's terms.

    ``parameters`` must be a Pydantic model describing a JSON object; ``execute(args, ctx)``
    (sync or async) returns output or an outcome. Without ``output`` the tool may return
    any JSON object. The result is an ordinary charter ``Tool``: register it (or its
    ``Capability``) with the host's registry, and every call goes through ``Host.invoke``.

    Args:
        name: the stable tool name the model sees.
        parameters: the Pydantic object model of the arguments.
        execute: the handler, ``(args)`` or ``(args, ctx)``.
        description: what the model reads; defaults to ``execute``'s docstring.
        output: the output model; defaults to ``JsonObjectOutput`` (any object).
        tier: the risk tier (``read`` by default).
        risk_policy: required for tiers other than ``read``.
        **options: any other ``define_tool`` option (``required_scopes``, ``timeout``...).

    Raises:
        ConfigurationError: ``parameters`` is not an object model, or the definition is
            invalid.
    """
    if not (
        isinstance(parameters, type)
        and issubclass(parameters, BaseModel)
        and not issubclass(parameters, RootModel)
    ):
        raise ConfigurationError(
            f"tool {name!r}: parameters must be a pydantic BaseModel describing a JSON object"
        )
    text = description if description is not None else inspect.getdoc(execute)
    return define_tool(
        name=name,
        description=text or "",
        input_schema=parameters,
        output_schema=output if output is not None else JsonObjectOutput,
        handler=execute,
        tier=tier,
        risk_policy=risk_policy,
        **options,
    )


def bind_tools(
    registry: Registry,
    visible: Sequence[RegisteredTool],
    capabilities: Sequence[Capability[Any]],
    names: Sequence[str] | None,
) -> dict[str, BoundToolDefinition]:
    """Bind the tools a session may use: capability tools first, then the registry's.

    Model-facing names are those of the whole registry, so a tool is called the same in
    every session whatever else the session may see.

    Raises:
        ConfigurationError: a capability tool is not registered in ``registry``, or two
            registered tools would have the same model-facing name.
    """
    called = model_names(registry.tools())
    allowed = {t.name for t in visible}
    bound: dict[str, BoundToolDefinition] = {}
    for capability in capabilities:
        for definition in capability.tools:
            registered = registry.get(definition.name)
            if registered is None or registered.tool is not definition:
                raise ConfigurationError(
                    f"capability {capability.id!r}: tool {definition.name!r} is not registered "
                    "with the host's registry; call capability.register(registry) first"
                )
            if registered.name in allowed:
                bound[registered.name] = BoundToolDefinition(
                    registered=registered,
                    owner=capability.owner,
                    capability=capability,
                    model_name=called.model_name(registered.name),
                )
    wanted = set(names) if names is not None else None
    for registered in visible:
        if registered.name in bound:
            continue
        if wanted is None or registered.name in wanted:
            bound[registered.name] = BoundToolDefinition(
                registered=registered,
                owner=HOST_OWNER,
                model_name=called.model_name(registered.name),
            )
    return bound


def bound_names(bound: Mapping[str, BoundToolDefinition]) -> ModelNames:
    """The model-facing names of bound tools, both ways."""
    return ModelNames.build((name, b.schema.name) for name, b in bound.items())


def lookup(
    bound: Mapping[str, BoundToolDefinition],
    registry: Registry,
    name: str,
    names: ModelNames | None = None,
) -> str | None:
    """The canonical name of a bound tool called by model-facing name, name or alias, else None."""
    canonical = (names or bound_names(bound)).tool_name(name)
    if canonical is not None:
        return canonical
    if name in bound:
        return name
    registered = registry.get(name)
    if registered is not None and registered.name in bound:
        return registered.name
    return None
