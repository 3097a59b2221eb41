"""One write transaction on a SQL store: the gate's claim, outcome, approval and audit."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..audit import AuditEvent
from ..effects import EffectRecord
from ..errors import StoreBusy, StoreError, StoreUnavailable, ToolError
from ..ledger import (
    ClaimRecord,
    DeferredRecord,
    LedgerEntry,
)
from ..ledger._scope import Scope
from . import _effect_rows
from ._approval_store import SqlApprovalWrites
from ._connections import ConnectionScope, Prelude, WriteQueue, run_to_completion, to_completion
from ._dialects import hung_up
from ._errors import transient_tool_error, translated
from ._pipelined import COMMIT, NO_CLAIMED_ROW, defer, drop_pending, nothing_sent, pipelined, raw
from ._rows import audit_values, write_audit
from ._statements import KEY, Statements, audit_parameters, key_parameters, statements
from ._types import is_storable

__all__ = ("SqlTransaction", "TransactionScope")

# A claim re-reads at most this often when the row it conflicted with vanishes (pruned)
# or is replaced by a concurrent claim between two statements.
_CLAIM_ATTEMPTS = 3


class SqlTransaction(SqlApprovalWrites):
    """A ``LedgerTransaction`` on one SQLAlchemy connection; the store commits or rolls back."""

    __slots__ = ("_audit", "_conn", "_sql", "_unclaimed")

    def __init__(self, conn: AsyncConnection) -> None:
        """Wrap the connection of an open transaction."""
        self._conn = conn
        self._sql: Statements = statements(conn.dialect.name)
        # Audit events not written yet: they go with the outcome (``complete``) or, failing
        # that, just before the commit; a rollback drops them with the rest.
        self._audit: list[AuditEvent] = []
        # The keys this transaction claimed afresh, with no created-target claim inserted
        # since. A claim lives and dies with its ledger row (the row inserted, or the
        # expired one replaced with its claim dropped), so ``get_claim`` knows there is
        # none without asking: a created-target call saves a statement.
        self._unclaimed: set[tuple[str, str, str]] = set()

    @property
    def connection(self) -> AsyncConnection:
        """The transaction's ``AsyncConnection``: handlers write their own tables with it."""
        return self._conn

    def transient_error(self, exc: Exception) -> ToolError | None:
        """Name a transient database error a handler let escape from its own statements.

        A lock wait that ran out, a serialization failure or deadlock, or a lost
        connection, raised by a statement on ``connection`` (or carried as the cause of
        the handler's own exception): the transaction rolls back, so the caller may retry
        with the same request id. None for any other exception.
        """
        return transient_tool_error(exc)

    @asynccontextmanager
    async def _writing(self, action: str) -> AsyncIterator[AsyncConnection]:
        """This transaction's connection, its errors translated as ``action``."""
        with translated(action):
            yield self._conn

    @run_to_completion
    async def claim(self, entry: LedgerEntry, now: datetime) -> LedgerEntry | None:
        """Insert ``entry`` unless its key exists; return the existing committed entry.

        The primary key decides: ``INSERT … ON CONFLICT DO NOTHING`` inserts one row or
        none. On PostgreSQL a concurrent claim of the same key waits inside that INSERT
        until the first transaction ends (bounded by ``lock_timeout``), then either inserts
        (the first rolled back) or conflicts and reads the committed row. On SQLite, ``BEGIN
        IMMEDIATE`` already serialised the writers. An expired entry is replaced by a
        compare-and-set UPDATE, and its created-target claim is dropped with it.

        Raises:
            StoreBusy: The key stayed locked longer than the transaction's wait.
            UnstorableValue: A field holds a NUL character or an unpaired surrogate.
        """
        values = entry.model_dump()
        conn, sql = self._conn, self._sql
        key = key_parameters(entry.tenant_id, entry.principal_id, entry.request_id)
        claimed = (entry.tenant_id, entry.principal_id, entry.request_id)
        with translated("claiming a request"):
            for _ in range(_CLAIM_ATTEMPTS):
                if await self._insert_claim(values):
                    self._unclaimed.add(claimed)
                    return None
                row = (await conn.execute(sql.read_entry, key)).first()
                if row is None:
                    continue
                existing = LedgerEntry.model_validate(dict(row._mapping))
                if existing.expires_at > now:
                    return existing
                replaced = await conn.execute(
                    sql.replace_expired, {**_without_key(values), **key, "now": now}
                )
                if replaced.rowcount == 1:
                    await conn.execute(sql.drop_claim, key)
                    self._unclaimed.add(claimed)
                    return None
        raise StoreBusy("the request's ledger row kept changing; retry the call")

    async def _insert_claim(self, values: dict[str, Any]) -> bool:
        """Run the claim's INSERT; whether it inserted the row.

        On PostgreSQL it goes straight to psycopg, in one pipeline with the transaction's
        ``BEGIN`` when nothing ran before it (``_pipelined``).
        """
        conn, sql = self._conn, self._sql
        if sql.complete_checked is None:
            return (await conn.execute(sql.claim, values)).rowcount == 1
        (inserted,) = await pipelined(conn, [raw(conn, sql.claim, values)])
        return inserted == 1

    @run_to_completion
    async def complete(self, entry: LedgerEntry) -> None:
        """Store the final status and outcome of an entry claimed in this transaction.

        On PostgreSQL the UPDATE goes with the ``COMMIT``, in one round trip, or before the
        transaction's next statement if one comes first; an audit event recorded before it
        goes in the same statement. It fails, and the transaction rolls back, when it
        finds no claimed entry.

        Raises:
            StoreError: There is no claimed entry with this key (on SQLite here, on
                PostgreSQL when the transaction commits).
        """
        parameters = {
            "status": entry.status,
            "outcome": entry.outcome,
            **key_parameters(entry.tenant_id, entry.principal_id, entry.request_id),
        }
        checked = self._sql.complete_checked
        if checked is not None:
            if len(self._audit) == 1:
                assert self._sql.complete_checked_with_audit is not None
                checked = self._sql.complete_checked_with_audit
                parameters |= audit_parameters(audit_values(self._audit.pop()))
            defer(self._conn, raw(self._conn, checked, parameters))
        else:
            with translated("storing an outcome"):
                result = await self._conn.execute(self._sql.complete, parameters)
            if result.rowcount != 1:
                raise StoreError("complete() found no claimed entry; call claim() first")
        await self._write_audit()

    async def _commit(self) -> None:
        """PostgreSQL: send the statements still waiting (the outcome) with ``COMMIT``.

        A transaction in which nothing ran sends nothing.
        """
        conn = self._conn
        if self._sql.complete_checked is None:
            return
        if nothing_sent(conn):
            drop_pending(conn)
            return
        if hung_up(conn):
            raise StoreUnavailable(
                "the database connection was lost before committing; the transaction did not commit"
            )
        try:
            with translated("committing", committing=True):
                await pipelined(conn, [COMMIT])
        except StoreError as exc:
            if getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None) == NO_CLAIMED_ROW:
                raise StoreError("complete() found no claimed entry; call claim() first") from exc
            raise

    @run_to_completion
    async def consume_approval(self, approval_id: str, request_id: str, now: datetime) -> bool:
        """Compare-and-set an approved, unexpired approval to consumed; False if it is not.

        Of concurrent consumers exactly one sees True: on PostgreSQL the others wait for
        its row lock and re-check ``status`` once it commits.
        """
        if not is_storable(approval_id):
            return False
        with translated("consuming an approval"):
            result = await self._conn.execute(
                self._sql.consume_approval,
                {"key_id": approval_id, "now": now, "consumed_by": request_id},
            )
        return result.rowcount == 1

    async def get_claim(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ClaimRecord | None:
        """Read a created-target claim, as this transaction sees it."""
        if (tenant_id, principal_id, request_id) in self._unclaimed:
            return None  # claimed afresh here: no claim until ``insert_claim``
        return await self._read_claim(tenant_id, principal_id, request_id)

    @run_to_completion
    async def _read_claim(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> ClaimRecord | None:
        if not is_storable(tenant_id, principal_id, request_id):
            return None
        with translated("reading a claim"):
            row = (
                await self._conn.execute(
                    self._sql.read_claim, key_parameters(tenant_id, principal_id, request_id)
                )
            ).first()
        return None if row is None else ClaimRecord.model_validate(dict(row._mapping))

    @run_to_completion
    async def insert_claim(self, claim: ClaimRecord) -> None:
        """Insert a created-target claim (replacing a stale one with the same key)."""
        with translated("inserting a claim"):
            await self._conn.execute(self._sql.insert_claim, claim.model_dump())
        self._unclaimed.discard((claim.tenant_id, claim.principal_id, claim.request_id))

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
                self._sql.record_claim_result,
                {
                    "result_reference": reference,
                    **key_parameters(tenant_id, principal_id, request_id),
                },
            )
        if result.rowcount != 1:
            raise StoreError("record_claim_result() found no claim; call insert_claim() first")

    @run_to_completion
    async def insert_deferred(self, record: DeferredRecord) -> None:
        """Persist an active deferred record."""
        with translated("inserting a deferred record"):
            await self._conn.execute(self._sql.insert_deferred, record.model_dump())

    async def record_audit(self, event: AuditEvent) -> None:
        """Write an audit event in this transaction (it commits with the action).

        It is written with the outcome by a later ``complete``, else just before the commit.
        """
        self._audit.append(event)

    async def _write_audit(self) -> None:
        """Write the audit events recorded and not written yet."""
        while self._audit:
            with translated("recording an audit event"):
                await write_audit(self._conn, self._audit[0])
            del self._audit[0]

    async def _finish(self) -> None:
        """Write the audit events still to write, then commit on PostgreSQL."""
        if self._audit:
            await self._write_audit()
        await self._commit()

    @run_to_completion
    async def insert_effect(self, record: EffectRecord) -> bool:
        """Write an effect to the outbox in this transaction; False if its key exists."""
        with translated("recording an effect"):
            return await _effect_rows.insert_effect(self._conn, record)


def _without_key(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in KEY}


class TransactionScope(Scope[SqlTransaction]):
    """``SqlStore.transaction``: a write ``ConnectionScope`` that enters a ``SqlTransaction``."""

    __slots__ = ("_connection", "_transaction")

    def __init__(
        self,
        engine: AsyncEngine,
        wait: float,
        queue: WriteQueue | None,
        prelude: Prelude | None = None,
        *,
        deferred: bool = False,
    ) -> None:
        """Describe the transaction; it begins on entry, after ``prelude`` (``ConnectionScope``)."""
        self._connection = ConnectionScope(engine, wait, queue, prelude, deferred=deferred)
        self._transaction: SqlTransaction | None = None

    async def __aenter__(self) -> SqlTransaction:
        conn = await self._connection.__aenter__()
        _lend(conn)
        self._transaction = SqlTransaction(conn)
        return self._transaction

    async def _exit(self, failed: BaseException | None) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None:
            _take_back(transaction.connection)
        if failed is None and transaction is not None:
            try:
                await to_completion(transaction._finish())
            except BaseException as unfinished:
                await self._connection._exit(unfinished)
                raise
        await self._connection._exit(failed)


# What a handler may not do to ``ctx.db``: end the transaction the ledger's record is in.
_STORE_ENDS = ("commit", "rollback", "close")


def _lend(conn: AsyncConnection) -> None:
    """Refuse ``commit``, ``rollback`` and ``close`` on ``conn`` until ``_take_back``.

    A handler that committed would commit the claim with its writes, then fail and leave
    the request id in progress; one that rolled back would drop the claim, and its later
    statements would run outside any transaction. ``AsyncConnection`` has slots, so the
    refusal goes on its (unslotted) sync connection, whose methods both reach: a guard
    against a mistake, not a sandbox (a transaction object's own ``commit`` is not
    covered).
    """
    sync = conn.sync_connection
    assert sync is not None
    for name, refusal in _REFUSALS.items():
        setattr(sync, name, refusal)


def _take_back(conn: AsyncConnection) -> None:
    """The store ends the transaction now: undo ``_lend``."""
    sync = conn.sync_connection
    if sync is not None:
        for name in _STORE_ENDS:
            sync.__dict__.pop(name, None)


def _refuse(action: str, *args: object, **kwargs: object) -> NoReturn:
    raise StoreError(
        f"a handler may not {action} ctx.db: the call's transaction commits with its ledger "
        "record, or rolls back when the handler raises; use ctx.db.begin_nested() for a "
        "part that may fail on its own"
    )


_REFUSALS = {name: functools.partial(_refuse, name) for name in _STORE_ENDS}
