"""Settling a deferred call once, with a checked outcome (``Host.settle``)."""

from __future__ import annotations

from datetime import datetime

from ..auth import split_principal_key
from ..errors import ErrorCode
from ..ledger import DeferredRecord, LedgerStore
from ..outcome import Completed, Denied, Failed, ToolOutcome, failed, outcome_adapter
from ..registry import Registry, finish_output
from ._calls import Settlement

__all__ = ("settle",)


async def settle(
    store: LedgerStore,
    registry: Registry,
    invocation_id: str,
    outcome: ToolOutcome,
    now: datetime,
    *,
    tenant: str | None = None,
) -> Settlement:
    """Store ``outcome`` as the deferred call's, once, if it is valid (``Host.settle``)."""
    record = await store.get_deferred(invocation_id)
    # Another tenant's deferred call answers exactly like a missing one (no oracle).
    if record is None or not _settles(tenant, record):
        return _refused(
            ErrorCode.NOT_FOUND,
            f"No deferred call {invocation_id[:200]!r} to settle.",
            "deferred_not_found",
        )
    if isinstance(outcome, Completed):
        registered = registry.get(record.tool)
        checked = finish_output(registered, outcome) if registered is not None else outcome
        if not isinstance(checked, Completed):
            return Settlement(settled=False, refused=_as_failed(checked))
        outcome = checked
    elif not isinstance(outcome, Denied | Failed):
        return _refused(
            ErrorCode.INVALID_INPUT,
            "A deferred call settles with a completed, denied or failed outcome.",
            "invalid_settlement",
        )
    stored = await store.settle_deferred(
        invocation_id, outcome_adapter.dump_json(outcome).decode(), now
    )
    if stored:
        return Settlement(settled=True, stored=outcome)
    return _refused(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        f"The deferred call {invocation_id[:200]!r} was already settled.",
        "already_settled",
    )


def _settles(tenant: str | None, record: DeferredRecord) -> bool:
    """Whether ``tenant`` may settle the record: the tenant the call acted for, or its caller's.

    The caller's home tenant counts too, as for an approval: an admin's delegated call acts
    for another tenant, and the admin's own side settles it. None is a caller of no tenant
    (the application itself, say the external system's webhook), which may settle any.
    """
    if tenant is None:
        return True
    home, _ = split_principal_key(record.principal_id)
    return tenant in (record.tenant_id, home)


def _refused(code: ErrorCode, message: str, reason: str) -> Settlement:
    return Settlement(settled=False, refused=failed(code, message, reason=reason))


def _as_failed(outcome: ToolOutcome) -> Failed:
    if isinstance(outcome, Failed):
        return outcome
    return failed(ErrorCode.INVALID_OUTPUT, "The settled outcome is not valid.")
