"""Resources, resource templates and prompts under the host's authority.

The same decisions as for tools, by the same ``ScopeChecks`` (``_access``): a resource or
prompt outside the caller's audience answers like an unknown one; one needing a scope the
caller lacks is not listed, and reading or getting it is ``AUTHORIZATION_DENIED`` naming
the required, granted and missing scopes, like a tool's refusal. The
handler's context is pinned to the caller's tenant (a template's ``tenant_param`` may name
another only for a delegable resource read with the admin scope). Every read and every
prompt got is audited; completions are not (they run on each keystroke).
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from .._limits import PayloadLimits
from .._limits._values import SURROGATE
from .._safe_log import log_exception
from .._wording import new_error_id
from ..audit import AuditAction, AuditEvent, AuditSink
from ..auth import Principal, resolve_tenant
from ..context import ToolContext
from ..errors import ErrorCode, ToolError
from ..outcome import Failed, failed, failed_from_error, not_found
from ..resources import (
    Access,
    ContentCatalog,
    Prompt,
    PromptResult,
    Resource,
    ResourceRead,
    complete_values,
)
from ._access import ScopeChecks, audience_visible, caller_audience
from ._arguments import check_payload
from ._ids import random_id

__all__ = ("ContentContextFactory", "HostContent", "ResourceListener")

logger = logging.getLogger("charter")

_T = TypeVar("_T")

ContentContextFactory: TypeAlias = Callable[
    [Principal | None], ToolContext | Awaitable[ToolContext]
]
"""Builds the domain context resource, prompt and completion handlers get (sync or async)."""

ResourceListener: TypeAlias = Callable[[str, str | None], Awaitable[None]]
"""Told the URI of a resource that changed and whose tenant's it is (``HostContent.updated``)."""


class HostContent:
    """Lists, reads, gets and completes resources and prompts for one caller at a time."""

    def __init__(
        self,
        catalog: ContentCatalog,
        *,
        context_factory: ContentContextFactory | None,
        audit: AuditSink,
        access: ScopeChecks,
        clock: Callable[[], datetime],
        limits: PayloadLimits,
    ) -> None:
        """Serve ``catalog``'s items; handlers get ``context_factory``'s context."""
        self.catalog = catalog
        self._context_factory = context_factory
        self._audit = audit
        self._access = access
        self._clock = clock
        self._limits = limits
        self._listeners: list[ResourceListener] = []

    # -- listing ----------------------------------------------------------------------------

    def resources(self, principal: Principal | None, audience: str | None = None) -> list[Resource]:
        """The fixed resources ``principal`` may read."""
        return [r for r in self.catalog.resources() if self._lists(r.access, principal, audience)]

    def templates(self, principal: Principal | None, audience: str | None = None) -> list[Resource]:
        """The resource templates ``principal`` may read."""
        return [r for r in self.catalog.templates() if self._lists(r.access, principal, audience)]

    def prompts(self, principal: Principal | None, audience: str | None = None) -> list[Prompt]:
        """The prompts ``principal`` may get."""
        return [p for p in self.catalog.prompts() if self._lists(p.access, principal, audience)]

    # -- reading ----------------------------------------------------------------------------

    async def read(
        self, uri: str, principal: Principal | None, *, audience: str | None = None
    ) -> ResourceRead | Failed:
        """Read one resource as ``principal``: its contents, or why not (audited)."""
        started = time.perf_counter()
        found, tenant, delegated, refusal = self._admit_resource(uri, principal, audience)
        if refusal is not None or found is None:
            refused = refusal or _unknown("resource", uri)
            await self._record("resource.read", uri, principal, tenant, delegated, refused, started)
            return refused
        resource, values = found
        result = _unusable_values(uri, values) or await self._read(
            resource, uri, values, principal, tenant, audience, delegated
        )
        await self._record("resource.read", uri, principal, tenant, delegated, result, started)
        return result

    async def _read(
        self,
        resource: Resource,
        uri: str,
        values: dict[str, str],
        principal: Principal | None,
        tenant: str | None,
        audience: str | None,
        delegated: bool,
    ) -> ResourceRead | Failed:
        try:
            params = resource.params(values)
        except ValidationError as exc:
            return _invalid(f"The URI {uri!r} does not name a valid {resource.name!r}", exc)
        ctx = await self._context(principal, tenant, audience, delegated)
        return await _guarded(
            f"resource {resource.name!r}", lambda: _read(resource, uri, params, ctx)
        )

    def check_read(
        self, uri: str, principal: Principal | None, *, audience: str | None = None
    ) -> Failed | None:
        """Why ``principal`` may not read ``uri`` (for subscriptions), or None."""
        found, _, _, refusal = self._admit_resource(uri, principal, audience)
        if refusal is not None:
            return refusal
        return _unknown("resource", uri) if found is None else _unusable_values(uri, found[1])

    def reader_tenant(
        self, uri: str, principal: Principal | None, *, audience: str | None = None
    ) -> str | None:
        """The tenant ``principal`` reads ``uri`` for (the URI's own, or the caller's)."""
        return self._admit_resource(uri, principal, audience)[1]

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | bytes | None,
        principal: Principal | None,
        *,
        audience: str | None = None,
    ) -> PromptResult | Failed:
        """Get one prompt's messages as ``principal``, or why not (audited).

        ``arguments`` as parsed JSON or its raw bytes: read as a tool's arguments are
        (``check_payload`` under the host's limits), so what a tool call refuses (a lone
        surrogate, a repeated key, a payload past a limit) is refused with the same reason.
        """
        started = time.perf_counter()
        tenant = principal.tenant_id if principal is not None else None
        found = self.catalog.prompt(name)
        refusal = (
            _unknown("prompt", name)
            if found is None
            else self._refusal("Prompt", name, found.access, principal, audience)
        )
        if found is None or refusal is not None:
            refused = refusal or _unknown("prompt", name)
            await self._record("prompt.get", name, principal, tenant, False, refused, started)
            return refused
        given = _prompt_arguments(arguments, self._limits)
        result = (
            given
            if isinstance(given, Failed)
            else await self._get(found, given, principal, tenant, audience)
        )
        await self._record("prompt.get", name, principal, tenant, False, result, started)
        return result

    async def _get(
        self,
        found: Prompt,
        arguments: dict[str, str],
        principal: Principal | None,
        tenant: str | None,
        audience: str | None,
    ) -> PromptResult | Failed:
        try:
            params = found.params(arguments)
        except ValidationError as exc:
            return _invalid(f"The arguments of prompt {found.name!r} are not valid", exc)
        ctx = await self._context(principal, tenant, audience, False)

        async def get() -> PromptResult:
            messages = await found.messages(params, ctx)
            return PromptResult(name=found.name, description=found.description, messages=messages)

        return await _guarded(f"prompt {found.name!r}", get)

    async def complete(
        self,
        ref: Literal["resource", "prompt"],
        name: str,
        argument: str,
        value: str,
        principal: Principal | None,
        *,
        audience: str | None = None,
    ) -> list[str] | Failed:
        """Suggested values of one argument of a prompt or resource template.

        ``name`` is the prompt's name or the template's URI template. An item the caller
        may not see answers like an unknown one; one without a completer for
        ``argument`` suggests nothing.
        """
        item: Resource | Prompt | None = (
            self.catalog.template(name) if ref == "resource" else self.catalog.prompt(name)
        )
        what = "Resource template" if ref == "resource" else "Prompt"
        if item is None or not self._lists(item.access, principal, audience):
            return failed(
                ErrorCode.NOT_FOUND,
                f"{what} {name!r} is not known.",
                reason="unknown_" + ref,
            )
        completer = item.complete.get(argument)
        if completer is None:
            return []
        tenant = principal.tenant_id if principal is not None else None
        ctx = await self._context(principal, tenant, audience, False)
        return await _guarded(
            f"completer of {name!r}", lambda: complete_values(completer, value, ctx)
        )

    # -- change notifications -----------------------------------------------------------------

    def watch(self, listener: ResourceListener) -> Callable[[], None]:
        """Call ``listener`` with each updated URI in this process; returns the unwatch."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def updated(self, uri: str, *, tenant_id: str | None = None) -> None:
        """Say that resource ``uri`` changed: subscribers who may still read it are told.

        ``tenant_id`` says whose resource changed when the URI alone does not (a template
        without ``tenant_param`` resolves in each reader's tenant, so acme's ``trip://T-1``
        is not globex's): then only subscribers reading it for that tenant are told.
        """
        for listener in list(self._listeners):
            try:
                await listener(uri, tenant_id)
            except Exception:
                log_exception(logger, "a resource listener failed for %r", uri)

    # -- decisions ------------------------------------------------------------------------------

    def _lists(self, access: Access, principal: Principal | None, audience: str | None) -> bool:
        if not audience_visible(access.audience, caller_audience(principal, audience)):
            return False
        return self._access.allows(access.auth, access.required_scopes, principal)

    def _refusal(
        self,
        kind: str,
        name: str,
        access: Access,
        principal: Principal | None,
        audience: str | None,
    ) -> Failed | None:
        if not audience_visible(access.audience, caller_audience(principal, audience)):
            return None  # the caller answers like an unknown name
        admitted = self._access.admit(kind, name, access.auth, access.required_scopes, principal)
        return admitted if isinstance(admitted, Failed) else None

    def _admit_resource(
        self, uri: str, principal: Principal | None, audience: str | None
    ) -> tuple[tuple[Resource, dict[str, str]] | None, str | None, bool, Failed | None]:
        """The resource ``uri`` names, the tenant it is read for, and any refusal."""
        tenant = principal.tenant_id if principal is not None else None
        found = self.catalog.find(uri) if isinstance(uri, str) and len(uri) <= 4096 else None
        if found is None:
            return None, tenant, False, None
        resource, values = found
        if not audience_visible(resource.access.audience, caller_audience(principal, audience)):
            return None, tenant, False, None
        refusal = self._refusal("Resource", uri, resource.access, principal, audience)
        if refusal is not None:
            return found, tenant, False, refusal
        if resource.tenant_param is None:
            return found, tenant, False, None
        requested = values.get(resource.tenant_param)
        if principal is None:
            # Anonymous readers of a public template act for no tenant but the one named.
            return found, requested, False, None
        decision = resolve_tenant(
            principal=principal,
            requested=requested,
            delegable=resource.delegable,
            admin_scope=self._access.admin_scope,
        )
        if decision.denied:
            return (
                found,
                tenant,
                False,
                failed(
                    ErrorCode.AUTHORIZATION_DENIED,
                    f"Resource {uri!r} belongs to another tenant.",
                    reason="tenant_forbidden",
                ),
            )
        return found, decision.tenant_id, decision.delegated, None

    async def _context(
        self, principal: Principal | None, tenant: str | None, audience: str | None, delegated: bool
    ) -> ToolContext:
        if self._context_factory is None:
            ctx = ToolContext()
        else:
            made = self._context_factory(principal)
            ctx = await made if inspect.isawaitable(made) else made
        ctx.tenant_id = tenant or ""
        ctx.principal = principal
        ctx.actor = principal.actor if principal is not None else None
        ctx.audience = caller_audience(principal, audience)
        ctx.delegated = delegated
        ctx.invocation_id = random_id()
        return ctx

    async def _record(
        self,
        action: AuditAction,
        name: str,
        principal: Principal | None,
        tenant: str | None,
        delegated: bool,
        result: BaseModel | Failed,
        started: float,
    ) -> None:
        event = AuditEvent(
            id="aud_" + random_id(),
            time=self._clock(),
            action=action,
            subject=principal.subject if principal is not None else None,
            principal_tenant=principal.tenant_id if principal is not None else None,
            tenant=tenant,
            delegated=delegated,
            tool=name[:512],
            outcome="failed" if isinstance(result, Failed) else "completed",
            code=result.code.value if isinstance(result, Failed) else None,
            reason=result.reason if isinstance(result, Failed) else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        try:
            await self._audit.record(event)
        except Exception:
            log_exception(logger, "could not record the audit event of %r", event.tool)


async def _read(
    resource: Resource, uri: str, params: BaseModel | None, ctx: ToolContext
) -> ResourceRead:
    return ResourceRead(uri=uri, contents=await resource.read(uri, params, ctx))


async def _guarded(what: str, run: Callable[[], Awaitable[_T]]) -> _T | Failed:
    """Run a handler: its ``ToolError`` becomes ``Failed``; any other error, a generic one.

    What the handler produced must be sendable: text holding an unpaired UTF-16 surrogate
    has no UTF-8 form, so no transport could send it, and it is the handler's failure like
    an exception (a ``ToolError``'s text keeps its words, ``failed_from_error``).
    """
    try:
        result = await run()
    except ToolError as exc:
        return failed_from_error(exc)
    except Exception:
        return _handler_failed(what, "failed", raised=True)
    if _holds_surrogate(result):
        return _handler_failed(what, "returned unsendable text (an unpaired surrogate)")
    return result


def _handler_failed(what: str, how: str, *, raised: bool = False) -> Failed:
    """The ``PROVIDER_ERROR`` of a handler that failed, logged under a new error id.

    ``how`` (a constant) says how; ``raised``: with the traceback of the exception being
    handled.
    """
    error_id = new_error_id()
    message = f"the handler of %s {how} (error id %s)"
    if raised:
        log_exception(logger, message, what, error_id)
    else:
        logger.error(message, what, error_id)
    return failed(
        ErrorCode.PROVIDER_ERROR,
        f"The {what} could not be produced. Error id: {error_id}.",
        reason="handler_failed",
        errorId=error_id,
    )


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""A C0 or C1 control character (NUL, line breaks, ESC, DEL...)."""


def _holds_surrogate(value: object) -> bool:
    """Whether a string in ``value`` (models, dicts, lists of them) holds a surrogate."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, BaseModel):
            stack.extend(node.__dict__.values())
    return False


def _prompt_arguments(
    arguments: Mapping[str, str] | bytes | None, limits: PayloadLimits
) -> dict[str, str] | Failed:
    """A prompt's arguments, checked as a tool's are: a JSON object of strings.

    An empty body or None is no arguments.
    """
    if arguments is None or (isinstance(arguments, bytes) and not arguments.strip()):
        return {}
    checked = check_payload(arguments, limits)
    if isinstance(checked, Failed):
        return checked
    if all(isinstance(value, str) for value in checked.values()):
        return dict(checked)
    return failed(
        ErrorCode.INVALID_INPUT,
        "A prompt's arguments are a JSON object whose values are strings.",
        reason="invalid_arguments",
        issues=[],
    )


def _unusable_values(uri: str, values: Mapping[str, str]) -> Failed | None:
    """``INVALID_INPUT`` for template variables no handler should be handed.

    A decoded variable holding an unpaired surrogate (``lone_surrogate``) or a control
    character, NUL included (``invalid_arguments``). Anything else (``/``, ``..``, ``%``)
    is the handler's to check.
    """
    if _holds_surrogate(dict(values)):
        return failed(
            ErrorCode.INVALID_INPUT,
            f"The URI {uri!r} was rejected: a variable holds an unpaired UTF-16 surrogate.",
            reason="lone_surrogate",
            issues=[],
        )
    bad = sorted(name for name, value in values.items() if _CONTROL.search(value))
    if not bad:
        return None
    return failed(
        ErrorCode.INVALID_INPUT,
        f"The URI {uri!r} does not name a valid resource: {', '.join(bad)} holds a control "
        "character.",
        reason="invalid_arguments",
        issues=[{"loc": [name], "msg": "control characters are not allowed"} for name in bad],
    )


def _invalid(message: str, exc: ValidationError) -> Failed:
    """``INVALID_INPUT``: ``message``, then each field and what is wrong (never its value)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    issues = [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]} for e in errors
    ]
    said = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors
    )
    return failed(
        ErrorCode.INVALID_INPUT, f"{message}: {said}.", reason="invalid_arguments", issues=issues
    )


_LISTINGS = {
    "resource": "List the resources and resource templates you may read.",
    "prompt": "List the prompts you may get.",
}


def _unknown(kind: Literal["resource", "prompt"], name: str) -> Failed:
    """``NOT_FOUND`` (``unknown_resource``, ``unknown_prompt``): no such ``kind`` is known."""
    return not_found(kind, name, "is known", next_step=_LISTINGS[kind], reason=f"unknown_{kind}")
