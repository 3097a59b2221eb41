"""``host.effects``: delivering the outbox — right after commit, by workers, with retries.

A handler stages effects with ``ctx.effect``; host code enqueues them in its own store
transaction with ``host.effects.transaction()``. Either way the row commits with the
writes it belongs to and is written leased to this process, which then runs it at once
(the fast path). A failed attempt is retried by ``charter worker`` after an exponential
backoff with jitter; after its last attempt it is parked ``dead`` (kept, re-drivable with
``retry``). Every attempt is an OpenTelemetry span and its result an audit event.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import random
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypeAlias

from .._safe_log import log_exception
from .._telemetry import Telemetry
from .._wording import new_error_id
from ..audit import AuditAction, AuditEvent, AuditSink
from ..auth import Principal
from ..effects import Effect, EffectRecord, EffectStatus, EffectStore, effect_key
from ..errors import ConfigurationError, ErrorCode, StoreBusy, StoreUnavailable
from ..ledger import LedgerStore, LedgerTransaction
from ..ledger.outbox import EffectOutbox, effect_payload
from ..outcome import Failed, failed, not_found
from ..registry import Registry
from ._standing import readable_tenant, unreadable

__all__ = ("EffectAction", "EffectBatch", "EffectListing", "Effects")

logger = logging.getLogger("charter")

_ERROR_LIMIT = 2000
"""The longest error text kept on an effect row (the rest is cut)."""

EffectAction: TypeAlias = Literal["retry", "discard"]
"""What a person does to an effect: re-drive it (dead or discarded), or give up on it."""

_FROM: dict[EffectAction, tuple[EffectStatus, ...]] = {
    "retry": ("dead", "discarded"),
    "discard": ("pending", "dead"),
}
"""The states each action applies to."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectListing:
    """The effects of one tenant a caller may see, newest first."""

    tenant: str
    effects: builtins.list[EffectRecord]


@dataclass(kw_only=True, slots=True)
class EffectBatch:
    """Host code's handle on one store transaction: write your rows, enqueue effects."""

    tx: LedgerTransaction
    """The open transaction; write the rows the effects belong to through it."""
    records: list[EffectRecord]
    """The effects enqueued so far (run once the transaction commits)."""
    _effects: Effects

    async def enqueue(
        self, name: str, payload: object, *, tenant_id: str, key: Sequence[str]
    ) -> EffectRecord | None:
        """Write effect ``name`` in this transaction; None when its key was enqueued before.

        Args:
            name: a registered effect.
            payload: JSON data or a pydantic model.
            tenant_id: the tenant the effect acts for.
            key: what makes this effect one of a kind (``("approval", id, "granted")``);
                hashed with the tenant and the name into the idempotency key.

        Raises:
            ConfigurationError: the name is not registered or the payload is not JSON.
        """
        record = self._effects.record(name, payload, tenant_id=tenant_id, key=key)
        if not await self.tx.insert_effect(record):
            return None
        self.records.append(record)
        return record


class Effects:
    """The host's effect outbox: fast-path delivery, worker passes, listing and re-driving."""

    def __init__(
        self,
        *,
        store: LedgerStore,
        registry: Registry,
        audit: AuditSink,
        clock: Callable[[], datetime],
        lease: timedelta,
        telemetry: Telemetry,
        oversees: Callable[[Principal], bool],
        admin_scope: str,
        rng: random.Random | None = None,
    ) -> None:
        """Bind the outbox to the host's store, registry, audit sink and clock.

        Raises:
            ConfigurationError: the lease is not positive.
        """
        if lease <= timedelta(0):
            raise ConfigurationError("effect_lease must be positive")
        self.registry = registry
        self._store = store
        self._audit = audit
        self._clock = clock
        self.lease = lease
        self._telemetry = telemetry
        self._oversees = oversees
        self._admin_scope = admin_scope
        self._rng = rng or random.Random()
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        """This host's lease token: fast-path rows are written leased to it."""
        self.outbox = EffectOutbox(owner=self.owner, lease=lease, deliver=self.deliver)

    @property
    def store(self) -> EffectStore:
        """The store as an effect outbox.

        Raises:
            ConfigurationError: the store keeps no effects.
        """
        if not isinstance(self._store, EffectStore):
            raise ConfigurationError(
                f"{type(self._store).__name__} keeps no effect outbox (charter.effects.EffectStore)"
            )
        return self._store

    # -- enqueueing outside a handler --------------------------------------------------------

    def record(
        self, name: str, payload: object, *, tenant_id: str, key: Sequence[str]
    ) -> EffectRecord:
        """Build the outbox row for an effect host code enqueues, leased to this host.

        Raises:
            ConfigurationError: the name is not registered or the payload is not JSON.
        """
        registered = self.registry.effect(name)
        now = self._clock()
        return EffectRecord(
            key=effect_key(tenant_id, name, *key),
            tenant_id=tenant_id,
            name=name,
            payload=effect_payload(name, payload),
            attempts=1,
            max_attempts=registered.max_attempts,
            next_attempt_at=now,
            lease_until=now + self.lease,
            leased_by=self.owner,
            created_at=now,
            updated_at=now,
        )

    @asynccontextmanager
    async def transaction(self, *, wait: float = 5.0) -> AsyncIterator[EffectBatch]:
        """Open a store transaction to enqueue effects with the rows they belong to.

        ``async with host.effects.transaction() as batch:`` — write through ``batch.tx``
        and ``await batch.enqueue(...)``; everything commits together when the block ends
        (or rolls back on an exception), and the enqueued effects then run at once.

        Raises:
            StoreBusy: the write lock was not granted within ``wait``.
            StoreUnavailable: the database cannot be reached.
        """
        async with self._store.transaction(wait=wait) as tx:
            batch = EffectBatch(tx=tx, records=[], _effects=self)
            yield batch
        await self.deliver(batch.records)

    # -- delivery ---------------------------------------------------------------------------

    async def deliver(self, records: Sequence[EffectRecord]) -> None:
        """Run committed effects this host leased (the fast path); failures are recorded.

        They run one after another, so a later one may come up when less of its lease is
        left than its attempt may take (its ``timeout``): its lease is renewed first, and
        it is left to the worker that claimed it if the lease ran out and one did.
        """
        for record in records:
            held = await self._held(record)
            if held is not None:
                await self.attempt(held, worker=self.owner)

    async def _held(self, record: EffectRecord) -> EffectRecord | None:
        """``record`` leased to this host for at least one more attempt; None when it lost it."""
        try:
            timeout = self.registry.effect(record.name).timeout
        except ConfigurationError:
            timeout = timedelta(0)  # the attempt fails at once
        now = self._clock()
        if record.lease_until is not None and record.lease_until - now >= timeout:
            return record
        lease_until = now + self.lease
        try:
            renewed = await self.store.renew_effect(
                record.key, worker=self.owner, lease_until=lease_until, now=now
            )
        except Exception:
            # Not run now: a worker takes it when its lease runs out.
            log_exception(logger, "renewing the lease of effect %r failed", record.name)
            return None
        if not renewed:
            return None  # a worker claimed it once the lease ran out (or a person discarded it)
        return record.model_copy(update={"lease_until": lease_until})

    async def attempt(self, record: EffectRecord, *, worker: str) -> EffectStatus:
        """Run one attempt of a leased effect and record its result; never raises.

        Only the cancellation of the task running it propagates (its lease runs out and a
        worker tries again); a ``CancelledError`` the function raises while its task is not
        being cancelled (it awaited a future someone else cancelled) is a failed attempt.
        """
        try:
            registered: Effect | None = self.registry.effect(record.name)
        except ConfigurationError:
            registered = None
        error: str | None = None
        with self._telemetry.effect_span(record.name, record.key, record.attempts) as span:
            if registered is None:
                error = f"no effect {record.name!r} is registered in this process"
            else:
                try:
                    async with asyncio.timeout(self._bound(record, registered)):
                        await registered.call(record.payload, record.key)
                except asyncio.CancelledError as exc:
                    if _cancelling():
                        raise  # this task is being cancelled: not the function's failure
                    error = _withheld(record, exc)  # it awaited something else cancelled
                except Exception as exc:
                    error = _withheld(record, exc)
            status = _next_status(record, error)
            self._telemetry.effect_attempted(span, name=record.name, status=status, error=error)
        now = self._clock()
        next_at = None
        if status == "pending" and registered is not None:
            next_at = now + self._backoff(registered, record.attempts)
        try:
            kept = await self.store.finish_effect(
                record.key,
                worker=worker,
                status=status,
                next_attempt_at=next_at,
                error=error,
                at=now,
            )
        except Exception:
            # The lease runs out and a worker tries again: the key lets the outside dedupe.
            log_exception(logger, "recording the result of effect %r failed", record.name)
            return status
        if kept:
            await self._record_audit(record, status, error, now)
        return status

    def _bound(self, record: EffectRecord, registered: Effect) -> float:
        """Seconds an attempt may run: the effect's ``timeout``, and never past its lease.

        Past the lease a worker may claim the effect and start another attempt, so one that
        ran on would overlap it: it fails as timed out when its lease ends instead.
        """
        bound = registered.timeout
        if record.lease_until is not None:
            bound = min(bound, record.lease_until - self._clock())
        return max(bound.total_seconds(), 0.0)

    def _backoff(self, registered: Effect, attempts: int) -> timedelta:
        """Exponential, capped, with "equal jitter": between half and all of the step."""
        step: timedelta = registered.backoff * (2 ** max(attempts - 1, 0))
        step = min(step, registered.max_backoff)
        jitter: float = 0.5 + self._rng.random() / 2
        return step * jitter

    async def _record_audit(
        self, record: EffectRecord, status: EffectStatus, error: str | None, now: datetime
    ) -> None:
        action: AuditAction = "effect.retried"
        if status == "delivered":
            action = "effect.delivered"
        elif status == "dead":
            action = "effect.dead"
        await self._write_audit(
            _effect_event(
                record, now, action, by=None, attempt_failed=status != "delivered", reason=error
            )
        )

    async def _write_audit(self, event: AuditEvent) -> None:
        try:
            await self._audit.record(event)
        except Exception:
            log_exception(logger, "recording the audit event of effect %r failed", event.tool)

    # -- workers ----------------------------------------------------------------------------

    async def run_due(self, *, worker: str, limit: int = 50, concurrency: int = 8) -> int:
        """Claim up to ``limit`` due effects for ``worker`` and attempt each; how many.

        An effect whose last attempt never finished comes back from the claim parked dead
        (its process died); it is audited ``effect.dead`` and not run again.
        """
        now = self._clock()
        claimed = await self.store.claim_effects(
            now=now, lease_until=now + self.lease, worker=worker, limit=limit
        )
        if not claimed:
            return 0
        for record in claimed:
            if record.status == "dead":
                await self._parked_unfinished(record, now)
        gate = asyncio.Semaphore(concurrency)

        async def one(record: EffectRecord) -> None:
            async with gate:
                await self.attempt(record, worker=worker)

        async with asyncio.TaskGroup() as group:
            for record in claimed:
                if record.status == "pending":
                    group.create_task(one(record))
        return len(claimed)

    async def _parked_unfinished(self, record: EffectRecord, now: datetime) -> None:
        """Report an effect the claim parked dead: its last attempt never recorded a result."""
        logger.warning(
            "effect %r (key %s) is dead: attempt %d of %d never finished",
            record.name,
            record.key,
            record.attempts,
            record.max_attempts,
        )
        self._telemetry.effect_attempted(
            None, name=record.name, status="dead", error=record.last_error
        )
        await self._record_audit(record, "dead", record.last_error, now)

    async def work(
        self,
        *,
        once: bool = False,
        poll: float = 1.0,
        limit: int = 50,
        concurrency: int = 8,
        stop: asyncio.Event | None = None,
        worker: str | None = None,
    ) -> int:
        """Deliver due effects until ``stop`` is set (or, with ``once``, none is due); how many.

        Each pass claims a batch under a lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL,
        so any number of workers share the table); between empty passes it sleeps ``poll``
        seconds. Effects waiting for a retry later than now are left for a later pass.
        """
        name = worker or f"worker-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        done = 0
        while stop is None or not stop.is_set():
            claimed = await self.run_due(worker=name, limit=limit, concurrency=concurrency)
            done += claimed
            await self._report_backlog()
            if claimed:
                continue
            if once:
                break
            if stop is None:
                await asyncio.sleep(poll)
                continue
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll)
            except TimeoutError:
                pass
        return done

    async def _report_backlog(self) -> None:
        try:
            depth, oldest = await self.store.effect_backlog()
        except Exception:
            log_exception(logger, "reading the effect backlog failed")
            return
        age = (self._clock() - oldest).total_seconds() if oldest is not None else 0.0
        self._telemetry.effect_backlog(depth=depth, oldest_age=max(age, 0.0))

    # -- people -----------------------------------------------------------------------------

    async def list(
        self,
        *,
        tenant_id: str | None = None,
        status: EffectStatus | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> builtins.list[EffectRecord]:
        """Effects, newest first (of one tenant, status or staging request when given)."""
        return await self.store.list_effects(
            tenant_id=tenant_id, status=status, request_id=request_id, limit=limit
        )

    async def visible(
        self,
        principal: Principal,
        *,
        tenant: str | None = None,
        status: EffectStatus | None = None,
        request_id: str | None = None,
        limit: int = 100,
    ) -> EffectListing | Failed:
        """The effects of a tenant the caller may see (what ``GET /v1/effects`` answers).

        The caller's own tenant by default; only the admin scope may name another.
        Approvers and admins see every effect of the tenant, other callers those their
        own calls staged.
        """
        where = readable_tenant(principal, tenant, admin_scope=self._admin_scope, what="effects")
        if isinstance(where, Failed):
            return where
        try:
            found = await self.list(
                tenant_id=where, status=status, request_id=request_id, limit=limit
            )
        except (StoreUnavailable, StoreBusy):
            return unreadable("effects")
        found = [e for e in found if self._shows(principal, e)]
        return EffectListing(tenant=where, effects=found)

    async def read(
        self, principal: Principal, key: str, *, tenant: str | None = None
    ) -> EffectRecord | Failed:
        """One effect the caller may see (what ``GET /v1/effects/{key}`` answers), or why not.

        Exactly what ``visible`` would list for the same ``tenant``: an effect of another
        tenant, or one a caller who does not oversee the tenant did not stage, is
        ``effect_not_found`` like an unknown key, so no caller learns another's keys.
        """
        where = readable_tenant(principal, tenant, admin_scope=self._admin_scope, what="effects")
        if isinstance(where, Failed):
            return where
        try:
            record = await self.store.get_effect(key)
        except (StoreUnavailable, StoreBusy):
            return unreadable("effect")
        if record is None or record.tenant_id != where or not self._shows(principal, record):
            return _no_effect(key)
        return record

    def _shows(self, principal: Principal, record: EffectRecord) -> bool:
        """Whether a listing of the effect's tenant shows it to ``principal``.

        Approvers and admins see every effect of the tenant; other callers those their own
        calls staged.
        """
        return self._oversees(principal) or record.principal_id == principal.key

    async def get(self, key: str) -> EffectRecord | None:
        """One effect by key."""
        return await self.store.get_effect(key)

    async def retry(self, key: str) -> bool:
        """Re-drive a dead or discarded effect: pending again, with fresh attempts (audited)."""
        return not isinstance(await self.change(key, "retry", by=None), Failed)

    async def discard(self, key: str) -> bool:
        """Give up on a pending or dead effect: kept, never run again (audited)."""
        return not isinstance(await self.change(key, "discard", by=None), Failed)

    async def change(
        self, key: str, action: EffectAction, *, by: Principal | None
    ) -> EffectRecord | Failed:
        """Retry or discard one effect as ``by``; the effect as it is now, or why not.

        What ``charter effects retry|discard`` (``by=None``: the operator who holds the
        database) and ``POST /v1/effects/{key}:retry|:discard`` (a person holding the admin
        scope literally, of any tenant) do. Each change
        is audited as ``effect.retry`` or ``effect.discard`` with the effect's key.
        """
        if by is not None and by.kind != "person":
            # Like deciding an approval: re-driving an effect a person gave up on, or giving
            # up on one, is a person's act; an agent or service never does it.
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Only a person may {action} effects; this caller is a {by.kind}.",
                reason="not_a_person",
            )
        if by is not None and self._admin_scope not in by.scopes:
            return failed(
                ErrorCode.AUTHORIZATION_DENIED,
                f"Only the {self._admin_scope!r} scope may {action} effects.",
                reason="insufficient_scope",
                missing=[self._admin_scope],
            )
        try:
            record = await self.store.get_effect(key)
            if record is None:
                return _no_effect(key)
            now = self._clock()
            if action == "retry":
                changed = await self.store.redrive_effect(key, now=now)
            else:
                changed = await self.store.discard_effect(key, now=now)
            after = await self.store.get_effect(key)
        except (StoreUnavailable, StoreBusy):
            return failed(
                ErrorCode.PROVIDER_UNAVAILABLE,
                "The effect could not be changed: the database is busy or unreachable.",
                reason="store_unavailable",
            )
        if after is None:  # pruned in between
            return _no_effect(key)
        if not changed:
            done = "retried" if action == "retry" else "discarded"
            return failed(
                ErrorCode.INVALID_INPUT,
                f"Effect {key[:200]!r} is {after.status}: only a "
                f"{' or '.join(_FROM[action])} effect can be {done}.",
                reason="effect_state",
                status=after.status,
            )
        await self._audit_change(after, action, by, now)
        return after

    async def _audit_change(
        self, record: EffectRecord, action: EffectAction, by: Principal | None, now: datetime
    ) -> None:
        audited: AuditAction = "effect.retry" if action == "retry" else "effect.discard"
        reason = None if by is not None else "operator"
        await self._write_audit(
            _effect_event(record, now, audited, by=by, attempt_failed=False, reason=reason)
        )

    async def backlog(self) -> tuple[int, datetime | None]:
        """How many effects are pending, and when the oldest was created."""
        return await self.store.effect_backlog()


def _effect_event(
    record: EffectRecord,
    now: datetime,
    action: AuditAction,
    *,
    by: Principal | None,
    attempt_failed: bool,
    reason: str | None,
) -> AuditEvent:
    """The audit event of an attempt at ``record`` (``by`` None) or of ``by``'s change to it.

    ``tool`` is the effect's name and ``note`` its key; a person acting on an effect holds
    the admin scope, so ``admin_used`` is whether one did.
    """
    return AuditEvent(
        id=uuid.uuid4().hex,
        time=now,
        action=action,
        subject=by.subject if by is not None else None,
        principal_tenant=by.tenant_id if by is not None else None,
        tenant=record.tenant_id,
        delegated=by is not None and by.tenant_id != record.tenant_id,
        admin_used=by is not None,
        tool=record.name,
        request_id=record.request_id,
        outcome="failed" if attempt_failed else "completed",
        code="PROVIDER_ERROR" if attempt_failed else None,
        reason=reason,
        note=record.key,
    )


def _next_status(record: EffectRecord, error: str | None) -> EffectStatus:
    """Where an attempt leaves its effect: delivered, pending another attempt, or dead."""
    if error is None:
        return "delivered"
    # The row's limit, as the claim's: one written before a deploy changed the effect's
    # max_attempts keeps its own, so the attempt that reaches it parks it with its error.
    return "dead" if record.attempts >= record.max_attempts else "pending"


def _cancelling() -> bool:
    """Whether the current task is being cancelled (``Task.cancel`` was called on it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _withheld(record: EffectRecord, exc: BaseException) -> str:
    """The ``last_error`` of an attempt that raised: the exception's class and an error id.

    Like a handler's failure (``charter._redaction``), the exception's text is the
    operator's: it goes to the ``charter`` log under the error id, never to the row, the
    audit event or whoever reads the effect (``GET /v1/effects`` shows it to its caller).
    """
    error_id = new_error_id()
    log_exception(
        logger,
        "effect %r (key %s) attempt %d failed (error id %s)",
        record.name,
        record.key,
        record.attempts,
        error_id,
        exc=exc,
        level=logging.WARNING,
    )
    return f"{type(exc).__name__}. Error id: {error_id}."[:_ERROR_LIMIT]


_LIST_EFFECTS = "List the effects (GET /v1/effects, `charter effects list`) and use a key."


def _no_effect(key: str) -> Failed:
    return not_found("effect", key, "in the outbox", next_step=_LIST_EFFECTS)
