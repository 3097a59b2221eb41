"""The registry: register tools, look them up, validate, and run them.

The registry never checks scopes, tenancy, confirmation or approvals; that is the
host's job (``charter.host``). It validates input once, resolves the action target,
runs the handler under its timeout and cancellation, and validates the output.
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import dataclasses
import functools
import inspect
import logging
import math
import re
import uuid
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from ._fingerprint import canonical_input, shown_input
from ._nearmatch import near_matches, suggestion_text
from ._safe_log import log_exception
from .auth import audience_allows, js_trim
from .context import ToolContext
from .errors import UNKNOWN_TOOL_NEXT_STEPS, ConfigurationError, ErrorCode, ToolError
from .manifest import RegisteredTool, build_entry, derive_annotations, manifest_json
from .outcome import (
    Completed,
    Deferred,
    Denied,
    Failed,
    InteractionRequired,
    ToolOutcome,
    failed,
    failed_from_error,
)
from .policy import (
    ClaimFactory,
    ControlSpec,
    HandlerActionPolicy,
    InvocationControls,
    TargetResolution,
    default_action_policy,
)
from .risk import DEFAULT_DEPLOYMENT_RISK, risk_allows_tier
from .tool import NAME_PATTERN, Tool, ToolBinding, check_action_policy

__all__ = ("PreparedAction", "Registry", "finish_output")

logger = logging.getLogger("charter")

_OUTCOMES = (Completed, Denied, Failed, InteractionRequired, Deferred)


@dataclass(frozen=True, kw_only=True, slots=True, weakref_slot=True, eq=False)
class PreparedAction:
    # eq=False: identity, not structure, decides admission (a copy is refused).
    """Validated input with its resolved target; single-use, and only for its registry."""

    tool: RegisteredTool
    input: BaseModel
    """The parsed input model."""
    target: str | None
    """The resolved, trimmed action target, when the policy has one."""
    _canonical: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)
    _shown: list[dict[str, Any]] = dataclasses.field(default_factory=list, repr=False)

    @property
    def canonical_input(self) -> dict[str, Any]:
        """Every validated value in canonical form, secrets in clear: what fingerprints hash.

        Never show, log or store it; `arguments` is the shown form. Built on first use
        (a call without an action policy never needs it), from the model, not a dump.

        Raises:
            NonCanonicalValueError: A value has no canonical form.
        """
        if not self._canonical:
            self._canonical.append(canonical_input(self.input))
        return self._canonical[0]

    @property
    def arguments(self) -> dict[str, Any]:
        """The validated input as an approver is shown it: `canonical_input`, secrets masked.

        Each secret is ``{"$secret": "bound"}``: it is in the fingerprint but never shown.

        Raises:
            NonCanonicalValueError: A value has no canonical form.
        """
        if not self._shown:
            self._shown.append(shown_input(self.input))
        return self._shown[0]


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
        self._prepared: weakref.WeakSet[PreparedAction] = weakref.WeakSet()
        self._minted: weakref.WeakSet[HandlerActionPolicy] = weakref.WeakSet()
        self._max_threads = max_threads
        self._executor: ThreadPoolExecutor | None = None

    # -- registration -------------------------------------------------------------------

    def register(
        self, tool: Tool[Any, Any, Any], binding: ToolBinding | None = None
    ) -> RegisteredTool:
        """Register a tool, optionally with deployment facts; returns its registered form.

        Raises:
            ConfigurationError: a name is taken, a binding disagrees with the definition,
                or the deployment risk does not fit the tier.
        """
        registered = _resolve(tool, binding or ToolBinding())
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
        return registered

    def register_all(self, tools: Iterable[Tool[Any, Any, Any]]) -> builtins.list[RegisteredTool]:
        """Register several tools without bindings, in order."""
        return [self.register(tool) for tool in tools]

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
        return max(versions, key=lambda t: _version_key(t.capability_version), default=None)

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
        registered = self.get(name) if isinstance(name, str) else None
        if registered is None:
            return self.not_found(name if isinstance(name, str) else repr(name))
        parsed = self.validate_input(registered, arguments)
        if isinstance(parsed, Failed):
            return parsed
        target = await self._resolve_target(registered, parsed, ctx)
        if isinstance(target, Failed):
            return target
        prepared = PreparedAction(tool=registered, input=parsed, target=target)
        self._prepared.add(prepared)
        return prepared

    async def dispatch_prepared(self, prepared: PreparedAction, ctx: ToolContext) -> ToolOutcome:
        """Run a prepared action once: the handler on its already-parsed input."""
        if prepared not in self._prepared:
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                "The prepared action was not admitted by this registry or was already dispatched.",
                reason="prepared_action_not_admitted",
            )
        self._prepared.discard(prepared)
        return await self._run(prepared.tool, prepared.input, ctx)

    async def dispatch(self, name: str, arguments: object, ctx: ToolContext) -> ToolOutcome:
        """Validate input, run the handler, validate output; always returns an outcome."""
        registered = self.get(name) if isinstance(name, str) else None
        if registered is None:
            return self.not_found(name if isinstance(name, str) else repr(name))
        parsed = self.validate_input(registered, arguments)
        if isinstance(parsed, Failed):
            return parsed
        return await self._run(registered, parsed, ctx)

    def validate_input(self, registered: RegisteredTool, arguments: object) -> BaseModel | Failed:
        """Parse ``arguments`` with the tool's input model; issues never echo the values."""
        # A dict is by far the common case; the ABC check costs more than validation's start.
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Invalid input for tool {registered.name!r}: arguments must be a JSON object.",
                reason="not_an_object",
                issues=[],
            )
        try:
            # The model's own validator: what ``model_validate`` calls, minus its overhead.
            parsed: BaseModel = registered.tool.validator.__pydantic_validator__.validate_python(
                arguments
            )
        except ValidationError as exc:
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Invalid input for tool {registered.name!r}: {_summary(exc)}",
                reason="validation_failed",
                issues=_issues(exc),
            )
        loc = _non_finite(parsed) if _may_hold_non_finite(registered.tool.validator) else None
        if loc is not None:
            where = ".".join(loc) or "(root)"
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Invalid input for tool {registered.name!r}: {where}: {_FINITE_MSG}",
                reason="validation_failed",
                issues=[{"loc": list(loc), "msg": _FINITE_MSG, "type": "finite_number"}],
            )
        return parsed

    async def _resolve_target(
        self, registered: RegisteredTool, parsed: BaseModel, ctx: ToolContext
    ) -> str | Failed | None:
        mode = registered.target_resolution
        tool = registered.tool
        policy = registered.action_policy
        value: object = None
        try:
            if tool.resolve_action_target is not None and mode in (None, "package-resolver"):
                value = tool.resolve_action_target(parsed, ctx)
                if inspect.isawaitable(value):
                    value = await value
            elif mode == "command-target-field" and policy is not None:
                value = getattr(parsed, policy.command_target_field or "", None)
            elif mode == "tenant-collection" and policy is not None:
                tenant = js_trim(ctx.tenant_id or "")
                value = f"{policy.target_type}:{tenant}" if tenant else None
        except ToolError as exc:
            return failed_from_error(exc)
        except Exception:
            return _provider_error(registered.name, "target resolver")
        if value is None and mode is None:
            return None
        if not isinstance(value, str) or not js_trim(value):
            return failed(
                ErrorCode.ACTION_POLICY_REQUIRED,
                f"Tool {registered.name!r} could not resolve a valid action target.",
                reason="target_unresolved",
                capabilityId=registered.capability_id,
                targetResolution=mode,
                commandTargetField=policy.command_target_field if policy else None,
            )
        return js_trim(value)

    async def _run(
        self, registered: RegisteredTool, parsed: BaseModel, ctx: ToolContext
    ) -> ToolOutcome:
        admitted = self._admit(registered, ctx)
        if isinstance(admitted, Failed):
            return admitted
        tool = registered.tool
        args = (parsed, admitted) if tool.takes_context else (parsed,)
        try:
            if tool.is_async:
                result = await _guard(tool.handler(*args), admitted, tool.timeout)
            else:
                result = await _guard(self._in_thread(tool.handler, args), admitted, tool.timeout)
        except ToolError as exc:
            return failed_from_error(exc)
        except TimeoutError:
            admitted.cancel.set()
            return failed(
                ErrorCode.TIMEOUT,
                f"Tool {registered.name!r} did not finish within {tool.timeout} s.",
                retryable=True,
            )
        except _CancelledBySignal:
            return failed(ErrorCode.CANCELLED, f"The call to {registered.name!r} was cancelled.")
        except asyncio.CancelledError:
            admitted.cancel.set()
            raise
        except Exception as exc:
            # A lock wait or lost connection in the handler's own ctx.db statements rolled
            # the call back: the store says so, and the caller may retry.
            transient = admitted.db_error(exc) if admitted.db_error is not None else None
            if transient is not None:
                return failed_from_error(transient)
            return _provider_error(registered.name, "handler")
        return finish_output(registered, result)

    async def _in_thread(self, func: Any, args: tuple[Any, ...]) -> Any:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_threads, thread_name_prefix="charter-tool"
            )
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, func, *args)
        return await loop.run_in_executor(self._executor, call)

    def close(self) -> None:
        """Shut the worker threads down (they are started again on demand)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class _CancelledBySignal(Exception):
    """The call's cancel signal fired while the handler ran."""


async def _guard(awaitable: Any, ctx: ToolContext, timeout: float | None) -> Any:
    """Await the handler in this task, under its timeout, cancelled by ``ctx.cancel``."""
    signal = ctx.cancel
    if signal.is_set():
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise _CancelledBySignal
    loop = asyncio.get_running_loop()
    watch = _Watch(asyncio.current_task(loop), loop)
    unsubscribe = signal.subscribe(watch.on_signal)
    try:
        if timeout is None:
            result = await awaitable
        else:
            async with asyncio.timeout(timeout):
                result = await awaitable
        watch.done = True
        return result
    except asyncio.CancelledError:
        watch.done = True
        task = watch.task
        if watch.fired and task is not None and task.uncancel() == 0:
            raise _CancelledBySignal from None
        raise
    finally:
        watch.done = True
        unsubscribe()


class _Watch:
    """Cancels the handler's task when the call's cancel signal fires (from any thread)."""

    __slots__ = ("done", "fired", "loop", "task")

    def __init__(self, task: asyncio.Task[Any] | None, loop: asyncio.AbstractEventLoop) -> None:
        self.task = task
        self.loop = loop
        self.done = False
        self.fired = False

    def on_signal(self) -> None:
        self.loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        if not self.done and self.task is not None:
            self.fired = True
            self.task.cancel()


def finish_output(registered: RegisteredTool, result: object) -> ToolOutcome:
    """Turn a handler's return value into an outcome, validating output data.

    The output is validated against the output model (closed to unknown fields) and
    returned in its serialised, by-alias form, which is what the output schema describes.
    Data that does not match becomes ``INVALID_OUTPUT``; the data itself is never returned
    or logged, only the locations and kinds of the problems.
    """
    if isinstance(result, (Denied, Failed, InteractionRequired, Deferred)):
        return result
    data = result.output if isinstance(result, Completed) else result
    # The models' own validators and serialisers are called directly: the same work as
    # ``model_validate`` and ``model_dump``, which add microseconds of overhead per call.
    try:
        if isinstance(data, BaseModel):
            # warnings="error": a model built with wrong types (model_construct, assignment)
            # fails here instead of serialising something else. Computed fields are
            # recomputed by validation, and the closed validator would refuse them.
            data = data.__pydantic_serializer__.to_python(
                data, mode="json", by_alias=True, exclude_computed_fields=True, warnings="error"
            )
        elif isinstance(data, Mapping):
            computed = registered.tool.output_model.model_computed_fields
            keys = {info.alias or name for name, info in computed.items()}
            data = {key: value for key, value in data.items() if key not in keys}
        validator = registered.tool.output_validator
        validated = validator.__pydantic_validator__.validate_python(data)
        problem = _non_finite(validated) if _may_hold_non_finite(validator) else None
        if problem is not None:
            issues: list[dict[str, Any]] = [
                {"loc": list(problem), "msg": _FINITE_MSG, "type": "finite_number"}
            ]
        else:
            return _completed(
                validator.__pydantic_serializer__.to_python(validated, mode="json", by_alias=True)
            )
    except ValidationError as exc:
        issues = _issues(exc)
    except PydanticSerializationError:
        issues = [{"loc": [], "msg": "Output could not be serialised", "type": "serialization"}]
    error_id = _error_id()
    logger.error(
        "tool %s returned invalid output (error id %s): %s", registered.name, error_id, issues
    )
    return failed(
        ErrorCode.INVALID_OUTPUT,
        f"Tool {registered.name!r} produced output that does not match its output schema.",
        errorId=error_id,
    )


_FINITE_MSG = "Input should be a finite number"


def _completed(output: object) -> Completed:
    """``Completed(output=output)`` for output that is a model's JSON-mode dump already.

    The instance ``Completed.model_construct(output=output)`` would make, built directly:
    validating the dump again as ``JsonValue`` (or ``model_construct``'s generic loop)
    costs more than validating the tool's output did.
    """
    completed = Completed.__new__(Completed)
    set_ = object.__setattr__
    set_(completed, "__dict__", {"kind": "completed", "output": output, "replayed": False})
    set_(completed, "__pydantic_fields_set__", {"output"})
    set_(completed, "__pydantic_extra__", None)
    set_(completed, "__pydantic_private__", None)
    return completed


def _non_finite(
    value: object, loc: tuple[str, ...] = (), allowed: bool = False
) -> tuple[str, ...] | None:
    """Return the location of the first NaN or infinity in validated data, if any.

    The tool's own model is closed to NaN/Infinity by its config, but a nested model
    keeps pydantic's default (allowed); this walk closes those too. A model that sets
    ``allow_inf_nan=True`` in its own config keeps its choice for its own fields.
    """
    if isinstance(value, BaseModel):
        own = value.model_config.get("allow_inf_nan") is True
        for name, info in type(value).model_fields.items():
            found = _non_finite(getattr(value, name, None), (*loc, info.alias or name), own)
            if found is not None:
                return found
        for key, item in (value.model_extra or {}).items():
            found = _non_finite(item, (*loc, str(key)), own)
            if found is not None:
                return found
        return None
    if isinstance(value, float | Decimal):
        finite = math.isfinite(value) if isinstance(value, float) else value.is_finite()
        return None if finite or allowed else loc
    if isinstance(value, Mapping):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        return None
    for index, item in items:
        found = _non_finite(item, (*loc, str(index)), allowed)
        if found is not None:
            return found
    return None


_WALKED: weakref.WeakKeyDictionary[type[BaseModel], bool] = weakref.WeakKeyDictionary()
"""Per validator model: whether ``_non_finite`` must walk what it validated."""

_FLOAT_FREE_TYPES = frozenset(
    {
        # Leaves that never hold a float or a Decimal.
        *("str", "int", "bool", "none", "bytes", "date", "datetime", "time", "timedelta"),
        *("uuid", "url", "multi-host-url", "is-subclass", "callable", "complex"),
        # Containers whose parts the walk below inspects.
        *("model", "model-fields", "model-field", "default", "nullable", "union"),
        *("tagged-union", "list", "set", "frozenset", "tuple", "dict", "chain"),
        *("lax-or-strict", "json-or-python", "definitions", "definition-ref"),
        *("typed-dict", "typed-dict-field", "dataclass", "dataclass-args", "dataclass-field"),
        *("custom-error", "literal", "enum"),
    }
)
"""Core schema types ``_float_free`` knows; any other type (``float``, ``decimal``,
``any``, function validators…) may hold a non-finite number."""

_ANY_ITEMS = {"list": "items_schema", "set": "items_schema", "frozenset": "items_schema"}


def _may_hold_non_finite(model: type[BaseModel]) -> bool:
    """Whether a validated instance of ``model`` can hold NaN or an infinity at all.

    Decided once per model from its core schema: a model made only of strings, integers,
    booleans, dates and the like (in any nesting) never needs the ``_non_finite`` walk,
    which would otherwise cost more than validating the data.
    """
    known = _WALKED.get(model)
    if known is None:
        try:
            known = not _float_free(model.__pydantic_core_schema__)
        except Exception:  # a schema pydantic could not build yet: walk, to be safe
            known = True
        _WALKED[model] = known
    return known


def _float_free(node: object) -> bool:
    """Whether no value validated by core schema ``node`` can be a float or a Decimal."""
    if isinstance(node, list):
        return all(_float_free(item) for item in node)
    if not isinstance(node, Mapping):
        return True
    kind = node.get("type")
    if kind is not None:
        if kind not in _FLOAT_FREE_TYPES or "default_factory" in node:
            return False
        if kind in _ANY_ITEMS and _ANY_ITEMS[kind] not in node:
            return False  # list[Any]
        if kind == "dict" and "values_schema" not in node:
            return False
        if kind == "tuple" and "items_schema" not in node:
            return False
        if kind == "enum" and node.get("sub_type") == "float":
            return False
        if kind == "default" and _non_finite(node.get("default")) is not None:
            return False
        if kind == "literal" and _non_finite(list(node.get("expected", ()))) is not None:
            return False
        if kind == "model" and _extra_allowed(node):
            return False
    return all(
        _float_free(value)
        for key, value in node.items()
        if key not in ("metadata", "serialization", "cls", "default", "expected", "config")
    )


def _extra_allowed(node: Mapping[str, Any]) -> bool:
    """Whether a ``model`` schema keeps unknown fields without a schema for them."""
    config = node.get("config") or {}
    inner = node.get("schema") or {}
    return config.get("extra_fields_behavior") == "allow" and "extras_schema" not in inner


def _provider_error(name: str, where: str) -> Failed:
    error_id = _error_id()
    log_exception(logger, "tool %s: %s raised (error id %s)", name, where, error_id)
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"Tool {name!r} failed. Error id: {error_id}.",
        reason="unhandled_exception",
        errorId=error_id,
    )


def _error_id() -> str:
    return "err_" + uuid.uuid4().hex[:16]


def _issues(exc: ValidationError) -> list[dict[str, Any]]:
    """Validation issues with location, message and type, never the offending values."""
    return [
        {"loc": [str(part) for part in error["loc"]], "msg": error["msg"], "type": error["type"]}
        for error in exc.errors(include_input=False, include_url=False, include_context=False)[:50]
    ]


def _summary(exc: ValidationError) -> str:
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(root)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


_VERSION_NUMBERS = re.compile(r"\d+")


def _version_key(version: str) -> tuple[tuple[int, ...], int, tuple[tuple[int, int, str], ...]]:
    """Order versions as semver does: numbers first, then a release above its pre-releases.

    ``v2`` and ``2.0.0`` both read as numbers; ``2.0.0-rc.1`` sorts below ``2.0.0`` and its
    identifiers compare numerically when numeric, else as text (numeric ones first). Build
    metadata (``+...``) is ignored. A version with no number sorts lowest.
    """
    main, _, _build = version.partition("+")
    core, dash, prerelease = main.partition("-")
    numbers = tuple(int(n) for n in _VERSION_NUMBERS.findall(core)) or (-1,)
    identifiers = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in prerelease.split(".")
        if part
    )
    return numbers, 0 if dash else 1, identifiers


def _resolve(tool: Tool[Any, Any, Any], binding: ToolBinding) -> RegisteredTool:
    """Merge a definition with its binding; every value set in both places must agree."""
    for field_name in ("name", "capability_id", "owner", "capability_version"):
        defined = getattr(tool, field_name)
        bound = getattr(binding, field_name)
        if defined is not None and bound is not None and defined != bound:
            raise ConfigurationError(
                f"tool {tool.name!r}: {field_name} {defined!r} does not match the binding's "
                f"{bound!r}"
            )
    if binding.required_scopes is not None and set(binding.required_scopes) != set(
        tool.required_scopes
    ):
        raise ConfigurationError(
            f"tool {tool.name!r}: required_scopes {sorted(tool.required_scopes)} do not match "
            f"the binding's {sorted(binding.required_scopes)}"
        )
    if (
        tool.action_policy is not None
        and binding.action_policy is not None
        and tool.action_policy != binding.action_policy
    ):
        raise ConfigurationError(
            f"tool {tool.name!r}: action_policy does not match the binding's action_policy"
        )
    aliases = tuple(dict.fromkeys((*binding.aliases, *tool.aliases)))
    for alias in binding.aliases:
        if not isinstance(alias, str) or not NAME_PATTERN.fullmatch(alias):
            raise ConfigurationError(
                f"tool {tool.name!r}: the binding's alias {alias!r} must use 1-128 letters, "
                "digits, '_', '.' or '-'"
            )
    if tool.name in aliases:
        raise ConfigurationError(f"tool {tool.name!r}: an alias repeats the canonical name")
    identity: dict[str, str] = {
        "capability_id": binding.capability_id or tool.capability_id or tool.name,
        "owner": binding.owner or tool.owner or "unbound",
        "capability_version": binding.capability_version or tool.capability_version or "v1",
    }
    for field_name, value in identity.items():
        if not value.strip():
            raise ConfigurationError(f"tool {tool.name!r}: {field_name} must be non-empty")
    risk = binding.deployment_risk or DEFAULT_DEPLOYMENT_RISK[tool.tier]
    if not risk_allows_tier(risk, tool.tier):
        raise ConfigurationError(
            f"tool {tool.name!r}: tier {tool.tier.value!r} is incompatible with deployment "
            f"risk {risk!r}"
        )
    policy = tool.action_policy or binding.action_policy
    if policy is None and tool.enforcement == "generic":
        policy = default_action_policy(tool.tier, identity["capability_id"])
    if policy is not None:
        check_action_policy(tool.name, policy, tool.enforcement)
        target_field = policy.command_target_field
        if target_field is not None and target_field not in tool.input_model.model_fields:
            raise ConfigurationError(
                f"tool {tool.name!r}: command_target_field {target_field!r} is not a field of "
                "the input model"
            )
    elif tool.enforcement == "handler":
        raise ConfigurationError(
            f'tool {tool.name!r}: enforcement="handler" needs an action_policy'
        )
    target_resolution = _target_resolution(tool, policy)
    controls = ControlSpec.for_policy(policy, tool.risk_policy)
    annotations = derive_annotations(
        tool.tier, tool.risk_policy, tool.annotations, binding.annotations
    )
    scopes = tool.required_scopes
    return RegisteredTool(
        tool=tool,
        aliases=aliases,
        required_scopes=scopes,
        deployment_risk=risk,
        annotations=annotations,
        action_policy=policy,
        target_resolution=target_resolution,
        controls=controls,
        entry=build_entry(
            tool=tool,
            aliases=aliases,
            required_scopes=scopes,
            deployment_risk=risk,
            annotations=annotations,
            action_policy=policy,
            target_resolution=target_resolution,
            controls=controls,
            **identity,
        ),
        **identity,
    )


def _target_resolution(tool: Tool[Any, Any, Any], policy: Any) -> TargetResolution | None:
    if policy is None or tool.enforcement != "generic":
        return None
    resolution = _generic_target_resolution(tool, policy)
    if tool.auth == "public" and resolution == "tenant-collection":
        # The default target is "{target_type}:{tenant}", and an anonymous caller has no
        # tenant: every anonymous call would fail with target_unresolved. Say so now.
        raise ConfigurationError(
            f"tool {tool.name!r}: a public tool with an action policy needs a target an "
            "anonymous caller can name: set the policy's command_target_field, give the "
            "tool a resolve_action_target, or make it auth='identity' (the default target "
            "is the caller's tenant, which an anonymous call does not have)"
        )
    return resolution


def _generic_target_resolution(tool: Tool[Any, Any, Any], policy: Any) -> TargetResolution:
    if tool.resolve_action_target is not None:
        return "package-resolver"
    if policy.command_target_field is not None:
        return "command-target-field"
    return "tenant-collection"
