"""``SqlStore``'s approval methods (``charter.ledger.ApprovalStore``), kept apart by concept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from ..ledger import (
    ApprovalCursor,
    ApprovalDecision,
    ApprovalRecord,
    ApprovalStatus,
    ListedStatus,
)
from . import _approval_rows as rows
from ._access import SqlAccess
from ._connections import run_to_completion
from ._errors import translated
from ._types import is_storable

__all__ = ("SqlApprovalStore", "SqlApprovalWrites")


class SqlApprovalWrites:
    """The approval writes (``ApprovalWrites``), on the connection the holder writes with.

    ``SqlStore`` writes each in a transaction of its own; ``SqlTransaction`` in itself.
    """

    __slots__ = ()

    def _writing(self, action: str) -> AbstractAsyncContextManager[AsyncConnection]:
        """The connection to write with, its errors translated as ``action``."""
        raise NotImplementedError

    @run_to_completion
    async def insert_approval(self, record: ApprovalRecord) -> ApprovalRecord:
        """Insert a pending approval, or return the one already made for its request.

        The unique key (tenant, requester, request id) decides between concurrent callers.

        Raises:
            UnstorableValue: A field holds a NUL character or an unpaired surrogate.
        """
        async with self._writing("inserting an approval") as conn:
            return await rows.insert_or_read(conn, record)

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
        async with self._writing("deciding an approval") as conn:
            return await rows.decide(
                conn,
                approval_id,
                expected,
                status,
                by=decided_by,
                reason=reason,
                at=at,
                history=history,
            )


class SqlApprovalStore(SqlAccess, SqlApprovalWrites):
    """The approvals half of ``SqlStore``: insert, read, list and decide approvals."""

    @asynccontextmanager
    async def _writing(self, action: str) -> AsyncIterator[AsyncConnection]:
        """A write transaction of its own, its errors translated as ``action``."""
        async with self._connection(self.busy_timeout) as conn:
            with translated(action):
                yield conn

    @run_to_completion
    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """Read an approval by id."""
        if not is_storable(approval_id):
            return None
        return rows.first(await self._read(rows.by_id(approval_id)))

    @run_to_completion
    async def find_approval(
        self, tenant_id: str, requester_id: str, request_id: str
    ) -> ApprovalRecord | None:
        """Read the approval made for one request."""
        if not is_storable(tenant_id, requester_id, request_id):
            return None
        return rows.first(await self._read(rows.by_request(tenant_id, requester_id, request_id)))

    @run_to_completion
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
        if limit <= 0 or not is_storable(tenant_id):
            return []
        if (requester_id is not None and not is_storable(requester_id)) or (
            before is not None and not is_storable(before[1])
        ):
            return []
        statement = rows.newest(
            tenant_id, status, limit, requester_id=requester_id, before=before, now=now
        )
        return [rows.record(row) for row in await self._read(statement)]
