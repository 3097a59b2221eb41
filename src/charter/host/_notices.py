"""Approval notifications: the event, what a notifier is, and how the host delivers it.

Every approval change (``requested``, ``granted``, ``denied``, ``expired``,
``consumed``) becomes one ``ApprovalEvent``; each notifier that wants it (per tenant and
per kind) gets it through a durable ``charter.notify`` effect written in the transaction
that writes the change. A ``requested`` change also writes the approval's ``expired``
deliveries, due at its expiry, which send only if the approval was still unused then.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from ..auth import holds_control_character
from ..effects import EffectRecord, effect
from ..errors import ConfigurationError
from ..ledger import ApprovalRecord, LedgerStore, LedgerTransaction
from ..ledger.approvals import ApprovalChange
from ._effects import Effects

__all__ = (
    "NOTIFY_EFFECT",
    "ApprovalEvent",
    "Delivery",
    "Notifications",
    "Notifier",
    "approval_link",
    "event_id",
    "notifier_name_problem",
)

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


_RECORD_FIELDS = {
    *("tenant_id", "request_id", "tool", "capability_version", "risk", "target"),
    *("arguments", "reason_code", "created_at", "expires_at"),
}
"""The fields an ``ApprovalEvent`` carries as the ``ApprovalRecord`` has them."""


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


NOTIFY_EFFECT = "charter.notify"
"""The name of the effect every notification is delivered as."""


class Delivery(BaseModel):
    """One event for one notifier: the payload of a ``charter.notify`` effect."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    notifier: str
    """The ``name`` of the notifier to send it with."""
    event: ApprovalEvent
    if_unused: bool = False
    """Send only if the approval is still unused (pending or granted) when it is due: the
    ``expired`` event, due at the expiry."""


def notifier_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a notifier; None when it can.

    The name keys each delivery (a string in the outbox's payload) and shows in its rows
    and logs: any other value failed every call an approval gates, at its first notice.
    """
    if not isinstance(name, str) or not name or holds_control_character(name):
        return f"name must be a non-empty string without control characters, got {name!r}"
    return None


class Notifications:
    """The host's notifiers, and the ``ApprovalNotices`` that writes their deliveries.

    Each delivery is a ``charter.notify`` effect written in the transaction of the change
    it tells of, so it commits with it or not at all; the serving process then attempts
    it at once, and ``charter worker`` (``host.effects.work``) retries it with backoff
    until it is delivered or parked dead.
    """

    def __init__(
        self,
        notifiers: Iterable[Notifier],
        *,
        effects: Effects,
        store: LedgerStore,
        console_url: str | None,
        clock: Callable[[], datetime],
        attempts: int = 8,
        backoff: timedelta = timedelta(seconds=2),
        wait: float = 5.0,
    ) -> None:
        """Bind the notifiers to the host's outbox; register their effect when there are any.

        Raises:
            ConfigurationError: two notifiers share a name, one is not a ``Notifier`` or
                has a name ``notifier_name_problem`` refuses, the
                retry settings are not positive, or the registry already delivers another
                host's notifications.
        """
        self.notifiers: dict[str, Notifier] = {}
        for notifier in notifiers:
            if not isinstance(notifier, Notifier):
                raise ConfigurationError(
                    f"notifiers: {notifier!r} is not a notifier (charter.notify.Webhook, "
                    "charter.notify.Slack, or an object with name, wants() and send())"
                )
            problem = notifier_name_problem(notifier.name)
            if problem is not None:
                raise ConfigurationError(f"notifiers: {notifier!r}: {problem}")
            if notifier.name in self.notifiers:
                raise ConfigurationError(
                    f"notifiers: two notifiers are named {notifier.name!r}; give each a "
                    "distinct name="
                )
            self.notifiers[notifier.name] = notifier
        self.effects = effects
        self.store = store
        self.console_url = console_url
        self.clock = clock
        self.wait = wait
        self._tasks: set[asyncio.Task[None]] = set()
        if self.notifiers:
            self._register(attempts, backoff)

    def _register(self, attempts: int, backoff: timedelta) -> None:
        try:
            existing = self.effects.registry.effect(NOTIFY_EFFECT)
        except ConfigurationError:
            existing = None
        if existing is not None:
            raise ConfigurationError(
                f"this registry already delivers another host's notifications "
                f"({NOTIFY_EFFECT!r}); give each host with notifiers its own registry"
            )

        async def deliver(payload: Delivery, key: str) -> None:
            await self.send(payload)

        self.effects.registry.register_effect(
            effect(NOTIFY_EFFECT, max_attempts=attempts, backoff=backoff)(deliver)
        )

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
        """Write the deliveries of one change in ``tx``: one effect per notifier that wants it.

        A ``requested`` change also writes its ``expired`` deliveries, due at the expiry.
        Returns the rows to attempt once ``tx`` committed.
        """
        event = self.event(change, record, by=by)
        now = [self._row(Delivery(notifier=n, event=event), record) for n in self._wanting(event)]
        later: list[EffectRecord] = []
        if change == "requested":
            expired = self.event("expired", record, by=None)
            later = [
                self._row(Delivery(notifier=n, event=expired, if_unused=True), record).model_copy(
                    # Due at the expiry, leased to nobody: a worker attempts it then.
                    update={
                        "attempts": 0,
                        "next_attempt_at": record.expires_at,
                        "lease_until": None,
                        "leased_by": None,
                    }
                )
                for n in self._wanting(expired)
            ]
        written: list[EffectRecord] = []
        for row in now + later:
            # An existing key (the same change told twice by racing writers) is a no-op.
            if await tx.insert_effect(row) and row.leased_by is not None:
                written.append(row)
        return written

    async def release(self, staged: Sequence[object]) -> None:
        """Attempt the committed deliveries now, in the background (the fast path).

        The caller does not wait for a receiver; a process that dies first leaves the rows
        to a worker once their lease runs out.
        """
        rows = [row for row in staged if isinstance(row, EffectRecord)]
        if not rows:
            return
        task = asyncio.get_running_loop().create_task(self.effects.deliver(rows))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _wanting(self, event: ApprovalEvent) -> list[str]:
        return [name for name, n in self.notifiers.items() if n.wants(event)]

    def _row(self, delivery: Delivery, record: ApprovalRecord) -> EffectRecord:
        row = self.effects.record(
            NOTIFY_EFFECT,
            delivery,
            tenant_id=record.tenant_id,
            key=(delivery.notifier, delivery.event.id),
        )
        # Listed with the request that asked for the approval (charter effects list
        # --request-id, the console's view of a call).
        return row.model_copy(
            update={
                "request_id": record.request_id,
                "principal_id": record.requester_id,
                "tool": record.tool,
            }
        )

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
            **record.model_dump(include=_RECORD_FIELDS),
            id=event_id(record.id, change),
            kind=change,
            approval_id=record.id,
            requester=record.requester_id,
            approver=by,
            reason=record.decision_reason if decided else None,
            occurred_at=occurred,
            url=approval_link(self.console_url, record.id),
        )

    async def send(self, delivery: Delivery) -> bool:
        """Make one attempt at a delivery; whether there was anything to send.

        An ``expired`` event whose approval was decided or used in time is not sent.

        Raises:
            ConfigurationError: no notifier of that name is configured in this process.
            Exception: whatever the notifier raised (the attempt failed; it is retried).
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

    async def drain(self) -> None:
        """Wait for the fast-path attempts this process started."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the fast-path attempts still running (their rows stay for a worker)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
