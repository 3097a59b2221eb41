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
        failure = outcome if isinstance(outcome, Failed) else None
        fields: dict[str, Any] = {
            "id": "aud_" + random_id(),
            "time": now,
            "action": "call",
            "subject": principal.subject if principal is not None else None,
            "principal_tenant": principal.tenant_id if principal is not None else None,
            "tenant": self.tenant,
            "delegated": self.delegated,
            "admin_used": self.admin_used,
            "tool": self.tool,
            "capability_id": registered.capability_id if registered is not None else None,
            "capability_version": (
                registered.capability_version if registered is not None else None
            ),
            "request_id": self.request_id,
            "approval_id": self.approval_id,
            "outcome": outcome.kind,
            "code": failure.code.value if failure is not None else None,
            "reason": failure.reason if failure is not None else None,
            "replayed": bool(getattr(outcome, "replayed", False)),
            "duration_ms": round(seconds * 1000, 3),
            "note": None,
            "count": 1,
            "model_name": self.model_name,
        }
        given = set(_SET_WITH_MODEL_NAME if self.model_name is not None else _SET)
        # Every value is the host's own, of the right type, in the model's field order:
        # no validation needed (see _shortcuts).
        return built(AuditEvent, fields, given)
