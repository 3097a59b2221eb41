"""Approval notifications: the event, what a notifier is, and how the host hands events on.

Every approval change (``requested``, ``granted``, ``denied``, ``expired``,
``consumed``) becomes one ``ApprovalEvent``, staged inside the transaction that writes
the change and handed to each notifier that wants it (per tenant and per kind) once that
transaction committed. A ``requested`` event also stages the approval's ``expired``
event, due at its expiry, which is sent only if the approval was still unused then.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from .._safe_log import log_exception
from ..errors import ConfigurationError
from ..ledger import ApprovalRecord, LedgerStore, LedgerTransaction
from ..ledger.approvals import ApprovalChange

__all__ = ("ApprovalEvent", "Notifications", "Notifier", "approval_link")

logger = logging.getLogger("charter")


class ApprovalEvent(BaseModel):
    """One change of one approval, as notifiers send it (the same for every notifier)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Stable per approval and kind (``evt_…``): a receiver deduplicates by it."""
    kind: ApprovalChange
    approval_id: str
    tenant_id: str
    request_id: str
    tool: str
    capability_version: str
    risk: str
    target: str | None
    arguments: dict[str, Any]
    """The exact bound arguments, each secret shown as ``{"$secret": "bound"}``."""
    requester: str
    """The requester's principal key (``<home tenant>/<subject>``)."""
    approver: str | None = None
    """Who decided (granted or denied), or whose call consumed it; None otherwise."""
    reason: str | None = None
    """The decider's reason, if given."""
    reason_code: str | None = None
    """The requester's reason code, if given."""
    created_at: datetime
    expires_at: datetime
    occurred_at: datetime
    url: str | None = None
    """The console card of this approval (``…/console/#/approvals/{id}``), if the host has
    a public URL."""

    @property
    def type(self) -> str:
        """The event type a webhook carries: ``approval.<kind>``."""
        return f"approval.{self.kind}"


@runtime_checkable
class Notifier(Protocol):
    """Protocol: sends approval events somewhere (``charter.notify.Webhook``, ``Slack``)."""

    @property
    def name(self) -> str:
        """A stable name, unique in the host, that a staged delivery is routed back by."""
        ...

    def wants(self, event: ApprovalEvent) -> bool:
        """Whether this notifier sends ``event`` (its tenants and kinds)."""
        ...

    async def send(self, event: ApprovalEvent) -> None:
        """Send one event once; raise to have it retried."""
        ...


def approval_link(base_url: str | None, approval_id: str) -> str | None:
    """The console deep link of an approval under ``base_url`` (None without one)."""
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/console/#/approvals/{quote(approval_id, safe='')}"


def event_id(approval_id: str, kind: ApprovalChange) -> str:
    """The stable id of an approval's event of one kind (the ``webhook-id``)."""
    digest = hashlib.sha256(f"{approval_id}\x00{kind}".encode("utf-8", "surrogatepass"))
    return "evt_" + digest.hexdigest()[:32]


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """One event for one notifier, staged with the change it tells of."""

    notifier: str
    event: ApprovalEvent
    due_at: datetime
    """Not before: the commit for most, the expiry for an ``expired`` event."""
    if_unused: bool = False
    """Send only if the approval is still unused (pending or granted) when due."""


class Notifications:
    """The host's notifiers, and the ``ApprovalNotices`` that hands them every change."""

    def __init__(
        self,
        notifiers: Iterable[Notifier],
        *,
        store: LedgerStore,
        console_url: str | None,
        clock: Callable[[], datetime],
        attempts: int = 8,
        backoff: timedelta = timedelta(seconds=2),
        max_backoff: timedelta = timedelta(minutes=10),
        wait: float = 5.0,
    ) -> None:
        """Bind the notifiers to the store approvals are written in.

        Raises:
            ConfigurationError: two notifiers share a name, one is not a ``Notifier``, or
                the retry settings are not positive.
        """
        self.notifiers: dict[str, Notifier] = {}
        for notifier in notifiers:
            if not isinstance(notifier, Notifier):
                raise ConfigurationError(
                    f"notifiers: {notifier!r} is not a notifier (charter.notify.Webhook, "
                    "charter.notify.Slack, or an object with name, wants() and send())"
                )
            if notifier.name in self.notifiers:
                raise ConfigurationError(
                    f"notifiers: two notifiers are named {notifier.name!r}; give each a "
                    "distinct name="
                )
            self.notifiers[notifier.name] = notifier
        if attempts < 1 or min(backoff, max_backoff) <= timedelta(0):
            raise ConfigurationError(
                "notify_attempts must be at least 1 and notify_backoff positive"
            )
        self.store = store
        self.console_url = console_url
        self.clock = clock
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.wait = wait
        self._tasks: set[asyncio.Task[None]] = set()

    # -- ApprovalNotices ----------------------------------------------------------------------

    def transaction(self) -> AbstractAsyncContextManager[LedgerTransaction]:
        """A write transaction on the host's store (the change and its deliveries)."""
        return self.store.transaction(wait=self.wait)

    async def stage(
        self,
        tx: LedgerTransaction,
        change: ApprovalChange,
        record: ApprovalRecord,
        *,
        by: str | None,
    ) -> Sequence[object]:
        """The deliveries of one change, one per notifier that wants its event."""
        event = self.event(change, record, by=by)
        staged = [
            Delivery(notifier=n.name, event=event, due_at=self.clock())
            for n in self.notifiers.values()
            if n.wants(event)
        ]
        if change == "requested":
            expired = self.event("expired", record, by=None)
            staged += [
                Delivery(notifier=n.name, event=expired, due_at=record.expires_at, if_unused=True)
                for n in self.notifiers.values()
                if n.wants(expired)
            ]
        return staged

    async def release(self, staged: Sequence[object]) -> None:
        """Start delivering committed events in this process (retried with backoff)."""
        for delivery in staged:
            if isinstance(delivery, Delivery):
                task = asyncio.get_running_loop().create_task(self._deliver(delivery))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    # -- events and delivery ------------------------------------------------------------------

    def event(
        self, change: ApprovalChange, record: ApprovalRecord, *, by: str | None
    ) -> ApprovalEvent:
        """The event telling of ``change`` to ``record`` (in its state after the change)."""
        occurred = {
            "requested": record.created_at,
            "granted": record.decided_at,
            "denied": record.decided_at,
            "expired": record.expires_at,
        }.get(change) or self.clock()
        decided = change in ("granted", "denied")
        return ApprovalEvent(
            id=event_id(record.id, change),
            kind=change,
            approval_id=record.id,
            tenant_id=record.tenant_id,
            request_id=record.request_id,
            tool=record.tool,
            capability_version=record.capability_version,
            risk=record.risk,
            target=record.target,
            arguments=record.arguments,
            requester=record.requester_id,
            approver=by,
            reason=record.decision_reason if decided else None,
            reason_code=record.reason_code,
            created_at=record.created_at,
            expires_at=record.expires_at,
            occurred_at=occurred,
            url=approval_link(self.console_url, record.id),
        )

    async def send(self, delivery: Delivery) -> bool:
        """Make one attempt at a delivery; whether there was anything to send.

        An ``expired`` event whose approval was decided or used in time is not sent.

        Raises:
            Exception: whatever the notifier raised (the attempt failed; retry it).
        """
        notifier = self.notifiers.get(delivery.notifier)
        if notifier is None:
            raise ConfigurationError(
                f"no notifier {delivery.notifier!r} is configured in this process"
            )
        if delivery.if_unused:
            current = await self.store.get_approval(delivery.event.approval_id)
            if current is None or current.status not in ("pending", "approved"):
                return False
        await notifier.send(delivery.event)
        return True

    async def _deliver(self, delivery: Delivery) -> None:
        """Deliver in this process: wait until due, then try up to ``attempts`` times."""
        wait = (delivery.due_at - self.clock()).total_seconds()
        if wait > 0:
            await asyncio.sleep(wait)
        for attempt in range(1, self.attempts + 1):
            try:
                await self.send(delivery)
                return
            except Exception:
                log_exception(
                    logger,
                    "approval notification %s to %r failed (attempt %d of %d)",
                    delivery.event.type,
                    delivery.notifier,
                    attempt,
                    self.attempts,
                )
            if attempt < self.attempts:
                step = min(self.backoff * (2 ** (attempt - 1)), self.max_backoff)
                await asyncio.sleep(step.total_seconds())

    async def aclose(self) -> None:
        """Stop deliveries still running in this process."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
