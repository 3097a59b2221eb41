"""Tenancy: which tenant a call acts on, and when an admin may act for another one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._principal import Principal
from ._trim import js_trim

__all__ = ("TenantDecision", "resolve_tenant")


def _requested_id(requested: object) -> str | None:
    """Return the trimmed requested id, or None when it is missing, blank or not a str."""
    if not isinstance(requested, str):
        return None
    trimmed = js_trim(str.__str__(requested))
    return trimmed or None


@dataclass(frozen=True, kw_only=True, slots=True)
class TenantDecision:
    """Which tenant a call acts on, and whether that is allowed."""

    tenant_id: str
    """The effective tenant. When ``denied``, the principal's own tenant, never the
    requested one."""

    delegated: bool = False
    """True when an admin acts for another tenant through a delegable tool; audit it."""

    denied: bool = False
    """True when the caller asked for another tenant and may not act for it."""

    reason: Literal["tenant_forbidden"] | None = None
    """``tenant_forbidden`` when denied."""


def resolve_tenant(
    *, principal: Principal, requested: object, delegable: bool, admin_scope: str | None = "admin"
) -> TenantDecision:
    """Decide the tenant a call acts on; a foreign tenant is delegated or denied, never re-pinned.

    A requested id counts only if it is a ``str``; it is trimmed with ``js_trim``. A
    missing, blank or non-string id, or the principal's own tenant, gives the principal's
    tenant. Any other id is honoured only when the tool is delegable and the principal
    holds exactly the admin scope; otherwise the call is denied with ``tenant_forbidden``.

    Args:
        principal: The authenticated caller.
        requested: The tenant named by the call (input field or controls), if any.
        delegable: Whether the tool allows delegation; only ``True`` enables it.
        admin_scope: The admin scope; None disables delegation.

    Returns:
        The decision.
    """
    own = principal.tenant_id
    wanted = _requested_id(requested)
    if wanted is None or wanted == own:
        return TenantDecision(tenant_id=own)
    if delegable is True and admin_scope is not None and admin_scope in principal.scopes:
        return TenantDecision(tenant_id=wanted, delegated=True)
    return TenantDecision(tenant_id=own, denied=True, reason="tenant_forbidden")
