"""Which tenant a call acts for: the caller's, or a delegated one, never re-pinned."""

from __future__ import annotations

from typing import Any

from ..auth import Principal, js_trim, resolve_tenant
from ..errors import ErrorCode
from ..manifest import RegisteredTool
from ..outcome import Failed, failed
from ..policy import InvocationControls
from ._trace import Trace

__all__ = ("call_tenant", "tenant_forbidden")


def call_tenant(
    registered: RegisteredTool,
    principal: Principal | None,
    arguments: dict[str, Any],
    controls: InvocationControls,
    trace: Trace,
    *,
    admin_scope: str,
) -> str | Failed:
    """The tenant the call acts for, pinned into ``arguments``; or why it may not.

    The principal's own tenant, or, for a delegable tool called with the admin scope,
    the tenant named in the tool's ``tenant_field`` or ``onBehalfOf`` (both, if given,
    must agree). Records the tenant and the delegation on ``trace``.
    """
    tool = registered.tool
    if principal is None:
        # An anonymous caller has no tenant to act for: naming one is refused, never
        # passed to the handler untouched.
        named = arguments.get(tool.tenant_field) if tool.tenant_field is not None else None
        if controls.on_behalf_of is not None or named is not None:
            return tenant_forbidden(registered)
        return ""
    field_name = tool.tenant_field
    requested: object = controls.on_behalf_of
    if field_name is not None and arguments.get(field_name) is not None:
        from_input = arguments[field_name]
        # Both name the tenant; they must agree after trimming ('  B ' is 'B').
        if requested is not None and _trimmed(from_input) != _trimmed(requested):
            return tenant_forbidden(registered)
        requested = from_input
    if requested is None:
        # Nothing named (almost every call): the caller's own tenant, as resolve_tenant
        # decides for a missing id, without building its decision.
        own = principal.tenant_id
        if field_name is not None:
            arguments[field_name] = own
        trace.tenant = own
        trace.delegated = False
        return own
    decision = resolve_tenant(
        principal=principal,
        requested=requested,
        delegable=tool.delegable,
        admin_scope=admin_scope,
    )
    if decision.denied:
        return tenant_forbidden(registered)
    if field_name is not None:
        arguments[field_name] = decision.tenant_id
    trace.tenant = decision.tenant_id
    trace.delegated = decision.delegated
    trace.admin_used = trace.admin_used or decision.delegated
    return decision.tenant_id


def tenant_forbidden(registered: RegisteredTool) -> Failed:
    return failed(
        ErrorCode.AUTHORIZATION_DENIED,
        f"Tool {registered.name!r} may only act on the caller's own tenant.",
        reason="tenant_forbidden",
    )


def _trimmed(value: object) -> object:
    return js_trim(value) if isinstance(value, str) else value
