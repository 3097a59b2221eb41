"""What the pipeline learned about one call, for its audit event."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from .._shortcuts import built
from ..audit import AuditEvent
from ..auth import Principal
from ..manifest import RegisteredTool
from ..outcome import Failed, ToolOutcome
from ._ids import random_id

__all__ = ("Trace",)

_SET = frozenset(
    {
        *("id", "time", "action", "subject", "principal_tenant", "tenant", "delegated"),
        *("admin_used", "tool", "capability_id", "capability_version", "request_id"),
        *("approval_id", "outcome", "code", "reason", "replayed", "duration_ms"),
    }
)
"""The fields of a call's audit event the host sets (the rest keep their defaults)."""
_SET_WITH_MODEL_NAME = _SET | {"model_name"}


class Trace:
    """What the pipeline learned about a call, for its audit event."""

    def __init__(
        self, *, tool: str, principal: Principal | None, model_name: str | None = None
    ) -> None:
        self.tool = str(tool)[:200]
        self.model_name = model_name
        self.principal = principal
        self.registered: RegisteredTool | None = None
        self.tenant: str | None = principal.tenant_id if principal is not None else None
        self.delegated = False
        self.admin_used = False
        self.request_id: str | None = None
        self.approval_id: str | None = None
        self.audited = False
        self.seconds = 0.0
        self._started = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return time.perf_counter() - self._started

    def event(self, outcome: ToolOutcome, seconds: float, now: datetime) -> AuditEvent:
        """The call's audit event, ended with ``outcome`` after ``seconds``."""
        registered = self.registered
        principal = self.principal
        # A copy of the template (every field, in the model's order) with this call's
        # values set costs a third of a dict display of all of them.
        fields = _CALL_EVENT.copy()
        fields["id"] = "aud_" + random_id()
        fields["time"] = now
        if principal is not None:
            fields["subject"] = principal.subject
            fields["principal_tenant"] = principal.tenant_id
        fields["tenant"] = self.tenant
        fields["delegated"] = self.delegated
        fields["admin_used"] = self.admin_used
        fields["tool"] = self.tool
        if registered is not None:
            fields["capability_id"] = registered.capability_id
            fields["capability_version"] = registered.capability_version
        fields["request_id"] = self.request_id
        fields["approval_id"] = self.approval_id
        fields["outcome"] = outcome.kind
        if isinstance(outcome, Failed):
            fields["code"] = outcome.code.value
            fields["reason"] = outcome.reason
        fields["replayed"] = bool(getattr(outcome, "replayed", False))
        # Milliseconds to the microsecond (half up), without round()'s decimal conversion.
        fields["duration_ms"] = int(seconds * 1_000_000 + 0.5) / 1000
        model_name = self.model_name
        if model_name is None:
            given = set(_SET)
        else:
            fields["model_name"] = model_name
            given = set(_SET_WITH_MODEL_NAME)
        # Every value is the host's own, of the right type, in the model's field order:
        # no validation needed (see _shortcuts).
        return built(AuditEvent, fields, given)


_CALL_EVENT: dict[str, Any] = {
    "id": "",
    "time": None,
    "action": "call",
    "subject": None,
    "principal_tenant": None,
    "tenant": None,
    "delegated": False,
    "admin_used": False,
    "tool": "",
    "capability_id": None,
    "capability_version": None,
    "request_id": None,
    "approval_id": None,
    "outcome": "completed",
    "code": None,
    "reason": None,
    "replayed": False,
    "duration_ms": 0.0,
    "note": None,
    "count": 1,
    "model_name": None,
}
"""Every field of a call's audit event in the model's order: ``Trace.event`` fills a copy."""
