"""The outbox's changes of an effect's delivery: which statuses allow each, and what it sets.

Every store applies the same changes (``MemoryStore`` to its records, ``SqlStore`` in one
``UPDATE … WHERE status IN …``), so the state machine is written once, here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .records import EffectStatus

__all__ = (
    "DISCARDABLE",
    "REDRIVABLE",
    "UNFINISHED",
    "abandoned",
    "discarded",
    "finished",
    "redriven",
)

REDRIVABLE: tuple[EffectStatus, ...] = ("dead", "discarded")
"""The statuses a person may re-drive an effect from."""

DISCARDABLE: tuple[EffectStatus, ...] = ("pending", "dead")
"""The statuses a person may discard an effect from."""


UNFINISHED = (
    "The last attempt never finished: the process running it died, or it outlived its lease."
)
"""The ``last_error`` of an effect a claim parked dead: its last attempt never reported."""


def abandoned(now: datetime) -> dict[str, Any]:
    """What a claim sets on a due effect whose attempts are used up: dead, no lease.

    Its last attempt started (and counted) but never recorded a result, so its process
    died or the attempt outlived the lease; running it again would pass ``max_attempts``
    (an effect that kills its worker would run forever).
    """
    return {
        "status": "dead",
        "lease_until": None,
        "leased_by": None,
        "last_error": UNFINISHED,
        "updated_at": now,
    }


def finished(
    status: EffectStatus, *, next_attempt_at: datetime | None, error: str | None, at: datetime
) -> dict[str, Any]:
    """What an attempt's result sets: the status, no lease, the error, when it was delivered.

    ``next_attempt_at`` is set only when given (a retry); otherwise the effect keeps its own.
    """
    fields: dict[str, Any] = {
        "status": status,
        "lease_until": None,
        "leased_by": None,
        "last_error": error,
        "updated_at": at,
        "delivered_at": at if status == "delivered" else None,
    }
    if next_attempt_at is not None:
        fields["next_attempt_at"] = next_attempt_at
    return fields


def renewed(lease_until: datetime, now: datetime) -> dict[str, Any]:
    """What renewing a held lease sets (only while the effect is pending and still held)."""
    return {"lease_until": lease_until, "updated_at": now}


def redriven(now: datetime) -> dict[str, Any]:
    """What a re-drive sets: pending again, no attempts yet, due now, no lease."""
    return {
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "lease_until": None,
        "leased_by": None,
        "updated_at": now,
    }


def discarded(now: datetime) -> dict[str, Any]:
    """What discarding sets: discarded (kept, never run again), no lease."""
    return {"status": "discarded", "lease_until": None, "leased_by": None, "updated_at": now}
