"""An in-memory ``LedgerStore`` for tests, examples and single-process demos (not durable)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from ..audit import AuditEvent, MemoryAuditSink
from ..effects import EffectRecord, EffectStatus, changes
from ..errors import StoreBusy, ToolError
from ..outcome import ApprovalStatus
from ._scope import Scope
from .approvals import ApprovalCursor, ApprovalDecision, ApprovalRecord, ListedStatus
from .records import ClaimRecord, DeferredRecord, LedgerEntry

__all__ = ("MemoryStore",)

_Key = tuple[str, str, str]


class _ApprovalWrites:
    """The ``ApprovalWrites`` of the store and of its transactions, over dictionaries.

    Writes go to ``_approvals``; reads see it first, then ``_approvals_below`` (under a
    transaction, the store's committed approvals; on the store itself, nothing).
    """

    _approvals: dict[str, ApprovalRecord]
    _approvals_below: Mapping[str, ApprovalRecord]

    def _approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._approvals.get(approval_id) or self._approvals_below.get(approval_id)

    def _approval_for(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """The approval made for one request (one written here before one below)."""
        key = (tenant_id, requester_id, request_id)
        for record in (*self._approvals.values(), *self._approvals_below.values()):
            if (record.tenant_id, record.requester_id, record.request_id) == key:
                return record
        return None

    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert a pending approval, or return the one already made for its request."""
        existing = self._approval_for(record.tenant_id, record.requester_id, record.request_id)
        if existing is not None:
            return existing
        self._approvals[record.id] = record
        return record

    async def decide_approval(
        self,
        approval_id: str,
        *,
        expected: tuple[ApprovalStatus, ...],
        status: ApprovalStatus,
        decided_by: str,
        reason: str | None,
        at: datetime,
        history: tuple[ApprovalDecision, ...],
    ) -> bool:
        """Change an approval's status if it is still in ``expected``."""
        record = self._approval(approval_id)
        if record is None or record.status not in expected:
            return False
        self._approvals[approval_id] = record.with_decision(
            status, decided_by=decided_by, at=at, reason=reason, history=history
        )
        return True


class MemoryStore(_ApprovalWrites, MemoryAuditSink):
    """Keeps the ledger in dictionaries; transactions run one at a time and roll back whole."""

    def __init__(self) -> None:
        """Create an empty store."""
        super().__init__()
        self.entries: dict[_Key, LedgerEntry] = {}
        self.approvals: dict[str, ApprovalRecord] = {}
        # The store writes its approvals in place; nothing lies below them.
        self._approvals = self.approvals
        self._approvals_below: Mapping[str, ApprovalRecord] = {}
        self.claims: dict[_Key, ClaimRecord] = {}
        self.deferred: dict[str, DeferredRecord] = {}
        self.effects: dict[str, EffectRecord] = {}
        self._write = asyncio.Lock()

    def transaction(self, *, wait: float) -> AbstractAsyncContextManager[_MemoryTransaction]:
        """Serialise writers; everything written in the block is applied only on success."""
        return _Scope(self, wait)

    async def get_entry(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> LedgerEntry | None:
        """Read a committed entry."""
        return self.entries.get((tenant_id, principal_id, request_id))

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """Read an approval by id."""
        return self.approvals.get(approval_id)

    async def find_approval(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """Read the approval made for one request."""
        return self._approval_for(tenant_id, requester_id, request_id)

    async def list_approvals(
        self,
        tenant_id: str,
        status: ListedStatus | None,
        limit: int,
        *,
        requester_id: str | None = None,
        before: ApprovalCursor | None = None,
        now: datetime | None = None,
    ) -> list[ApprovalRecord]:
        """List a tenant's approvals, newest first (see ``ApprovalStore.list_approvals``)."""

        def listed(r: ApprovalRecord) -> bool:
            return (
                r.tenant_id == tenant_id
                and (requester_id is None or r.requester_id == requester_id)
                and (status is None or (r.status if now is None else r.status_at(now)) == status)
                and (before is None or r.cursor < before)
            )

        records = [r for r in self.approvals.values() if listed(r)]
        return sorted(records, key=lambda r: r.cursor, reverse=True)[: max(limit, 0)]

    async def get_deferred(self, invocation_id: str) -> DeferredRecord | None:
        """Read a deferred record."""
        return self.deferred.get(invocation_id)

    async def settle_deferred(self, invocation_id: str, outcome: str, at: datetime) -> bool:
        """Settle an active deferred record and its ledger entry once."""
        record = self.deferred.get(invocation_id)
        if record is None or record.status != "active":
            return False
        self.deferred[invocation_id] = record.model_copy(
            update={"status": "settled", "outcome": outcome, "settled_at": at}
        )
        key = (record.tenant_id, record.principal_id, record.request_id)
        entry = self.entries.get(key)
        # The entry this call created, not a later one that reused the key (as SQL).
        if entry is not None and entry.invocation_id == invocation_id:
            self.entries[key] = entry.model_copy(update={"status": "completed", "outcome": outcome})
        return True

    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete expired completed entries and expired decided approvals.

        A pruned entry takes its created-target claim and settled deferred record with it.
        Everything goes at once (nothing to hold a lock for); ``batch_size`` is checked only.

        Raises:
            ValueError: ``batch_size`` is less than 1.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        doomed = [
            k for k, e in self.entries.items() if e.status == "completed" and e.expires_at < before
        ]
        gone = set(doomed)
        for key in doomed:
            del self.entries[key]
            self.claims.pop(key, None)
        settled = [
            i
            for i, d in self.deferred.items()
            if d.status == "settled" and (d.tenant_id, d.principal_id, d.request_id) in gone
        ]
        for invocation_id in settled:
            del self.deferred[invocation_id]
        stale = [
            a.id
            for a in self.approvals.values()
            if a.status in ("denied", "consumed") and a.expires_at < before
        ]
        for approval_id in stale:
            del self.approvals[approval_id]
        return len(doomed) + len(stale)

    # -- the effect outbox (charter.effects.EffectStore) ------------------------------------

    async def claim_effects(
        self, *, now: datetime, lease_until: datetime, worker: str, limit: int
    ) -> list[EffectRecord]:
        """Lease up to ``limit`` due pending effects to ``worker``, oldest due first.

        A due effect whose attempts are used up is parked dead instead (and returned so).
        """
        due = sorted(
            (
                e
                for e in self.effects.values()
                if e.status == "pending"
                and e.next_attempt_at <= now
                and (e.lease_until is None or e.lease_until <= now)
            ),
            key=lambda e: (e.next_attempt_at, e.created_at, e.key),
        )[:limit]
        claimed = []
        for record in due:
            if record.attempts >= record.max_attempts:
                leased = record.model_copy(update=changes.abandoned(now))
            else:
                leased = record.model_copy(
                    update={
                        "lease_until": lease_until,
                        "leased_by": worker,
                        "attempts": record.attempts + 1,
                        "updated_at": now,
                    }
                )
            self.effects[record.key] = leased
            claimed.append(leased)
        return claimed

    async def finish_effect(
        self,
        key: str,
        *,
        worker: str,
        status: EffectStatus,
        next_attempt_at: datetime | None,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Record an attempt's result if ``worker`` still holds the effect's lease."""
        record = self.effects.get(key)
        if record is None or record.status != "pending" or record.leased_by != worker:
            return False
        self.effects[key] = record.model_copy(
            update=changes.finished(status, next_attempt_at=next_attempt_at, error=error, at=at)
        )
        return True

    async def renew_effect(
        self, key: str, *, worker: str, lease_until: datetime, now: datetime
    ) -> bool:
        """Extend ``worker``'s lease on a pending effect it still holds; whether it did."""
        record = self.effects.get(key)
        if record is None or record.status != "pending" or record.leased_by != worker:
            return False
        self.effects[key] = record.model_copy(update=changes.renewed(lease_until, now))
        return True

    async def get_effect(self, key: str) -> EffectRecord | None:
        """Read one effect."""
        return self.effects.get(key)

    async def list_effects(
        self,
        *,
        tenant_id: str | None = None,
        status: EffectStatus | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> list[EffectRecord]:
        """List effects, newest first."""
        found = [
            e
            for e in self.effects.values()
            if (tenant_id is None or e.tenant_id == tenant_id)
            and (status is None or e.status == status)
            and (request_id is None or e.request_id == request_id)
        ]
        found.sort(key=lambda e: (e.created_at, e.seq), reverse=True)
        return found[: max(limit, 0)]

    async def redrive_effect(self, key: str, *, now: datetime) -> bool:
        """Make a dead or discarded effect pending again, with fresh attempts."""
        return self._change_effect(key, changes.REDRIVABLE, changes.redriven(now))

    async def discard_effect(self, key: str, *, now: datetime) -> bool:
        """Give up on a pending or dead effect."""
        return self._change_effect(key, changes.DISCARDABLE, changes.discarded(now))

    def _change_effect(
        self, key: str, allowed: tuple[EffectStatus, ...], fields: dict[str, Any]
    ) -> bool:
        """Set ``fields`` on the effect if its status is one of ``allowed``; whether it did."""
        record = self.effects.get(key)
        if record is None or record.status not in allowed:
            return False
        self.effects[key] = record.model_copy(update=fields)
        return True

    async def prune_effects(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete delivered and discarded effects that finished before ``before``; how many."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        doomed = [
            key
            for key, e in self.effects.items()
            if e.status in ("delivered", "discarded") and e.updated_at < before
        ]
        for key in doomed:
            del self.effects[key]
        return len(doomed)

    async def effect_backlog(self) -> tuple[int, datetime | None]:
        """How many effects are pending, and the oldest one's creation time."""
        pending = [e.created_at for e in self.effects.values() if e.status == "pending"]
        return len(pending), min(pending, default=None)


class _Scope(Scope["_MemoryTransaction"]):
    """``MemoryStore.transaction``: the write lock within ``wait``, then one transaction."""

    __slots__ = ("_store", "_tx", "_wait")

    def __init__(self, store: MemoryStore, wait: float) -> None:
        self._store = store
        self._wait = wait
        self._tx: _MemoryTransaction | None = None

    async def __aenter__(self) -> _MemoryTransaction:
        try:
            # A free lock is taken without suspending; unlike wait_for, no task per call.
            async with asyncio.timeout(self._wait):
                await self._store._write.acquire()
        except TimeoutError:
            raise StoreBusy("the in-memory store is busy") from None
        self._tx = _MemoryTransaction(self._store)
        return self._tx

    async def _exit(self, failed: BaseException | None) -> None:
        try:
            if failed is None and self._tx is not None:
                self._tx.apply()
        finally:
            self._tx = None
            self._store._write.release()


class _MemoryTransaction(_ApprovalWrites):
    """Buffers writes and applies them to the store on commit."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._entries: dict[_Key, LedgerEntry] = {}
        self._approvals: dict[str, ApprovalRecord] = {}
        """Approvals written (inserted, decided or consumed) in this transaction."""
        self._approvals_below = store.approvals
        self._claims: dict[_Key, ClaimRecord] = {}
        self._deferred: dict[str, DeferredRecord] = {}
        self._audit: list[AuditEvent] = []
        self._effects: dict[str, EffectRecord] = {}
        self._dropped: set[_Key] = set()
        """Keys whose expired entry this transaction replaced: their old claims go too."""

    @property
    def connection(self) -> object:
        """No database connection: handlers of an in-memory host get ``ctx.db = None``."""
        return None

    def transient_error(self, exc: Exception) -> ToolError | None:
        """No database, so no transient database error."""
        return None

    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        key = (entry.tenant_id, entry.principal_id, entry.request_id)
        existing = self._store.entries.get(key)
        if existing is not None and existing.expires_at > now:
            return existing
        if existing is not None:
            # An expired request is replaced, and its created-target claim with it (as SQL).
            self._dropped.add(key)
        self._entries[key] = entry
        return None

    async def complete(self, entry: LedgerEntry) -> None:
        self._entries[(entry.tenant_id, entry.principal_id, entry.request_id)] = entry

    async def consume_approval(self, approval_id: str, request_id: str, now: datetime) -> bool:
        # This transaction's own writes first: an approval is consumed once.
        record = self._approval(approval_id)
        if record is None or record.status_at(now) != "approved":
            return False
        self._approvals[approval_id] = record.model_copy(
            update={"status": "consumed", "consumed_by": request_id}
        )
        return True

    async def get_claim(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ClaimRecord | None:
        key = (tenant_id, principal_id, request_id)
        if key in self._claims or key in self._dropped:
            return self._claims.get(key)
        return self._store.claims.get(key)

    async def insert_claim(self, claim: ClaimRecord) -> None:
        self._claims[(claim.tenant_id, claim.principal_id, claim.request_id)] = claim

    async def record_claim_result(
        self, tenant_id: str, principal_id: str, request_id: str, reference: str
    ) -> None:
        key = (tenant_id, principal_id, request_id)
        claim = self._claims.get(key) or self._store.claims[key]
        self._claims[key] = claim.model_copy(update={"result_reference": reference})

    async def insert_deferred(self, record: DeferredRecord) -> None:
        self._deferred[record.invocation_id] = record

    async def record_audit(self, event: AuditEvent) -> None:
        self._audit.append(event)

    async def insert_effect(self, record: EffectRecord) -> bool:
        if record.key in self._effects or record.key in self._store.effects:
            return False
        self._effects[record.key] = record
        return True

    def apply(self) -> None:
        store = self._store
        for key in self._dropped:
            store.claims.pop(key, None)
        store.entries.update(self._entries)
        store.approvals.update(self._approvals)
        store.claims.update(self._claims)
        store.deferred.update(self._deferred)
        store.effects.update(self._effects)
        for event in self._audit:
            store._events.append(event)
