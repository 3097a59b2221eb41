"""One write transaction on a SQL store: the gate's claim, outcome, approval and audit."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from ..audit import AuditEvent
from ..ledger import ClaimRecord, DeferredRecord, LedgerEntry, StoreBusy
from ._connections import run_to_completion
from ._errors import translated
from ._rows import claim_key, entry_key, insert, without, write_audit
from ._schema import approvals, claims, deferred, ledger_entries
from ._types import is_storable
from .errors import StoreError

__all__ = ("SqlTransaction",)

_KEY = ("tenant_id", "principal_id", "request_id")
# A claim re-reads at most this often when the row it conflicted with vanishes (pruned)
# or is replaced by a concurrent claim between two statements.
_CLAIM_ATTEMPTS = 3


class SqlTransaction:
    """A ``LedgerTransaction`` on one SQLAlchemy connection; the store commits or rolls back."""

    def __init__(self, conn: AsyncConnection) -> None:
        """Wrap the connection of an open transaction."""
        self._conn = conn

    @property
    def connection(self) -> AsyncConnection:
        """The transaction's ``AsyncConnection``: handlers write their own tables with it."""
        return self._conn

    @run_to_completion
    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        """Insert ``entry`` unless its key exists; return the existing committed entry.

        The primary key decides: ``INSERT … ON CONFLICT DO NOTHING RETURNING``. On
        PostgreSQL a concurrent claim of the same key waits inside that INSERT until the
        first transaction ends (bounded by ``lock_timeout``), then either inserts (the
        first rolled back) or conflicts and reads the committed row. On SQLite, ``BEGIN
        IMMEDIATE`` already serialised the writers. An expired entry is replaced by a
        compare-and-set UPDATE, and its created-target claim is dropped with it.

        Raises:
            StoreBusy: The key stayed locked longer than the transaction's wait.
            UnstorableValue: A field holds a NUL character or an unpaired surrogate.
        """
        values = entry.model_dump()
        conn = self._conn
        key = entry_key(entry.tenant_id, entry.principal_id, entry.request_id)
        with translated("claiming a request"):
            for _ in range(_CLAIM_ATTEMPTS):
                statement = (
                    insert(conn, ledger_entries)
                    .values(**values)
                    .on_conflict_do_nothing(index_elements=list(_KEY))
                    .returning(ledger_entries.c.request_id)
                )
                if (await conn.execute(statement)).first() is not None:
                    return None
                row = (await conn.execute(sa.select(ledger_entries).where(key))).first()
                if row is None:
                    continue
                existing = LedgerEntry.model_validate(dict(row._mapping))
                if existing.expires_at > now:
                    return existing
                replaced = await conn.execute(
                    sa.update(ledger_entries)
                    .where(key, ledger_entries.c.expires_at <= now)
                    .values(**without(values, *_KEY))
                )
                if replaced.rowcount == 1:
                    await conn.execute(
                        sa.delete(claims).where(
                            claim_key(entry.tenant_id, entry.principal_id, entry.request_id)
                        )
                    )
                    return None
        raise StoreBusy("the request's ledger row kept changing; retry the call")

    @run_to_completion
    async def complete(self, entry: LedgerEntry) -> None:
        """Store the final status and outcome of an entry claimed in this transaction."""
        with translated("storing an outcome"):
            result = await self._conn.execute(
                sa.update(ledger_entries)
                .where(entry_key(entry.tenant_id, entry.principal_id, entry.request_id))
                .values(**without(entry.model_dump(), *_KEY))
            )
        if result.rowcount != 1:
            raise StoreError("complete() found no claimed entry; call claim() first")

    @run_to_completion
    async def consume_approval(self, approval_id: str, request_id: str, now: datetime) -> bool:
        """Compare-and-set an approved, unexpired approval to consumed; False if it is not.

        Of concurrent consumers exactly one sees True: on PostgreSQL the others wait for
        its row lock and re-check ``status`` once it commits.
        """
        if not is_storable(approval_id):
            return False
        c = approvals.c
        with translated("consuming an approval"):
            result = await self._conn.execute(
                sa.update(approvals)
                .where(c.id == approval_id, c.status == "approved", c.expires_at > now)
                .values(status="consumed", consumed_by=request_id)
            )
        return result.rowcount == 1

    @run_to_completion
    async def get_claim(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ClaimRecord | None:
        """Read a created-target claim, as this transaction sees it."""
        if not is_storable(tenant_id, principal_id, request_id):
            return None
        with translated("reading a claim"):
            row = (
                await self._conn.execute(
                    sa.select(claims).where(claim_key(tenant_id, principal_id, request_id))
                )
            ).first()
        return None if row is None else ClaimRecord.model_validate(dict(row._mapping))

    @run_to_completion
    async def insert_claim(self, claim: ClaimRecord) -> None:
        """Insert a created-target claim (replacing a stale one with the same key)."""
        values = claim.model_dump()
        with translated("inserting a claim"):
            await self._conn.execute(
                insert(self._conn, claims)
                .values(**values)
                .on_conflict_do_update(index_elements=list(_KEY), set_=without(values, *_KEY))
            )

    @run_to_completion
    async def record_claim_result(
        self, tenant_id: str, principal_id: str, request_id: str, reference: str
    ) -> None:
        """Record a claim's typed result reference.

        Raises:
            UnstorableValue: The reference holds a NUL character or an unpaired surrogate.
            StoreError: There is no claim with this key.
        """
        with translated("recording a claim result"):
            result = await self._conn.execute(
                sa.update(claims)
                .where(claim_key(tenant_id, principal_id, request_id))
                .values(result_reference=reference)
            )
        if result.rowcount != 1:
            raise StoreError("record_claim_result() found no claim; call insert_claim() first")

    @run_to_completion
    async def insert_deferred(self, record: DeferredRecord) -> None:
        """Persist an active deferred record."""
        values = record.model_dump()
        with translated("inserting a deferred record"):
            await self._conn.execute(
                insert(self._conn, deferred)
                .values(**values)
                .on_conflict_do_update(
                    index_elements=["invocation_id"], set_=without(values, "invocation_id")
                )
            )

    @run_to_completion
    async def record_audit(self, event: AuditEvent) -> None:
        """Write an audit event in this transaction (it commits with the action)."""
        with translated("recording an audit event"):
            await write_audit(self._conn, event)
