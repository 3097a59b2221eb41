"""What the outbox keeps of an effect, and how its idempotency key is derived."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

__all__ = ("EffectRecord", "EffectStatus", "effect_key")

EffectStatus: TypeAlias = Literal["pending", "delivered", "dead", "discarded"]
"""``pending`` until delivered; ``dead`` after its last failed attempt (re-drivable);
``discarded`` when a person gave up on it."""


class EffectRecord(BaseModel):
    """One effect in the outbox: what to run, for whom, and where its delivery stands."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    """The idempotency key (``effect_key``), unique; handed to the effect function."""
    tenant_id: str
    name: str
    payload: Any
    """The staged payload as JSON data."""
    seq: int = 0
    """Its place among the effects one call staged (0, 1, …)."""
    request_id: str | None = None
    """The call that staged it (None when host code enqueued it)."""
    principal_id: str | None = None
    tool: str | None = None
    status: EffectStatus = "pending"
    attempts: int = 0
    """Attempts started so far (a started attempt counts even if its process died)."""
    max_attempts: int
    next_attempt_at: datetime
    lease_until: datetime | None = None
    """Until when ``leased_by`` owns the current attempt; afterwards anyone may take it."""
    leased_by: str | None = None
    last_error: str | None = None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None = None


def effect_key(tenant_id: str, *parts: str) -> str:
    """The idempotency key of an effect: a SHA-256 over the tenant and the given parts.

    A handler's effect uses (principal, request id, its ledger entry's creation time in
    UTC ISO 8601, effect name, sequence number): two tenants (or two principals of one
    tenant) reusing a request id never share a key, nor does a call that reuses a request
    id after the first call's ledger entry expired.
    """
    digest = hashlib.sha256()
    for part in (tenant_id, *parts):
        raw = part.encode("utf-8", "surrogatepass")
        # Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        digest.update(len(raw).to_bytes(8, "big") + raw)
    return "eff_" + digest.hexdigest()
