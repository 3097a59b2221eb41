"""A ledgered write under a per-principal rate limit against the same write without one.

Both sides run on one ``SqlStore`` on PostgreSQL (a temporary schema, as
``bench_ledger``), where budgets are shared by replicas; the case is left out when the
server does not answer. The limit is generous, so every call spends and none is refused:
what is timed is the cost of checking and spending a budget, not of being refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import sqlalchemy as sa

from bench import Case
from bench.bench_ledger import (
    _PRINCIPAL,
    _postgres,
    _postgres_reachable,
    each_completes,
    effects,
    note_registry,
    note_writes,
)
from charter import RateLimit, Registry
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.ledger.budgets import Bucket
from charter.store import SqlStore
from charter.store._schema import budgets

_LIMIT = RateLimit(calls=1_000_000, per=60)


def _registry(*, limited: bool) -> Registry:
    return note_registry(limits=[_LIMIT] if limited else [])


class _Hosts:
    """A limited and an unlimited host on one PostgreSQL store, held open by their own task."""

    def __init__(self) -> None:
        self.store: SqlStore | None = None
        self.limited: Host | None = None
        self.plain: Host | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> tuple[SqlStore, Host, Host]:
        if self._task is None:
            ready = asyncio.Event()
            self._task = asyncio.create_task(self._hold(ready))
            await ready.wait()
        assert self.store is not None and self.limited is not None and self.plain is not None
        return self.store, self.limited, self.plain

    async def _hold(self, ready: asyncio.Event) -> None:
        async with AsyncExitStack() as stack:
            url = await stack.enter_async_context(_postgres())
            self.store = await stack.enter_async_context(SqlStore(url))
            async with self.store.engine.begin() as conn:
                await conn.run_sync(effects.metadata.create_all)
            audit = MemoryAuditSink()
            self.limited = Host(_registry(limited=True), store=self.store, audit=audit)
            self.plain = Host(_registry(limited=False), store=self.store, audit=audit)
            ready.set()
            await asyncio.Event().wait()


Operation = Callable[[], Awaitable[object]]


def _operations(hosts: _Hosts) -> tuple[Operation, Operation, Callable[[], Awaitable[None]]]:
    async def limited_host() -> Host:
        return (await hosts.open())[1]

    async def plain_host() -> Host:
        return (await hosts.open())[2]

    limited = note_writes(limited_host, "limited")
    plain = note_writes(plain_host, "plain")

    async def check() -> None:
        store, _, _ = await hosts.open()
        await each_completes(limited, plain)
        async with store.engine.connect() as conn:
            rows = (await conn.execute(sa.select(budgets.c.bucket_key))).scalars().all()
        bucket = Bucket(
            tool="save_note",
            limit=_LIMIT.label,
            holder=_PRINCIPAL.key,
            tenant=_PRINCIPAL.tenant_id,
            interval=_LIMIT.per / _LIMIT.calls,
            window=_LIMIT.per,
        )
        if rows != [bucket.key]:
            raise AssertionError(f"the limited side must spend one bucket, found {rows}")

    return limited, plain, check


def cases() -> list[Case]:
    """The limited write against the plain one, on PostgreSQL (left out without it)."""
    if not _postgres_reachable():
        return []
    limited, plain, check = _operations(_Hosts())
    return [
        Case(
            name="Ledgered write under a rate limit (PostgreSQL)",
            baseline_name="the same write, no limit, same store",
            run=limited,
            baseline=plain,
            target=1.1,
            check=check,
            clock="wall",
            note=(
                "on PostgreSQL, `Host.invoke` of the ledgered write of the ledger case with "
                "a per-principal `RateLimit` that is never reached, against the same tool "
                "without one, on the same store; wall-clock time, since what a budget costs "
                "is its statement's round trip to the database (one `INSERT … ON CONFLICT DO "
                "UPDATE … RETURNING` in its own short transaction, before the ledger's), "
                "which the CPU clock of this process would not see."
            ),
        )
    ]
