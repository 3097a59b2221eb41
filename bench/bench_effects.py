"""Effects: what recording and delivering one costs, and how workers share the outbox.

- **Effect recorded and delivered (PostgreSQL)**: ``Host.invoke`` of a ledgered write whose
  handler writes its row through ``ctx.db`` and stages one effect with ``ctx.effect``;
  the effect row commits with the call and the fake provider is called right after the
  commit, whose result is then recorded (one more statement). The baseline is the same
  ledgered write whose handler inserts a bare row of its own into an outbox-like table
  through ``ctx.db`` and calls the same provider after the commit with ``wait_until``
  (nothing durable records that the call happened).
- **Worker throughput (PostgreSQL, 4 workers)**: 200 due effects, each calling a provider
  that takes 2 ms (a network round trip), drained by four worker processes at once
  (``bench/_effect_worker.py``: ``host.effects.work(once=True)`` on a store of its own,
  claiming batches of 50 with ``FOR UPDATE SKIP LOCKED`` and running up to 8 attempts at
  once) against one such worker. The enqueueing is in both sides' time.

Both cases need PostgreSQL (a temporary schema, as ``bench_ledger``) and are left out
when it does not answer.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from contextlib import AsyncExitStack
from typing import Any

import sqlalchemy as sa

import charter
from bench import Case, Sides
from bench._live import Held
from bench._load import ROOT, python_module
from bench._notes import Note, Saved
from bench.bench_ledger import (
    _postgres,
    _postgres_reachable,
    effects,
    insert_note,
    note_tool,
    note_writes,
    open_notes_store,
)
from charter import Completed, Registry, ToolContext
from charter.audit import MemoryAuditSink
from charter.host import Host
from charter.store import SqlStore

_BATCH = 200
PROVIDER_LATENCY = 0.002


class Provider:
    """Counts calls; ``latency`` seconds each, as a remote call would take."""

    def __init__(self, latency: float = 0.0) -> None:
        self.calls = 0
        self.latency = latency

    async def call(self, key: str) -> None:
        if self.latency:
            await asyncio.sleep(self.latency)
        self.calls += 1


def effects_registry(provider: Provider) -> Registry:
    registry = Registry()

    @charter.effect("notes.notify")
    async def notify(payload: dict[str, Any], key: str) -> None:
        await provider.call(key)

    registry.register_effect(notify)

    async def with_effect(note: Note, ctx: ToolContext) -> Saved:
        note_id = await insert_note(note, ctx)
        ctx.effect("notes.notify", {"note_id": note_id})
        return Saved(note_id=note_id, text=note.text)

    async def with_bare_outbox(note: Note, ctx: ToolContext) -> Saved:
        note_id = await insert_note(note, ctx)
        await ctx.db.execute(
            sa.insert(_outbox).values(id=uuid.uuid4().hex, payload=f'{{"note_id":"{note_id}"}}')
        )
        ctx.wait_until(lambda: provider.call(note_id))
        return Saved(note_id=note_id, text=note.text)

    for name, handler in (("save_note", with_effect), ("save_note_bare", with_bare_outbox)):
        registry.register(note_tool(name, handler, "Save a note and notify someone."))
    return registry


_outbox = sa.Table(
    "bench_outbox",
    effects.metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("payload", sa.Text, nullable=False),
)


class _WorkerProcess:
    """One ``bench._effect_worker`` process: told to drain, it answers how many it delivered."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, url: str, name: str) -> _WorkerProcess:
        """Start the process and wait until its store is open."""
        process = await asyncio.create_subprocess_exec(
            *python_module("bench._effect_worker", url, name),
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        worker = cls(process)
        if (ready := await worker._line()) != "ready":
            raise RuntimeError(f"effect worker {name} did not start: {ready!r}")
        return worker

    async def drain(self) -> int:
        """Drain the due effects once; how many this worker delivered."""
        assert self._process.stdin is not None
        self._process.stdin.write(b"drain\n")
        await self._process.stdin.drain()
        return int(await self._line())

    async def stop(self) -> None:
        """End its input, so it exits."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 10)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()

    async def _line(self) -> str:
        assert self._process.stdout is not None
        line = await self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"effect worker exited ({await self._process.wait()})")
        return line.decode().strip()


class _Database:
    """A PostgreSQL store and hosts on it, held open by their own task (``bench._live.Held``)."""

    def __init__(self, *, workers: int = 0) -> None:
        self._worker_count = workers
        self.workers: list[_WorkerProcess] = []
        """``workers`` worker processes, each on a store of its own, as ``charter worker``
        runs."""
        self.provider = Provider()
        self.slow_provider = Provider(PROVIDER_LATENCY)
        self._held = Held(self._enter, "effects database")

    async def open(self) -> tuple[SqlStore, Host, Host]:
        """The store, the host, and the host whose provider is slow (opened once)."""
        return await self._held.open()

    async def _enter(self, stack: AsyncExitStack) -> tuple[SqlStore, Host, Host]:
        url = await stack.enter_async_context(_postgres())
        store = await open_notes_store(stack, url, pool_size=8)
        audit = MemoryAuditSink()
        host = Host(effects_registry(self.provider), store=store, audit=audit)
        slow = Host(effects_registry(self.slow_provider), store=store, audit=audit)
        for n in range(self._worker_count):
            worker = await _WorkerProcess.start(url, f"w{n}")
            stack.push_async_callback(worker.stop)  # before the schema is dropped
            self.workers.append(worker)
        return store, host, slow


def _delivery(database: _Database) -> Sides:
    async def host() -> Host:
        return (await database.open())[1]

    effect = note_writes(host, "effect")
    bare = note_writes(host, "bare", tool="save_note_bare")

    async def check() -> None:
        _, host, _ = await database.open()
        for operation in (effect, bare):
            before = database.provider.calls
            outcome = await operation()
            if not isinstance(outcome, Completed) or database.provider.calls != before + 1:
                raise AssertionError(f"{operation.__name__} did not call the provider once")
        [record] = await host.effects.list(limit=1)
        if record.status != "delivered":
            raise AssertionError(f"the effect was not delivered: {record!r}")

    return Sides(effect, bare, check)


def _throughput(database: _Database) -> Sides:
    batches = itertools.count()

    async def drain(workers: int) -> object:
        store, _, host = await database.open()
        batch = next(batches)
        async with store.transaction(wait=5) as tx:
            for n in range(_BATCH):
                record = host.effects.record(
                    "notes.notify", {"n": n}, tenant_id="tenant-a", key=(str(batch), str(n))
                ).model_copy(update={"lease_until": None, "leased_by": None, "attempts": 0})
                await tx.insert_effect(record)
        done = await asyncio.gather(*(worker.drain() for worker in database.workers[:workers]))
        return sum(done)

    async def four() -> object:
        return await drain(4)

    async def one() -> object:
        return await drain(1)

    async def check() -> None:
        _, _, host = await database.open()
        for operation in (four, one):
            if await operation() != _BATCH:
                raise AssertionError(f"{operation.__name__} did not deliver {_BATCH} effects")
        if (await host.effects.backlog())[0]:
            raise AssertionError("effects were left pending")

    return Sides(four, one, check)


def cases() -> list[Case]:
    """Recording and delivering an effect, and worker throughput (PostgreSQL only)."""
    if not _postgres_reachable():
        return []
    # One database per case: each case runs in its own event loop, which closes its store.
    return [
        _delivery(_Database()).case(
            "Effect recorded and delivered (PostgreSQL)",
            "ledgered write + bare outbox row + call after commit",
            target=1.3,
            clock="wall",
            note=(
                "on PostgreSQL, `Host.invoke` of a ledgered write whose handler inserts its "
                "row through `ctx.db` and stages one effect (`ctx.effect`): the effect row "
                "commits with the call, the provider (an in-process function) is called "
                "right after the commit and the delivery is recorded (one `UPDATE` that "
                "commits on its own) with its audit event (in memory); against the same write "
                "whose handler inserts a bare row into its own outbox table and calls the "
                "provider after commit with `wait_until`, recording nothing afterwards. "
                "Wall-clock time: the difference is mostly that one round trip (its commit "
                "does not wait for the disk flush: a result a database crash forgets is one "
                "more attempt with the same key) and the effect row's `INSERT`. It was 1.94x "
                "until 2026-12-07, when the result's `UPDATE` stopped being a transaction of "
                "its own (`BEGIN`, `UPDATE`, `COMMIT`) and both statements stopped being "
                "built per call (an `INSERT` 410 against 245 us)."
            ),
        ),
        _throughput(_Database(workers=4)).case(
            f"Worker throughput: {_BATCH} effects, 4 workers (PostgreSQL)",
            f"the same {_BATCH} effects, 1 worker",
            target=0.6,
            clock="wall",
            rounds=5,
            iterations=1,
            note=(
                f"on PostgreSQL, {_BATCH} due effects written in one transaction, then "
                "drained by four worker processes at once (`bench/_effect_worker.py`: "
                "`host.effects.work(once=True)` on a store of its own with 4 connections, as "
                "`charter worker` runs: claims of 50 with `FOR UPDATE SKIP LOCKED`, up to 8 "
                "attempts at once each, one result `UPDATE` per attempt) against one such "
                "worker; the machine's CPUs are shared with PostgreSQL; the provider takes "
                f"{PROVIDER_LATENCY * 1000:.0f} ms per call (a remote call), so workers "
                "overlap its waits; the ratio below 1 is the speed-up. Per operation: the "
                f"whole batch of {_BATCH}. What bounds it on 2 CPUs (2026-12-07, timed "
                "apart): the enqueue, about 50 ms, is in both sides' time; the drain alone "
                "took 150 to 170 ms with one worker, 85 to 90 ms with two and 75 to 80 ms with "
                "four, whose CPU shares the two CPUs with PostgreSQL's. (Until 2026-12-07 "
                "the four workers ran in the bench's own process, on one CPU between them: "
                "0.95x; in processes of their own 0.84x, then 0.65x once each result was one "
                "statement committing on its own and the effect's INSERT and result UPDATE "
                "were built once, not per call.)"
            ),
        ),
    ]
