"""A ledgered write through ``Host.invoke`` against a bare transaction writing the same rows.

Both sides run on the same ``SqlStore`` engine, once on SQLite (a temporary file) and once
on PostgreSQL (a temporary schema on ``CHARTER_BENCH_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/test``; the case is left out when the server does
not answer). Each call commits two rows: the request's ledger row and one effect row in
the application's own table.

- charter: ``host.invoke`` of a write tool whose handler inserts the effect row through
  ``ctx.db``, with a fresh request id. The host's audit sink is in memory, so the audit
  event is not a third row (with the store as audit sink, both sides would add it).
- baseline: ``engine.begin()`` (``BEGIN IMMEDIATE`` on SQLite, as charter's writes), then
  an INSERT of a completed ledger row with its outcome JSON and an INSERT of the effect
  row, through SQLAlchemy Core: what a hand-written idempotent endpoint does at least.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from bench import Case, Operation, Sides
from bench._bare import write_note
from bench._live import Held
from bench._notes import WRITE_RISK, Note, Saved, effects_table, insert_effect
from charter import Completed, Principal, Registry, ToolContext, define_tool
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.limits import Limit
from charter.store import SqlStore, sqlite_url
from charter.store._schema import ledger_entries
from charter.tool import Tool

POSTGRES_URL = os.environ.get(
    "CHARTER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)

_PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset({"notes:write"}))

effects = effects_table("bench_effects")


async def insert_note(note: Note, ctx: ToolContext) -> str:
    """Insert ``note``'s effect row through ``ctx.db`` (the call's transaction); its id."""
    return await insert_effect(effects, note, ctx)


async def save_note(note: Note, ctx: ToolContext) -> Saved:
    return Saved(note_id=await insert_note(note, ctx), text=note.text)


def note_tool(
    name: str,
    handler: Callable[[Note, ToolContext], Awaitable[Saved]],
    description: str,
    *,
    limits: Sequence[Limit] = (),
) -> Tool[Note, Saved]:
    """A ledgered ``Note`` → ``Saved`` write named ``name`` (scope ``notes:write``)."""
    return define_tool(
        name=name,
        description=description,
        input_schema=Note,
        output_schema=Saved,
        handler=handler,
        tier="write",
        risk_policy=WRITE_RISK,
        required_scopes=["notes:write"],
        limits=limits,
    )


def note_registry(*, limits: Sequence[Limit] = ()) -> Registry:
    """A registry of the ledgered ``save_note`` write (with ``limits``, as ``bench_budgets``)."""
    registry = Registry()
    registry.register(
        note_tool("save_note", save_note, "Save a note in the application's table.", limits=limits)
    )
    return registry


@asynccontextmanager
async def _sqlite() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="charter-bench-") as directory:
        yield sqlite_url(os.path.join(directory, "bench.db"))


@asynccontextmanager
async def _postgres() -> AsyncIterator[str]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        base = POSTGRES_URL.split("://", 1)[1]
        separator = "&" if "?" in base else "?"
        yield f"postgresql+psycopg://{base}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _postgres_reachable() -> bool:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception:
        return False
    return True


async def open_notes_store(stack: AsyncExitStack, url: str, **options: Any) -> SqlStore:
    """A ``SqlStore`` on ``url``, entered on ``stack``, with the application's notes table."""
    store = await stack.enter_async_context(SqlStore(url, **options))
    async with store.engine.begin() as conn:
        await conn.run_sync(effects.metadata.create_all)
    return store


def _database(url: Callable[[], AbstractAsyncContextManager[str]]) -> Held[tuple[SqlStore, Host]]:
    """A store and a host on it, held open by their own task (``bench._live.Held``).

    The bench times operations in one event loop and has no teardown hook: a task that
    enters the store and waits lets ``asyncio.run`` cancel it when the loop ends, which
    closes the store (and drops the temporary file or schema) in the task that opened it.
    """

    async def enter(stack: AsyncExitStack) -> tuple[SqlStore, Host]:
        store = await open_notes_store(stack, await stack.enter_async_context(url()))
        return store, Host(note_registry(), store=store, audit=MemoryAuditSink())

    return Held(enter, "ledger database")


def note_writes(
    host: Callable[[], Awaitable[Host]], name: str, tool: str = "save_note"
) -> Operation:
    """An operation called ``name``: ``tool`` on ``host()`` as ``_PRINCIPAL``, fresh requestIds.

    The ids are made outside the timed work's own steps, as a client would.
    """
    request_ids = (str(uuid.uuid4()) for _ in itertools.count())

    async def write() -> object:
        arguments = {"text": "hello", "_charter": {"requestId": next(request_ids)}}
        return await (await host()).invoke(tool, arguments, _PRINCIPAL)

    write.__name__ = name
    return write


async def each_completes(*operations: Operation) -> None:
    """Run each operation once; raise unless each completed (and was not a replay)."""
    for operation in operations:
        outcome = await operation()
        if not isinstance(outcome, Completed) or outcome.replayed:
            raise AssertionError(f"{operation.__name__} did not complete: {outcome!r}")


def _sides(database: Held[tuple[SqlStore, Host]]) -> Sides:
    # Fresh request ids, made outside the timed work's own steps as a client would.
    request_ids = (str(uuid.uuid4()) for _ in itertools.count())

    async def host() -> Host:
        return (await database.open())[1]

    ledgered = note_writes(host, "ledgered")

    async def bare() -> object:
        store, _ = await database.open()
        async with store.engine.begin() as conn:
            return await write_note(conn, effects, _PRINCIPAL, next(request_ids), "hello")

    async def check() -> None:
        store, _ = await database.open()
        await each_completes(ledgered, bare)
        async with store.engine.connect() as conn:
            rows = await conn.execute(sa.select(sa.func.count()).select_from(effects))
            ledger = await conn.execute(sa.select(sa.func.count()).select_from(ledger_entries))
            if (rows.scalar_one(), ledger.scalar_one()) != (2, 2):
                raise AssertionError("each side must commit one ledger row and one effect row")

    return Sides(ledgered, bare, check)


def cases() -> list[Case]:
    """The ledgered write against the bare transaction, on SQLite and on PostgreSQL.

    Each case opens its own database: the bench runs every case in a new event loop.
    """
    backends: list[tuple[str, Callable[[], AbstractAsyncContextManager[str]]]] = [
        ("SQLite", _sqlite)
    ]
    if _postgres_reachable():
        backends.append(("PostgreSQL", _postgres))
    result = []
    for label, url in backends:
        result.append(
            _sides(_database(url)).case(
                f"Ledgered write ({label})",
                "bare transaction, same rows",
                target=1.5,
                note=(
                    f"on {label}, `Host.invoke` of a write tool whose handler inserts one row "
                    "through `ctx.db`, with a fresh requestId (the whole pipeline; the claim, "
                    "an insert that would also find a committed entry to replay, so a tool "
                    "without approvals needs no read before it; the handler; the stored "
                    "outcome; the commit; audit events in memory), against one SQLAlchemy "
                    "Core transaction on the same engine inserting the same two rows: a "
                    "completed ledger row with its outcome JSON and the effect row. What "
                    "the ratio is made of: one statement more than the baseline (the claim "
                    "inserts the request's row before the handler runs, so that a duplicate "
                    "waits for it or replays it, and the outcome updates that row after; "
                    "alone it makes a bare transaction about 1.15x), and the host pipeline "
                    "(validation, fingerprint, the gate, a task per store operation so that "
                    "a cancellation never cuts a statement short)."
                ),
            )
        )
    return result
