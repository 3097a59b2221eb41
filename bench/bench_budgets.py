"""A ledgered write under a per-principal rate limit against the same write without one.

Both sides run on one ``SqlStore`` on PostgreSQL (a temporary schema, as
``bench_ledger``), where budgets are shared by replicas; the case is left out when the
server does not answer. The limit is generous, so every call spends and none is refused:
what is timed is the cost of checking and spending a budget, not of being refused.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import sqlalchemy as sa

from bench import Case, Sides
from bench._live import Held
from bench.bench_ledger import (
    _PRINCIPAL,
    _postgres,
    _postgres_reachable,
    each_completes,
    note_registry,
    note_writes,
    open_notes_store,
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


_Hosts = Held[tuple[SqlStore, Host, Host]]
"""The store, and a limited and an unlimited host on it."""


async def _open_hosts(stack: AsyncExitStack) -> tuple[SqlStore, Host, Host]:
    store = await open_notes_store(stack, await stack.enter_async_context(_postgres()))
    audit = MemoryAuditSink()
    limited = Host(_registry(limited=True), store=store, audit=audit)
    plain = Host(_registry(limited=False), store=store, audit=audit)
    return store, limited, plain


def _sides(hosts: _Hosts) -> Sides:
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

    return Sides(limited, plain, check)


def cases() -> list[Case]:
    """The limited write against the plain one, on PostgreSQL (left out without it)."""
    if not _postgres_reachable():
        return []
    return [
        _sides(Held(_open_hosts, "budget hosts")).case(
            "Ledgered write under a rate limit (PostgreSQL)",
            "the same write, no limit, same store",
            target=1.1,
            clock="wall",
            note=(
                "on PostgreSQL, `Host.invoke` of the ledgered write of the ledger case with "
                "a per-principal `RateLimit` that is never reached, against the same tool "
                "without one, on the same store; wall-clock time, since a budget is spent on "
                "the database (one `INSERT … ON CONFLICT DO UPDATE … RETURNING`, committed "
                "on its own at a pipeline `Sync` with no `BEGIN` or `COMMIT`, sent in one "
                "psycopg pipeline with the ledger transaction's `BEGIN` and claim, so no round "
                "trip more and one statement more), which the CPU clock of this process would "
                "not see."
            ),
        )
    ]
