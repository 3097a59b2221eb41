"""Where a tenant's requests stand, as a caller may read them: audit events and budgets.

The caller's own tenant by default; only the admin scope may name another
(``readable_tenant``, shared with ``Effects.visible`` and ``Effects.read``). Approvers and
admins see all of the tenant; other callers what is theirs.
"""

from __future__ import annotations

from ..audit import AuditSink, AuditTrail
from ..auth import Principal, resolve_tenant
from ..errors import ErrorCode, StoreBusy, StoreUnavailable
from ..ledger import Approvals
from ..ledger.budgets import BudgetReport
from ..outcome import Failed, failed
from ._budgets import Budgets

__all__ = ("audit_events", "budget_usage", "readable_tenant", "unreadable")


def readable_tenant(
    principal: Principal, tenant: str | None, *, admin_scope: str, what: str
) -> str | Failed:
    """The tenant whose ``what`` (say "audit events") the caller reads, or why not."""
    decision = resolve_tenant(
        principal=principal, requested=tenant, delegable=True, admin_scope=admin_scope
    )
    if decision.denied:
        return failed(
            ErrorCode.AUTHORIZATION_DENIED,
            f"Only the admin scope may read another tenant's {what}.",
            reason="tenant_forbidden",
        )
    return decision.tenant_id


def unreadable(what: str) -> Failed:
    """``PROVIDER_UNAVAILABLE``: the ``what`` could not be read from a busy or unreachable store."""
    return failed(
        ErrorCode.PROVIDER_UNAVAILABLE,
        f"The {what} could not be read: the database is busy or unreachable.",
        reason="store_unavailable",
    )


async def audit_events(
    audit: AuditSink,
    approvals: Approvals,
    principal: Principal,
    *,
    tenant: str | None,
    limit: int,
    admin_scope: str,
) -> AuditTrail | Failed:
    """Recent audit events the caller may read, newest first (``Host.audit_events``)."""
    where = readable_tenant(principal, tenant, admin_scope=admin_scope, what="audit events")
    if isinstance(where, Failed):
        return where
    events = await audit.events(tenant=where, limit=limit)
    if not approvals.oversees(principal):
        own = (principal.subject, principal.tenant_id)
        events = [e for e in events if (e.subject, e.principal_tenant) == own]
    return AuditTrail(tenant=where, events=events)


async def budget_usage(
    budgets: Budgets,
    approvals: Approvals,
    principal: Principal,
    *,
    tenant: str | None,
    admin_scope: str,
) -> BudgetReport | Failed:
    """The budgets being spent by calls for one tenant (``Host.budget_usage``)."""
    where = readable_tenant(principal, tenant, admin_scope=admin_scope, what="budgets")
    if isinstance(where, Failed):
        return where
    try:
        now, buckets = await budgets.usage(where)
    except (StoreUnavailable, StoreBusy):
        return unreadable("budgets")
    if not approvals.oversees(principal):
        own = (principal.key, "tenant:" + where)
        buckets = [b for b in buckets if b.bucket.holder in own]
    return BudgetReport(tenant=where, at=now, buckets=buckets)
