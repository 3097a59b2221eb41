"""Audit events: one per invocation, with who acted, for which tenant, and how it ended."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict

__all__ = (
    "AuditAction",
    "AuditEvent",
    "AuditLosses",
    "AuditSink",
    "AuditTrail",
    "AuditWatch",
    "MemoryAuditSink",
)

AuditAction: TypeAlias = Literal[
    "call",
    "approval.grant",
    "approval.deny",
    "approval.revoke",
    "effect.delivered",
    "effect.retried",
    "effect.dead",
    "effect.retry",
    "effect.discard",
    "resource.read",
    "prompt.get",
]
"""What an audit event records: a tool call, a decision on an approval (made or refused),
an attempt at an effect or a person's retry or discard of one (``tool`` is the effect's
name, ``note`` its key), a resource read
(``tool`` is the URI) or a prompt got (``tool`` is its name)."""


class AuditEvent(BaseModel):
    """What happened in one invocation or one decision; stored, listed and exported as is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    time: datetime
    action: AuditAction = "call"
    """A tool call, or a decision on an approval (``outcome`` says whether it was made)."""
    subject: str | None
    """Who called or decided (None for anonymous calls to public tools)."""
    principal_tenant: str | None
    """The caller's own tenant."""
    tenant: str | None
    """The tenant the call acted on (differs from ``principal_tenant`` when delegated)."""
    delegated: bool = False
    admin_used: bool = False
    """True when the admin scope satisfied a check the caller's own scopes did not."""
    tool: str
    capability_id: str | None = None
    capability_version: str | None = None
    request_id: str | None = None
    approval_id: str | None = None
    outcome: Literal["completed", "denied", "failed", "interaction-required", "deferred"]
    code: str | None = None
    reason: str | None = None
    replayed: bool = False
    duration_ms: float = 0.0
    note: str | None = None
    """For a decision: the reason the decider gave."""
    count: int = 1
    """How many calls this event stands for (anonymous refusals are aggregated)."""
    model_name: str | None = None
    """The name a model called the tool by (harness and bridges), beside the canonical ``tool``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditTrail:
    """The audit events of one tenant that a caller may read, newest first."""

    tenant: str
    events: list[AuditEvent]


class AuditSink(Protocol):
    """Protocol: receives one audit event per invocation."""

    async def record(self, event: AuditEvent) -> None:
        """Store ``event``."""
        ...

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Return recent events, newest first, for one tenant or all."""
        ...


class MemoryAuditSink:
    """An in-memory audit sink for tests and examples; keeps the newest ``capacity`` events."""

    def __init__(self, capacity: int = 10_000) -> None:
        """Create an empty sink holding at most ``capacity`` events."""
        self._events: deque[AuditEvent] = deque(maxlen=capacity)
        self._lock = asyncio.Lock()

    async def record(self, event: AuditEvent) -> None:
        """Store ``event``."""
        self._events.append(event)

    async def prune_audit(
        self, before: datetime, *, anonymous_only: bool = False, batch_size: int = 500
    ) -> int:
        """Delete events older than ``before`` (only anonymous ones, if asked)."""
        kept = [
            e
            for e in self._events
            if not (e.time < before and (not anonymous_only or e.subject is None))
        ]
        deleted = len(self._events) - len(kept)
        self._events.clear()
        self._events.extend(kept)
        return deleted

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Return recent events, newest first, for one tenant or all."""
        selected = [
            e
            for e in reversed(self._events)
            if tenant is None or tenant in (e.tenant, e.principal_tenant)
        ]
        return selected[:limit]


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditLosses:
    """The audit events a host could not record since it started (``Host.audit_losses``)."""

    lost: int
    """How many events the sink refused (each was logged at ERROR, with the tool)."""
    last_lost_at: datetime | None
    """When the latest one was lost."""
    failing: bool
    """The latest write failed and no later one succeeded: ``/readyz`` answers 503."""


class AuditWatch:
    """The audit sink as the host writes to it: every lost event counted, never only logged.

    A write that fails still raises (the caller logs it with the call's details); the
    watch remembers it, so a health check fails while audit events are being lost
    (docs/host.md, "Audit events that cannot be recorded").
    """

    def __init__(
        self, sink: AuditSink, *, clock: Callable[[], datetime], window: timedelta
    ) -> None:
        """Watch ``sink``; a loss keeps ``failing`` true for at most ``window`` after it."""
        self.sink = sink
        self._clock = clock
        self._window = window
        self._lost = 0
        self._last_lost_at: datetime | None = None
        self._last_failed = False

    async def record(self, event: AuditEvent) -> None:
        """Store ``event`` in the sink; count it as lost when the sink raises (and re-raise)."""
        try:
            await self.sink.record(event)
        except Exception:
            self._lost += 1
            self._last_lost_at = self._clock()
            self._last_failed = True
            raise
        self._last_failed = False

    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Return recent events from the sink, newest first."""
        return await self.sink.events(tenant=tenant, limit=limit)

    def losses(self) -> AuditLosses:
        """What was lost; ``failing`` while the latest write failed, within the window.

        The window ends the alarm of a replica that gets no more calls (a load balancer
        stopped sending any once it was not ready); the count stays.
        """
        recent = (
            self._last_lost_at is not None and self._clock() - self._last_lost_at < self._window
        )
        return AuditLosses(
            lost=self._lost,
            last_lost_at=self._last_lost_at,
            failing=self._last_failed and recent,
        )
