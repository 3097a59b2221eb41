"""The effect outbox as the gate sees it: stage a call's effects, write them, hand them on.

A handler's ``ctx.effect(name, payload)`` stages a record here; the gate writes the staged
records in the call's transaction (``StagedEffects.write``) and, once it committed, hands
them to ``deliver`` (the host's fast path). Each row is written already leased to this
process for ``lease`` from the moment it is written, so no worker takes it while the fast
path runs, and any worker does once that lease ran out (the process died between commit
and delivery).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..effects import EffectRecord, effect_key
from ..errors import ConfigurationError
from ..registry import Registry
from .records import LedgerEntry

if TYPE_CHECKING:
    from .protocols import LedgerTransaction

__all__ = ("EffectOutbox", "StagedEffects", "effect_payload")


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectOutbox:
    """What the gate needs to stage effects: who leases new rows, for how long, and delivery."""

    owner: str
    """The lease holder new rows are written with (this process's fast path)."""
    lease: timedelta
    deliver: Callable[[Sequence[EffectRecord]], Awaitable[None]]
    """Runs committed effects right away (failures are recorded, never raised)."""


def effect_payload(name: str, payload: object) -> Any:
    """``payload`` as JSON data: a model dumped in JSON mode, anything else checked as JSON.

    Raises:
        ConfigurationError: the payload is not JSON data (or holds NaN or Infinity).
    """
    if isinstance(payload, BaseModel):
        return payload.model_dump(mode="json")
    try:
        return json.loads(json.dumps(payload, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"the payload of effect {name!r} must be JSON data or a pydantic model: {exc}"
        ) from None


@dataclass(kw_only=True, slots=True, eq=False)
class StagedEffects:
    """The effects the call of ``entry`` staged, in order; the stager its ``ctx.effect`` calls."""

    registry: Registry
    outbox: EffectOutbox
    entry: LedgerEntry
    clock: Callable[[], datetime]
    records: list[EffectRecord] = field(default_factory=list, init=False)
    # Sync handlers stage from a worker thread.
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __call__(self, name: str, payload: object) -> str:
        """Stage one effect (``ctx.effect``); its key."""
        registered = self.registry.effect(name)
        data = effect_payload(name, payload)
        entry = self.entry
        # The ledger entry's creation time tells this call from an earlier one that reused
        # its request id after expiry (whose dead effect may still hold the plain key).
        claimed = entry.created_at.astimezone(UTC).isoformat()
        now = self.clock()
        with self._lock:
            seq = len(self.records)
            key = effect_key(
                entry.tenant_id, entry.principal_id, entry.request_id, claimed, name, str(seq)
            )
            self.records.append(
                EffectRecord(
                    key=key,
                    **entry.request_key(),
                    tool=entry.tool,
                    name=name,
                    payload=data,
                    seq=seq,
                    attempts=1,
                    max_attempts=registered.max_attempts,
                    next_attempt_at=now,
                    leased_by=self.outbox.owner,  # its lease starts when written (``write``)
                    created_at=now,
                    updated_at=now,
                )
            )
        return key

    async def write(self, tx: LedgerTransaction) -> str | None:
        """Insert the staged effects in the call's transaction, leased from now.

        The lease starts when the rows are written, just before the commit, not when the
        handler staged them: a handler that worked longer than the lease after
        ``ctx.effect`` would commit rows a worker takes at once, beside the fast path.

        Returns:
            None when every row was inserted; else the key of the first that already
            existed (the call must roll back rather than lose that effect).
        """
        now = self.clock()
        leased = {"lease_until": now + self.outbox.lease, "updated_at": now}
        with self._lock:
            self.records = [record.model_copy(update=leased) for record in self.records]
        for record in self.records:
            if not await tx.insert_effect(record):
                return record.key
        return None
