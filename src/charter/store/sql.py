"""``SqlStore``: the durable ledger on SQLite (embedded) or PostgreSQL (shared by replicas)."""

from __future__ import annotations

import enum
import functools
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..audit import AuditEvent
from ..auth import PrincipalKind
from ..ledger import ApprovalDecision, ApprovalRecord, ApprovalStatus, DeferredRecord, LedgerEntry
from ..ledger.budgets import Bucket, BucketUsage
from . import _approval_rows as approval_rows
from . import _budget_rows, _keys, _secrets
from ._connections import ConnectionScope, WriteQueue, run_to_completion, to_completion
from ._dialects import READ_ONLY_OPTION
from ._effect_store import SqlEffectOutbox
from ._engine import make_engine
from ._errors import translated
from ._migrate import ensure_schema, upgrade
from ._retention import PruneBatch, prune_approvals, prune_audit_events, prune_entries
from ._rows import audit_from_row, searchable_tenant, write_audit
from ._schema import audit_events, deferred
from ._statements import key_parameters, statements
from ._transaction import SqlTransaction
from ._types import is_storable
from .api_keys import ApiKeyRecord

__all__ = ("SqlStore",)


class _State(enum.Enum):
    NEW = "new"
    """Built; ``open()`` not called yet (``upgrade()`` is allowed)."""
    OPEN = "open"
    """Schema checked; serving."""
    CLOSED = "closed"
    """``aclose()`` released the connections; the store cannot be reopened."""


class SqlStore(SqlEffectOutbox):
    """The ledger, approvals, claims, deferred records, effects, audit events and API keys in SQL.

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
        # PostgreSQL: a statement that commits on its own (rate-limit buckets), same pool.
        self._autocommit = (
            self._engine.execution_options(isolation_level="AUTOCOMMIT")
            if self._engine.dialect.name == "postgresql"
            else None
        )
        # SQLite's writers in this process take turns here before BEGIN IMMEDIATE.
        self._queue = WriteQueue() if self._engine.dialect.name == "sqlite" else None

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

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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

    def _connection(self, wait: float | None) -> AbstractAsyncContextManager[AsyncConnection]:
        self._require_open()
        if wait is None:
            return ConnectionScope(self._reader, None)
        return ConnectionScope(self._engine, wait, self._queue)

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
        return _Transaction(self._engine, wait, self._queue)

    @asynccontextmanager
    async def _statement(self, action: str) -> AsyncIterator[AsyncConnection]:
        """A connection for one write statement that commits on its own.

        PostgreSQL: autocommit, one round trip. SQLite: a write transaction (its commit is
        cheap, and its writers must queue for the lock anyway).
        """
        if self._autocommit is None:
            async with self._connection(self.busy_timeout) as conn:
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

    async def _read(
        self, statement: sa.Executable, parameters: dict[str, Any] | None = None
    ) -> list[sa.Row[Any]]:
        async with self._connection(None) as conn:
            with translated("reading"):
                return list(await conn.execute(statement, parameters))

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

    # -- approvals ------------------------------------------------------------------------

    @run_to_completion
    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert a pending approval, or return the one already made for its request.

        The unique key (tenant, requester, request id) decides between concurrent callers.

        Raises:
            UnstorableValue: A field holds a NUL character or an unpaired surrogate.
        """
        async with self._connection(self.busy_timeout) as conn:
            with translated("inserting an approval"):
                return await approval_rows.insert_or_read(conn, record)

    @run_to_completion
    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """Read an approval by id."""
        if not is_storable(approval_id):
            return None
        return approval_rows.first(await self._read(approval_rows.by_id(approval_id)))

    @run_to_completion
    async def find_approval(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """Read the approval made for one request."""
        if not is_storable(tenant_id, requester_id, request_id):
            return None
        statement = approval_rows.by_request(tenant_id, requester_id, request_id)
        return approval_rows.first(await self._read(statement))

    @run_to_completion
    async def list_approvals(
        self, tenant_id: str, status: ApprovalStatus | None, limit: int
    ) -> list[ApprovalRecord]:
        """List a tenant's approvals, newest first."""
        if limit <= 0 or not is_storable(tenant_id):
            return []
        rows = await self._read(approval_rows.newest(tenant_id, status, limit))
        return [approval_rows.record(row) for row in rows]

    @run_to_completion
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
        """Change an approval's status if it is still in ``expected`` (compare-and-set).

        Raises:
            UnstorableValue: ``decided_by`` or ``reason`` holds a NUL character.
        """
        if not is_storable(approval_id) or not expected:
            return False
        statement = approval_rows.decide(
            approval_id, expected, status=status, by=decided_by, reason=reason, at=at
        )
        async with self._connection(self.busy_timeout) as conn:
            with translated("deciding an approval"):
                result = await conn.execute(statement, {"history": approval_rows.dump(history)})
        return result.rowcount == 1

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
        """Delete completed entries and decided approvals that expired before ``before``.

        Works in batches of ``batch_size`` rows, one short write transaction each, so a
        large backlog never holds the write lock for long. A pruned entry takes its
        created-target claim and settled deferred record with it. Deferred (unsettled)
        entries, pending and approved approvals and active deferred records are never
        touched. Returns the number of entries and approvals deleted.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        total = 0
        while (deleted := await self._prune(prune_entries, before, batch_size)) > 0:
            total += deleted
            if deleted < batch_size:
                break
        while (deleted := await self._prune(prune_approvals, before, batch_size)) > 0:
            total += deleted
            if deleted < batch_size:
                break
        return total

    async def _prune(self, batch: PruneBatch, before: datetime, batch_size: int) -> int:
        async with self._connection(self.busy_timeout) as conn:
            with translated("pruning"):
                return await batch(conn, before, batch_size)

    # -- audit events (the store is also the durable audit sink) ---------------------------

    @run_to_completion
    async def record(self, event: AuditEvent) -> None:
        """Store an audit event in its own transaction."""
        async with self._connection(self.busy_timeout) as conn:
            with translated("recording an audit event"):
                await write_audit(conn, event)

    @run_to_completion
    async def events(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """Recent audit events, newest first, acting on or made by one tenant (or all)."""
        if limit <= 0:
            return []
        c = audit_events.c
        statement = sa.select(c.event).order_by(c.time.desc(), c.seq.desc()).limit(limit)
        if tenant is not None:
            wanted = searchable_tenant(tenant)
            statement = statement.where(sa.or_(c.tenant == wanted, c.principal_tenant == wanted))
        return [audit_from_row(row) for row in await self._read(statement)]

    @run_to_completion
    async def prune_audit(
        self, before: datetime, *, anonymous_only: bool = False, batch_size: int = 500
    ) -> int:
        """Delete audit events older than ``before`` (only anonymous ones, if asked).

        Batches of ``batch_size`` rows, one short write transaction each. Returns how many
        events were deleted. Charter never calls it by itself: ``charter db prune`` does,
        with the retentions it is given.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        batch = functools.partial(prune_audit_events, anonymous_only=anonymous_only)
        total = 0
        while (deleted := await self._prune(batch, before, batch_size)) > 0:
            total += deleted
            if deleted < batch_size:
                break
        return total

    # -- API keys -------------------------------------------------------------------------

    @run_to_completion
    async def create_api_key(
        self,
        *,
        tenant_id: str,
        subject: str,
        scopes: Iterable[str],
        kind: PrincipalKind = "agent",
        actor: str = "staff",
        name: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[str, ApiKeyRecord]:
        """Create an API key; the returned ``chk_<id>_<secret>`` is the only copy of the secret.

        Args:
            tenant_id: The tenant the key acts for.
            subject: The principal's subject (who the key stands for).
            scopes: Granted scopes, each valid as given (``charter.auth.is_valid_scope``).
            kind: The principal kind the key authenticates as (``agent`` by default; only
                ``person`` keys may decide approvals).
            actor: The principal's audience.
            name: A label for people.
            expires_at: When the key stops working (timezone-aware), or None.

        Returns:
            The key to hand over once, and its record (which never holds the secret).

        Raises:
            ValueError: A scope, tenant, subject, actor or kind is invalid, or
                ``expires_at`` is naive.
        """
        async with self._connection(self.busy_timeout) as conn:
            with translated("creating an API key"):
                return await _keys.create_key(
                    conn,
                    tenant_id=tenant_id,
                    subject=subject,
                    scopes=scopes,
                    kind=kind,
                    actor=actor,
                    name=name,
                    expires_at=expires_at,
                    now=datetime.now(UTC),
                )

    @run_to_completion
    async def list_api_keys(self, tenant_id: str | None = None) -> list[ApiKeyRecord]:
        """The API keys of one tenant (or all), oldest first; never their secrets."""
        async with self._connection(None) as conn:
            with translated("listing API keys"):
                return await _keys.list_keys(conn, tenant_id)

    @run_to_completion
    async def revoke_api_key(self, key_id: str) -> bool:
        """Revoke a key at once; False when it does not exist or was already revoked."""
        async with self._connection(self.busy_timeout) as conn:
            with translated("revoking an API key"):
                return await _keys.revoke_key(conn, key_id, datetime.now(UTC))

    @run_to_completion
    async def verify_api_key(self, presented: str, *, now: datetime) -> ApiKeyRecord | None:
        """The active key ``presented`` names if its secret matches, else None (no reason why)."""
        async with self._connection(None) as conn:
            with translated("checking an API key"):
                return await _keys.verify_key(conn, presented, now)

    # -- rate-limit buckets (charter.ledger.budgets) ---------------------------------------

    @run_to_completion
    async def spend_budget(self, bucket: Bucket, *, cost: float, now: float) -> bool:
        """Spend ``cost`` seconds of the bucket if it has room: one statement, no lost update."""
        async with self._statement("spending a rate limit") as conn:
            return await _budget_rows.spend(conn, bucket, cost, now)

    @run_to_completion
    async def budget_arrival(self, bucket: Bucket) -> float | None:
        """The bucket's theoretical arrival time (None when it was never spent)."""
        async with self._connection(None) as conn:
            with translated("reading a rate limit"):
                return await _budget_rows.arrival(conn, bucket)

    @run_to_completion
    async def refund_budget(self, bucket: Bucket, *, cost: float) -> None:
        """Give ``cost`` seconds back to the bucket (the call did not run its handler)."""
        async with self._statement("refunding a rate limit") as conn:
            await _budget_rows.refund(conn, bucket, cost)

    @run_to_completion
    async def budget_usage(self, *, now: float, tenant: str | None = None) -> list[BucketUsage]:
        """The buckets not yet full again at ``now`` (of one tenant, when given)."""
        async with self._connection(None) as conn:
            with translated("listing rate limits"):
                return await _budget_rows.usage(conn, now, tenant)

    @run_to_completion
    async def prune_budgets(self, *, now: float) -> int:
        """Delete the buckets full again at ``now`` (they mean the same as no row)."""
        async with self._connection(self.busy_timeout) as conn:
            with translated("pruning rate limits"):
                return await _budget_rows.prune(conn, now)

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


class _Transaction(AbstractAsyncContextManager[SqlTransaction]):
    """``SqlStore.transaction``: a write ``ConnectionScope`` that enters a ``SqlTransaction``."""

    __slots__ = ("_connection",)

    def __init__(self, engine: AsyncEngine, wait: float, queue: WriteQueue | None) -> None:
        self._connection = ConnectionScope(engine, wait, queue)

    async def __aenter__(self) -> SqlTransaction:
        return SqlTransaction(await self._connection.__aenter__())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._connection.__aexit__(exc_type, exc, tb)
