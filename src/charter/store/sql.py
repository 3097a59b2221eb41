"""``SqlStore``: the durable ledger on SQLite (embedded) or PostgreSQL (shared by replicas)."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Self

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..ledger import DeferredRecord, LedgerEntry
from . import _secrets
from ._approval_store import SqlApprovalStore
from ._audit_batch import AuditBatches
from ._audit_store import SqlAuditLog
from ._budget_store import SqlBudgets
from ._connections import ConnectionScope, Prelude, WriteQueue, run_to_completion, to_completion
from ._dialects import READ_ONLY_OPTION, refuse_writes
from ._effect_store import SqlEffectOutbox
from ._engine import make_engine
from ._errors import translated
from ._key_store import SqlApiKeys
from ._migrate import ensure_schema, upgrade
from ._retention import prune_approvals, prune_entries
from ._schema import deferred
from ._statements import key_parameters, statements
from ._stream_store import SqlStreamEvents, prune_stream_events
from ._transaction import SqlTransaction, TransactionScope
from ._types import is_storable

__all__ = ("SqlStore",)


class _State(enum.Enum):
    NEW = "new"
    """Built; ``open()`` not called yet (``upgrade()`` is allowed)."""
    OPEN = "open"
    """Schema checked; serving."""
    CLOSED = "closed"
    """``aclose()`` released the connections; the store cannot be reopened."""


class SqlStore(
    SqlApprovalStore, SqlAuditLog, SqlApiKeys, SqlBudgets, SqlEffectOutbox, SqlStreamEvents
):
    """The ledger, approvals, claims, deferred records, effects, audit events and API keys in SQL.

    It also keeps the SSE events of resumable MCP streams (``charter.mcp.SqlEventStore``).

    ``sqlite+aiosqlite:///path`` (see ``sqlite_url``) is the embedded default: WAL,
    ``BEGIN IMMEDIATE`` for every write transaction, a busy timeout. A fresh database is
    migrated on ``open()``; an older one must be upgraded explicitly (``charter db
    upgrade`` or ``upgrade()``). ``postgresql+psycopg://…`` runs the same schema for many
    replicas, at READ COMMITTED. Unique keys arbitrate every race; nothing checks and then
    acts. Use it as ``async with SqlStore(url) as store: …``.
    """

    def __init__(
        self, url: str, *, busy_timeout: float = 5.0, pool_size: int = 10, echo: bool = False
    ) -> None:
        """Configure a store; nothing connects until ``open()``.

        Args:
            url: ``sqlite+aiosqlite:///path`` or ``postgresql+psycopg://user@host/db``
                (``sqlite://`` and ``postgresql://`` pick those drivers).
            busy_timeout: Seconds a write outside the gate waits for a lock (SQLite's
                busy timeout, PostgreSQL's ``lock_timeout``); ``transaction(wait=…)``
                sets its own.
            pool_size: The most connections the store holds open at once.
            echo: Log every statement (SQLAlchemy's ``echo``).

        Raises:
            ConfigurationError: The URL or an option is not supported.
            ImportError: The driver is missing (names ``pip install 'charter[sql]'`` or
                ``'charter[postgres]'``).
        """
        self._engine = make_engine(url, busy_timeout=busy_timeout, pool_size=pool_size, echo=echo)
        self.busy_timeout = busy_timeout
        self._state = _State.NEW
        # The same pool, its connections marked for reading (no BEGIN on SQLite).
        self._reader = self._engine.execution_options(**{READ_ONLY_OPTION: True})
        refuse_writes(self._reader)
        # PostgreSQL: a statement that commits on its own (rate-limit buckets), same pool.
        self._autocommit = (
            self._engine.execution_options(isolation_level="AUTOCOMMIT")
            if self._engine.dialect.name == "postgresql"
            else None
        )
        # SQLite's writers in this process take turns here before BEGIN IMMEDIATE.
        self._queue = WriteQueue() if self._engine.dialect.name == "sqlite" else None
        # Audit events recorded while one is being written go together (group commit).
        self._audit_batches = AuditBatches(self._write_audit_events)

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"SqlStore({url!r}, state={self._state.value})"

    @property
    def state(self) -> str:
        """``new`` (not opened yet), ``open``, or ``closed``; ASGI lifespans open a new one."""
        return self._state.value

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._engine.dialect.name

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine, for the application's own tables and for tests."""
        return self._engine

    @property
    def reader(self) -> AsyncEngine:
        """The engine for the application's own reads outside a call (the same pool).

        On SQLite its connections begin no transaction: each statement reads a consistent
        snapshot of its own, takes no lock and never waits for a writer, where a
        connection of ``engine`` begins ``BEGIN IMMEDIATE`` and so waits for the write
        lock a ledgered call holds. Read what must agree in one statement, or inside a
        call through ``ctx.db``. On PostgreSQL it behaves as ``engine`` does: readers never
        wait for writers there. Write through ``engine`` or ``ctx.db``: on both databases
        the writes it can see through this one are refused with ``StoreError`` before they
        run (``_dialects.refuse_writes``).
        """
        return self._reader

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # Closes the same way whether or not the block raised.
        await self.aclose()

    async def open(self) -> None:
        """Check the schema (creating it in a fresh database) and start serving.

        Raises:
            SchemaMismatch: The schema is behind (run ``charter db upgrade``) or unknown.
            StoreError: The database cannot be reached.
            RuntimeError: The store was already opened or closed.
        """
        if self._state is not _State.NEW:
            raise RuntimeError(
                f"SqlStore.open() was called on a store that is {self._state.value}; "
                "a store opens once — create a new SqlStore"
            )
        try:
            with translated("checking the schema"):
                await to_completion(ensure_schema(self._engine))
        except BaseException:
            await self.aclose()
            raise
        self._state = _State.OPEN

    @run_to_completion
    async def upgrade(self) -> None:
        """Apply charter's pending migrations (what ``charter db upgrade`` runs).

        Allowed before ``open()``, which refuses an old schema, and while open.

        Raises:
            StoreError: The database cannot be reached or a migration failed.
            RuntimeError: The store is closed.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError(self._closed_reason())
        with translated("migrating the schema"):
            await upgrade(self._engine)

    async def aclose(self) -> None:
        """Close every connection; the store cannot be used afterwards (safe to repeat)."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        await to_completion(self._engine.dispose())

    def _closed_reason(self) -> str:
        return "this SqlStore was closed by aclose(); create a new SqlStore to use the database"

    def _require_open(self) -> None:
        if self._state is _State.OPEN:
            return
        if self._state is _State.NEW:
            raise RuntimeError(
                "this SqlStore is not open: use `async with SqlStore(url) as store:` or "
                "`await store.open()` first"
            )
        raise RuntimeError(self._closed_reason())

    # -- connections ----------------------------------------------------------------------

    def _connection(
        self, wait: float | None, *, urgent: bool = False
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        self._require_open()
        if wait is None:
            return ConnectionScope(self._reader, None)
        return ConnectionScope(self._engine, wait, self._queue, urgent=urgent)

    def transaction(self, *, wait: float) -> AbstractAsyncContextManager[SqlTransaction]:
        """A write transaction for the gate, to enter with ``async with``.

        It commits when the block ends normally and rolls back on any exception.

        Args:
            wait: Seconds to wait for a lock: on SQLite for this process's other writers
                and then the write lock at ``BEGIN IMMEDIATE``; on PostgreSQL for row
                locks (``lock_timeout``), e.g. a concurrent claim of the same request.

        Returns:
            A context manager entering a ``LedgerTransaction`` whose ``connection`` is
            this transaction's ``AsyncConnection`` (the handler's ``ctx.db``).

        Raises:
            StoreBusy: A lock was not granted within ``wait`` (on entering).
            StoreUnavailable: The database cannot be reached (on entering), or the
                connection was lost (on leaving: ``commit_unknown`` if during COMMIT).
        """
        self._require_open()
        if self._autocommit is not None:
            # PostgreSQL: its BEGIN goes with the claim (see ``_pipelined``).
            return TransactionScope(self._autocommit, wait, None, deferred=True)
        return TransactionScope(self._engine, wait, self._queue)

    def _transaction_after(self, wait: float, prelude: Prelude) -> TransactionScope:
        """``transaction(wait=…)`` whose connection first runs ``prelude`` (a budget's spend)."""
        self._require_open()
        if self._autocommit is not None:
            # PostgreSQL: the prelude's statements wait for the claim too (``_pipelined``).
            return TransactionScope(self._autocommit, wait, None, prelude, deferred=True)
        return TransactionScope(self._engine, wait, self._queue, prelude)

    @asynccontextmanager
    async def _statement(
        self, action: str, *, urgent: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        """A connection for one write statement that commits on its own.

        PostgreSQL: autocommit, one round trip. SQLite: a write transaction (its commit is
        cheap, and its writers must queue for the lock anyway), ``urgent`` ones ahead of
        the others waiting (``WriteQueue``).
        """
        if self._autocommit is None:
            async with self._connection(self.busy_timeout, urgent=urgent) as conn:
                with translated(action):
                    yield conn
            return
        self._require_open()
        with translated("connecting", connecting=True):
            conn = await self._autocommit.connect()
        try:
            with translated(action):
                yield conn
        finally:
            await conn.close()

    # -- ledger entries -------------------------------------------------------------------

    @run_to_completion
    async def get_entry(
        self, tenant_id: str, principal_id: str, request_id: str
    ) -> LedgerEntry | None:
        """Read a committed entry."""
        if not is_storable(tenant_id, principal_id, request_id):
            return None
        rows = await self._read(
            statements(self.dialect).read_entry,
            key_parameters(tenant_id, principal_id, request_id),
        )
        return LedgerEntry.model_validate(dict(rows[0]._mapping)) if rows else None

    # -- deferred records -----------------------------------------------------------------

    @run_to_completion
    async def get_deferred(self, invocation_id: str) -> DeferredRecord | None:
        """Read a deferred record."""
        if not is_storable(invocation_id):
            return None
        rows = await self._read(
            sa.select(deferred).where(deferred.c.invocation_id == invocation_id)
        )
        return DeferredRecord.model_validate(dict(rows[0]._mapping)) if rows else None

    @run_to_completion
    async def settle_deferred(self, invocation_id: str, outcome: str, at: datetime) -> bool:
        """Settle an active deferred record and complete its ledger entry, once.

        Both updates commit together; of concurrent settlers exactly one sees True.
        """
        if not is_storable(invocation_id):
            return False
        d = deferred.c
        async with self._connection(self.busy_timeout) as conn:
            with translated("settling a deferred call"):
                settled = (
                    await conn.execute(
                        sa.update(deferred)
                        .where(d.invocation_id == invocation_id, d.status == "active")
                        .values(status="settled", outcome=outcome, settled_at=at)
                        .returning(d.tenant_id, d.principal_id, d.request_id)
                    )
                ).first()
                if settled is None:
                    return False
                await conn.execute(
                    statements(self.dialect).settle_entry,
                    {
                        **key_parameters(*settled),
                        "key_invocation_id": invocation_id,
                        "status": "completed",
                        "outcome": outcome,
                    },
                )
        return True

    # -- retention ------------------------------------------------------------------------

    @run_to_completion
    async def prune(self, before: datetime, *, batch_size: int = 500) -> int:
        """Delete completed entries, decided approvals and stream events expired before ``before``.

        Works in batches of ``batch_size`` rows, one short write transaction each, so a
        large backlog never holds the write lock for long. A pruned entry takes its
        created-target claim and settled deferred record with it. Deferred (unsettled)
        entries, pending and approved approvals and active deferred records are never
        touched. Returns the number of entries, approvals and stream events deleted.
        """
        entries = await self._prune_in_batches(prune_entries, before, batch_size)
        approvals = await self._prune_in_batches(prune_approvals, before, batch_size)
        return (
            entries
            + approvals
            + await self._prune_in_batches(prune_stream_events, before, batch_size)
        )

    # -- shared secrets -------------------------------------------------------------------

    @run_to_completion
    async def request_state_key(self) -> bytes:
        """The key that seals MCP ``requestState``, shared by every process on this database.

        Created (32 random bytes) by the first process that asks; the others read the same
        row, so stateless replicas accept each other's elicitation round trips. Anyone who
        can read the database can read it, like the rest of charter's tables.
        """
        async with self._connection(self.busy_timeout) as conn:
            with translated("reading the shared request-state key"):
                return await _secrets.shared_secret(
                    conn, _secrets.REQUEST_STATE_KEY, datetime.now(UTC)
                )
