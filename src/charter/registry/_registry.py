"""The registry: register tools, look them up, validate, and run them.

The registry never checks scopes, tenancy, confirmation or approvals; that is the
host's job (``charter.host``). It validates input once, resolves the action target,
runs the handler under its timeout and cancellation, and validates the output.
"""

from __future__ import annotations

import builtins
import dataclasses
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from .._nearmatch import near_matches, suggestion_text
from .._single_use import SingleUse
from ..auth import audience_allows
from ..context import ToolContext
from ..effects import Effect
from ..errors import UNKNOWN_TOOL_NEXT_STEPS, ConfigurationError, ErrorCode
from ..manifest import RegisteredTool, manifest_json
from ..outcome import Failed, ToolOutcome, failed
from ..policy import ClaimFactory, HandlerActionPolicy, InvocationControls
from ..resources import ContentCatalog, Prompt, Resource
from ..tool import Tool, ToolBinding
from ._binding import resolve_binding, version_key
from ._execution import HandlerRunner
from ._prepared import PreparedAction
from ._targets import resolve_target
from ._validation import finish_output, validate_input

__all__ = ("Registry",)


class Registry:
    """Holds tools by name, alias and capability; validates and dispatches calls."""

    def __init__(self, *, max_threads: int = 32) -> None:
        """Create an empty registry.

        Args:
            max_threads: the most sync handlers that run at once in worker threads.
        """
        self._tools: dict[str, RegisteredTool] = {}
        self._names: dict[str, RegisteredTool] = {}
        self._capabilities: dict[tuple[str, str], RegisteredTool] = {}
        # The actions prepared here and not yet dispatched.
        self._prepared: SingleUse[PreparedAction] = SingleUse()
        self._minted: weakref.WeakSet[HandlerActionPolicy] = weakref.WeakSet()
        self._runner = HandlerRunner(max_threads=max_threads)
        self._listeners: builtins.list[Callable[[], None]] = []
        self._effects: dict[str, Effect] = {}
        self.content = ContentCatalog()
        """The resources, resource templates and prompts served beside the tools."""

    # -- registration -------------------------------------------------------------------

    def register(
        self, tool: Tool[Any, Any, Any], binding: ToolBinding | None = None
    ) -> RegisteredTool:
        """Register a tool, optionally with deployment facts; returns its registered form.

        Raises:
            ConfigurationError: a name is taken, a binding disagrees with the definition,
                or the deployment risk does not fit the tier.
        """
        if not isinstance(tool, Tool):
            raise ConfigurationError(
                f"register takes a Tool, got {type(tool).__name__} {tool!r:.80}: make one "
                "with @tool(tier=...) on a function, or define_tool(...)"
            )
        registered = resolve_binding(tool, binding or ToolBinding())
        for name in (registered.name, *registered.aliases):
            if name in self._names:
                raise ConfigurationError(f"invocation name {name!r} is already registered")
        key = (registered.capability_id, registered.capability_version)
        if key in self._capabilities:
            raise ConfigurationError(
                f"capability {key[0]!r} version {key[1]!r} is already registered"
            )
        self._tools[registered.name] = registered
        self._capabilities[key] = registered
        for name in (registered.name, *registered.aliases):
            self._names[name] = registered
        self._changed()
        return registered

    def unregister(self, name: str) -> RegisteredTool | None:
        """Remove a tool (by canonical name) and its aliases; returns what was removed.

        For tool sources whose tools come and go while serving (``charter.gateway``).
        Calls already prepared for it may still run.
        """
        registered = self._tools.pop(name, None)
        if registered is None:
            return None
        self._capabilities.pop((registered.capability_id, registered.capability_version), None)
        for key in (registered.name, *registered.aliases):
            self._names.pop(key, None)
        self._changed()
        return registered

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each registration or removal; returns its remover.

        Transports use it to tell connected clients that the tool list changed.
        """
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _changed(self) -> None:
        for listener in builtins.list(self._listeners):
            listener()

    def register_all(self, tools: Iterable[Tool[Any, Any, Any]]) -> builtins.list[RegisteredTool]:
        """Register several tools without bindings, in order."""
        return [self.register(tool) for tool in tools]

    def register_effect(self, effect: Effect) -> Effect:
        """Register an effect (``@charter.effect``) that handlers stage with ``ctx.effect``.

        Raises:
            ConfigurationError: an effect with this name is already registered.
        """
        if effect.name in self._effects:
            raise ConfigurationError(f"effect {effect.name!r} is already registered")
        self._effects[effect.name] = effect
        return effect

    def effect(self, name: str) -> Effect:
        """The registered effect called ``name``.

        Raises:
            ConfigurationError: no effect has this name (the message suggests near ones).
        """
        found = self._effects.get(name)
        if found is None:
            near = near_matches(name, list(self._effects)).did_you_mean
            hint = f" Did you mean {near!r}?" if near else ""
            raise ConfigurationError(
                f"no effect {name!r} is registered; register it with "
                f"registry.register_effect(...).{hint}"
            )
        return found

    def effects(self) -> builtins.list[Effect]:
        """The registered effects, in registration order."""
        return list(self._effects.values())

    def register_content(self, *items: Resource | Prompt) -> None:
        """Register resources, resource templates and prompts (``charter.resources``).

        Raises:
            ConfigurationError: a URI or prompt name is taken.
        """
        for item in items:
            self.content.add(item)

    # -- lookup -------------------------------------------------------------------------

    def get(self, name: str) -> RegisteredTool | None:
        """Look a tool up by canonical name or alias."""
        return self._names.get(name)

    def get_by_capability(
        self, capability_id: str, version: str | None = None
    ) -> RegisteredTool | None:
        """Look a tool up by capability id: an exact version, or the highest one."""
        if version is not None:
            return self._capabilities.get((capability_id, version))
        versions = [t for (cid, _), t in self._capabilities.items() if cid == capability_id]
        return max(versions, key=lambda t: version_key(t.capability_version), default=None)

    def names(self) -> builtins.list[str]:
        """Canonical names, in registration order."""
        return list(self._tools)

    def tools(self, audience: str | None = None) -> builtins.list[RegisteredTool]:
        """Registered tools visible to ``audience`` (all when None), in registration order."""
        return [
            t
            for t in self._tools.values()
            if audience is None or audience_allows(t.tool.audience, audience)
        ]

    def list(self, audience: str | None = None) -> builtins.list[dict[str, Any]]:
        """Manifest entries visible to ``audience`` (all when None), in registration order."""
        return [t.entry for t in self.tools(audience)]

    def manifest(self) -> builtins.list[dict[str, Any]]:
        """Every manifest entry, in registration order."""
        return self.list()

    def manifest_json(self) -> str:
        """The whole manifest as stable JSON, for diffing, lock files and snapshots."""
        return manifest_json(self.manifest())

    def not_found(self, name: str, visible: Iterable[str] | None = None) -> Failed:
        """The ``NOT_FOUND`` outcome for ``name``, suggesting only among ``visible`` names."""
        pool = list(self._names) if visible is None else list(visible)
        matches = near_matches(name, pool)
        meta: dict[str, Any] = {"candidates": list(matches.candidates)}
        if matches.did_you_mean is not None:
            meta["didYouMean"] = matches.did_you_mean
        shown = name if len(name) <= 128 else name[:125] + "..."
        return failed(
            ErrorCode.NOT_FOUND,
            f"Unknown tool {shown!r}. {suggestion_text(matches)}",
            next_steps=UNKNOWN_TOOL_NEXT_STEPS,
            **meta,
        )

    # -- admission ------------------------------------------------------------------------

    def mint_handler_policy(
        self,
        registered: RegisteredTool,
        controls: InvocationControls,
        claim_factory: ClaimFactory | None = None,
    ) -> HandlerActionPolicy:
        """Mint a fresh, single-use admission for a handler-enforced tool."""
        if registered.action_policy is None or registered.tool.enforcement != "handler":
            raise ConfigurationError(f"tool {registered.name!r} is not handler-enforced")
        admission = HandlerActionPolicy(
            capability_id=registered.capability_id,
            capability_version=registered.capability_version,
            canonical_name=registered.name,
            action_policy=registered.action_policy,
            controls=controls,
            claim_factory=claim_factory,
        )
        self._minted.add(admission)
        return admission

    def _admit(self, registered: RegisteredTool, ctx: ToolContext) -> ToolContext | Failed:
        """Return the context the handler may see, or why it may not run."""
        if registered.tool.enforcement != "handler":
            if ctx.handler_action_policy is None:
                return ctx
            # Never mutate the caller's context; the handler gets a copy without it.
            return dataclasses.replace(ctx, handler_action_policy=None)
        admission = ctx.handler_action_policy
        if admission is None or admission not in self._minted:
            reason = "admission-absent" if admission is None else "admission-not-minted"
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                f"Tool {registered.name!r} enforces its own action policy and needs an "
                "admission minted by this registry for this call.",
                reason=reason,
                capabilityId=registered.capability_id,
            )
        self._minted.discard(admission)
        for field_name, expected in (
            ("capabilityId", registered.capability_id),
            ("capabilityVersion", registered.capability_version),
            ("canonicalName", registered.name),
        ):
            actual = {
                "capabilityId": admission.capability_id,
                "capabilityVersion": admission.capability_version,
                "canonicalName": admission.canonical_name,
            }[field_name]
            if actual != expected:
                return failed(
                    ErrorCode.ACTION_POLICY_REQUIRED,
                    f"The admission does not match tool {registered.name!r}.",
                    reason="admission-mismatch",
                    mismatch=field_name,
                )
        if admission.action_policy != registered.action_policy:
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                f"The admission does not match tool {registered.name!r}.",
                reason="admission-mismatch",
                mismatch="actionPolicy",
            )
        allowed = admission.action_policy.allowed_actor_types
        if allowed and ctx.actor not in allowed:
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Actor type {ctx.actor!r} may not run {registered.name!r}.",
                reason="actor_not_allowed",
            )
        return ctx

    # -- dispatch -----------------------------------------------------------------------

    async def prepare_action(
        self, name: str, arguments: object, ctx: ToolContext
    ) -> PreparedAction | Failed:
        """Validate input once and resolve the action target; returns a single-use action."""
        found = self._parse(name, arguments)
        if isinstance(found, Failed):
            return found
        registered, parsed = found
        target: str | Failed | None = None  # what resolve_target answers for a tool with none
        tool = registered.tool
        if registered.target_resolution is not None or tool.resolve_action_target is not None:
            target = await resolve_target(registered, parsed, ctx)
        if isinstance(target, Failed):
            return target
        prepared = PreparedAction(tool=registered, input=parsed, target=target)
        self._prepared.issue(prepared)
        return prepared

    async def dispatch_prepared(self, prepared: PreparedAction, ctx: ToolContext) -> ToolOutcome:
        """Run a prepared action once: the handler on its already-parsed input."""
        if not self._prepared.spend(prepared):
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                "The prepared action was not admitted by this registry or was already dispatched.",
                reason="prepared_action_not_admitted",
            )
        return await self._run(prepared.tool, prepared.input, ctx)

    async def dispatch(self, name: str, arguments: object, ctx: ToolContext) -> ToolOutcome:
        """Validate input, run the handler, validate output; always returns an outcome."""
        found = self._parse(name, arguments)
        if isinstance(found, Failed):
            return found
        registered, parsed = found
        return await self._run(registered, parsed, ctx)

    def _parse(self, name: object, arguments: object) -> tuple[RegisteredTool, BaseModel] | Failed:
        """The named tool and its parsed input, or why not (no such tool, invalid input)."""
        # The look-up and validation ``get`` and ``validate_input`` make, without their two
        # calls: every call through the host is parsed here.
        registered = self._names.get(name) if isinstance(name, str) else None
        if registered is None:
            return self.not_found(name if isinstance(name, str) else repr(name))
        parsed = validate_input(registered, arguments)
        if isinstance(parsed, Failed):
            return parsed
        return registered, parsed

    def validate_input(self, registered: RegisteredTool, arguments: object) -> BaseModel | Failed:
        """Parse ``arguments`` with the tool's input model; issues never echo the values."""
        return validate_input(registered, arguments)

    async def _run(
        self, registered: RegisteredTool, parsed: BaseModel, ctx: ToolContext
    ) -> ToolOutcome:
        admitted = self._admit(registered, ctx)
        if isinstance(admitted, Failed):
            return admitted
        result = await self._runner.run(registered, parsed, admitted)
        if isinstance(result, Failed):
            return result
        return finish_output(registered, result)

    def close(self) -> None:
        """Shut the worker threads down (they are started again on demand)."""
        self._runner.close()
