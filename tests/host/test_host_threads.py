"""Sync handlers run in worker threads: the event loop keeps running while they block."""

from __future__ import annotations

import threading

import anyio
import pytest
from pydantic import BaseModel
from tests.builders import tiered_tool

from charter import Completed, Principal, Registry
from charter.host import Host

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal(subject="user-1", tenant_id="tenant-a", scopes=frozenset())
TICKS_WHILE_BLOCKED = 50


class Wait(BaseModel):
    seconds: float = 5.0


class Waited(BaseModel):
    released: bool
    thread: str


async def test_a_blocking_sync_handler_never_blocks_the_event_loop() -> None:
    started = threading.Event()
    release = threading.Event()

    def blocking(wait: Wait) -> Waited:
        # Blocks its thread until the event loop has ticked while it was blocked. If the
        # handler ran on the loop's thread, no tick could happen and the wait would time out.
        started.set()
        released = release.wait(wait.seconds)
        return Waited(released=released, thread=threading.current_thread().name)

    registry = Registry()
    registry.register(
        tiered_tool("blocking", "read", blocking, Wait, Waited, description="Blocks its thread.")
    )
    host = Host(registry)
    ticks_while_blocked = 0
    results: list[object] = []

    async def call() -> None:
        results.append(await host.invoke("blocking", {}, PRINCIPAL))

    async def ticker() -> None:
        nonlocal ticks_while_blocked
        while ticks_while_blocked < TICKS_WHILE_BLOCKED:
            await anyio.sleep(0)
            if started.is_set():
                ticks_while_blocked += 1
        release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            group.start_soon(ticker)
    [outcome] = results
    assert isinstance(outcome, Completed) and isinstance(outcome.output, dict)
    assert outcome.output["released"] is True
    assert str(outcome.output["thread"]).startswith("charter-tool")
    assert ticks_while_blocked == TICKS_WHILE_BLOCKED
    await host.aclose()
