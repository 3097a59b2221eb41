"""Holding a session's record: ownership, the run lease, compare-and-set writes.

A run or resume claims the session by writing ``status="running"`` with a lease; while
the lease lasts, another run or resume gets a conflict. A lease that ran out means the
process holding it died, and the session may be taken over. Every write is a
compare-and-set on the record's revision, so of two writers one wins.

A session is its owner's: the record names the subject and tenant of the principal that
created it, and only a principal with the same subject *and* tenant may read, run,
resume or stop it (without a principal: ``anonymous`` in tenant ``""``).
"""

from __future__ import annotations

from typing import Any

from .live import Owner
from .runtime import Runtime
from .store import RECORD_VERSION, SessionRecord
from .turns import Rejected, ResumeCodes

__all__ = ("SessionLease",)


class SessionLease:
    """Reads and writes one session's record on behalf of its owner.

    Each method raises ``Rejected`` instead of reading or writing what it may not.
    """

    def __init__(self, runtime: Runtime, *, session_id: str, subject: str, tenant_id: str) -> None:
        """Bind the session id to its owner (``anonymous`` and ``""`` without a principal)."""
        self.runtime = runtime
        self.session_id = session_id
        self.subject = subject
        self.tenant_id = tenant_id
        self.owner: Owner = (subject, tenant_id)
        """Whose the session must be: its record's subject and tenant, compared whole."""

    def owns(self, record: SessionRecord) -> bool:
        """True when ``record`` belongs to the owner (same subject and same tenant)."""
        return (record.subject, record.tenant_id) == self.owner

    async def load_owned(self) -> SessionRecord:
        """The session's record, checked to exist, be readable, and belong to the owner."""
        record = await self.runtime.store.load(self.session_id)
        if record is None:
            raise Rejected(ResumeCodes.INVALID_INPUT, f"No session {self.session_id!r}.")
        if record.version != RECORD_VERSION:
            raise Rejected(
                ResumeCodes.UNSUPPORTED_RECORD,
                f"Session {self.session_id!r} has record version {record.version}; this "
                f"harness reads version {RECORD_VERSION}.",
            )
        if not self.owns(record):
            raise Rejected(ResumeCodes.FORBIDDEN, f"Session {self.session_id!r} is not yours.")
        return record

    async def read(self) -> SessionRecord | None:
        """The session's record for reading: None when none is stored, or it is not the owner's.

        Another principal's session reads as a missing one, revealing neither its
        transcript nor that it exists. The record's version is not checked: an owner may
        inspect a record this harness cannot continue.
        """
        record = await self.runtime.store.load(self.session_id)
        return record if record is not None and self.owns(record) else None

    async def acquire(self, *, for_turn: bool) -> SessionRecord:
        """Create the session's record, or claim the existing one.

        Args:
            for_turn: a new turn is starting, which a paused session refuses.
        """
        runtime = self.runtime
        record = await runtime.store.load(self.session_id)
        if record is None:
            now = runtime.clock()
            fresh = SessionRecord(
                session_id=self.session_id,
                subject=self.subject,
                tenant_id=self.tenant_id,
                status="running",
                lease_until=now + runtime.lease,
                updated_at=now,
            )
            if not await runtime.store.save(fresh, expected_revision=None):
                raise Rejected(ResumeCodes.CONFLICT, "Another run created this session.")
            return fresh
        record = await self.load_owned()
        if for_turn and record.status == "paused":
            raise Rejected(
                ResumeCodes.PAUSED,
                "The session is waiting on an interaction; resume or stop it first.",
            )
        if for_turn and record.pending is not None and not self._held(record):
            # Running with a step on record and no lease: its run was cut short (a
            # cancelled task, a dead process), and only stop() says what its calls did.
            raise Rejected(
                ResumeCodes.PAUSED,
                "The session's last step was cut short before its calls were settled; "
                "stop it to settle them, then run again.",
            )
        return await self.claim(record)

    async def claim(self, record: SessionRecord, **changes: Any) -> SessionRecord:
        """Mark ``record`` running under a fresh lease (with ``changes``), unless it is held."""
        if self._held(record):
            raise Rejected(ResumeCodes.CONFLICT, "Another run or resume holds this session.")
        now = self.runtime.clock()
        return await self.write(
            record, status="running", lease_until=now + self.runtime.lease, **changes
        )

    def _held(self, record: SessionRecord) -> bool:
        """Whether a run or resume holds ``record`` under a lease that is not over."""
        return (
            record.status == "running"
            and record.lease_until is not None
            and record.lease_until > self.runtime.clock()
        )

    async def write(self, record: SessionRecord, **changes: Any) -> SessionRecord:
        """Save ``record`` with ``changes`` and the next revision, if no one wrote first."""
        updated = record.model_copy(
            update={
                **changes,
                "revision": record.revision + 1,
                "updated_at": self.runtime.clock(),
            }
        )
        if not await self.runtime.store.save(updated, expected_revision=record.revision):
            raise Rejected(
                ResumeCodes.CONFLICT, "Another run or resume changed this session first."
            )
        return updated
